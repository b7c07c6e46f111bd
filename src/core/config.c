#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

typedef struct env_entry {
  const char *name;
  const char *default_value;
  const char *doc;
} env_entry_t;

/* Keep sorted by topic; qcoll-info prints them in this order. */
static const env_entry_t env_table[] = {
    {"QCOLL_TIMEOUT", "300",
     "deadline in seconds of every wait (bootstrap, shared memory, GPU flags)"},
    {"QCOLL_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
    {"QCOLL_DEBUG_SUBSYS", "ALL",
     "comma-separated subsystems to log: INIT,BOOT,SHM,COLL,CUDA,NCCL or ALL"},
    {"QCOLL_HOST_ID", "",
     "identity of this host (default: the hostname); ranks with equal ids "
     "share memory"},
    {"QCOLL_ROOT_ADDR", "",
     "address the rendezvous root advertises or binds (default: first "
     "non-loopback IPv4)"},
    {"QCOLL_ROOT_PORT", "0",
     "port of the rendezvous root (0: any free port; env init: MASTER_PORT+1)"},
    {"QCOLL_SECRET", "",
     "job secret for env init without QCOLL_UNIQUE_ID (default: derived from "
     "job ids)"},
    {"QCOLL_UNIQUE_ID", "",
     "hex unique id set by qcoll-run for qcoll_comm_init_env"},
    {"QCOLL_RANK", "", "rank set by qcoll-run"},
    {"QCOLL_WORLD_SIZE", "", "world size set by qcoll-run"},
    {"QCOLL_LOCAL_RANK", "",
     "rank among the ranks of this host, set by qcoll-run"},
    {"QCOLL_LOCAL_SIZE", "", "number of ranks on this host, set by qcoll-run"},
    {"QCOLL_SHM_BYTES", "32M",
     "host back end: shared-memory staging bytes for all ranks of a host "
     "together"},
    {"QCOLL_SHM_ONESHOT_BYTES", "64K",
     "host back end: largest message reduced one-shot (everyone reads "
     "everyone)"},
    {"QCOLL_P2P_BYTES", "256K",
     "host back end: buffer per ordered pair of ranks for send/recv (capped to "
     "fit)"},
    {"QCOLL_SPIN_US", "50",
     "microseconds a wait spins before it sleeps on a futex"},
    {"QCOLL_CHECK", "0",
     "1: ranks compare each call's signature (count, dtype, op, root) before "
     "running it"},
    {"QCOLL_ALGO", "auto",
     "force the path of GPU collectives: auto, host (staged), nccl, ipc; "
     "oneshot and twoshot for all-reduce only (the barrier keeps its own)"},
    {"QCOLL_QUANT", "none",
     "quantised transfer for GPU all-reduce: none, fp8, int8, int6, int4, "
     "int3"},
    {"QCOLL_QUANT_MIN_BYTES", "1M",
     "messages smaller than this are never quantised"},
    {"QCOLL_IPC_BYTES", "64M", "CUDA IPC buffer per rank (data and flags)"},
    {"QCOLL_MAX_BLOCKS", "0",
     "largest grid of a rank's GPU collective kernels (0: the GPU's resident "
     "blocks, halved and divided among ranks that share a GPU); leaves SMs to "
     "other work"},
    {"QCOLL_IPC_P2P_BYTES", "1M",
     "CUDA IPC: GPU send/recv inbox per ordered pair of ranks (allocated "
     "beside QCOLL_IPC_BYTES); smaller sends do not wait for their recv"},
    {"QCOLL_ONESHOT_MAX_BYTES", "256K",
     "largest GPU all-reduce sent one-shot by the selection table"},
    {"QCOLL_TWOSHOT_MAX_BYTES", "16M",
     "largest GPU all-reduce sent two-shot before NCCL is preferred (when NCCL "
     "serves)"},
    {"QCOLL_SHARED_GPU_IPC_MAX_BYTES", "2M",
     "largest GPU reduce, broadcast, all-gather, reduce-scatter or all-to-all "
     "(bytes of count elements) kept on the IPC kernels rather than NCCL when "
     "ranks share a GPU"},
    {"QCOLL_SHARED_GPU_NCCL_MAX_RANKS", "2",
     "the most ranks on one GPU for which the selection table delegates to "
     "NCCL; with more, every GPU collective but send/recv stays on the IPC "
     "kernels (NCCL stalled with 4 ranks on one GPU)"},
    {"QCOLL_NCCL_LIB", "",
     "path of libnccl to load (default: the usual names)"},
    {"QCOLL_NCCL_BLOCKING", "1",
     "1: NCCL calls go to a blocking communicator split from the non-blocking "
     "one made at init (no launch thread per call); 0: every NCCL call stays "
     "non-blocking and under QCOLL_TIMEOUT"},
    {"QCOLL_DISABLE_CUDA", "0",
     "1: never load or use CUDA, even when a GPU is present"},
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

long long qcoll__env_int(const char *name) {
  const char *v = qcoll__env_str(name);
  const env_entry_t *e = find_entry(name);
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v ? v : "0", &end, 10);
  if (errno || !end || *end) {
    QLOG_WARN(NULL, INIT, "%s=%s is not an integer; using default %s", name, v,
              e ? e->default_value : "0");
    x = e ? strtoll(e->default_value, NULL, 10) : 0;
  }
  return x;
}

double qcoll__env_double(const char *name) {
  const char *v = qcoll__env_str(name);
  const env_entry_t *e = find_entry(name);
  char *end = NULL;
  errno = 0;
  double x = strtod(v ? v : "0", &end);
  if (errno || !end || *end) {
    QLOG_WARN(NULL, INIT, "%s=%s is not a number; using default %s", name, v,
              e ? e->default_value : "0");
    x = e ? strtod(e->default_value, NULL) : 0;
  }
  return x;
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
    QLOG_WARN(NULL, INIT, "%s=%s is not a byte size; using default %s", name,
              v ? v : "", e ? e->default_value : "0");
    if (!e || !qcoll__parse_bytes(e->default_value, &x)) x = 0;
  }
  return x;
}

bool qcoll__env_bool(const char *name) {
  const char *v = qcoll__env_str(name);
  if (!v || !*v) return false;
  return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
         strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0;
}
