/*
 * Intruders on the bootstrap's ports during a real rendezvous.
 *
 *   rel_flood [RUNS] [NRANKS]      (defaults 10 and 4)
 *
 * Each run starts one job twice, side by side: once undisturbed, once
 * flooded.  The program makes the unique id (so it hosts the root), forks
 * NRANKS ranks that each init, run an exact all-reduce and destroy, and
 * holds ranks 1.. back until rank 0 is waiting for the root with its ring
 * socket open.  In the flooded job it then finds the ports of rank 0's ring
 * socket and of the root (from /proc, as any local process could) and fills
 * both with connections that never authenticate: STALLED that send
 * nothing, GARBAGE that send a hello-sized block of noise, PARTIAL that send
 * half a frame header, RAPID ones that connect and close at once; more
 * than the ring socket's pool holds.  A thread keeps adding stalled and
 * rapid connections until the job has ended.  Only then are ranks 1.. let go.
 *
 * The ranks are fresh programs (this one, exec'ed with --rank): a child
 * forked from a process whose root thread runs may inherit a lock that
 * thread held, which only exec clears.  A rank that has not exited after
 * HUNG_S is reported and killed, so a hang fails the test with its name.
 *
 * Every rank of every job must succeed, and a flooded job must take about
 * as long as the undisturbed one made just before it: at most
 * SLOW_FACTOR times the undisturbed median, or SLOW_FLOOR_S (a job held up
 * by a stalled connection waits the 5 s hello deadline, one that lost its
 * peer the whole QCOLL_TIMEOUT).  Prints each run's times and their ratio.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_readings.h"
#include "qcoll.h"

#define STALLED 40
#define GARBAGE 20
#define PARTIAL 10
#define RAPID 50
/* Connections the flood thread keeps open per port at most. */
#define HELD_MAX 120
#define RANKS_MAX 16
#define SLOW_FACTOR 3.0
#define SLOW_FLOOR_S 2.5
#define TIMEOUT_S 20.0
/* Longer than any wait of a rank: init's deadline plus the all-reduce's. */
#define HUNG_S (3 * TIMEOUT_S)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the ranks -------------------------------------------------------- */

static int rank_main(int rank, int nranks, const qcoll_unique_id_t *id,
                     int go_fd) {
  if (go_fd >= 0) {
    char c;
    if (read(go_fd, &c, 1) != 1) return 2;
  }
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = TIMEOUT_S;
  qcoll_comm_t comm = NULL;
  qcoll_status_t st = qcoll_comm_init_rank(&comm, nranks, id, rank, &cfg);
  if (st != QCOLL_OK) {
    fprintf(stderr, "rank %d: init failed: %s (%s)\n", rank,
            qcoll_status_string(st), qcoll_last_error());
    return 1;
  }
  int32_t v[4] = {rank, 1, rank * rank, -rank}, sum[4];
  st = qcoll_all_reduce(v, sum, 4, QCOLL_I32, QCOLL_SUM, comm, NULL);
  int n = nranks;
  bool exact = st == QCOLL_OK && sum[0] == n * (n - 1) / 2 && sum[1] == n &&
               sum[2] == (n - 1) * n * (2 * n - 1) / 6 &&
               sum[3] == -n * (n - 1) / 2;
  if (!exact)
    fprintf(stderr, "rank %d: all-reduce %s: %s\n", rank,
            qcoll_status_string(st),
            st == QCOLL_OK ? "wrong sums" : qcoll_comm_last_error(comm));
  st = qcoll_comm_destroy(comm);
  return exact && st == QCOLL_OK ? 0 : 1;
}

/* ---- finding a process's listening TCP ports -------------------------- */

static bool contains(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* A port pid listens on that is not among the n in `known`; 0 if none. */
static int new_listen_port(pid_t pid, const int *known, int n) {
  int ports[64];
  int k = proc_listen_ports(pid, ports, 64);
  for (int i = 0; i < k; i++)
    if (!contains(known, n, ports[i])) return ports[i];
  return 0;
}

/* ---- the intruders ---------------------------------------------------- */

static int connect_local(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

typedef struct held {
  int fds[STALLED + GARBAGE + PARTIAL + HELD_MAX];
  int n;
} held_t;

static void hold(held_t *h, int fd) {
  if (fd < 0) return;
  if (h->n == (int)(sizeof h->fds / sizeof h->fds[0])) {
    close(h->fds[0]);
    memmove(h->fds, h->fds + 1, (size_t)(h->n - 1) * sizeof h->fds[0]);
    h->n--;
  }
  h->fds[h->n++] = fd;
}

static void release(held_t *h) {
  for (int i = 0; i < h->n; i++) close(h->fds[i]);
  h->n = 0;
}

static void send_noise(int fd, size_t len, unsigned seed) {
  unsigned char buf[128];
  for (size_t i = 0; i < len && i < sizeof buf; i++)
    buf[i] = (unsigned char)(seed = seed * 1103515245u + 12345u) >> 3;
  (void)!send(fd, buf, len < sizeof buf ? len : sizeof buf, MSG_NOSIGNAL);
}

/* The first wave: more unauthenticated connections than a pool holds. */
static void flood_wave(held_t *h, int port) {
  for (int i = 0; i < STALLED; i++) hold(h, connect_local(port));
  for (int i = 0; i < GARBAGE; i++) {
    int fd = connect_local(port);
    if (fd >= 0) send_noise(fd, 88, (unsigned)i);
    hold(h, fd);
  }
  /* A frame length that fits a hello, then nothing more. */
  static const unsigned char half[] = {0, 0, 0, 52, 'q', 'c'};
  for (int i = 0; i < PARTIAL; i++) {
    int fd = connect_local(port);
    if (fd >= 0) (void)!send(fd, half, sizeof half, MSG_NOSIGNAL);
    hold(h, fd);
  }
  for (int i = 0; i < RAPID; i++) {
    int fd = connect_local(port);
    if (fd >= 0) close(fd);
  }
}

typedef struct flood {
  int ports[2];
  held_t held[2];
  atomic_bool stop;
} flood_t;

/* Until the job ends: a new stalled and a rapid connection to each port
 * every millisecond. */
static void *flood_thread(void *arg) {
  flood_t *f = arg;
  while (!atomic_load(&f->stop)) {
    for (int p = 0; p < 2; p++) {
      hold(&f->held[p], connect_local(f->ports[p]));
      int fd = connect_local(f->ports[p]);
      if (fd >= 0) close(fd);
    }
    usleep(1000);
  }
  return NULL;
}

/* ---- one job ---------------------------------------------------------- */

static char *self_path;

/* Waits for every rank; false when one failed.  A rank still running
 * HUNG_S after t0 is named and killed (with the rest of them). */
static bool wait_ranks(const pid_t *pids, int nranks, double t0) {
  bool ok = true, done[RANKS_MAX] = {false};
  for (int left = nranks; left > 0;) {
    for (int r = 0; r < nranks; r++) {
      int status = 0;
      if (done[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      left--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
    }
    if (left == 0) break;
    if (now_s() - t0 < HUNG_S) {
      usleep(2000);
      continue;
    }
    for (int r = 0; r < nranks; r++) {
      if (done[r]) continue;
      fprintf(stderr, "rank %d (pid %d) has not exited after %.0f s: hung; "
              "killed\n", r, (int)pids[r], HUNG_S);
      kill(pids[r], SIGKILL);
      waitpid(pids[r], NULL, 0);
      done[r] = true;
      left--;
    }
    ok = false;
  }
  return ok;
}

/* Runs one job; returns its time from letting ranks 1.. go to the last
 * exit, or -1 when a rank failed. */
static double run_job(int nranks, bool flooded) {
  /* Roots of earlier jobs may still be closing: the new ports are ours. */
  int known[66];
  int nknown = proc_listen_ports(getpid(), known, 64);
  qcoll_unique_id_t id;
  qcoll_status_t st = qcoll_get_unique_id(&id);
  if (st != QCOLL_OK) {
    fprintf(stderr, "qcoll_get_unique_id: %s\n", qcoll_last_error());
    return -1;
  }
  int go[2];
  if (pipe(go) != 0) return -1;
  pid_t pids[RANKS_MAX];
  char hex[2 * QCOLL_UNIQUE_ID_BYTES + 1], args[4][32];
  qcoll_unique_id_to_hex(&id, hex);
  for (int r = 0; r < nranks; r++) {
    snprintf(args[0], sizeof args[0], "%d", r);
    snprintf(args[1], sizeof args[1], "%d", nranks);
    snprintf(args[2], sizeof args[2], "%d", r == 0 ? -1 : go[0]);
    snprintf(args[3], sizeof args[3], "%d", go[1]);
    pids[r] = fork();
    if (pids[r] == 0) {
      char *argv[] = {self_path, "--rank", args[0], args[1], hex, args[2],
                      args[3], NULL};
      execv(self_path, argv);
      _exit(127);
    }
  }
  close(go[0]);
  /* Rank 0's ring port is the one that is new to it. */
  int root_port = new_listen_port(getpid(), known, nknown), ring_port = 0;
  known[nknown++] = root_port;
  for (double t0 = now_s(); !ring_port && now_s() - t0 < 10; usleep(1000))
    ring_port = new_listen_port(pids[0], known, nknown);
  flood_t *f = calloc(1, sizeof *f);
  pthread_t thread;
  bool threaded = false;
  if (flooded) {
    if (!root_port || !ring_port) {
      fprintf(stderr, "cannot find the ports to flood (root %d, rank 0 %d)\n",
              root_port, ring_port);
    } else {
      f->ports[0] = ring_port;
      f->ports[1] = root_port;
      flood_wave(&f->held[0], ring_port);
      flood_wave(&f->held[1], root_port);
      threaded = pthread_create(&thread, NULL, flood_thread, f) == 0;
    }
  }
  double t0 = now_s();
  char ones[RANKS_MAX];
  memset(ones, 1, sizeof ones);
  (void)!write(go[1], ones, (size_t)(nranks - 1));
  close(go[1]);
  bool ok = flooded ? root_port && ring_port : true;
  if (!wait_ranks(pids, nranks, t0)) ok = false;
  double took = now_s() - t0;
  if (threaded) {
    atomic_store(&f->stop, true);
    pthread_join(thread, NULL);
  }
  release(&f->held[0]);
  release(&f->held[1]);
  free(f);
  return ok ? took : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A rank: --rank RANK NRANKS ID_HEX GO_FD WRITE_END (the go pipe's end
 * this rank must not hold, or the others never see its end of file). */
static int rank_entry(char **argv) {
  qcoll_unique_id_t id;
  if (qcoll_unique_id_from_hex(argv[4], &id) != QCOLL_OK) {
    fprintf(stderr, "rel_flood --rank: bad id %s\n", argv[4]);
    return 2;
  }
  close(atoi(argv[6]));
  return rank_main(atoi(argv[2]), atoi(argv[3]), &id, atoi(argv[5]));
}

int main(int argc, char **argv) {
  if (argc == 7 && !strcmp(argv[1], "--rank")) return rank_entry(argv);
  self_path = realpath("/proc/self/exe", NULL);
  if (!self_path) {
    perror("rel_flood: /proc/self/exe");
    return 2;
  }
  int runs = argc > 1 ? atoi(argv[1]) : 10;
  int nranks = argc > 2 ? atoi(argv[2]) : 4;
  if (runs < 1 || nranks < 2 || nranks > RANKS_MAX) {
    fprintf(stderr, "usage: rel_flood [RUNS >= 1] [NRANKS in 2..%d]\n",
            RANKS_MAX);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  double *plain = calloc((size_t)runs, sizeof *plain);
  double *flood = calloc((size_t)runs, sizeof *flood);
  int failed = 0, slow = 0;
  for (int i = 0; i < runs; i++) {
    plain[i] = run_job(nranks, false);
    flood[i] = run_job(nranks, true);
    if (plain[i] < 0 || flood[i] < 0) failed++;
    printf(
        "run %d: %d ranks, undisturbed %.3f s, flooded %.3f s, ratio "
        "%.2f\n",
        i + 1, nranks, plain[i], flood[i],
        plain[i] > 0 ? flood[i] / plain[i] : 0.0);
    fflush(stdout);
  }
  double sorted[2][4096];
  int m = runs < 4096 ? runs : 4096;
  memcpy(sorted[0], plain, (size_t)m * sizeof *plain);
  memcpy(sorted[1], flood, (size_t)m * sizeof *flood);
  qsort(sorted[0], (size_t)m, sizeof(double), cmp_double);
  qsort(sorted[1], (size_t)m, sizeof(double), cmp_double);
  double median = sorted[0][m / 2];
  double bound =
      median * SLOW_FACTOR > SLOW_FLOOR_S ? median * SLOW_FACTOR : SLOW_FLOOR_S;
  for (int i = 0; i < runs; i++)
    if (flood[i] > bound) slow++;
  printf(
      "%d runs: undisturbed median %.3f s (max %.3f), flooded median "
      "%.3f s (max %.3f), median ratio %.2f; %d failed, %d over %.2f s\n",
      runs, median, sorted[0][m - 1], sorted[1][m / 2], sorted[1][m - 1],
      median > 0 ? sorted[1][m / 2] / median : 0.0, failed, slow, bound);
  free(plain);
  free(flood);
  free(self_path);
  if (failed || slow) {
    printf("FAIL\n");
    return 1;
  }
  printf("rel_flood: all checks passed\n");
  return 0;
}
