/*
 * Failure handling of the host back end, started by qcoll-run:
 *
 *   qcoll-run -n N host_fail_test MODE
 *
 * MODE
 *   exit      the last rank leaves without a word (_exit(0)) before an
 *             all-reduce; the others must fail with QCOLL_ERR_PEER_FAILURE
 *             naming it as dead, within 5 s (the timeout is 120 s).
 *   exit_send rank 1 leaves while rank 0 streams it a message larger than
 *             the pair buffer: rank 0's send fails with PEER_FAILURE.
 *   timeout   rank 1 arrives 3 s late at a barrier, the timeout is 1 s:
 *             rank 0 fails with QCOLL_ERR_TIMEOUT naming rank 1; the others
 *             (rank 1 included, once it arrives) with PEER_FAILURE.
 *   abort     rank 0 aborts from a second thread while its main thread waits
 *             in a barrier that rank 1 joins late: rank 0 gets ABORTED, the
 *             others PEER_FAILURE, all within 5 s.
 *   mismatch  rank 0 sends 100 bytes, rank 1 receives 200: MISMATCH on
 *             rank 1, after which rank 0's barrier fails with PEER_FAILURE.
 * In every mode each surviving rank checks that the communicator is then
 * refused (broken), destroys it, and checks that the shared-memory segment
 * name is gone from /dev/shm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "core/comm.h"
#include "qcoll.h"
#include "transport/shm.h"

static int rank, n;
static qcoll_comm_t comm;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void expect_status(const char *what, qcoll_status_t got,
                          qcoll_status_t want, double elapsed, double limit,
                          const char *must_mention) {
  const char *msg = qcoll_comm_last_error(comm);
  EXPECT(got == want, "%s returned %s, expected %s (%s)", what,
         qcoll_status_string(got), qcoll_status_string(want), msg);
  EXPECT(elapsed <= limit, "%s took %.2f s, expected at most %.1f s", what,
         elapsed, limit);
  EXPECT(!must_mention || strstr(msg, must_mention),
         "%s: message '%s' does not mention '%s'", what, msg, must_mention);
  printf("rank %d: %s -> %s after %.2f s: %s\n", rank, what,
         qcoll_status_string(got), elapsed, msg);
}

static char segment[128];

static void finish(void) {
  /* Broken or aborted communicators refuse further calls at once. */
  int x = 1;
  qcoll_status_t st =
      qcoll_all_reduce(&x, &x, 1, QCOLL_I32, QCOLL_SUM, comm, NULL);
  EXPECT(st != QCOLL_OK, "a collective on a failed communicator succeeded");
  qcoll_comm_destroy(comm);
  EXPECT(access(segment, F_OK) != 0, "%s still exists", segment);
}

static void mode_exit(void) {
  qcoll_status_t st = qcoll_barrier(comm, NULL);
  EXPECT(st == QCOLL_OK, "first barrier: %s", qcoll_status_string(st));
  if (rank == n - 1) {
    fflush(stdout);
    _exit(0); /* no destroy: like a crash, as far as the peers can tell */
  }
  float v[1000] = {0};
  double t0 = now_s();
  /* Repeat until the failure is seen: a first call may still complete if
   * it raced with the exit (it cannot here: the last rank never joins). */
  st = qcoll_all_reduce(v, v, 1000, QCOLL_F32, QCOLL_SUM, comm, NULL);
  char who[32];
  snprintf(who, sizeof who, "rank %d", n - 1);
  expect_status("all_reduce after a rank exited", st, QCOLL_ERR_PEER_FAILURE,
                now_s() - t0, 5.0, who);
  EXPECT(strstr(qcoll_comm_last_error(comm), "died") != NULL,
         "message does not say the rank died");
  finish();
}

static void mode_exit_send(void) {
  qcoll_status_t st = qcoll_barrier(comm, NULL);
  EXPECT(st == QCOLL_OK, "first barrier: %s", qcoll_status_string(st));
  if (rank == 1) {
    fflush(stdout);
    _exit(0);
  }
  if (rank != 0) {
    /* Bystanders hear about it through the shared abort word. */
    double t0 = now_s();
    st = qcoll_barrier(comm, NULL);
    expect_status("barrier after rank 1 exited", st, QCOLL_ERR_PEER_FAILURE,
                  now_s() - t0, 5.0, "rank 1");
    finish();
    return;
  }
  size_t bytes = qcoll__shm_layout(&comm->ctx)->pair_bytes * 4;
  char *buf = calloc(1, bytes);
  double t0 = now_s();
  st = qcoll_send(buf, bytes, QCOLL_U8, 1, comm, NULL);
  expect_status("streamed send to a rank that exited", st,
                QCOLL_ERR_PEER_FAILURE, now_s() - t0, 5.0, "rank 1");
  free(buf);
  finish();
}

static void mode_timeout(void) {
  if (rank == 1) sleep(3);
  double t0 = now_s();
  qcoll_status_t st = qcoll_barrier(comm, NULL);
  double dt = now_s() - t0;
  if (rank == 0) {
    expect_status("barrier without rank 1", st, QCOLL_ERR_TIMEOUT, dt, 2.5,
                  "not arrived: 1");
    EXPECT(dt >= 0.9, "timed out after %.2f s, before the 1 s deadline", dt);
  } else {
    expect_status("barrier after rank 0 timed out", st, QCOLL_ERR_PEER_FAILURE,
                  dt, 2.5, "rank 0");
  }
  finish();
}

static void *abort_later(void *arg) {
  (void)arg;
  usleep(300 * 1000);
  qcoll_comm_abort(comm);
  return NULL;
}

static void mode_abort(void) {
  pthread_t th;
  if (rank == 0) pthread_create(&th, NULL, abort_later, NULL);
  if (rank == 1) usleep(800 * 1000);
  double t0 = now_s();
  qcoll_status_t st = qcoll_barrier(comm, NULL);
  double dt = now_s() - t0;
  if (rank == 0) {
    pthread_join(th, NULL);
    expect_status("barrier during abort", st, QCOLL_ERR_ABORTED, dt, 5.0, NULL);
    EXPECT(dt < 0.3 + 1.7, "abort took %.2f s to reach the waiting thread", dt);
  } else {
    expect_status("barrier with an aborted rank", st, QCOLL_ERR_PEER_FAILURE,
                  dt, 5.0, "rank 0");
  }
  finish();
}

static void mode_mismatch(void) {
  char buf[200] = {0};
  qcoll_status_t st;
  double t0 = now_s();
  if (rank == 0) {
    st = qcoll_send(buf, 100, QCOLL_U8, 1, comm, NULL);
    EXPECT(st == QCOLL_OK, "send: %s", qcoll_status_string(st));
    st = qcoll_barrier(comm, NULL);
    expect_status("barrier after a mismatched send", st, QCOLL_ERR_PEER_FAILURE,
                  now_s() - t0, 5.0, "rank 1");
  } else if (rank == 1) {
    st = qcoll_recv(buf, 200, QCOLL_U8, 0, comm, NULL);
    expect_status("recv of the wrong size", st, QCOLL_ERR_MISMATCH,
                  now_s() - t0, 5.0, "100 bytes");
  } else {
    /* Rank 1's failure, or rank 0 destroying its communicator after it saw
     * that failure: whichever this rank notices first (both are peer
     * failures; a slow scheduler, as under TSan, can show either). */
    st = qcoll_barrier(comm, NULL);
    const char *msg = qcoll_comm_last_error(comm);
    expect_status("barrier", st, QCOLL_ERR_PEER_FAILURE, now_s() - t0, 5.0,
                  strstr(msg, "rank 0") && strstr(msg, "destroyed")
                      ? "destroyed its communicator"
                      : "rank 1");
  }
  finish();
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s exit|exit_send|timeout|abort|mismatch\n",
            argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.timeout_s = strcmp(mode, "timeout") == 0 ? 1.0 : 120.0;
  qcoll_status_t st = qcoll_comm_init_env(&comm, &cfg);
  if (st != QCOLL_OK) {
    fprintf(stderr, "qcoll_comm_init_env: %s (%s)\n", qcoll_status_string(st),
            qcoll_last_error());
    return 1;
  }
  qcoll_comm_rank(comm, &rank);
  check_rank = rank;
  qcoll_comm_size(comm, &n);
  snprintf(segment, sizeof segment, "/dev/shm%s", qcoll__shm_name(&comm->ctx));
  if (n < 2) {
    fprintf(stderr, "host_fail_test needs at least 2 ranks\n");
    return 2;
  }
  if (!strcmp(mode, "exit"))
    mode_exit();
  else if (!strcmp(mode, "exit_send"))
    mode_exit_send();
  else if (!strcmp(mode, "timeout"))
    mode_timeout();
  else if (!strcmp(mode, "abort"))
    mode_abort();
  else if (!strcmp(mode, "mismatch"))
    mode_mismatch();
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return check_failures ? 1 : 0;
}
