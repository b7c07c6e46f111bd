#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

extern char **environ;

/* How a variable is parsed; ENV_STR ones are read where they are used. */
typedef enum env_kind {
  ENV_STR = 0,
  ENV_INT,
  ENV_DOUBLE,
  ENV_BYTES,
  ENV_BOOL
} env_kind_t;

#define FIELD(f) offsetof(qcoll__config_t, f)

typedef struct env_entry {
  const char *name;
  const char *default_value;
  const char *doc;
  env_kind_t kind;
  size_t field;    /* typed kinds: where qcoll__config_t keeps the value */
  double min, max; /* ENV_INT, ENV_DOUBLE: the accepted range */
} env_entry_t;

/* Keep sorted by topic; qcoll-info prints them in this order. */
static const env_entry_t env_table[] = {
    {"QCOLL_TIMEOUT", "300",
     "deadline in seconds of every wait (bootstrap, shared memory, GPU flags)",
     ENV_DOUBLE, FIELD(timeout_s), 1e-6, 1e300},
    {"QCOLL_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE", ENV_STR, 0,
     0, 0},
    {"QCOLL_DEBUG_SUBSYS", "ALL",
     "comma-separated subsystems to log: INIT,BOOT,SHM,COLL,CUDA,NCCL or ALL",
     ENV_STR, 0, 0, 0},
    {"QCOLL_HOST_ID", "",
     "identity of this host (default: the hostname); ranks with equal ids "
     "share memory",
     ENV_STR, 0, 0, 0},
    {"QCOLL_ROOT_ADDR", "",
     "address the rendezvous root advertises or binds (default: first "
     "non-loopback IPv4)",
     ENV_STR, 0, 0, 0},
    {"QCOLL_ROOT_PORT", "0",
     "port of the rendezvous root (0: any free port; env init: MASTER_PORT+1)",
     ENV_INT, FIELD(root_port), 0, 65535},
    {"QCOLL_SECRET", "",
     "job secret for env init without QCOLL_UNIQUE_ID (default: derived from "
     "job ids)",
     ENV_STR, 0, 0, 0},
    {"QCOLL_UNIQUE_ID", "",
     "hex unique id set by qcoll-run for qcoll_comm_init_env", ENV_STR, 0, 0,
     0},
    {"QCOLL_RANK", "", "rank set by qcoll-run", ENV_STR, 0, 0, 0},
    {"QCOLL_WORLD_SIZE", "", "world size set by qcoll-run", ENV_STR, 0, 0, 0},
    {"QCOLL_LOCAL_RANK", "",
     "rank among the ranks of this host, set by qcoll-run", ENV_STR, 0, 0, 0},
    {"QCOLL_LOCAL_SIZE", "", "number of ranks on this host, set by qcoll-run",
     ENV_STR, 0, 0, 0},
    {"QCOLL_SHM_BYTES", "32M",
     "host back end: shared-memory staging bytes for all ranks of a host "
     "together",
     ENV_BYTES, FIELD(shm_bytes), 0, 0},
    {"QCOLL_SHM_ONESHOT_BYTES", "64K",
     "host back end: largest message reduced one-shot (everyone reads "
     "everyone)",
     ENV_BYTES, FIELD(shm_oneshot_bytes), 0, 0},
    {"QCOLL_P2P_BYTES", "256K",
     "host back end: buffer per ordered pair of ranks for send/recv (capped to "
     "fit)",
     ENV_BYTES, FIELD(p2p_bytes), 0, 0},
    {"QCOLL_SPIN_US", "50",
     "microseconds a wait spins before it sleeps on a futex", ENV_INT,
     FIELD(spin_us), 0, 1e9},
    {"QCOLL_CHECK", "0",
     "1: ranks compare each call's signature (count, dtype, op, root) before "
     "running it",
     ENV_BOOL, FIELD(check), 0, 0},
    {"QCOLL_ALGO", "auto",
     "force the path of GPU collectives: auto, host (staged), nccl, ipc; "
     "oneshot and twoshot for all-reduce only (the barrier keeps its own)",
     ENV_STR, 0, 0, 0},
    {"QCOLL_QUANT", "none",
     "quantised transfer for GPU all-reduce: none, fp8, int8, int6, int4, "
     "int3; a \"+rot\" suffix (int8+rot) rotates every group first",
     ENV_STR, 0, 0, 0},
    {"QCOLL_QUANT_MIN_BYTES", "1M",
     "messages smaller than this are never quantised", ENV_BYTES,
     FIELD(quant_min_bytes), 0, 0},
    {"QCOLL_QUANT_SHARED_GPU_FLOORS", "1",
     "where all ranks share one GPU, a format is quantised only from the "
     "size at which it was measured faster than the exact two-shot "
     "(qcoll-info's selection table lists them; smaller messages run exact); "
     "0: every format from QCOLL_QUANT_MIN_BYTES",
     ENV_BOOL, FIELD(quant_shared_gpu_floors), 0, 0},
    {"QCOLL_QUANT_ROUND_BYTES", "0",
     "quantised all-reduce: the most message bytes reduced per round of a "
     "launch, for every format (larger messages stream through the IPC "
     "buffer in rounds of this size); 0: the measured default (on the larger "
     "grid of long launches 44M for int4, 40M for int6, 32M for int3, otherwise "
     "as many as the buffer holds); the ranks use the smallest of their "
     "values",
     ENV_BYTES, FIELD(quant_round_bytes), 0, 0},
    {"QCOLL_QUANT_PIPELINE", "1",
     "quantised all-reduce: whether a launch of several rounds runs them as "
     "a pipeline (a block encodes a round while its peers reduce the one "
     "before): 1, int4 where its rounds are limited (QCOLL_QUANT_ROUND_BYTES "
     "or the larger grid's 44M default; measured faster there, slower for "
     "int8's whole-buffer rounds, mixed for int6 and int3); 2, every launch "
     "of several rounds; 0, never; the ranks use the smallest of their "
     "values",
     ENV_INT, FIELD(quant_pipeline), 0, 2},
    {"QCOLL_IPC_BYTES", "64M",
     "CUDA IPC buffer per rank (data and flags; one-shot regions larger "
     "than 2 MiB each take the rest beside it, 4 MiB more by default)",
     ENV_BYTES, FIELD(ipc_bytes), 0, 0},
    {"QCOLL_MAX_BLOCKS", "0",
     "largest grid of a rank's GPU collective kernels (0: the GPU's resident "
     "blocks, halved and divided among ranks that share a GPU, not halved for "
     "long two-shot and quantised launches where two share one); leaves SMs "
     "to other work",
     ENV_INT, FIELD(max_blocks), 0, 1e9},
    {"QCOLL_IPC_P2P_BYTES", "1M",
     "CUDA IPC: GPU send/recv inbox per ordered pair of ranks (allocated "
     "beside QCOLL_IPC_BYTES); smaller sends do not wait for their recv",
     ENV_BYTES, FIELD(ipc_p2p_bytes), 0, 0},
    {"QCOLL_IPC_PUSH_BYTES", "256K",
     "largest one-shot all-reduce sent on the push kernel (its slot per "
     "sender; two buffers of one slot per rank are allocated beside "
     "QCOLL_IPC_BYTES); larger one-shots, and all with 0, use the "
     "flag-barrier one-shot",
     ENV_BYTES, FIELD(ipc_push_bytes), 0, 0},
    {"QCOLL_IPC_PUSH_MAX_RANKS", "4",
     "the most ranks for which the one-shot all-reduce uses the push kernel "
     "(with more, the flag-barrier one-shot, which at 8 ranks is as fast up "
     "to 4 KiB and faster above)",
     ENV_INT, FIELD(ipc_push_max_ranks), 0, 65536},
    {"QCOLL_IPC_PUSH_BLOCK_PACKS", "128",
     "16-byte packs per block of the push one-shot while a message is spread "
     "over up to 16 blocks (then one pack per thread of 512): fewer spread "
     "a small message over more SMs; the ranks use the smallest of their "
     "values",
     ENV_INT, FIELD(ipc_push_block_packs), 1, 512},
    {"QCOLL_PDL", "1",
     "launch the IPC kernels (all-reduce, collectives, send/recv) with "
     "programmatic dependent launch where the GPU (sm_90+) and driver (12.3+) "
     "support it, except long all-reduce launches (two-shot above 16 MiB, "
     "quantised above 4 MiB); 0 turns it off",
     ENV_BOOL, FIELD(pdl), 0, 0},
    {"QCOLL_GRAPH_REGISTER", "1",
     "register the buffers of GPU all-reduces captured into a CUDA graph "
     "(a collective exchange at capture time, so every rank must capture the "
     "same calls), so that replays read peers' buffers with no copy-in; 0 "
     "stages them as eager calls do",
     ENV_BOOL, FIELD(graph_register), 0, 0},
    {"QCOLL_ONESHOT_MAX_BYTES", "0",
     "largest GPU all-reduce sent one-shot by the selection table (0: 4 MiB "
     "at 2 ranks, else 4 MiB divided by the number of ranks, where one-shot "
     "and two-shot crossed at 2 and 8 ranks)",
     ENV_BYTES, FIELD(oneshot_max_bytes), 0, 0},
    {"QCOLL_ONESHOT_REG_MIN_BYTES", "4M",
     "smallest one-shot GPU all-reduce that reads peers' registered inputs "
     "in place (no copy-in, one closing barrier); smaller ones, in-place "
     "ones and unregistered inputs are copied in (measured on one H200: the "
     "copy was faster up to 3 MiB); 0: never",
     ENV_BYTES, FIELD(oneshot_reg_min_bytes), 0, 0},
    {"QCOLL_TWOSHOT_MAX_BYTES", "16M",
     "largest GPU all-reduce sent two-shot before NCCL is preferred (when NCCL "
     "serves)",
     ENV_BYTES, FIELD(twoshot_max_bytes), 0, 0},
    {"QCOLL_SHARED_GPU_IPC_MAX_BYTES", "2M",
     "largest GPU reduce, broadcast, all-gather, reduce-scatter or all-to-all "
     "(bytes of count elements) kept on the IPC kernels rather than NCCL when "
     "ranks share a GPU",
     ENV_BYTES, FIELD(shared_gpu_ipc_max_bytes), 0, 0},
    {"QCOLL_SHARED_GPU_NCCL_MAX_RANKS", "2",
     "the most ranks on one GPU for which the selection table delegates to "
     "NCCL; with more, every GPU collective but send/recv stays on the IPC "
     "kernels (NCCL stalled with 4 ranks on one GPU)",
     ENV_INT, FIELD(shared_gpu_nccl_max_ranks), 0, 65536},
    {"QCOLL_NCCL_LIB", "", "path of libnccl to load (default: the usual names)",
     ENV_STR, 0, 0, 0},
    {"QCOLL_NCCL_BLOCKING", "1",
     "1: NCCL calls go to a blocking communicator split from the non-blocking "
     "one made at init (no launch thread per call); 0: every NCCL call stays "
     "non-blocking and under QCOLL_TIMEOUT",
     ENV_BOOL, FIELD(nccl_blocking), 0, 0},
    {"QCOLL_NCCL_WATCHDOG", "1",
     "1: a thread per NCCL communicator polls NCCL's asynchronous error and "
     "aborts NCCL when work qcoll enqueued is still running after "
     "QCOLL_TIMEOUT; 0: off",
     ENV_BOOL, FIELD(nccl_watchdog), 0, 0},
    {"QCOLL_STALL_EXIT", "1",
     "1: when GPU work is still running QCOLL_TIMEOUT after the watchdog "
     "aborted NCCL, end the process (exit code 70) instead of hanging",
     ENV_BOOL, FIELD(stall_exit), 0, 0},
    {"QCOLL_DISABLE_CUDA", "0",
     "1: never load or use CUDA, even when a GPU is present", ENV_BOOL,
     FIELD(disable_cuda), 0, 0},
};

#define ENV_COUNT (sizeof(env_table) / sizeof(env_table[0]))

static const env_entry_t *find_entry(const char *name) {
  for (size_t i = 0; i < ENV_COUNT; i++)
    if (strcmp(env_table[i].name, name) == 0) return &env_table[i];
  return NULL;
}

qcoll_status_t qcoll_env_describe(int i, const char **name,
                                  const char **default_value,
                                  const char **doc) {
  if (i < 0 || (size_t)i >= ENV_COUNT)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_env_describe: index %d out of range [0, %zu)", i,
                        ENV_COUNT);
  if (name) *name = env_table[i].name;
  if (default_value) *default_value = env_table[i].default_value;
  if (doc) *doc = env_table[i].doc;
  return QCOLL_OK;
}

const char *qcoll__env_str(const char *name) {
  const char *v = getenv(name);
  if (v && *v) return v;
  const env_entry_t *e = find_entry(name);
  return e ? e->default_value : NULL;
}

/* The one policy for a bad value: say which variable, which value and the
 * default used instead; once per process for each variable and value, as
 * every communicator (and qcoll-info's every table) reads them again. */
static void warn_bad_value(const char *name, const char *value,
                           const char *expected, const env_entry_t *e) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char warned[ENV_COUNT][64];
  value = value ? value : "";
  if (e) {
    char *last = warned[e - env_table];
    pthread_mutex_lock(&lock);
    bool again = strncmp(last, value, sizeof warned[0] - 1) == 0 && *last;
    snprintf(last, sizeof warned[0], "%s", value);
    pthread_mutex_unlock(&lock);
    if (again) return;
  }
  QLOG_WARN(NULL, INIT, "%s=%s is not %s; using the default %s", name, value,
            expected, e ? e->default_value : "0");
}

static bool in_range(const env_entry_t *e, double x) {
  return !e || !(e->min < e->max) || (x >= e->min && x <= e->max);
}

/* "an integer in [0, 65535]" and the like, for warnings. */
static void expected_number(const env_entry_t *e, const char *kind, char *buf,
                            size_t n) {
  if (e && e->min < e->max)
    snprintf(buf, n, "%s in [%g, %g]", kind, e->min, e->max);
  else
    snprintf(buf, n, "%s", kind);
}

/* An integer (whole string, strtoll) or a number (strtod). */
static bool parse_number(const char *v, bool integer, double *out) {
  char *end = NULL;
  errno = 0;
  double x = integer ? (double)strtoll(v, &end, 10) : strtod(v, &end);
  if (errno || !end || end == v || *end) return false;
  *out = x;
  return true;
}

/* A numeric variable in its range, else its default (with the warning). */
static double env_number(const char *name, bool integer) {
  const char *v = qcoll__env_str(name);
  const env_entry_t *e = find_entry(name);
  double x = 0;
  if (!parse_number(v ? v : "0", integer, &x) || !in_range(e, x)) {
    char what[80];
    expected_number(e, integer ? "an integer" : "a number", what, sizeof what);
    warn_bad_value(name, v, what, e);
    x = 0;
    if (e) parse_number(e->default_value, integer, &x);
  }
  return x;
}

/* Every numeric variable's range lies well within 2^53: exact in a double. */
long long qcoll__env_int(const char *name) {
  return (long long)env_number(name, true);
}

double qcoll__env_double(const char *name) {
  return env_number(name, false);
}

bool qcoll__parse_bytes(const char *s, size_t *out) {
  if (!s || !*s) return false;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    default: return false;
  }
  if (*end == 'i' || *end == 'I') end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end) return false;
  if (shift && x > (~0ULL >> shift)) return false;
  *out = (size_t)(x << shift);
  return true;
}

size_t qcoll__env_bytes(const char *name) {
  const char *v = qcoll__env_str(name);
  const env_entry_t *e = find_entry(name);
  size_t x = 0;
  if (!qcoll__parse_bytes(v, &x)) {
    warn_bad_value(name, v, "a byte size (e.g. 4096, 64K, 16M, 1G)", e);
    if (!e || !qcoll__parse_bytes(e->default_value, &x)) x = 0;
  }
  return x;
}

static bool parse_bool(const char *v, bool *out) {
  static const char *yes[] = {"1", "true", "yes", "on"};
  static const char *no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(v, yes[i]) == 0) return *out = true, true;
    if (strcasecmp(v, no[i]) == 0) return *out = false, true;
  }
  return false;
}

bool qcoll__env_bool(const char *name) {
  const char *v = qcoll__env_str(name);
  const env_entry_t *e = find_entry(name);
  bool b = false;
  if (!v || !*v) return false;
  if (!parse_bool(v, &b)) {
    warn_bad_value(name, v, "a boolean (1/0, true/false, yes/no, on/off)", e);
    b = e && parse_bool(e->default_value, &b) && b;
  }
  return b;
}

/* ---- the typed values ------------------------------------------------ */

/* QCOLL_* names that qcoll's tools, tests, scripts and Python binding read
 * (not the library): not misspellings. */
static const char *const other_names[] = {
    "QCOLL_LIB", /* the Python binding */
    "QCOLL_QUICK_REDUCE_QUANTIZATION",
    "QCOLL_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
    "QCOLL_BENCH_ARGS",
    "QCOLL_BENCH_RANKS",
    "QCOLL_BUILD_DIR",
    "QCOLL_CMOCKA_DIR",
    "QCOLL_CUDA_ARCH",
    "QCOLL_FUZZ_DIR",
    "QCOLL_FUZZ_JOBS",
    "QCOLL_FUZZ_SECONDS",
    "QCOLL_INCLUDE", /* qcoll.torch's extension build */
    "QCOLL_JOBS",
    "QCOLL_PERF_CUDA",
    "QCOLL_PYTHON3",
    "QCOLL_RUN",
    "QCOLL_RUN_TEST_PASSED",
    "QCOLL_SANITIZE",
    "QCOLL_SRC",
    "QCOLL_SKIP_SANITIZERS",
    "QCOLL_TEST_IMPL",
    "QCOLL_TEST_KERNEL_TIMEOUT",
    "QCOLL_TORCH_BACKEND", /* qcoll.torch */
    "QCOLL_TORCH_EXT",
    "QCOLL_TORCH_EXT_DIR",
    "QCOLL_TORCH_EXT_VERBOSE",
    "QCOLL_TORCH_INLINE_BYTES",
    "QCOLL_WITH_CUDA",
};

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return (size_t)-1;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t sub = diag + (a[i - 1] != b[j - 1]);
      row[j] = QCOLL_MIN(QCOLL_MIN(row[j - 1] + 1, up + 1), sub);
      diag = up;
    }
  }
  return row[lb];
}

const char *qcoll__env_nearest(const char *name) {
  const char *best = env_table[0].name;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; i < ENV_COUNT; i++) {
    size_t d = edit_distance(name, env_table[i].name);
    if (d < best_d) best_d = d, best = env_table[i].name;
  }
  return best;
}

static bool is_known_name(const char *name) {
  if (find_entry(name)) return true;
  for (size_t i = 0; i < sizeof other_names / sizeof other_names[0]; i++)
    if (strcmp(other_names[i], name) == 0) return true;
  return false;
}

static void warn_unknown_names(void) {
  for (char **env = environ; env && *env; env++) {
    if (strncmp(*env, "QCOLL_", 6) != 0) continue;
    char name[128];
    size_t len = strcspn(*env, "=");
    if (len >= sizeof name) continue;
    memcpy(name, *env, len);
    name[len] = '\0';
    if (is_known_name(name)) continue;
    QLOG_WARN(NULL, INIT,
              "%s is not a qcoll variable (ignored); did you mean %s? "
              "(qcoll-info lists them all)",
              name, qcoll__env_nearest(name));
  }
}

/* One-shot reads every peer's whole message, two-shot a share of it twice:
 * the crossover falls as ranks are added.  Measured on one H200 (bf16,
 * graph): at 8 ranks one-shot faster up to 512 KiB (12.6 against 17.2),
 * even at 1 MiB, slower at 2 MiB (docs/results/2026-12-02-h200-merged.md);
 * at 2 ranks see qcoll__config_oneshot_max_bytes. */
#define ONESHOT_AUTO_BYTES ((size_t)4 << 20)

/* Two ranks: 4 MiB, where the one-shot (copied in, two packs per thread
 * per round) took 9.5 us against the two-shot's 10.4-11.0 registered and
 * 13.5-14.4 staged, and 8 MiB went to the two-shot (15-17 against 21-24;
 * one H200, docs/results/2026-12-03-h200-oneshot-unroll.md).  More ranks:
 * 4 MiB divided by their number (the crossing measured at 8 ranks). */
size_t qcoll__config_oneshot_max_bytes(const qcoll__config_t *config, int nranks) {
  if (config->oneshot_max_bytes) return config->oneshot_max_bytes;
  if (nranks <= 2) return ONESHOT_AUTO_BYTES;
  return ONESHOT_AUTO_BYTES / (size_t)nranks;
}

static pthread_once_t unknown_once = PTHREAD_ONCE_INIT;

void qcoll__config_read(qcoll__config_t *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < ENV_COUNT; i++) {
    const env_entry_t *e = &env_table[i];
    char *field = (char *)out + e->field;
    switch (e->kind) {
      case ENV_STR: break;
      case ENV_INT: *(long long *)field = qcoll__env_int(e->name); break;
      case ENV_DOUBLE: *(double *)field = qcoll__env_double(e->name); break;
      case ENV_BYTES: *(size_t *)field = qcoll__env_bytes(e->name); break;
      case ENV_BOOL: *(bool *)field = qcoll__env_bool(e->name); break;
    }
  }
  pthread_once(&unknown_once, warn_unknown_names);
}
