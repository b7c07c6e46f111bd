/*
 * The one table of QCOLL_* environment variables.  Every variable qcoll
 * reads is listed in config.c with its default, its type and range and a
 * one-line doc, so qcoll-info can print them all.
 *
 * When they are read: a communicator reads every typed variable once, at
 * init, into its qcoll__config_t (ctx->config), and nothing on the path of
 * a call reads the environment.  Read once per process instead: QCOLL_DEBUG
 * and QCOLL_DEBUG_SUBSYS (at the first log line), QCOLL_DISABLE_CUDA (at
 * the first use of the device runtime) and QCOLL_NCCL_LIB (when NCCL is
 * first loaded).
 *
 * Bad values, one policy for every variable: a value that does not parse as
 * its type, or lies outside its range, is warned about (once per process
 * for each variable and value), naming the variable, the value and the
 * default used instead, and the default is used.  A QCOLL_* name in the
 * environment that qcoll does not know is warned about once per process, with
 * the nearest known name.
 */
#ifndef QCOLL_CORE_CONFIG_H
#define QCOLL_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The typed values a communicator uses, read once at its init. */
typedef struct qcoll__config {
  double timeout_s;                    /* QCOLL_TIMEOUT */
  long long root_port;                 /* QCOLL_ROOT_PORT, 0..65535 */
  size_t shm_bytes;                    /* QCOLL_SHM_BYTES */
  size_t shm_oneshot_bytes;            /* QCOLL_SHM_ONESHOT_BYTES */
  size_t p2p_bytes;                    /* QCOLL_P2P_BYTES */
  long long spin_us;                   /* QCOLL_SPIN_US */
  bool check;                          /* QCOLL_CHECK */
  size_t quant_min_bytes;              /* QCOLL_QUANT_MIN_BYTES */
  bool quant_shared_gpu_floors;        /* QCOLL_QUANT_SHARED_GPU_FLOORS */
  size_t quant_round_bytes;            /* QCOLL_QUANT_ROUND_BYTES, 0: none */
  int quant_pipeline;                  /* QCOLL_QUANT_PIPELINE: 0, 1, 2 */
  size_t ipc_bytes;                    /* QCOLL_IPC_BYTES */
  long long max_blocks;                /* QCOLL_MAX_BLOCKS */
  size_t ipc_p2p_bytes;                /* QCOLL_IPC_P2P_BYTES */
  size_t ipc_push_bytes;               /* QCOLL_IPC_PUSH_BYTES */
  long long ipc_push_max_ranks;        /* QCOLL_IPC_PUSH_MAX_RANKS */
  long long ipc_push_block_packs;      /* QCOLL_IPC_PUSH_BLOCK_PACKS */
  bool pdl;                            /* QCOLL_PDL */
  bool graph_register;                 /* QCOLL_GRAPH_REGISTER */
  size_t oneshot_max_bytes;            /* QCOLL_ONESHOT_MAX_BYTES */
  size_t oneshot_reg_min_bytes;        /* QCOLL_ONESHOT_REG_MIN_BYTES */
  size_t twoshot_max_bytes;            /* QCOLL_TWOSHOT_MAX_BYTES */
  size_t shared_gpu_ipc_max_bytes;     /* QCOLL_SHARED_GPU_IPC_MAX_BYTES */
  long long shared_gpu_nccl_max_ranks; /* QCOLL_SHARED_GPU_NCCL_MAX_RANKS */
  bool nccl_blocking;                  /* QCOLL_NCCL_BLOCKING */
  bool nccl_watchdog;                  /* QCOLL_NCCL_WATCHDOG */
  bool stall_exit;                     /* QCOLL_STALL_EXIT */
  bool disable_cuda;                   /* QCOLL_DISABLE_CUDA */
} qcoll__config_t;

/* Read every typed variable of the table now (bad values: the policy
 * above), and warn once per process about unknown QCOLL_* names. */
void qcoll__config_read(qcoll__config_t *out);

/* The known QCOLL_* name nearest to name (edit distance), for warnings
 * about misspelt variables. */
const char *qcoll__env_nearest(const char *name);

/* The raw value of a listed variable: the environment's, else the table's
 * default (never NULL for listed names; NULL for unlisted ones). */
const char *qcoll__env_str(const char *name);
/* Parsed forms of one variable (the policy above for bad values); for
 * code that runs once per process.  Communicators use qcoll__config_t. */
long long qcoll__env_int(const char *name);
double qcoll__env_double(const char *name);
/* Byte sizes accept suffixes K, M, G (powers of 1024). */
size_t qcoll__env_bytes(const char *name);
bool qcoll__env_bool(const char *name);

/* The largest all-reduce sent one-shot at nranks ranks:
 * QCOLL_ONESHOT_MAX_BYTES, or its rank-scaled default when that is 0. */
size_t qcoll__config_oneshot_max_bytes(const qcoll__config_t *config,
                                       int nranks);

/* Parse "123", "4K", "16M", "1G" into bytes; false when malformed. */
bool qcoll__parse_bytes(const char *s, size_t *out);

#ifdef __cplusplus
}
#endif

#endif
