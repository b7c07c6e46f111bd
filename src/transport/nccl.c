/*
 * NCCL transport: loading libnccl with dlopen, the lazy per-communicator
 * NCCL communicator, and the collectives that delegate to it.  See nccl.h
 * for the contract; the notes here say why the code is shaped as it is.
 *
 * Why non-blocking NCCL: a blocking ncclCommInitRank waits forever for a
 * rank that never arrives (a peer that failed before calling it), and a
 * blocking call cannot be interrupted.  In non-blocking mode every NCCL
 * call returns at once (possibly "in progress") and ncclCommGetAsyncError
 * tells when it is done, so every wait here has the communicator's
 * deadline and notices qcoll_comm_abort(); on either, ncclCommAbort frees
 * NCCL's side without hanging.
 */
#define _GNU_SOURCE /* dlinfo */
#include "nccl.h"

#include <dlfcn.h>
#include <link.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../bootstrap/bootstrap.h"
#include "../base/config.h"
#include "../runtime/runtime.h"
#include "nccl_watch.h"

#ifdef QCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- the NCCL functions qcoll calls ------------------------------------
 * Enums are passed as int (NCCL's enums are int-sized; ncclRedOp_t is
 * pinned to 32 bits), ncclComm_t as void *, cudaStream_t as void *. */

typedef struct nccl_api {
  int (*get_version)(int *version);
  int (*get_unique_id)(qcoll__nccl_unique_id_t *id);
  int (*comm_init_rank)(void **comm, int nranks, qcoll__nccl_unique_id_t id,
                        int rank);
  int (*comm_init_rank_config)(void **comm, int nranks,
                               qcoll__nccl_unique_id_t id, int rank,
                               qcoll__nccl_config_t *config);
  int (*comm_finalize)(void *comm);
  int (*comm_destroy)(void *comm);
  int (*comm_abort)(void *comm);
  int (*comm_get_async_error)(void *comm, int *async_error);
  const char *(*get_error_string)(int result);
  const char *(*get_last_error)(void *comm);
  int (*all_reduce)(const void *send, void *recv, size_t count, int dtype,
                    int op, void *comm, void *stream);
  int (*reduce)(const void *send, void *recv, size_t count, int dtype, int op,
                int root, void *comm, void *stream);
  int (*broadcast)(const void *send, void *recv, size_t count, int dtype,
                   int root, void *comm, void *stream);
  int (*all_gather)(const void *send, void *recv, size_t sendcount, int dtype,
                    void *comm, void *stream);
  int (*reduce_scatter)(const void *send, void *recv, size_t recvcount,
                        int dtype, int op, void *comm, void *stream);
  int (*send)(const void *send, size_t count, int dtype, int peer, void *comm,
              void *stream);
  int (*recv)(void *recv, size_t count, int dtype, int peer, void *comm,
              void *stream);
  int (*group_start)(void);
  int (*group_end)(void);
  /* Optional (looked up apart from api_symbols): NULL keeps every NCCL
   * call on the non-blocking communicator. */
  int (*comm_split)(void *comm, int color, int key, void **newcomm,
                    qcoll__nccl_config_t *config);
} nccl_api_t;

static const struct {
  const char *name;
  size_t offset;
} api_symbols[] = {
    {"ncclGetUniqueId", offsetof(nccl_api_t, get_unique_id)},
    {"ncclCommInitRank", offsetof(nccl_api_t, comm_init_rank)},
    {"ncclCommInitRankConfig", offsetof(nccl_api_t, comm_init_rank_config)},
    {"ncclCommFinalize", offsetof(nccl_api_t, comm_finalize)},
    {"ncclCommDestroy", offsetof(nccl_api_t, comm_destroy)},
    {"ncclCommAbort", offsetof(nccl_api_t, comm_abort)},
    {"ncclCommGetAsyncError", offsetof(nccl_api_t, comm_get_async_error)},
    {"ncclGetErrorString", offsetof(nccl_api_t, get_error_string)},
    {"ncclGetLastError", offsetof(nccl_api_t, get_last_error)},
    {"ncclAllReduce", offsetof(nccl_api_t, all_reduce)},
    {"ncclReduce", offsetof(nccl_api_t, reduce)},
    {"ncclBroadcast", offsetof(nccl_api_t, broadcast)},
    {"ncclAllGather", offsetof(nccl_api_t, all_gather)},
    {"ncclReduceScatter", offsetof(nccl_api_t, reduce_scatter)},
    {"ncclSend", offsetof(nccl_api_t, send)},
    {"ncclRecv", offsetof(nccl_api_t, recv)},
    {"ncclGroupStart", offsetof(nccl_api_t, group_start)},
    {"ncclGroupEnd", offsetof(nccl_api_t, group_end)},
};
#define API_SYMBOL_COUNT (sizeof api_symbols / sizeof api_symbols[0])

/* ---- loading ------------------------------------------------------------ */

#define WHY_BYTES 2048

static struct {
  pthread_once_t once;
  bool available;
  int version;
  void *handle;
  char path[PATH_MAX];
  char why[WHY_BYTES]; /* reason NCCL is unavailable */
} lib = {.once = PTHREAD_ONCE_INIT};

/* Set once, by load_once(), before any communicator can use it. */
static nccl_api_t api;

/* Append to a bounded string; silently truncates (reasons are for people). */
static void appendf(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t n, const char *fmt, ...) {
  size_t used = strnlen(buf, n);
  if (used + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, n - used, fmt, ap);
  va_end(ap);
}

/* Copy a reason into a fixed-size field, truncating. */
static void copy_text(char *dst, size_t n, const char *src) {
  size_t len = strnlen(src, n - 1);
  memcpy(dst, src, len);
  dst[len] = '\0';
}

static void version_parts(int code, int *major, int *minor, int *patch) {
  /* NCCL_VERSION(): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after. */
  bool old = code < 10000;
  *major = old ? code / 1000 : code / 10000;
  *minor = old ? (code % 1000) / 100 : (code % 10000) / 100;
  *patch = code % 100;
}

/* Open one candidate and check it is a usable NCCL: ncclGetVersion first
 * (an old library is reported as old, not as "missing ncclSend"), then
 * every other symbol.  On failure *why says what was wrong.  When the file
 * could be opened, *opened names it (a bare soname resolves to a path). */
static bool try_library(const char *path, char *why, size_t n,
                        char opened[PATH_MAX]) {
  opened[0] = '\0';
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    if (!e) e = "dlopen failed";
    /* dlerror() repeats the path the caller already names. */
    size_t len = strlen(path);
    if (!strncmp(e, path, len) && !strncmp(e + len, ": ", 2)) e += len + 2;
    snprintf(why, n, "%s", e);
    return false;
  }
  struct link_map *map = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
      map->l_name[0])
    snprintf(opened, PATH_MAX, "%s", map->l_name);
  else
    snprintf(opened, PATH_MAX, "%s", path);
  nccl_api_t found;
  memset(&found, 0, sizeof found);
  void *sym = dlsym(h, "ncclGetVersion");
  if (!sym) {
    snprintf(why, n, "no ncclGetVersion symbol (not an NCCL library)");
    goto fail;
  }
  memcpy(&found.get_version, &sym, sizeof sym);
  int version = 0;
  int r = found.get_version(&version);
  if (r != QCOLL__NCCL_SUCCESS) {
    snprintf(why, n, "ncclGetVersion returned error %d", r);
    goto fail;
  }
  if (version < QCOLL__NCCL_MIN_VERSION) {
    int ma, mi, pa;
    version_parts(version, &ma, &mi, &pa);
    snprintf(why, n, "NCCL %d.%d.%d (version code %d) is older than 2.18", ma,
             mi, pa, version);
    goto fail;
  }
  why[0] = '\0';
  for (size_t i = 0; i < API_SYMBOL_COUNT; i++) {
    sym = dlsym(h, api_symbols[i].name);
    if (!sym) {
      appendf(why, n, "%s%s",
              why[0] ? ", " : "missing symbols: ", api_symbols[i].name);
      continue;
    }
    memcpy((char *)&found + api_symbols[i].offset, &sym, sizeof sym);
  }
  if (why[0]) goto fail;
  sym = dlsym(h, "ncclCommSplit");
  if (sym) memcpy(&found.comm_split, &sym, sizeof sym);

  api = found;
  lib.handle = h;
  lib.version = version;
  /* The file actually mapped: a bare soname resolves through the search
   * path, or to a copy the process had already loaded. */
  snprintf(lib.path, sizeof lib.path, "%s", opened);
  return true;
fail:
  dlclose(h);
  return false;
}

/* Where NCCL's Python wheel (nvidia-nccl-*) puts the library, relative to
 * a site-packages dir; Python frameworks depend on that wheel. */
#define WHEEL_NCCL "nvidia/nccl/lib/libnccl.so.2"

static void add_glob(glob_t *g, bool *first, const char *pattern) {
  glob(pattern, *first ? 0 : GLOB_APPEND, NULL, g);
  *first = false;
}

/* Candidate copies from NCCL's Python wheel, found without running
 * Python: PYTHONPATH entries, active environments, usual prefixes. */
static void find_wheel_copies(glob_t *g) {
  char pattern[PATH_MAX];
  bool first = true;
  const char *pp = getenv("PYTHONPATH");
  if (pp && *pp) {
    char *copy = strdup(pp);
    for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL;
         dir; dir = strtok_r(NULL, ":", &save)) {
      snprintf(pattern, sizeof pattern, "%s/" WHEEL_NCCL, dir);
      add_glob(g, &first, pattern);
    }
    free(copy);
  }
  static const char *const env_prefixes[] = {"VIRTUAL_ENV", "CONDA_PREFIX"};
  for (size_t i = 0; i < 2; i++) {
    const char *prefix = getenv(env_prefixes[i]);
    if (!prefix || !*prefix) continue;
    snprintf(pattern, sizeof pattern,
             "%s/lib/python3*/site-packages/" WHEEL_NCCL, prefix);
    add_glob(g, &first, pattern);
  }
  const char *home = getenv("HOME");
  if (home && *home) {
    snprintf(pattern, sizeof pattern,
             "%s/.local/lib/python3*/site-packages/" WHEEL_NCCL, home);
    add_glob(g, &first, pattern);
  }
  static const char *const system_patterns[] = {
      "/usr/local/lib/python3*/dist-packages/" WHEEL_NCCL,
      "/usr/local/lib/python3*/site-packages/" WHEEL_NCCL,
      "/usr/lib/python3/dist-packages/" WHEEL_NCCL,
      "/usr/lib/python3*/site-packages/" WHEEL_NCCL,
      "/usr/lib64/python3*/site-packages/" WHEEL_NCCL,
      "/opt/conda/lib/python3*/site-packages/" WHEEL_NCCL,
  };
  for (size_t i = 0; i < sizeof system_patterns / sizeof *system_patterns; i++)
    add_glob(g, &first, system_patterns[i]);
}

typedef struct seen_files {
  char real[16][PATH_MAX];
  size_t n;
} seen_files_t;

/* Whether the file at path was tried already (through another prefix, a
 * link, or the search path); remembers it otherwise. */
static bool seen_before(seen_files_t *seen, const char *path) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return false;
  for (size_t i = 0; i < seen->n; i++)
    if (!strcmp(seen->real[i], real)) return true;
  if (seen->n < sizeof seen->real / sizeof seen->real[0])
    snprintf(seen->real[seen->n++], PATH_MAX, "%s", real);
  return false;
}

/* Try one candidate, recording "path: reason; " on failure. */
static bool try_candidate(const char *path, seen_files_t *seen) {
  if (path[0] == '/') {
    if (access(path, F_OK) != 0) {
      appendf(lib.why, sizeof lib.why, "%s: absent; ", path);
      return false;
    }
    if (seen_before(seen, path)) return false;
  }
  char why[512], opened[PATH_MAX];
  if (try_library(path, why, sizeof why, opened)) return true;
  if (path[0] != '/' && opened[0]) {
    seen_before(seen, opened);
    appendf(lib.why, sizeof lib.why, "%s (found %s): %s; ", path, opened, why);
  } else {
    appendf(lib.why, sizeof lib.why, "%s: %s; ", path, why);
  }
  return false;
}

static bool search_library(void) {
  static seen_files_t seen; /* 64 KiB: not on the stack */
  seen.n = 0;
  if (try_candidate("libnccl.so.2", &seen) ||
      try_candidate("/usr/local/cuda/lib64/libnccl.so.2", &seen))
    return true;
  glob_t g;
  memset(&g, 0, sizeof g);
  find_wheel_copies(&g);
  bool ok = false;
  for (size_t i = 0; !ok && i < g.gl_pathc; i++)
    ok = try_candidate(g.gl_pathv[i], &seen);
  if (!ok && g.gl_pathc == 0)
    appendf(lib.why, sizeof lib.why,
            "no Python wheel copy (" WHEEL_NCCL
            ") under PYTHONPATH, VIRTUAL_ENV, "
            "CONDA_PREFIX, ~/.local or the system Python prefixes");
  globfree(&g);
  return ok;
}

static void load_once(void) {
  lib.why[0] = '\0';
  const char *explicit_path = qcoll__env_str("QCOLL_NCCL_LIB");
  if (explicit_path && *explicit_path) {
    /* The user's choice and nothing else (see nccl.h). */
    char why[512], opened[PATH_MAX];
    lib.available = try_library(explicit_path, why, sizeof why, opened);
    if (!lib.available)
      snprintf(lib.why, sizeof lib.why,
               "QCOLL_NCCL_LIB=%s: %s (no other copy is tried when "
               "QCOLL_NCCL_LIB is set)",
               explicit_path, why);
  } else {
    lib.available = search_library();
    if (!lib.available) {
      /* Drop the trailing "; " of the last entry. */
      size_t len = strlen(lib.why);
      if (len >= 2 && !strcmp(lib.why + len - 2, "; ")) lib.why[len - 2] = '\0';
      char tried[WHY_BYTES];
      snprintf(tried, sizeof tried, "no usable libnccl.so.2 (tried %.*s)",
               WHY_BYTES - 64, lib.why);
      memcpy(lib.why, tried, sizeof lib.why);
    }
  }
  if (lib.available) {
    lib.why[0] = '\0';
    int ma, mi, pa;
    version_parts(lib.version, &ma, &mi, &pa);
    QLOG_INFO(NULL, NCCL, "NCCL %d.%d.%d loaded from %s", ma, mi, pa, lib.path);
  } else {
    QLOG_INFO(NULL, NCCL, "NCCL unavailable: %s", lib.why);
  }
}

bool qcoll__nccl_load(void) {
  pthread_once(&lib.once, load_once);
  return lib.available;
}

bool qcoll__nccl_available(char *why, size_t n) {
  bool ok = qcoll__nccl_load();
  if (why && n) snprintf(why, n, "%s", ok ? "" : lib.why);
  return ok;
}

int qcoll__nccl_version(void) {
  return qcoll__nccl_load() ? lib.version : 0;
}

const char *qcoll__nccl_library_path(void) {
  return qcoll__nccl_load() ? lib.path : "";
}

/* ---- type and op mapping -------------------------------------------- */

int qcoll__nccl_dtype(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_I8: return QCOLL__NCCL_INT8;
    case QCOLL_U8: return QCOLL__NCCL_UINT8;
    case QCOLL_I32: return QCOLL__NCCL_INT32;
    case QCOLL_U32: return QCOLL__NCCL_UINT32;
    case QCOLL_I64: return QCOLL__NCCL_INT64;
    case QCOLL_U64: return QCOLL__NCCL_UINT64;
    case QCOLL_F16: return QCOLL__NCCL_FLOAT16;
    case QCOLL_BF16: return QCOLL__NCCL_BFLOAT16;
    case QCOLL_F32: return QCOLL__NCCL_FLOAT32;
    case QCOLL_F64: return QCOLL__NCCL_FLOAT64;
    default: return -1;
  }
}

int qcoll__nccl_op(qcoll_op_t op) {
  switch (op) {
    case QCOLL_SUM: return QCOLL__NCCL_SUM;
    case QCOLL_PROD: return QCOLL__NCCL_PROD;
    case QCOLL_MIN: return QCOLL__NCCL_MIN;
    case QCOLL_MAX: return QCOLL__NCCL_MAX;
    case QCOLL_AVG: return QCOLL__NCCL_AVG;
    default: return -1;
  }
}

/* ---- per-communicator state ------------------------------------------ */

/* Reasons travel between ranks in fixed-size fields. */
#define REASON_BYTES 320
#define BUS_ID_BYTES 32

struct qcoll__nccl_comm {
  qcoll__nccl_state_t state;
  void *handle; /* ncclComm_t while READY: the one every call uses */
  void *parent; /* the non-blocking one it was split from, or NULL */
  void *split;  /* ncclCommSplit's output: a non-blocking parent fills it
                   in the background, so it must outlive the call */
  bool broken;  /* NCCL reported an error: destroy must abort */
  char why[REASON_BYTES + 64];
  qcoll__nccl_watch_t *watch; /* over `handle` while READY (NULL: off) */
};

qcoll__nccl_state_t qcoll__nccl_comm_state(qcoll__ctx_t *comm) {
  return comm->nccl ? comm->nccl->state : QCOLL__NCCL_UNTRIED;
}

const char *qcoll__nccl_comm_refusal(qcoll__ctx_t *comm) {
  return comm->nccl && comm->nccl->state == QCOLL__NCCL_REFUSED
             ? comm->nccl->why
             : "";
}

/* "fn: " and NCCL's description of a result: its error string and, when
 * there is one, the last error message it recorded. */
static void describe(const char *fn, void *handle, int result, char *out,
                     size_t n) {
  const char *s = api.get_error_string ? api.get_error_string(result) : NULL;
  const char *last = api.get_last_error ? api.get_last_error(handle) : NULL;
  snprintf(out, n, "%s: %s (NCCL result %d)%s%s", fn,
           s ? s : "unknown NCCL error", result, last && *last ? ": " : "",
           last && *last ? last : "");
}

typedef enum wait_end { WAIT_DONE, WAIT_TIMEOUT, WAIT_ABORTED } wait_end_t;

/* How long a wait for a non-blocking NCCL call polls without sleeping.  A
 * collective's enqueue usually leaves "in progress" within microseconds,
 * and the shortest nanosleep lasts the thread's timer slack (50 us by
 * default): sleeping at once would add that to every delegated call. */
#define NCCL_WAIT_SPIN_S 200e-6

/* Poll a non-blocking NCCL communicator until its pending work leaves "in
 * progress"; *result is then its outcome.  It spins (yielding the core to
 * NCCL's own threads) for NCCL_WAIT_SPIN_S, then naps from 50 us up to
 * 1 ms, so fast completions cost little and slow ones do not burn a core. */
static wait_end_t wait_nccl(qcoll__ctx_t *comm, void *handle,
                            qcoll__deadline_t deadline, int *result) {
  const double spin_end = qcoll__now() + NCCL_WAIT_SPIN_S;
  long nap_ns = 50000;
  for (;;) {
    int async = QCOLL__NCCL_SUCCESS;
    int r = api.comm_get_async_error(handle, &async);
    if (r != QCOLL__NCCL_SUCCESS) {
      *result = r;
      return WAIT_DONE;
    }
    if (async != QCOLL__NCCL_IN_PROGRESS) {
      *result = async;
      return WAIT_DONE;
    }
    if (qcoll__ctx_aborted(comm)) return WAIT_ABORTED;
    if (qcoll__deadline_passed(deadline)) return WAIT_TIMEOUT;
    if (qcoll__now() < spin_end) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, nap_ns};
    nanosleep(&ts, NULL);
    if (nap_ns < 1000000) nap_ns *= 2;
  }
}

/* ncclCommAbort never waits for peers, so it is the way out of anything. */
static void abort_handle(qcoll__ctx_t *comm, void **handle) {
  if (!*handle) return;
  int r = api.comm_abort(*handle);
  if (r != QCOLL__NCCL_SUCCESS && r != QCOLL__NCCL_IN_PROGRESS)
    QLOG_INFO(comm, NCCL, "ncclCommAbort returned %d", r);
  *handle = NULL;
}

static void refuse(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s,
                   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, sizeof s->why, fmt, ap);
  va_end(ap);
  s->state = QCOLL__NCCL_REFUSED;
  s->handle = NULL;
  QLOG_INFO(comm, NCCL, "NCCL will not serve this communicator: %s", s->why);
}

/* What each rank tells the others before anyone touches NCCL. */
typedef struct ready_msg {
  int32_t ok; /* NCCL loaded and comm has a device */
  int32_t host_index;
  int32_t shared_gpu_ok; /* NCCL_MULTI_RANK_GPU_ENABLE=1 on this rank */
  int32_t device;
  char bus_id[BUS_ID_BYTES]; /* "" when unknown */
  char reason[REASON_BYTES];
} ready_msg_t;

typedef struct id_msg {
  int32_t ok;
  char reason[REASON_BYTES];
  qcoll__nccl_unique_id_t id;
} id_msg_t;

typedef struct result_msg {
  int32_t ok;
  char reason[REASON_BYTES];
} result_msg_t;

/* PCI bus id of comm's device, the identity NCCL uses to refuse two ranks
 * on one GPU; "" when it cannot be asked (it is then not compared). */
static void local_bus_id(qcoll__ctx_t *comm, char *out, size_t n) {
  out[0] = '\0';
#ifdef QCOLL_HAVE_CUDA
  if (comm->device < 0) return;
  char id[BUS_ID_BYTES] = "";
  if (cudaDeviceGetPCIBusId(id, (int)sizeof id, comm->device) != cudaSuccess) {
    cudaGetLastError(); /* do not leave the error for the caller's next call */
    return;
  }
  for (size_t i = 0; id[i] && i + 1 < n; i++) {
    out[i] = (char)(id[i] >= 'A' && id[i] <= 'F' ? id[i] - 'A' + 'a' : id[i]);
    out[i + 1] = '\0';
  }
#else
  (void)comm;
  (void)n;
#endif
}

static void fill_ready(qcoll__ctx_t *comm, ready_msg_t *m) {
  memset(m, 0, sizeof *m);
  m->host_index = comm->host_index;
  m->device = comm->device;
  const char *multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  m->shared_gpu_ok = multi && !strcmp(multi, "1");
  char why[WHY_BYTES];
  if (!qcoll__nccl_available(why, sizeof why)) {
    copy_text(m->reason, sizeof m->reason, why);
    return;
  }
  if (comm->device < 0) {
    snprintf(m->reason, sizeof m->reason,
             "the communicator has no GPU (device %d)", comm->device);
    return;
  }
  local_bus_id(comm, m->bus_id, sizeof m->bus_id);
  m->ok = 1;
}

/* qsort_r order: host, then bus id, then rank (so equal GPUs list their
 * ranks ascending). */
static int by_host_and_bus(const void *x, const void *y, void *ctx) {
  const ready_msg_t *all = ctx;
  size_t a = *(const size_t *)x, b = *(const size_t *)y;
  if (all[a].host_index != all[b].host_index)
    return all[a].host_index < all[b].host_index ? -1 : 1;
  int c = strcmp(all[a].bus_id, all[b].bus_id);
  if (c) return c;
  return a < b ? -1 : a > b;
}

/* Step 1, collective: every rank's readiness; refuses (identically on
 * every rank) when some rank cannot use NCCL or two ranks of one host
 * share a GPU, which NCCL would refuse ("Duplicate GPU detected") only
 * after a costly init that may fail on some ranks and not others. */
static qcoll_status_t agree_ready(qcoll__ctx_t *comm,
                                  struct qcoll__nccl_comm *s) {
  size_t n = (size_t)comm->nranks;
  ready_msg_t *all = calloc(n, sizeof *all);
  if (!all)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "NCCL init: cannot allocate %zu readiness records", n);
  fill_ready(comm, &all[comm->rank]);
  qcoll_status_t st =
      qcoll__bootstrap_allgather(comm->bootstrap, all, sizeof *all);
  if (st != QCOLL_OK) goto out;
  bool all_allow_sharing = true;
  for (size_t r = 0; r < n; r++) {
    all[r].reason[REASON_BYTES - 1] = '\0';
    all[r].bus_id[BUS_ID_BYTES - 1] = '\0';
    if (!all[r].ok) {
      refuse(comm, s, "rank %zu: %s", r, all[r].reason);
      goto out;
    }
    all_allow_sharing = all_allow_sharing && all[r].shared_gpu_ok;
  }
  if (all_allow_sharing)
    goto out; /* NCCL_MULTI_RANK_GPU_ENABLE: NCCL decides */
  /* Sorted by (host, bus id), ranks sharing a GPU are neighbours: one
   * pass finds the lowest such pair in rank order, the same on every
   * rank, in O(n log n) for large worlds. */
  size_t *order = malloc(n * sizeof *order);
  if (!order) {
    st = qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                      "NCCL init: cannot allocate %zu indices", n);
    goto out;
  }
  for (size_t r = 0; r < n; r++) order[r] = r;
  qsort_r(order, n, sizeof *order, by_host_and_bus, all);
  size_t first = n, second = n;
  for (size_t k = 1; k < n; k++) {
    const ready_msg_t *a = &all[order[k - 1]], *b = &all[order[k]];
    if (!a->bus_id[0] || a->host_index != b->host_index ||
        strcmp(a->bus_id, b->bus_id))
      continue;
    if (order[k - 1] < first || (order[k - 1] == first && order[k] < second)) {
      first = order[k - 1];
      second = order[k];
    }
  }
  free(order);
  if (first < n)
    refuse(comm, s,
           "ranks %zu and %zu share the GPU at PCI %s (devices %d and %d); "
           "NCCL needs one GPU per rank",
           first, second, all[first].bus_id, all[first].device,
           all[second].device);
out:
  free(all);
  return st;
}

/* Step 2, collective: rank 0 makes NCCL's unique id and broadcasts it. */
static qcoll_status_t share_unique_id(qcoll__ctx_t *comm,
                                      struct qcoll__nccl_comm *s,
                                      qcoll__nccl_unique_id_t *id) {
  id_msg_t m;
  memset(&m, 0, sizeof m);
  if (comm->rank == 0) {
    int r = api.get_unique_id(&m.id);
    m.ok = r == QCOLL__NCCL_SUCCESS;
    if (!m.ok) describe("ncclGetUniqueId", NULL, r, m.reason, sizeof m.reason);
  }
  qcoll_status_t st =
      qcoll__bootstrap_broadcast(comm->bootstrap, &m, sizeof m, 0);
  if (st != QCOLL_OK) return st;
  m.reason[REASON_BYTES - 1] = '\0';
  if (!m.ok)
    refuse(comm, s, "rank 0: %s", m.reason);
  else
    *id = m.id;
  return QCOLL_OK;
}

static qcoll__nccl_config_t nccl_config(int blocking) {
  qcoll__nccl_config_t config = {
      .size = sizeof config,
      .magic = QCOLL__NCCL_CONFIG_MAGIC,
      .version = QCOLL__NCCL_MIN_VERSION,
      .blocking = blocking,
      .cga_cluster_size = QCOLL__NCCL_CONFIG_UNDEF_INT,
      .min_ctas = QCOLL__NCCL_CONFIG_UNDEF_INT,
      .max_ctas = QCOLL__NCCL_CONFIG_UNDEF_INT,
      .net_name = NULL,
      .split_share = QCOLL__NCCL_CONFIG_UNDEF_INT,
  };
  return config;
}

/* Wait for a non-blocking NCCL operation (fn, on handle) to finish by
 * deadline; true when it succeeded, else why says what went wrong
 * (during names the operation in the abort message). */
static bool wait_succeeded(qcoll__ctx_t *comm, void *handle,
                           qcoll__deadline_t deadline, double seconds,
                           const char *fn, const char *during, char *why,
                           size_t n) {
  int r = QCOLL__NCCL_SUCCESS;
  wait_end_t end = wait_nccl(comm, handle, deadline, &r);
  if (end == WAIT_TIMEOUT)
    snprintf(why, n, "%s still in progress after %.1f s", fn, seconds);
  else if (end == WAIT_ABORTED)
    snprintf(why, n, "the communicator was aborted during %s", during);
  else if (r != QCOLL__NCCL_SUCCESS)
    describe(fn, handle, r, why, n);
  else
    return true;
  return false;
}

/* Step 3, local: non-blocking ncclCommInitRankConfig on comm->device,
 * polled until done.  Its deadline is half the communicator's, so a rank
 * that failed at once (and waits in step 4 with the full deadline) is
 * still waiting when the others give up on NCCL and join it. */
static bool init_local(qcoll__ctx_t *comm, const qcoll__nccl_unique_id_t *id,
                       void **handle, char *why, size_t n) {
  *handle = NULL;
  qcoll__device_guard_t guard;
  if (qcoll__device_guard_enter(comm, &guard) != QCOLL_OK) {
    snprintf(why, n, "cannot make device %d current: %s", comm->device,
             qcoll_last_error());
    return false;
  }
  double started = qcoll__now();
  qcoll__nccl_config_t config = nccl_config(0);
  int r =
      api.comm_init_rank_config(handle, comm->nranks, *id, comm->rank, &config);
  bool ok = false;
  if (r == QCOLL__NCCL_IN_PROGRESS || (r == QCOLL__NCCL_SUCCESS && *handle)) {
    ok = wait_succeeded(comm, *handle, qcoll__deadline_in(comm->timeout_s / 2),
                        comm->timeout_s / 2, "ncclCommInitRankConfig",
                        "NCCL init", why, n);
  } else {
    describe("ncclCommInitRankConfig", *handle, r, why, n);
  }
  if (!ok)
    abort_handle(comm, handle);
  else
    QLOG_TRACE(comm, NCCL, "NCCL init done on this rank in %.2f s",
               qcoll__now() - started);
  qcoll__device_guard_exit(comm, &guard);
  return ok;
}

/* Collective: all-gather every rank's outcome (ok, or why not).  *bad is
 * the first rank that failed, nranks when none did; its reason, if any,
 * goes to reason. */
static qcoll_status_t gather_outcomes(qcoll__ctx_t *comm, bool ok,
                                      const char *why, int *bad,
                                      char reason[REASON_BYTES]) {
  *bad = comm->nranks;
  reason[0] = '\0';
  result_msg_t *all = calloc((size_t)comm->nranks, sizeof *all);
  if (!all)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate %d NCCL result records", comm->nranks);
  all[comm->rank].ok = ok;
  snprintf(all[comm->rank].reason, REASON_BYTES, "%s", ok ? "" : why);
  qcoll_status_t st =
      qcoll__bootstrap_allgather(comm->bootstrap, all, sizeof *all);
  for (int r = 0; st == QCOLL_OK && r < comm->nranks; r++)
    if (!all[r].ok) {
      *bad = r;
      snprintf(reason, REASON_BYTES, "%.*s", REASON_BYTES - 1, all[r].reason);
      break;
    }
  free(all);
  return st;
}

/* Step 4, collective: keep NCCL only if every rank got it. */
static qcoll_status_t agree_result(qcoll__ctx_t *comm,
                                   struct qcoll__nccl_comm *s, void **handle,
                                   bool ok, const char *why) {
  int bad = comm->nranks;
  char reason[REASON_BYTES];
  qcoll_status_t st = gather_outcomes(comm, ok, why, &bad, reason);
  if (st != QCOLL_OK || bad < comm->nranks) {
    qcoll__device_guard_t guard;
    bool entered = qcoll__device_guard_enter(comm, &guard) == QCOLL_OK;
    abort_handle(comm, handle);
    if (entered) qcoll__device_guard_exit(comm, &guard);
  }
  if (st == QCOLL_OK && bad < comm->nranks) {
    refuse(comm, s, "rank %d: %s", bad, reason);
  } else if (st == QCOLL_OK) {
    s->state = QCOLL__NCCL_READY;
    s->handle = *handle;
    QLOG_INFO(comm, NCCL, "NCCL communicator ready: rank %d of %d on device %d",
              comm->rank, comm->nranks, comm->device);
  }
  return st;
}

/* Step 5, collective: the calls go to a blocking child communicator.  A
 * call on a non-blocking NCCL communicator starts a thread to launch its
 * work, which costs tens of microseconds per collective; a blocking one
 * launches in the caller.  The non-blocking parent keeps its purpose: init,
 * where a missing peer is the usual failure, ran under qcoll's deadline,
 * and so does the split (the parent runs it in the background and is
 * polled).  Every rank has just reported a working parent (step 4), so
 * every rank is here.  Ranks agree on the outcome: if the split failed
 * anywhere, the parents may be stuck in it, so NCCL is given up on every
 * rank, with the reason.  QCOLL_NCCL_BLOCKING=0 skips this step. */
static bool split_local(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s,
                        char *why, size_t n) {
  qcoll__nccl_config_t config = nccl_config(1);
  qcoll__deadline_t deadline = qcoll__deadline_in(comm->timeout_s / 2);
  int r = api.comm_split(s->handle, 0, comm->rank, &s->split, &config);
  if (r != QCOLL__NCCL_SUCCESS && r != QCOLL__NCCL_IN_PROGRESS) {
    describe("ncclCommSplit", s->handle, r, why, n);
    return false;
  }
  /* The parent runs the split; the child then reports its own state. */
  const double seconds = comm->timeout_s / 2;
  if (!wait_succeeded(comm, s->handle, deadline, seconds, "ncclCommSplit",
                      "ncclCommSplit", why, n))
    return false;
  if (!s->split) {
    snprintf(why, n, "ncclCommSplit returned no communicator");
    return false;
  }
  return wait_succeeded(comm, s->split, deadline, seconds, "ncclCommSplit",
                        "ncclCommSplit", why, n);
}

static qcoll_status_t use_blocking_child(qcoll__ctx_t *comm,
                                         struct qcoll__nccl_comm *s) {
  if (!comm->config.nccl_blocking) return QCOLL_OK;
  if (!api.comm_split) {
    QLOG_INFO(comm, NCCL,
              "this NCCL has no ncclCommSplit: its calls stay non-blocking");
    return QCOLL_OK;
  }
  char why[REASON_BYTES] = "";
  qcoll__device_guard_t guard;
  bool entered = qcoll__device_guard_enter(comm, &guard) == QCOLL_OK;
  if (!entered)
    snprintf(why, sizeof why, "cannot make device %d current: %s",
             comm->device, qcoll_last_error());
  bool ok = entered && split_local(comm, s, why, sizeof why);
  int bad = comm->nranks;
  char reason[REASON_BYTES];
  qcoll_status_t st = gather_outcomes(comm, ok, why, &bad, reason);
  if (st == QCOLL_OK && bad == comm->nranks) {
    s->parent = s->handle;
    s->handle = s->split;
    s->split = NULL;
    QLOG_INFO(comm, NCCL, "NCCL calls use a blocking communicator split from "
                          "the non-blocking one");
  } else {
    abort_handle(comm, &s->split);
    abort_handle(comm, &s->handle);
    s->state = QCOLL__NCCL_REFUSED;
    if (st == QCOLL_OK)
      refuse(comm, s, "rank %d: %s (QCOLL_NCCL_BLOCKING=0 avoids the split)",
             bad, reason);
  }
  if (entered) qcoll__device_guard_exit(comm, &guard);
  return st;
}

static qcoll_status_t create(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s) {
  qcoll_status_t st = agree_ready(comm, s);
  if (st != QCOLL_OK || s->state == QCOLL__NCCL_REFUSED) return st;
  qcoll__nccl_unique_id_t id;
  st = share_unique_id(comm, s, &id);
  if (st != QCOLL_OK || s->state == QCOLL__NCCL_REFUSED) return st;
  char why[REASON_BYTES];
  void *handle = NULL;
  bool ok = init_local(comm, &id, &handle, why, sizeof why);
  st = agree_result(comm, s, &handle, ok, why);
  if (st != QCOLL_OK || s->state != QCOLL__NCCL_READY) return st;
  return use_blocking_child(comm, s);
}

static qcoll_status_t refused_error(qcoll__ctx_t *comm) {
  return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                      "NCCL cannot serve this communicator: %s",
                      comm->nccl->why);
}

/* ---- the watchdog (nccl_watch.h) -------------------------------------- */

static void watch_start(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s) {
  const qcoll__nccl_watch_api_t wapi = {api.comm_get_async_error,
                                        api.comm_abort, api.get_error_string};
  s->watch = qcoll__nccl_watch_start(comm, s->handle, &wapi, qcoll__runtime());
}

/* Stop the watchdog before anything here aborts or frees the handle it
 * polls. */
static void watch_stop(struct qcoll__nccl_comm *s) {
  qcoll__nccl_watch_stop(s->watch);
  s->watch = NULL;
}

/* When the watchdog fired it has aborted the handle: forget it, remember
 * why, and return the watchdog's error (QCOLL_OK when it did not fire). */
static qcoll_status_t take_watch_verdict(qcoll__ctx_t *comm,
                                         struct qcoll__nccl_comm *s,
                                         const char *fn) {
  qcoll_status_t st = QCOLL_OK;
  char why[REASON_BYTES * 2];
  if (!s || !qcoll__nccl_watch_fired(s->watch, &st, why, sizeof why))
    return QCOLL_OK;
  watch_stop(s);
  s->handle = NULL;
  s->broken = true;
  s->state = QCOLL__NCCL_REFUSED;
  snprintf(s->why, sizeof s->why, "the NCCL watchdog aborted it");
  qcoll__ctx_mark_broken(comm);
  return qcoll__error(comm, st, "%s: %s", fn, why);
}

qcoll_status_t qcoll__nccl_comm_get(qcoll__ctx_t *comm, void **nccl_comm) {
  *nccl_comm = NULL;
  if (!comm->nccl) {
    struct qcoll__nccl_comm *s = calloc(1, sizeof *s);
    if (!s) {
      /* The peers are in the protocol already; this rank cannot follow. */
      qcoll__ctx_mark_broken(comm);
      return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                          "cannot allocate the NCCL state");
    }
    comm->nccl = s;
    qcoll_status_t st = create(comm, s);
    if (st != QCOLL_OK) {
      /* The bootstrap failed mid-protocol: ranks may disagree now. */
      if (s->state != QCOLL__NCCL_REFUSED)
        refuse(comm, s, "the bootstrap failed during NCCL init (%s)",
               qcoll_status_string(st));
      qcoll__ctx_mark_broken(comm);
      return st;
    }
  }
  if (comm->nccl->state != QCOLL__NCCL_READY) return refused_error(comm);
  if (!comm->nccl->watch) watch_start(comm, comm->nccl);
  *nccl_comm = comm->nccl->handle;
  return QCOLL_OK;
}

qcoll_status_t qcoll__nccl_comm_prepare(qcoll__ctx_t *comm, void *stream,
                                        void **nccl_comm) {
  *nccl_comm = NULL;
  if (qcoll__nccl_comm_state(comm) == QCOLL__NCCL_UNTRIED) {
    /* NCCL's init allocates device memory, which graph capture forbids
     * (in its global mode, from any thread): creating the communicator
     * now would break the caller's capture and be remembered as a
     * refusal.  Decline without touching the state, so this call is
     * served another way and a later uncaptured one creates it.  Capture
     * is uniform across ranks (NCCL requires it): every rank declines. */
    bool capturing = false;
    if (qcoll__runtime()->stream_is_capturing(stream, &capturing) == QCOLL_OK &&
        capturing)
      return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                          "the NCCL communicator is created by the first "
                          "collective that uses NCCL, and that one cannot be "
                          "captured into a CUDA graph; run one NCCL "
                          "collective before capturing");
  }
  return qcoll__nccl_comm_get(comm, nccl_comm);
}

/* Finalize and destroy one NCCL communicator (abort it when the
 * communicator is broken or finalize does not finish by the deadline). */
static void release_handle(qcoll__ctx_t *comm, struct qcoll__nccl_comm *s,
                           void **handle, bool healthy) {
  bool finalized = false;
  if (healthy) {
    /* Finalize flushes this rank's NCCL work; after it, destroy frees
     * locally without waiting.  Work that never completes (a peer died
     * mid-collective) passes the deadline and is aborted instead. */
    int r = api.comm_finalize(*handle);
    if (r == QCOLL__NCCL_IN_PROGRESS || r == QCOLL__NCCL_SUCCESS) {
      wait_end_t end = wait_nccl(comm, *handle, qcoll__ctx_deadline(comm), &r);
      finalized = end == WAIT_DONE && r == QCOLL__NCCL_SUCCESS;
      if (end == WAIT_TIMEOUT)
        QLOG_WARN(comm, NCCL,
                  "ncclCommFinalize still in progress after "
                  "%.1f s: aborting the NCCL communicator",
                  comm->timeout_s);
    }
    if (!finalized && r != QCOLL__NCCL_SUCCESS) {
      char d[REASON_BYTES];
      describe("ncclCommFinalize", *handle, r, d, sizeof d);
      QLOG_INFO(comm, NCCL, "%s; aborting instead", d);
      s->broken = true;
    }
  }
  if (finalized) {
    int r = api.comm_destroy(*handle);
    if (r != QCOLL__NCCL_SUCCESS && r != QCOLL__NCCL_IN_PROGRESS)
      QLOG_INFO(comm, NCCL, "ncclCommDestroy returned %d", r);
    *handle = NULL;
  } else {
    abort_handle(comm, handle);
  }
}

void qcoll__nccl_comm_destroy(qcoll__ctx_t *comm) {
  struct qcoll__nccl_comm *s = comm->nccl;
  if (!s) return;
  (void)take_watch_verdict(comm, s, "qcoll_comm_destroy");
  watch_stop(s);
  comm->nccl = NULL;
  if (s->handle || s->parent) {
    qcoll__device_guard_t guard;
    bool entered = qcoll__device_guard_enter(comm, &guard) == QCOLL_OK;
    /* The child the calls used first, then the parent it came from. */
    void **handles[] = {&s->handle, &s->parent};
    for (int i = 0; i < 2; i++) {
      bool healthy = !s->broken && entered &&
                     atomic_load(&comm->state) == QCOLL_COMM_LIVE;
      if (*handles[i]) release_handle(comm, s, handles[i], healthy);
    }
    if (entered) qcoll__device_guard_exit(comm, &guard);
  }
  free(s);
}

qcoll_status_t qcoll__nccl_poll_async_error(qcoll__ctx_t *comm) {
  struct qcoll__nccl_comm *s = comm->nccl;
  qcoll_status_t watched =
      take_watch_verdict(comm, s, "qcoll_comm_get_async_error");
  if (watched != QCOLL_OK) return watched;
  if (!s || s->state != QCOLL__NCCL_READY || !s->handle) return QCOLL_OK;
  int async = QCOLL__NCCL_SUCCESS;
  int r = api.comm_get_async_error(s->handle, &async);
  if (r == QCOLL__NCCL_SUCCESS &&
      (async == QCOLL__NCCL_SUCCESS || async == QCOLL__NCCL_IN_PROGRESS))
    return QCOLL_OK;
  int bad = r != QCOLL__NCCL_SUCCESS ? r : async;
  s->broken = true;
  qcoll__ctx_mark_broken(comm);
  char d[REASON_BYTES * 2];
  describe("ncclCommGetAsyncError", s->handle, bad, d, sizeof d);
  return qcoll__error(comm, QCOLL_ERR_NCCL, "NCCL asynchronous error: %s", d);
}

/* ---- collectives ------------------------------------------------------ */

typedef struct nccl_call {
  const char *fn; /* qcoll function, for messages */
  void *handle;
  int dtype, op; /* NCCL values */
  void *stream;
  qcoll__device_guard_t guard;
} nccl_call_t;

/* Get the NCCL communicator (creating it, collectively, when `create`),
 * map dtype/op, and enter the device guard.  The collective step comes
 * first so that a rank never leaves before its peers reach it. */
static qcoll_status_t begin(qcoll__ctx_t *comm, nccl_call_t *c, bool create,
                            qcoll_dtype_t dtype, qcoll_op_t op, bool reduction,
                            void *stream) {
  qcoll_status_t st = take_watch_verdict(comm, comm->nccl, c->fn);
  if (st != QCOLL_OK) return st;
  c->stream = stream;
  if (create) {
    st = qcoll__nccl_comm_prepare(comm, stream, &c->handle);
    if (st != QCOLL_OK) return st;
  } else {
    if (qcoll__nccl_comm_state(comm) == QCOLL__NCCL_REFUSED)
      return refused_error(comm);
    if (qcoll__nccl_comm_state(comm) != QCOLL__NCCL_READY)
      return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                          "%s: the NCCL communicator does not exist yet; the "
                          "first collective that uses NCCL creates it "
                          "(point-to-point calls cannot)",
                          c->fn);
    c->handle = comm->nccl->handle;
  }
  c->dtype = qcoll__nccl_dtype(dtype);
  c->op = reduction ? qcoll__nccl_op(op) : QCOLL__NCCL_SUM;
  if (c->dtype < 0)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: dtype %d has no NCCL equivalent", c->fn,
                        (int)dtype);
  if (c->op < 0)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: op %d has no NCCL equivalent", c->fn, (int)op);
  return qcoll__device_guard_enter(comm, &c->guard);
}

/* Wait out "in progress", turn NCCL's result into a status, leave the
 * device guard. */
static qcoll_status_t end(qcoll__ctx_t *comm, nccl_call_t *c, int r,
                          const char *nccl_fn) {
  struct qcoll__nccl_comm *s = comm->nccl;
  qcoll_status_t st = QCOLL_OK;
  if (r == QCOLL__NCCL_IN_PROGRESS) {
    wait_end_t w = wait_nccl(comm, c->handle, qcoll__ctx_deadline(comm), &r);
    if (w != WAIT_DONE) {
      watch_stop(s);
      abort_handle(comm, &s->handle);
      s->broken = true;
      if (w == WAIT_ABORTED) {
        snprintf(s->why, sizeof s->why, "aborted during %s", nccl_fn);
        st = qcoll__error(comm, QCOLL_ERR_ABORTED,
                          "%s: the communicator was aborted while %s was in "
                          "progress; the NCCL communicator was aborted",
                          c->fn, nccl_fn);
      } else {
        snprintf(s->why, sizeof s->why, "%s passed the deadline", nccl_fn);
        qcoll__ctx_mark_broken(comm);
        st = qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                          "%s: %s still in progress after %.1f s "
                          "(QCOLL_TIMEOUT); the NCCL communicator was aborted",
                          c->fn, nccl_fn, comm->timeout_s);
      }
      s->state = QCOLL__NCCL_REFUSED;
      goto out;
    }
  }
  if (r != QCOLL__NCCL_SUCCESS) {
    /* A bad argument leaves NCCL (and comm) usable; anything else may have
     * left peers inside the collective. */
    if (r != QCOLL__NCCL_INVALID_ARGUMENT && r != QCOLL__NCCL_INVALID_USAGE) {
      s->broken = true;
      qcoll__ctx_mark_broken(comm);
    }
    char d[REASON_BYTES * 2];
    describe(nccl_fn, c->handle, r, d, sizeof d);
    st = qcoll__error(comm, QCOLL_ERR_NCCL, "%s: %s", c->fn, d);
  } else {
    qcoll__nccl_watch_enqueued(s->watch, c->fn, nccl_fn, c->stream);
  }
out:
  qcoll__device_guard_exit(comm, &c->guard);
  return st;
}

qcoll_status_t qcoll__nccl_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream) {
  nccl_call_t c = {.fn = "qcoll_all_reduce"};
  qcoll_status_t st = begin(comm, &c, true, dtype, op, true, stream);
  if (st != QCOLL_OK) return st;
  int r =
      api.all_reduce(sendbuf, recvbuf, count, c.dtype, c.op, c.handle, stream);
  return end(comm, &c, r, "ncclAllReduce");
}

qcoll_status_t qcoll__nccl_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  qcoll_dtype_t dtype, qcoll_op_t op, int root,
                                  void *stream) {
  nccl_call_t c = {.fn = "qcoll_reduce"};
  qcoll_status_t st = begin(comm, &c, true, dtype, op, true, stream);
  if (st != QCOLL_OK) return st;
  int r = api.reduce(sendbuf, recvbuf, count, c.dtype, c.op, root, c.handle,
                     stream);
  return end(comm, &c, r, "ncclReduce");
}

qcoll_status_t qcoll__nccl_broadcast(qcoll__ctx_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     qcoll_dtype_t dtype, int root,
                                     void *stream) {
  nccl_call_t c = {.fn = "qcoll_broadcast"};
  qcoll_status_t st = begin(comm, &c, true, dtype, QCOLL_SUM, false, stream);
  if (st != QCOLL_OK) return st;
  int r =
      api.broadcast(sendbuf, recvbuf, count, c.dtype, root, c.handle, stream);
  return end(comm, &c, r, "ncclBroadcast");
}

qcoll_status_t qcoll__nccl_all_gather(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t sendcount,
                                      qcoll_dtype_t dtype, void *stream) {
  nccl_call_t c = {.fn = "qcoll_all_gather"};
  qcoll_status_t st = begin(comm, &c, true, dtype, QCOLL_SUM, false, stream);
  if (st != QCOLL_OK) return st;
  int r =
      api.all_gather(sendbuf, recvbuf, sendcount, c.dtype, c.handle, stream);
  return end(comm, &c, r, "ncclAllGather");
}

qcoll_status_t qcoll__nccl_reduce_scatter(qcoll__ctx_t *comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t recvcount, qcoll_dtype_t dtype,
                                          qcoll_op_t op, void *stream) {
  nccl_call_t c = {.fn = "qcoll_reduce_scatter"};
  qcoll_status_t st = begin(comm, &c, true, dtype, op, true, stream);
  if (st != QCOLL_OK) return st;
  int r = api.reduce_scatter(sendbuf, recvbuf, recvcount, c.dtype, c.op,
                             c.handle, stream);
  return end(comm, &c, r, "ncclReduceScatter");
}

qcoll_status_t qcoll__nccl_all_to_all(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, void *stream) {
  nccl_call_t c = {.fn = "qcoll_all_to_all"};
  qcoll_status_t st = begin(comm, &c, true, dtype, QCOLL_SUM, false, stream);
  if (st != QCOLL_OK) return st;
  size_t block = count * qcoll_dtype_size(dtype); /* core checked overflow */
  const char *what = "ncclGroupStart";
  int r = api.group_start();
  if (r == QCOLL__NCCL_SUCCESS) {
    for (int peer = 0; peer < comm->nranks && r == QCOLL__NCCL_SUCCESS;
         peer++) {
      what = "ncclSend";
      r = api.send((const char *)sendbuf + (size_t)peer * block, count, c.dtype,
                   peer, c.handle, stream);
      if (r != QCOLL__NCCL_SUCCESS) break;
      what = "ncclRecv";
      r = api.recv((char *)recvbuf + (size_t)peer * block, count, c.dtype, peer,
                   c.handle, stream);
    }
    /* A group once started must be ended, also after an error inside it. */
    int g = api.group_end();
    if (r == QCOLL__NCCL_SUCCESS) {
      r = g;
      what = "ncclGroupEnd";
    }
  }
  return end(comm, &c, r, what);
}

qcoll_status_t qcoll__nccl_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer,
                                void *stream) {
  nccl_call_t c = {.fn = "qcoll_send"};
  qcoll_status_t st = begin(comm, &c, false, dtype, QCOLL_SUM, false, stream);
  if (st != QCOLL_OK) return st;
  int r = api.send(sendbuf, count, c.dtype, peer, c.handle, stream);
  return end(comm, &c, r, "ncclSend");
}

qcoll_status_t qcoll__nccl_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer, void *stream) {
  nccl_call_t c = {.fn = "qcoll_recv"};
  qcoll_status_t st = begin(comm, &c, false, dtype, QCOLL_SUM, false, stream);
  if (st != QCOLL_OK) return st;
  int r = api.recv(recvbuf, count, c.dtype, peer, c.handle, stream);
  return end(comm, &c, r, "ncclRecv");
}
