/*
 * The NCCL watchdog without a GPU: a fake NCCL (FAKE_WATCHED, loaded with
 * dlopen) whose asynchronous state the test chooses, and a runtime whose
 * device events the test controls.
 *
 *   test_nccl_watch LIB CASE
 *
 * Cases (deadline 0.5 s):
 *   quiet       work that finishes, 200 calls (more than the ring holds):
 *               nothing fires in 3 deadlines, NCCL never aborted; then
 *               1000 calls at once and one that stalls: that one is named
 *   hang        NCCL "in progress" forever, no device events: TIMEOUT
 *               naming the call within deadline + 0.3 s, one abort, the
 *               communicator broken, no NCCL call after the abort
 *   async       NCCL reports an error: QCOLL_ERR_NCCL with NCCL's text
 *   stall_exit  events that never complete: TIMEOUT, then, a deadline
 *               after the abort, the process ends with exit code 70
 *               (QCOLL_STALL_EXIT=1, in a child process)
 *   stall_stay  the same with QCOLL_STALL_EXIT=0: the process stays
 *   off         QCOLL_NCCL_WATCHDOG=0: no watchdog
 * Prints "PASS <case>" or exits non-zero with the reason.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/transport/nccl_watch.h"

#define TIMEOUT_S 0.5
#define NCCL_IN_PROGRESS 7
#define NCCL_REMOTE_ERROR 6

static void (*set_async)(int);
static int (*aborts)(void);
static qcoll__nccl_watch_api_t wapi;

static void fail(const char *fmt, const char *arg) {
  fprintf(stderr, "FAIL: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(1);
}

static void load(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail("cannot load %s", dlerror());
  set_async = (void (*)(int))dlsym(h, "fake_nccl_set_async");
  aborts = (int (*)(void))dlsym(h, "fake_nccl_aborts");
  wapi.get_async_error =
      (int (*)(void *, int *))dlsym(h, "ncclCommGetAsyncError");
  wapi.abort = (int (*)(void *))dlsym(h, "ncclCommAbort");
  wapi.error_string = (const char *(*)(int))dlsym(h, "ncclGetErrorString");
  if (!set_async || !aborts || !wapi.get_async_error || !wapi.abort)
    fail("%s is not the FAKE_WATCHED variant", lib);
}

/* ---- a runtime whose events finish when the test says ----------------
 * Each event holds the number of the call recorded in it last; work up to
 * call `finished` has finished (all of it while events_finish is set). */

static atomic_bool events_finish;
static atomic_long recorded, finished;
static qcoll_status_t test_event_record(void **event, void *stream) {
  (void)stream;
  if (!*event && !(*event = malloc(sizeof(long))))
    return QCOLL_ERR_OUT_OF_MEMORY;
  *(long *)*event = atomic_fetch_add(&recorded, 1) + 1;
  return QCOLL_OK;
}
static qcoll_status_t test_event_query(void *event, bool *done) {
  *done = atomic_load(&events_finish) ||
          *(const long *)event <= atomic_load(&finished);
  return QCOLL_OK;
}
static void test_event_destroy(void *event) {
  free(event);
}

static qcoll__runtime_t with_events(void) {
  qcoll__runtime_t rt = *qcoll__runtime_host();
  rt.event_record = test_event_record;
  rt.event_query = test_event_query;
  rt.event_destroy = test_event_destroy;
  return rt;
}

/* A context as a communicator's init makes it: the QCOLL_* variables the
 * case set are read into its configuration. */
static qcoll__ctx_t make_comm(void) {
  qcoll__ctx_t c;
  memset(&c, 0, sizeof c);
  qcoll__config_read(&c.config);
  c.nranks = 1;
  c.device = QCOLL_DEVICE_NONE;
  c.timeout_s = TIMEOUT_S;
  atomic_init(&c.state, QCOLL_COMM_LIVE);
  pthread_mutex_init(&c.error_lock, NULL);
  return c;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static int fake_handle;

/* Wait up to max_s for the watchdog to fire; returns when it did (or -1). */
static double wait_fired(qcoll__nccl_watch_t *w, double max_s,
                         qcoll_status_t *st, char *why, size_t n) {
  double t0 = now_s();
  while (now_s() - t0 < max_s) {
    if (qcoll__nccl_watch_fired(w, st, why, n)) return now_s() - t0;
    nap(0.005);
  }
  return -1;
}

static void case_quiet(const qcoll__runtime_t *rt) {
  qcoll__ctx_t comm = make_comm();
  set_async(0);
  atomic_store(&events_finish, true);
  qcoll__nccl_watch_t *w =
      qcoll__nccl_watch_start(&comm, &fake_handle, &wapi, rt);
  if (!w) fail("%s", "the watchdog did not start");
  for (int i = 0; i < 200; i++) {
    qcoll__nccl_watch_enqueued(w, "qcoll_all_reduce", "ncclAllReduce", NULL);
    nap(0.005);
  }
  nap(3 * TIMEOUT_S);
  char why[512] = "";
  qcoll_status_t st = QCOLL_OK;
  if (qcoll__nccl_watch_fired(w, &st, why, sizeof why))
    fail("fired on work that finished: %s", why);
  if (aborts() != 0) fail("%s", "NCCL was aborted");
  if (atomic_load(&comm.state) != QCOLL_COMM_LIVE)
    fail("%s", "the communicator is not live");
  /* Calls far faster than the ticks (1000 at once, the ring holds 64):
   * finished slots are reused at once, so the one call that then stalls is
   * still watched, and it alone is named. */
  for (int i = 0; i < 1000; i++)
    qcoll__nccl_watch_enqueued(w, "qcoll_all_reduce", "ncclAllReduce", NULL);
  atomic_store(&finished, atomic_load(&recorded));
  atomic_store(&events_finish, false);
  qcoll__nccl_watch_enqueued(w, "qcoll_reduce", "ncclReduce", NULL);
  if (wait_fired(w, 3 * TIMEOUT_S, &st, why, sizeof why) < 0 ||
      !strstr(why, "qcoll_reduce (ncclReduce)"))
    fail("a stall after 1000 quick calls was not caught: '%s'", why);
  printf("after 1000 quick calls: %s\n", why);
  qcoll__nccl_watch_stop(w);
  if (aborts() != 1) fail("%s", "NCCL was not aborted exactly once");
}

/* Work that never finishes (per NCCL's state or per its event). */
static qcoll__nccl_watch_t *expect_timeout(qcoll__ctx_t *comm,
                                           const qcoll__runtime_t *rt) {
  qcoll__nccl_watch_t *w =
      qcoll__nccl_watch_start(comm, &fake_handle, &wapi, rt);
  if (!w) fail("%s", "the watchdog did not start");
  double t0 = now_s();
  qcoll__nccl_watch_enqueued(w, "qcoll_broadcast", "ncclBroadcast", NULL);
  char why[512] = "";
  qcoll_status_t st = QCOLL_OK;
  double after = wait_fired(w, 5 * TIMEOUT_S, &st, why, sizeof why);
  if (after < 0) fail("%s", "did not fire within 5 deadlines");
  after = now_s() - t0;
  printf("fired after %.3f s (deadline %.1f s): %s\n", after, TIMEOUT_S, why);
  if (st != QCOLL_ERR_TIMEOUT) fail("status is not TIMEOUT: %s", why);
  if (after < TIMEOUT_S || after > TIMEOUT_S + 0.3)
    fail("fired outside [deadline, deadline + 0.3 s]: %s", why);
  if (!strstr(why, "qcoll_broadcast (ncclBroadcast)") ||
      !strstr(why, "aborted the NCCL communicator"))
    fail("the message does not name the call and the abort: %s", why);
  if (aborts() != 1) fail("%s", "NCCL was not aborted exactly once");
  if (atomic_load(&comm->state) != QCOLL_COMM_BROKEN)
    fail("%s", "the communicator is not broken");
  return w;
}

static void case_hang(const qcoll__runtime_t *rt) {
  qcoll__ctx_t comm = make_comm();
  set_async(NCCL_IN_PROGRESS);
  qcoll__nccl_watch_t *w = expect_timeout(&comm, rt);
  nap(2 * TIMEOUT_S); /* the fake aborts the test on any NCCL call now */
  qcoll__nccl_watch_stop(w);
}

static void case_async(const qcoll__runtime_t *rt) {
  qcoll__ctx_t comm = make_comm();
  set_async(0);
  qcoll__nccl_watch_t *w =
      qcoll__nccl_watch_start(&comm, &fake_handle, &wapi, rt);
  if (!w) fail("%s", "the watchdog did not start");
  nap(0.1);
  set_async(NCCL_REMOTE_ERROR);
  char why[512] = "";
  qcoll_status_t st = QCOLL_OK;
  double after = wait_fired(w, 2 * TIMEOUT_S, &st, why, sizeof why);
  printf("fired %.3f s after the error: %s\n", after, why);
  if (after < 0 || st != QCOLL_ERR_NCCL ||
      !strstr(why, "remote process exited") || aborts() != 1)
    fail("not an NCCL error with NCCL's text and one abort: %s", why);
  qcoll__nccl_watch_stop(w);
}

static void case_stall(const qcoll__runtime_t *rt, bool exits) {
  setenv("QCOLL_STALL_EXIT", exits ? "1" : "0", 1);
  pid_t pid = fork();
  if (pid == 0) {
    qcoll__ctx_t comm = make_comm();
    set_async(0);
    atomic_store(&events_finish, false);
    qcoll__nccl_watch_t *w = expect_timeout(&comm, rt);
    nap(3 * TIMEOUT_S);
    qcoll__nccl_watch_stop(w);
    _exit(0);
  }
  double t0 = now_s();
  int status = 0;
  waitpid(pid, &status, 0);
  double took = now_s() - t0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  printf("child exited with %d after %.3f s\n", code, took);
  /* The exit code tells the watchdog's exit from the child's own; the
   * time bound is loose, for sanitizer builds on loaded machines. */
  if (exits && (code != QCOLL__STALL_EXIT_CODE || took > 8 * TIMEOUT_S))
    fail("%s",
         "the stalled process did not exit with 70 a deadline after "
         "the abort");
  if (!exits && (code != 0 || took < 4 * TIMEOUT_S))
    fail("%s", "with QCOLL_STALL_EXIT=0 the process did not stay");
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_nccl_watch FAKE_LIB CASE\n");
    return 2;
  }
  load(argv[1]);
  setenv("QCOLL_DEBUG", "WARN", 0);
  const char *c = argv[2];
  qcoll__runtime_t events = with_events();
  if (!strcmp(c, "quiet"))
    case_quiet(&events);
  else if (!strcmp(c, "hang"))
    case_hang(qcoll__runtime_host());
  else if (!strcmp(c, "async"))
    case_async(qcoll__runtime_host());
  else if (!strcmp(c, "stall_exit"))
    case_stall(&events, true);
  else if (!strcmp(c, "stall_stay"))
    case_stall(&events, false);
  else if (!strcmp(c, "off")) {
    setenv("QCOLL_NCCL_WATCHDOG", "0", 1);
    qcoll__ctx_t comm = make_comm();
    if (qcoll__nccl_watch_start(&comm, &fake_handle, &wapi, &events))
      fail("%s", "QCOLL_NCCL_WATCHDOG=0 started a watchdog");
  } else {
    fail("unknown case %s", c);
  }
  printf("PASS %s\n", c);
  return 0;
}
