/*
 * A rank killed with SIGKILL in the middle of a GPU all-reduce: every
 * survivor learns it within the deadline, and nothing is left behind.
 *
 *   gpu_kill [N] [TIMEOUT_S]        (default 2 ranks, 3 s)
 *
 * The program is its own launcher (a launcher that stops the job when a
 * rank dies would stop the survivors before they could report): it makes
 * the unique id, forks N ranks that share the GPUs round-robin, and waits
 * for them.  Every rank runs one exact all-reduce, then all enqueue an
 * all-reduce of many chunks (QCOLL_IPC_BYTES small, so the message takes
 * thousands of launches, forced onto the IPC two-shot); a thread of the
 * last rank SIGKILLs it 2 ms into its call, stamping the time of death in
 * memory the parent shares with every rank.  Enqueueing thousands of
 * launches takes the host longer than that (and past the launch queue's
 * depth the call waits for the GPU), so the rank dies inside the call:
 * some chunks have run on every rank, the rest never reach the survivors'
 * peers.  (Killing it after the call returned is not enough: the launches
 * it had queued may still run to the end, and then nobody waits.)  A
 * survivor whose all-reduce completed anyway fails the test (no async
 * error).
 *
 * Each survivor must see its stream finish (the kernels stop waiting: a
 * device-side deadline of TIMEOUT_S), qcoll_comm_get_async_error must say
 * TIMEOUT or PEER_FAILURE within TIMEOUT_S + 2 s of the death, the next
 * all-reduce must be refused at once, and destroy must return.  The parent
 * checks that the victim died of SIGKILL, that every survivor passed, and
 * that no rank process is left.  Exits 77 without a GPU (decided in a
 * child: the parent never touches CUDA, so the forked ranks may).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_test.h"

/* 1 GiB of f32: about 2900 launches with 1 MiB IPC buffers. */
#define CHUNKED_COUNT ((size_t)256 << 20)
#define DEATH_AFTER_US 2000
#define SMALL_COUNT 4096

typedef struct shared {
  volatile double died_at; /* the victim's gt_now() at death, 0 before */
} shared_t;

/* The victim's killer thread: DEATH_AFTER_US into the all-reduce call. */
static void *kill_soon(void *arg) {
  shared_t *sh = arg;
  usleep(DEATH_AFTER_US);
  sh->died_at = gt_now();
  raise(SIGKILL);
  return NULL;
}

static void fill(float *dev, size_t n, float v) {
  float *host = malloc(n * sizeof *host);
  if (!host) exit(1);
  for (size_t i = 0; i < n; i++) host[i] = v;
  gt_upload(dev, host, n * sizeof *host);
  free(host);
}

static int survivor_checks(qcoll_comm_t comm, cudaStream_t stream, float *buf,
                           shared_t *sh, int victim, double timeout) {
  /* The kernels give up on their own: the stream must finish. */
  gt_wait_stream(stream, timeout + 30, "the all-reduce whose peer was killed");
  double done = gt_now();
  qcoll_status_t async = QCOLL_OK;
  (void)qcoll_comm_get_async_error(comm, &async);
  const char *msg = gt_last_error(comm);
  double died = sh->died_at;
  if (died <= 0) {
    gt_fail("the victim never stamped its death");
    return 1;
  }
  if (async != QCOLL_ERR_TIMEOUT && async != QCOLL_ERR_PEER_FAILURE)
    gt_fail("async error is %s, expected a timeout or a peer failure",
            qcoll_status_string(async));
  if (done - died > timeout + 2)
    gt_fail("the failure surfaced %.2f s after the death (deadline %.1f s)",
            done - died, timeout);
  gt_note(
      "rank %d was killed; this rank's all-reduce stopped %.2f s later "
      "(QCOLL_TIMEOUT %.1f s): %s: %s",
      victim, done - died, timeout, qcoll_status_string(async), msg);
  double t = gt_now();
  qcoll_status_t st = qcoll_all_reduce(buf, buf, SMALL_COUNT, QCOLL_F32,
                                       QCOLL_SUM, comm, stream);
  if (st == QCOLL_OK)
    gt_fail("an all-reduce after the failure was accepted");
  else if (gt_now() - t > 1.0)
    gt_fail("the refused call took %.2f s", gt_now() - t);
  t = gt_now();
  st = qcoll_comm_destroy(comm);
  gt_note("destroy returned %s after %.2f s", qcoll_status_string(st),
          gt_now() - t);
  if (gt_now() - t > 2 * timeout + 10)
    gt_fail("destroy took %.1f s", gt_now() - t);
  return gt_failures() ? 1 : 0;
}

static int rank_main(int rank, int n, const qcoll_unique_id_t *id, shared_t *sh,
                     double timeout) {
  gt_rank = rank;
  gt_nranks = n;
  int ngpus = 0;
  GT_CUDA(cudaGetDeviceCount(&ngpus));
  GT_CUDA(cudaSetDevice(rank % ngpus));
  qcoll_config_t cfg;
  GT_QCOLL(NULL, qcoll_config_init(&cfg));
  cfg.timeout_s = timeout;
  qcoll_comm_t comm = NULL;
  GT_QCOLL(NULL, qcoll_comm_init_rank(&comm, n, id, rank, &cfg));
  cudaStream_t stream;
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *buf = NULL;
  GT_CUDA(cudaMalloc((void **)&buf, CHUNKED_COUNT * sizeof(float)));
  fill(buf, SMALL_COUNT, 1.0f);
  GT_QCOLL(comm, qcoll_all_reduce(buf, buf, SMALL_COUNT, QCOLL_F32, QCOLL_SUM,
                                  comm, stream));
  gt_wait_stream(stream, timeout + 30, "the first all-reduce");
  float first = 0;
  GT_CUDA(cudaMemcpy(&first, buf, sizeof first, cudaMemcpyDeviceToHost));
  if (first != (float)n) gt_fail("first all-reduce: %g, expected %d", first, n);
  /* Everyone is in; the chunked all-reduce starts together. */
  GT_QCOLL(comm, qcoll_barrier(comm, stream));
  gt_wait_stream(stream, timeout + 30, "the barrier");
  const int victim = n - 1;
  pthread_t killer;
  if (rank == victim && pthread_create(&killer, NULL, kill_soon, sh) != 0) {
    gt_fail("pthread_create failed");
    return 1;
  }
  GT_QCOLL(comm, qcoll_all_reduce(buf, buf, CHUNKED_COUNT, QCOLL_F32, QCOLL_SUM,
                                  comm, stream));
  if (rank == victim) {
    pause(); /* the killer thread ends this process */
    return 1;
  }
  return survivor_checks(comm, stream, buf, sh, victim, timeout);
}

/* Run the skip check in a child: the parent must stay free of CUDA. */
static void skip_unless_gpu(void) {
  pid_t pid = fork();
  if (pid == 0) {
    gt_skip_without_gpu("gpu_kill");
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) exit(77);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gt_prog = "gpu_kill";
  int n = argc > 1 ? atoi(argv[1]) : 2;
  double timeout = argc > 2 ? atof(argv[2]) : 3.0;
  if (n < 2 || n > 8 || timeout <= 0) {
    fprintf(stderr, "usage: gpu_kill [N in 2..8] [TIMEOUT_S > 0]\n");
    return 2;
  }
  skip_unless_gpu();
  /* Small IPC buffers: the 64 MiB message needs many launches. */
  setenv("QCOLL_IPC_BYTES", "1M", 1);
  /* Not NCCL (which ranks on separate GPUs would get at this size): the
   * test is about qcoll's own kernels. */
  setenv("QCOLL_ALGO", "twoshot", 1);
  shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  sh->died_at = 0;
  qcoll_unique_id_t id;
  GT_QCOLL(NULL, qcoll_get_unique_id(&id));
  pid_t pids[8];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rank_main(r, n, &id, sh, timeout));
    if (pids[r] < 0) {
      perror("fork");
      return 1;
    }
  }
  int failed = 0;
  for (int r = 0; r < n; r++) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r]) {
      printf("FAIL: rank %d (pid %d) could not be reaped\n", r, (int)pids[r]);
      failed++;
      continue;
    }
    bool victim = r == n - 1;
    if (victim && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      printf(
          "FAIL: the victim, rank %d, did not die of SIGKILL (status 0x%x)\n",
          r, status);
      failed++;
    } else if (!victim && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      printf("FAIL: survivor rank %d ended with status 0x%x\n", r, status);
      failed++;
    }
  }
  /* Every rank was reaped above: no rank process is left. */
  printf(
      "%s: %d ranks, rank %d killed with SIGKILL in the middle of a %zu "
      "MiB all-reduce, QCOLL_TIMEOUT %.1f s\n",
      failed ? "FAIL" : "PASS", n, n - 1, CHUNKED_COUNT * sizeof(float) >> 20,
      timeout);
  return failed ? 1 : 0;
}
