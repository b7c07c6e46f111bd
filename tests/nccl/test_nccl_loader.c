/*
 * Loading NCCL with dlopen: every way a library can be unusable gives a
 * clean "unavailable" with one reason, logged exactly once per process even
 * when many threads ask at once; the real libnccl.so.2 (when there is one)
 * loads with its version and every symbol.  Loading happens once per
 * process, so each case runs as its own process:
 *
 *   test_nccl_loader CASE [LIBRARY]
 *
 * CASE says what LIBRARY is and what must happen:
 *   absent        a path that does not exist
 *   not_elf       a file that is not a shared library
 *   old           a library whose ncclGetVersion says 2.17.3
 *   missing       a 2.28 library without ncclSend / ncclRecv
 *   no_version    a library without ncclGetVersion
 *   version_fails a library whose ncclGetVersion returns an error
 *   real          the real libnccl.so.2 (QCOLL_NCCL_LIB=LIBRARY)
 *   search        QCOLL_NCCL_LIB unset: the usual names; exits 77 (skipped)
 *                 when no NCCL is installed
 * Failure cases also check that a communicator then refuses NCCL with that
 * reason and that point-to-point calls cannot create the NCCL communicator.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "qcoll.h"
#include "core/comm.h"
#include "transport/nccl.h"

#define THREADS 8
#define UNAVAILABLE_MARK "NCCL unavailable:"
#define LOADED_MARK " loaded from "

typedef struct loader_case {
  const char *name;
  bool expect_available;
  /* Pieces the reason must contain (NULL-terminated). */
  const char *reason_has[4];
} loader_case_t;

static const loader_case_t cases[] = {
    {"absent", false, {"QCOLL_NCCL_LIB=", "No such file", NULL}},
    {"not_elf", false, {"QCOLL_NCCL_LIB=", "invalid ELF header", NULL}},
    {"old", false, {"NCCL 2.17.3", "older than 2.18", NULL}},
    {"missing", false, {"missing symbols: ", "ncclSend", "ncclRecv", NULL}},
    {"no_version", false, {"no ncclGetVersion", NULL}},
    {"version_fails", false, {"ncclGetVersion returned error 3", NULL}},
    {"real", true, {NULL}},
    {"search", true, {NULL}},
};

static const loader_case_t *the_case;
static const char *the_library;

/* ---- stderr capture ------------------------------------------------- */

typedef struct capture {
  int saved_fd;
  FILE *file;
} capture_t;

static void capture_start(capture_t *c) {
  fflush(stderr);
  c->file = tmpfile();
  assert_non_null(c->file);
  c->saved_fd = dup(STDERR_FILENO);
  assert_true(c->saved_fd >= 0);
  assert_true(dup2(fileno(c->file), STDERR_FILENO) >= 0);
}

/* Restore stderr and return what was written meanwhile (malloc'd). */
static char *capture_end(capture_t *c) {
  fflush(stderr);
  dup2(c->saved_fd, STDERR_FILENO);
  close(c->saved_fd);
  long len = ftell(c->file);
  char *text = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
  assert_non_null(text);
  rewind(c->file);
  size_t got = fread(text, 1, (size_t)(len > 0 ? len : 0), c->file);
  text[got] = '\0';
  fclose(c->file);
  fprintf(stderr, "---- captured log ----\n%s----------------------\n", text);
  return text;
}

static int count_occurrences(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* ---- tests ---------------------------------------------------------- */

typedef struct probe {
  bool available;
  char why[1024];
} probe_t;

static void *probe_thread(void *arg) {
  probe_t *p = arg;
  p->available = qcoll__nccl_available(p->why, sizeof p->why);
  return NULL;
}

/* Many threads ask at once; everyone gets the same answer and the reason
 * (or the success) is logged exactly once. */
static void loads_once_from_many_threads(void **state) {
  capture_t cap;
  capture_start(&cap);
  pthread_t threads[THREADS];
  probe_t probes[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&threads[i], NULL, probe_thread, &probes[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  probe_t again;
  for (int i = 0; i < 3; i++) probe_thread(&again);
  char *log = capture_end(&cap);

  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(probes[i].available, probes[0].available);
    assert_string_equal(probes[i].why, probes[0].why);
  }
  assert_int_equal(again.available, probes[0].available);
  if (probes[0].available) {
    assert_int_equal(count_occurrences(log, LOADED_MARK), 1);
    assert_int_equal(count_occurrences(log, UNAVAILABLE_MARK), 0);
    assert_string_equal(probes[0].why, "");
  } else {
    assert_int_equal(count_occurrences(log, UNAVAILABLE_MARK), 1);
    assert_int_equal(count_occurrences(log, LOADED_MARK), 0);
    /* The logged reason is the one returned. */
    assert_non_null(strstr(log, probes[0].why));
  }
  free(log);
}

static void outcome_matches_case(void **state) {
  char why[2048];
  bool ok = qcoll__nccl_available(why, sizeof why);
  if (!ok && !strcmp(the_case->name, "search")) {
    /* No NCCL on this machine: the reason lists what was tried. */
    assert_non_null(strstr(why, "no usable libnccl.so.2 (tried libnccl.so.2"));
    return;
  }
  if (ok != the_case->expect_available)
    fail_msg("case %s: available=%d, reason: %s", the_case->name, ok, why);
  if (!ok) {
    for (int i = 0; the_case->reason_has[i]; i++)
      if (!strstr(why, the_case->reason_has[i]))
        fail_msg("reason lacks '%s': %s", the_case->reason_has[i], why);
    if (the_library && !strstr(why, the_library))
      fail_msg("reason does not name %s: %s", the_library, why);
    assert_int_equal(qcoll__nccl_version(), 0);
    assert_string_equal(qcoll__nccl_library_path(), "");
    /* A missing-symbols report names only what is missing. */
    if (!strcmp(the_case->name, "missing"))
      assert_null(strstr(why, "ncclAllReduce"));
    /* A truncated reason buffer still ends in a NUL. */
    char small[8];
    memset(small, 'x', sizeof small);
    assert_false(qcoll__nccl_available(small, sizeof small));
    assert_int_equal(strlen(small), sizeof small - 1);
    return;
  }
  int v = qcoll__nccl_version();
  printf("NCCL version code %d from %s\n", v, qcoll__nccl_library_path());
  assert_true(v >= QCOLL__NCCL_MIN_VERSION);
  assert_non_null(strstr(qcoll__nccl_library_path(), "libnccl"));
  if (the_library) {
    char want[4096], got[4096];
    assert_non_null(realpath(the_library, want));
    assert_non_null(realpath(qcoll__nccl_library_path(), got));
    assert_string_equal(got, want);
  }
}

static qcoll_comm_t make_host_comm(void) {
  qcoll_unique_id_t id;
  assert_int_equal(qcoll_get_unique_id(&id), QCOLL_OK);
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = 20;
  qcoll_comm_t comm = NULL;
  if (qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg) != QCOLL_OK)
    fail_msg("init failed: %s", qcoll_last_error());
  return comm;
}

/* Without a usable library a communicator refuses NCCL, with the loader's
 * reason, and keeps refusing without another round of agreement; on a
 * host-only communicator even a good library is refused (no GPU). */
static void communicator_refuses_nccl(void **state) {
  qcoll_comm_t comm = make_host_comm();
  assert_int_equal(qcoll__nccl_comm_state(&comm->ctx), QCOLL__NCCL_UNTRIED);
  assert_string_equal(qcoll__nccl_comm_refusal(&comm->ctx), "");

  /* Point-to-point cannot create the NCCL communicator (not collective). */
  int x = 1;
  assert_int_equal(qcoll__nccl_send(&comm->ctx, &x, 1, QCOLL_I32, 0, NULL),
                   QCOLL_ERR_UNSUPPORTED);
  assert_non_null(strstr(qcoll_comm_last_error(comm), "does not exist yet"));
  assert_int_equal(qcoll__nccl_comm_state(&comm->ctx), QCOLL__NCCL_UNTRIED);

  void *nccl = &x;
  assert_int_equal(qcoll__nccl_comm_get(&comm->ctx, &nccl),
                   QCOLL_ERR_UNSUPPORTED);
  assert_null(nccl);
  assert_int_equal(qcoll__nccl_comm_state(&comm->ctx), QCOLL__NCCL_REFUSED);
  const char *refusal = qcoll__nccl_comm_refusal(&comm->ctx);
  assert_non_null(strstr(refusal, "rank 0: "));
  char why[2048];
  if (qcoll__nccl_available(why, sizeof why))
    assert_non_null(strstr(refusal, "no GPU"));
  else
    assert_non_null(strstr(refusal, "QCOLL_NCCL_LIB=") ||
                    strstr(refusal, "no usable libnccl.so.2"));
  assert_non_null(strstr(qcoll_comm_last_error(comm), refusal));

  /* Remembered: the same answer, and the collectives refuse too. */
  assert_int_equal(qcoll__nccl_comm_get(&comm->ctx, &nccl),
                   QCOLL_ERR_UNSUPPORTED);
  assert_int_equal(
      qcoll__nccl_all_reduce(&comm->ctx, &x, &x, 1, QCOLL_I32, QCOLL_SUM, NULL),
      QCOLL_ERR_UNSUPPORTED);
  assert_int_equal(qcoll__nccl_recv(&comm->ctx, &x, 1, QCOLL_I32, 0, NULL),
                   QCOLL_ERR_UNSUPPORTED);
  assert_int_equal(qcoll__nccl_poll_async_error(&comm->ctx), QCOLL_OK);
  /* The communicator itself is still fine. */
  assert_int_equal(qcoll_barrier(comm, NULL), QCOLL_OK);

  qcoll__nccl_comm_destroy(&comm->ctx);
  assert_int_equal(qcoll__nccl_comm_state(&comm->ctx), QCOLL__NCCL_UNTRIED);
  qcoll__nccl_comm_destroy(&comm->ctx); /* twice is harmless */
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CASE [LIBRARY]\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(cases[i].name, argv[1])) the_case = &cases[i];
  if (!the_case) {
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
  }
  the_library = argc > 2 ? argv[2] : NULL;
  /* Before the first qcoll call: logging and the runtime read these once. */
  setenv("QCOLL_DEBUG", "INFO", 1);
  setenv("QCOLL_DEBUG_SUBSYS", "NCCL", 1);
  setenv("QCOLL_DISABLE_CUDA", "1", 1);
  if (the_library)
    setenv("QCOLL_NCCL_LIB", the_library, 1);
  else
    unsetenv("QCOLL_NCCL_LIB");

  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loads_once_from_many_threads),
      cmocka_unit_test(outcome_matches_case),
      cmocka_unit_test(communicator_refuses_nccl),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  char why[2048];
  if (!failed && !strcmp(the_case->name, "search") &&
      !qcoll__nccl_available(why, sizeof why)) {
    printf("skipped: no NCCL found by the search: %s\n", why);
    return 77;
  }
  return failed;
}
