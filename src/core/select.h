/*
 * The selection table: which path serves a call, from the collective, its
 * size, the world size, the dtype/op, the quantisation asked for and what
 * the communicator can do.  Rows are tried in order; the first whose
 * conditions hold wins.  QCOLL_ALGO and per-call options force a path.
 * Every rank evaluates the same rows with the same inputs (the
 * capabilities are agreed collectively at init or first use), so every
 * rank picks the same path.
 */
#ifndef QCOLL_CORE_SELECT_H
#define QCOLL_CORE_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qcoll__path {
  QCOLL__PATH_HOST = 0,    /* host back end (host buffers) */
  QCOLL__PATH_ONESHOT = 1, /* CUDA IPC one-shot all-reduce */
  QCOLL__PATH_TWOSHOT = 2, /* CUDA IPC two-shot all-reduce */
  QCOLL__PATH_NCCL = 3,    /* NCCL */
  QCOLL__PATH_STAGED = 4,  /* GPU buffers staged through the host back end */
  QCOLL__PATH_IPC = 5,     /* CUDA IPC kernels of every collective, dtype, op */
  QCOLL__PATH_COUNT = 6
} qcoll__path_t;

typedef enum qcoll__coll {
  QCOLL__COLL_ALL_REDUCE,
  QCOLL__COLL_REDUCE,
  QCOLL__COLL_BROADCAST,
  QCOLL__COLL_ALL_GATHER,
  QCOLL__COLL_REDUCE_SCATTER,
  QCOLL__COLL_ALL_TO_ALL,
  QCOLL__COLL_SEND,
  QCOLL__COLL_RECV,
  QCOLL__COLL_BARRIER,
  QCOLL__COLL_COUNT
} qcoll__coll_t;

typedef struct qcoll__select_in {
  qcoll__coll_t coll;
  size_t bytes; /* bytes of one rank's contribution */
  int nranks;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  qcoll_quant_t quant; /* resolved: never DEFAULT */
  bool gpu;            /* GPU buffers */
  bool ipc;            /* the IPC kernels can serve this comm */
  int ranks_per_gpu;   /* ipc: the most ranks any one GPU holds (1: none is
                          shared); 0 without ipc */
  bool nccl;           /* NCCL is not known to refuse this comm */
} qcoll__select_in_t;

const char *qcoll__path_name(qcoll__path_t path);
const char *qcoll__coll_name(qcoll__coll_t coll);

/* Whether the IPC all-reduce kernels handle dtype/op. */
bool qcoll__ipc_kernel_supports(qcoll_dtype_t dtype, qcoll_op_t op);

/* The path the table picks (no forcing).  *row gets the index of the row
 * that decided, for logs. */
qcoll__path_t qcoll__select(const qcoll__select_in_t *in, int *row);
/* Whether NCCL is known to stall for this call (more ranks on one GPU than
 * QCOLL_SHARED_GPU_NCCL_MAX_RANKS, a collective): the table keeps such
 * calls off NCCL, and forcing NCCL there draws a warning. */
bool qcoll__select_nccl_stalls(const qcoll__select_in_t *in);

#ifdef __cplusplus
}
#endif

#endif
