/*
 * qcoll-perf's NCCL side (perf_nccl.c) against a fake NCCL on host memory:
 *
 *   perf_nccl_test run FAKE_LIB       one rank: every collective, dtype and
 *                                     op reaches NCCL with NCCL's enum values
 *                                     and the right buffers, and the result
 *                                     passes qcoll-perf's own check
 *   perf_nccl_test missing            QCOLL_NCCL_LIB names no library: a
 *                                     refusal that says so
 *   perf_nccl_test refuse FAKE_LIB    under qcoll-run, with FAKE_NCCL_REFUSE
 *                                     set: every rank goes on without NCCL,
 *                                     rank 0 knows which rank refused and
 *                                     why, and ranks whose communicator was
 *                                     made abort it instead of waiting
 *
 * Prints what it checked; exits 0, or 1 on the first failed check.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "fake_nccl_perf.h"
#include "perf.h"

static qcoll_comm_t make_comm(bool launched) {
  qcoll_config_t cfg;
  qcoll_comm_t comm = NULL;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  qcoll_status_t st;
  if (launched) {
    st = qcoll_comm_init_env(&comm, &cfg);
  } else {
    qcoll_unique_id_t id;
    st = qcoll_get_unique_id(&id);
    if (st == QCOLL_OK) st = qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg);
  }
  CHECK(st == QCOLL_OK, "cannot create a communicator: %s", qcoll_last_error());
  return comm;
}

/* The fake's own view of what it was asked, through the same handle the
 * benchmark loaded (dlopen of the same path returns it). */
typedef struct fake {
  const struct fake_nccl_call *(*last_call)(void);
  void (*counts)(int *, int *, int *);
} fake_t;

static fake_t open_fake(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL, "the fake NCCL %s is not loaded: %s", path, dlerror());
  fake_t f;
  *(void **)&f.last_call = dlsym(h, "fake_nccl_last_call");
  *(void **)&f.counts = dlsym(h, "fake_nccl_counts");
  CHECK(f.last_call && f.counts,
        "the fake NCCL lacks its inspection functions");
  return f;
}

/* NCCL's enum values, written out from nccl.h independently of perf_nccl.c. */
static int want_dtype(qcoll_dtype_t dt) {
  switch (dt) {
    case QCOLL_I8: return 0;   /* ncclInt8 */
    case QCOLL_U8: return 1;   /* ncclUint8 */
    case QCOLL_I32: return 2;  /* ncclInt32 */
    case QCOLL_U32: return 3;  /* ncclUint32 */
    case QCOLL_I64: return 4;  /* ncclInt64 */
    case QCOLL_U64: return 5;  /* ncclUint64 */
    case QCOLL_F16: return 6;  /* ncclFloat16 */
    case QCOLL_F32: return 7;  /* ncclFloat32 */
    case QCOLL_F64: return 8;  /* ncclFloat64 */
    case QCOLL_BF16: return 9; /* ncclBfloat16 */
    default: return -2;
  }
}

static int want_op(qcoll_op_t op) {
  switch (op) {
    case QCOLL_SUM: return 0;  /* ncclSum */
    case QCOLL_PROD: return 1; /* ncclProd */
    case QCOLL_MAX: return 2;  /* ncclMax */
    case QCOLL_MIN: return 3;  /* ncclMin */
    case QCOLL_AVG: return 4;  /* ncclAvg */
    default: return -2;
  }
}

static const char *want_fn(perf_coll_id_t id) {
  switch (id) {
    case PERF_ALL_REDUCE: return "ncclAllReduce";
    case PERF_REDUCE: return "ncclReduce";
    case PERF_BROADCAST: return "ncclBroadcast";
    case PERF_ALL_GATHER: return "ncclAllGather";
    case PERF_REDUCE_SCATTER: return "ncclReduceScatter";
    case PERF_ALL_TO_ALL: return "ncclRecv"; /* a group: send, then recv last */
    default: return "?";
  }
}

static int run_case(const char *lib) {
  setenv("QCOLL_NCCL_LIB", lib, 1);
  qcoll_comm_t comm = make_comm(false);
  char why[320];
  perf_nccl_t *n = perf_nccl_start(comm, 0, 1, why, sizeof why);
  CHECK(n != NULL, "NCCL refused: %s", why);
  CHECK(strstr(perf_nccl_describe(n), "2.28.3") != NULL, "version: %s",
        perf_nccl_describe(n));
  CHECK(strstr(perf_nccl_describe(n), lib) != NULL, "path: %s",
        perf_nccl_describe(n));
  fake_t fake = open_fake(lib);

  perf_buf_t send, recv;
  const size_t bytes = 96 * 8;
  CHECK(perf_buf_alloc(&send, PERF_MEM_HOST, bytes) == 0 &&
            perf_buf_alloc(&recv, PERF_MEM_HOST, bytes) == 0,
        "host buffers");
  int checked = 0;
  for (int id = 0; id < PERF_COLL_COUNT; id++) {
    const perf_coll_t *coll = perf_coll_by_id((perf_coll_id_t)id);
    perf_call_t call = {.coll = coll,
                        .comm = comm,
                        .rank = 0,
                        .nranks = 1,
                        .root = coll->has_root ? 0 : -1,
                        .send = &send,
                        .recv = &recv};
    if (coll->id == PERF_BARRIER || coll->id == PERF_SENDRECV) {
      /* No NCCL barrier; a ring needs two ranks. */
      if (coll->id == PERF_BARRIER)
        CHECK(!perf_nccl_supports(&call), "NCCL has no barrier");
      continue;
    }
    CHECK(perf_nccl_supports(&call), "%s should be supported", coll->name);
    for (int d = 0; d < QCOLL_DTYPE_COUNT; d++) {
      for (int o = 0; o < (coll->has_op ? QCOLL_OP_COUNT : 1); o++) {
        call.dtype = (qcoll_dtype_t)d;
        call.op = (qcoll_op_t)o;
        call.shape =
            perf_coll_shape(coll, bytes, qcoll_dtype_size(call.dtype), 1);
        CHECK(perf_check_prepare(&call) == 0, "prepare");
        int before = fake.last_call()->calls;
        CHECK(perf_nccl_run(n, &call, why, sizeof why) == 0, "%s: %s",
              coll->name, why);
        const struct fake_nccl_call *c = fake.last_call();
        CHECK(c->calls > before, "%s: NCCL was not called", coll->name);
        CHECK(strcmp(c->fn, want_fn(coll->id)) == 0, "%s called %s", coll->name,
              c->fn);
        CHECK(c->dtype == want_dtype(call.dtype),
              "%s %s: NCCL dtype %d, expected %d", coll->name,
              qcoll_dtype_name(call.dtype), c->dtype, want_dtype(call.dtype));
        if (coll->has_op)
          CHECK(c->op == want_op(call.op), "%s %s: NCCL op %d, expected %d",
                coll->name, qcoll_op_name(call.op), c->op, want_op(call.op));
        if (coll->has_root)
          CHECK(c->root == 0, "%s: root %d", coll->name, c->root);
        CHECK(c->count == call.shape.count, "%s: count %zu, expected %zu",
              coll->name, c->count, call.shape.count);
        CHECK(c->recv == recv.ptr,
              "%s: NCCL did not write into the receive buffer", coll->name);
        int64_t wrong = -1;
        CHECK(perf_check_count_wrong(&call, (perf_tolerance_t){0}, &wrong) == 0,
              "compare");
        CHECK(wrong == 0, "%s %s %s: %lld wrong", coll->name,
              qcoll_dtype_name(call.dtype), qcoll_op_name(call.op),
              (long long)wrong);
        checked++;
      }
    }
  }
  perf_buf_free(&send);
  perf_buf_free(&recv);
  perf_nccl_stop(n);
  int inits, destroys, aborts;
  fake.counts(&inits, &destroys, &aborts);
  CHECK(inits == 1 && destroys == 1 && aborts == 0,
        "communicators: %d made, %d destroyed, %d "
        "aborted",
        inits, destroys, aborts);
  qcoll_comm_destroy(comm);
  printf(
      "PASS: %d NCCL calls with NCCL's dtype/op values, results exact; "
      "communicator made once and destroyed\n",
      checked);
  return 0;
}

static int missing_case(void) {
  setenv("QCOLL_NCCL_LIB", "/no/such/dir/libnccl.so.2", 1);
  qcoll_comm_t comm = make_comm(false);
  char why[320] = "";
  perf_nccl_t *n = perf_nccl_start(comm, 0, 1, why, sizeof why);
  CHECK(n == NULL, "a missing NCCL was accepted");
  CHECK(strstr(why, "cannot load QCOLL_NCCL_LIB=/no/such/dir/libnccl.so.2") !=
            NULL,
        "reason: %s", why);
  qcoll_comm_destroy(comm);
  printf("PASS: refused: %s\n", why);
  return 0;
}

static int refuse_case(const char *lib) {
  const char *refuse = getenv("FAKE_NCCL_REFUSE");
  CHECK(refuse != NULL, "set FAKE_NCCL_REFUSE");
  setenv("QCOLL_NCCL_LIB", lib, 1);
  qcoll_comm_t comm = make_comm(true);
  int rank, nranks;
  qcoll_comm_rank(comm, &rank);
  qcoll_comm_size(comm, &nranks);
  check_rank = rank;
  char why[320] = "";
  perf_nccl_t *n = perf_nccl_start(comm, rank, nranks, why, sizeof why);
  CHECK(n == NULL, "NCCL was accepted although rank(s) %s refused", refuse);
  CHECK(
      strstr(why, "ncclCommInitRank: invalid usage: Duplicate GPU detected") !=
          NULL,
      "reason: %s", why);
  CHECK(strchr(why, '\n') == NULL, "the reason is not one line: %s", why);
  bool all = strcmp(refuse, "all") == 0;
  bool me_refused = all || atoi(refuse) == rank;
  if (!all && !me_refused) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d: ", atoi(refuse));
    CHECK(strncmp(why, prefix, strlen(prefix)) == 0,
          "reason should name the rank: %s", why);
  }
  fake_t fake = open_fake(lib);
  int inits, destroys, aborts;
  fake.counts(&inits, &destroys, &aborts);
  CHECK(inits == !me_refused, "%d communicators made", inits);
  CHECK(aborts == inits && destroys == 0, "%d made, %d aborted, %d destroyed",
        inits, aborts, destroys);
  /* The qcoll communicator is still usable. */
  CHECK(qcoll_barrier(comm, NULL) == QCOLL_OK, "barrier: %s",
        qcoll_comm_last_error(comm));
  qcoll_comm_destroy(comm);
  printf("PASS (rank %d): refused everywhere: %s\n", rank, why);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "run") == 0) return run_case(argv[2]);
  if (argc == 2 && strcmp(argv[1], "missing") == 0) return missing_case();
  if (argc == 3 && strcmp(argv[1], "refuse") == 0) return refuse_case(argv[2]);
  fprintf(stderr,
          "usage: perf_nccl_test run FAKE_LIB | missing | refuse FAKE_LIB\n");
  return 2;
}
