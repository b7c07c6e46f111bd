/*
 * NCCL on the same buffers, for a side-by-side ratio.
 *
 * NCCL is loaded at run time (dlopen), so qcoll-perf builds and runs where
 * NCCL is absent; the few entry points used are declared here with NCCL's
 * C ABI (handles are pointers, enums are ints, the unique id is 128 bytes).
 * Its communicator spans the same ranks as qcoll's and is created on the
 * current device; rank 0's unique id travels through qcoll_broadcast.
 *
 * Every step that can fail on one rank only (loading, the unique id, the
 * communicator) ends with an exchange over qcoll, so that all ranks go on
 * with NCCL or all go on without it: a rank that left NCCL alone while its
 * peers enqueued NCCL work would hang them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

/* ---- NCCL's ABI ------------------------------------------------------------
 */

typedef struct nccl_comm *nccl_comm_t; /* ncclComm_t */
typedef int nccl_result_t;             /* ncclResult_t, ncclSuccess = 0 */
#define NCCL_SUCCESS 0
#define NCCL_ID_BYTES 128
typedef struct {
  char internal[NCCL_ID_BYTES];
} nccl_id_t;

/* ncclDataType_t and ncclRedOp_t values, indexed by qcoll's enums. */
static const int nccl_dtype[QCOLL_DTYPE_COUNT] = {
    [QCOLL_I8] = 0,  [QCOLL_U8] = 1,  [QCOLL_I32] = 2, [QCOLL_U32] = 3,
    [QCOLL_I64] = 4, [QCOLL_U64] = 5, [QCOLL_F16] = 6, [QCOLL_F32] = 7,
    [QCOLL_F64] = 8, [QCOLL_BF16] = 9};
static const int nccl_op[QCOLL_OP_COUNT] = {[QCOLL_SUM] = 0,
                                            [QCOLL_PROD] = 1,
                                            [QCOLL_MAX] = 2,
                                            [QCOLL_MIN] = 3,
                                            [QCOLL_AVG] = 4};

typedef struct nccl_api {
  nccl_result_t (*get_unique_id)(nccl_id_t *);
  nccl_result_t (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
  nccl_result_t (*all_reduce)(const void *, void *, size_t, int, int,
                              nccl_comm_t, void *);
  nccl_result_t (*all_gather)(const void *, void *, size_t, int, nccl_comm_t,
                              void *);
  nccl_result_t (*reduce_scatter)(const void *, void *, size_t, int, int,
                                  nccl_comm_t, void *);
  nccl_result_t (*broadcast)(const void *, void *, size_t, int, int,
                             nccl_comm_t, void *);
  nccl_result_t (*reduce)(const void *, void *, size_t, int, int, int,
                          nccl_comm_t, void *);
  nccl_result_t (*send)(const void *, size_t, int, int, nccl_comm_t, void *);
  nccl_result_t (*recv)(void *, size_t, int, int, nccl_comm_t, void *);
  nccl_result_t (*group_start)(void);
  nccl_result_t (*group_end)(void);
  nccl_result_t (*comm_destroy)(nccl_comm_t);
  const char *(*get_error_string)(nccl_result_t);
  /* Optional (older versions lack them). */
  nccl_result_t (*comm_abort)(nccl_comm_t);
  const char *(*get_last_error)(nccl_comm_t);
  nccl_result_t (*get_version)(int *);
} nccl_api_t;

struct perf_nccl {
  void *lib;
  nccl_api_t api;
  nccl_comm_t comm;
  int rank, nranks;
  char describe[160];
};

/* ---- loading
 * ----------------------------------------------------------------- */

static bool load_symbols(perf_nccl_t *n, char *why, size_t len) {
  static const struct {
    const char *name;
    size_t offset;
    bool optional;
  } syms[] = {
#define SYM(field, name, optional) {name, offsetof(nccl_api_t, field), optional}
      SYM(get_unique_id, "ncclGetUniqueId", false),
      SYM(comm_init_rank, "ncclCommInitRank", false),
      SYM(all_reduce, "ncclAllReduce", false),
      SYM(all_gather, "ncclAllGather", false),
      SYM(reduce_scatter, "ncclReduceScatter", false),
      SYM(broadcast, "ncclBroadcast", false),
      SYM(reduce, "ncclReduce", false),
      SYM(send, "ncclSend", false),
      SYM(recv, "ncclRecv", false),
      SYM(group_start, "ncclGroupStart", false),
      SYM(group_end, "ncclGroupEnd", false),
      SYM(comm_destroy, "ncclCommDestroy", false),
      SYM(get_error_string, "ncclGetErrorString", false),
      SYM(comm_abort, "ncclCommAbort", true),
      SYM(get_last_error, "ncclGetLastError", true),
      SYM(get_version, "ncclGetVersion", true),
#undef SYM
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *f = dlsym(n->lib, syms[i].name);
    if (!f && !syms[i].optional) {
      snprintf(why, len, "the NCCL library lacks %s (too old?)", syms[i].name);
      return false;
    }
    /* POSIX guarantees that object and function pointers convert. */
    memcpy((char *)&n->api + syms[i].offset, &f, sizeof f);
  }
  return true;
}

static bool load(perf_nccl_t *n, char *why, size_t len) {
  const char *env = getenv("QCOLL_NCCL_LIB");
  const char *candidates[] = {"libnccl.so.2",
                              "/usr/local/cuda/lib64/libnccl.so.2"};
  const char *used = NULL;
  char first_error[256] = "";
  if (env && *env) {
    used = env;
    n->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
      snprintf(why, len, "cannot load QCOLL_NCCL_LIB=%s: %s", env, dlerror());
      return false;
    }
  } else {
    for (size_t i = 0; i < 2 && !n->lib; i++) {
      used = candidates[i];
      n->lib = dlopen(used, RTLD_NOW | RTLD_LOCAL);
      const char *e = n->lib ? NULL : dlerror();
      if (e && !first_error[0])
        snprintf(first_error, sizeof first_error, "%s", e);
    }
    if (!n->lib) {
      snprintf(
          why, len,
          "cannot load NCCL (libnccl.so.2, /usr/local/cuda/lib64/libnccl.so.2; "
          "set QCOLL_NCCL_LIB): %s",
          first_error);
      return false;
    }
  }
  if (!load_symbols(n, why, len)) return false;
  int v = 0;
  if (n->api.get_version && n->api.get_version(&v) == NCCL_SUCCESS && v > 0) {
    /* Codes are major*10000 + minor*100 + patch since 2.9, major*1000 + ...
     * before. */
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
    snprintf(n->describe, sizeof n->describe, "%d.%d.%d (%s)", major, minor,
             v % 100, used);
  } else {
    snprintf(n->describe, sizeof n->describe, "version unknown (%s)", used);
  }
  return true;
}

/* "ncclCommInitRank: invalid usage: Duplicate GPU detected ..." */
static void nccl_reason(const perf_nccl_t *n, const char *what, nccl_result_t r,
                        char *why, size_t len) {
  const char *detail =
      n->api.get_last_error ? n->api.get_last_error(NULL) : NULL;
  int k = snprintf(why, len, "%s: %s", what, n->api.get_error_string(r));
  if (detail && *detail && k > 0 && (size_t)k < len)
    snprintf(why + k, len - (size_t)k, ": %s", detail);
  /* One line: NCCL's messages may end in a newline. */
  for (char *p = why; *p; p++)
    if (*p == '\n' || *p == '\r') *p = (p[1] ? ' ' : 0);
}

/* ---- agreeing
 * ------------------------------------------------------------------ */

typedef struct verdict {
  int32_t failed;
  char why[252];
} verdict_t;

/* Exchange every rank's outcome of one step; true when all succeeded.
 * Otherwise why gets the first failing rank's reason. */
static bool all_agree(qcoll_comm_t comm, int rank, int nranks, bool ok,
                      char *why, size_t len) {
  verdict_t mine = {.failed = !ok};
  if (!ok) snprintf(mine.why, sizeof mine.why, "%s", why);
  verdict_t *all = calloc((size_t)nranks, sizeof *all);
  if (!all) {
    snprintf(why, len, "out of memory");
    return false;
  }
  qcoll_status_t st =
      qcoll_all_gather(&mine, all, sizeof mine, QCOLL_U8, comm, NULL);
  bool agreed = st == QCOLL_OK;
  if (!agreed)
    snprintf(why, len, "exchanging the NCCL set-up over qcoll failed: %s",
             qcoll_comm_last_error(comm));
  for (int r = 0; agreed && r < nranks; r++) {
    if (!all[r].failed) continue;
    all[r].why[sizeof all[r].why - 1] = 0;
    if (r == rank)
      snprintf(why, len, "%s", all[r].why);
    else
      snprintf(why, len, "rank %d: %s", r, all[r].why);
    agreed = false;
  }
  free(all);
  return agreed;
}

/* ---- the context
 * ----------------------------------------------------------------- */

static void release(perf_nccl_t *n, bool abort) {
  if (n->comm) {
    if (abort && n->api.comm_abort)
      n->api.comm_abort(n->comm);
    else
      n->api.comm_destroy(n->comm);
  }
  /* The library stays loaded: NCCL's threads may outlive the communicator. */
  free(n);
}

perf_nccl_t *perf_nccl_start(qcoll_comm_t comm, int rank, int nranks, char *why,
                             size_t len) {
  perf_nccl_t *n = calloc(1, sizeof *n);
  bool ok = n != NULL;
  why[0] = 0;
  if (!ok)
    snprintf(why, len, "out of memory");
  else
    ok = load(n, why, len);
  if (!all_agree(comm, rank, nranks, ok, why, len)) {
    if (n) free(n);
    return NULL;
  }
  n->rank = rank;
  n->nranks = nranks;

  /* Rank 0 makes the id; its outcome travels with it. */
  struct {
    int32_t ok;
    char why[252];
    nccl_id_t id;
  } ticket;
  memset(&ticket, 0, sizeof ticket);
  if (rank == 0) {
    nccl_result_t r = n->api.get_unique_id(&ticket.id);
    ticket.ok = r == NCCL_SUCCESS;
    if (!ticket.ok)
      nccl_reason(n, "ncclGetUniqueId", r, ticket.why, sizeof ticket.why);
  }
  qcoll_status_t st =
      qcoll_broadcast(&ticket, &ticket, sizeof ticket, QCOLL_U8, 0, comm, NULL);
  if (st != QCOLL_OK || !ticket.ok) {
    if (st != QCOLL_OK)
      snprintf(why, len, "broadcasting NCCL's unique id failed: %s",
               qcoll_comm_last_error(comm));
    else
      snprintf(why, len, "rank 0: %s", ticket.why);
    release(n, false);
    return NULL;
  }

  nccl_result_t r = n->api.comm_init_rank(&n->comm, nranks, ticket.id, rank);
  ok = r == NCCL_SUCCESS;
  if (!ok) {
    nccl_reason(n, "ncclCommInitRank", r, why, len);
    n->comm = NULL;
  }
  if (!all_agree(comm, rank, nranks, ok, why, len)) {
    /* Peers may be gone from this communicator: abort, do not wait. */
    release(n, true);
    return NULL;
  }
  return n;
}

const char *perf_nccl_describe(const perf_nccl_t *n) {
  return n->describe;
}

bool perf_nccl_supports(const perf_call_t *call) {
  return call->coll->id != PERF_BARRIER;
}

/* Exchanges with every peer (all-to-all) or with the ring's neighbours
 * (sendrecv), as one group so NCCL pairs them without deadlock. */
static nccl_result_t exchange(perf_nccl_t *n, const perf_call_t *c,
                              const char **what) {
  const nccl_api_t *a = &n->api;
  size_t cnt = c->shape.count, es = qcoll_dtype_size(c->dtype);
  int dt = nccl_dtype[c->dtype];
  const char *send = c->send->ptr;
  char *recv = c->recv->ptr;
  nccl_result_t r = a->group_start(), r2;
  *what = "ncclGroupStart";
  if (r != NCCL_SUCCESS) return r;
  if (c->coll->id == PERF_ALL_TO_ALL) {
    for (int p = 0; p < n->nranks && r == NCCL_SUCCESS; p++) {
      *what = "ncclSend";
      r = a->send(send + (size_t)p * cnt * es, cnt, dt, p, n->comm, c->stream);
      if (r != NCCL_SUCCESS) break;
      *what = "ncclRecv";
      r = a->recv(recv + (size_t)p * cnt * es, cnt, dt, p, n->comm, c->stream);
    }
  } else {
    int next = (n->rank + 1) % n->nranks,
        prev = (n->rank + n->nranks - 1) % n->nranks;
    *what = "ncclSend";
    r = a->send(send, cnt, dt, next, n->comm, c->stream);
    if (r == NCCL_SUCCESS) {
      *what = "ncclRecv";
      r = a->recv(recv, cnt, dt, prev, n->comm, c->stream);
    }
  }
  /* A group once started must be ended, whatever happened inside. */
  r2 = a->group_end();
  if (r == NCCL_SUCCESS && r2 != NCCL_SUCCESS) *what = "ncclGroupEnd";
  return r != NCCL_SUCCESS ? r : r2;
}

int perf_nccl_run(perf_nccl_t *n, const perf_call_t *c, char *why, size_t len) {
  const nccl_api_t *a = &n->api;
  const void *send = c->send->ptr;
  void *recv = c->recv->ptr;
  size_t cnt = c->shape.count;
  int dt = nccl_dtype[c->dtype], op = nccl_op[c->op];
  const char *what = "?";
  nccl_result_t r;
  switch (c->coll->id) {
    case PERF_ALL_REDUCE:
      what = "ncclAllReduce";
      r = a->all_reduce(send, recv, cnt, dt, op, n->comm, c->stream);
      break;
    case PERF_REDUCE:
      what = "ncclReduce";
      r = a->reduce(send, recv, cnt, dt, op, c->root, n->comm, c->stream);
      break;
    case PERF_BROADCAST:
      what = "ncclBroadcast";
      r = a->broadcast(send, recv, cnt, dt, c->root, n->comm, c->stream);
      break;
    case PERF_ALL_GATHER:
      what = "ncclAllGather";
      r = a->all_gather(send, recv, cnt, dt, n->comm, c->stream);
      break;
    case PERF_REDUCE_SCATTER:
      what = "ncclReduceScatter";
      r = a->reduce_scatter(send, recv, cnt, dt, op, n->comm, c->stream);
      break;
    case PERF_ALL_TO_ALL:
    case PERF_SENDRECV: r = exchange(n, c, &what); break;
    default: snprintf(why, len, "NCCL has no %s", c->coll->name); return -1;
  }
  if (r == NCCL_SUCCESS) return 0;
  nccl_reason(n, what, r, why, len);
  return -1;
}

void perf_nccl_stop(perf_nccl_t *n) {
  if (n) release(n, false);
}
