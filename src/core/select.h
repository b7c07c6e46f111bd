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

#include "../backend/backend.h"
#include "../base/colls.h"
#include "../base/common.h"
#include "../base/config.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  const qcoll__config_t *config; /* the thresholds (read at init) */
} qcoll__select_in_t;

/* The path the table picks (no forcing).  *row gets the index of the row
 * that decided, for logs. */
qcoll__path_t qcoll__select(const qcoll__select_in_t *in, int *row);
/* The smallest message that a quantised all-reduce of in->quant is
 * quantised at: QCOLL_QUANT_MIN_BYTES, raised where all ranks share a GPU to
 * the size from which the format was measured to pay
 * (QCOLL_QUANT_SHARED_GPU_FLOORS); SIZE_MAX: never. */
size_t qcoll__select_quant_floor(const qcoll__select_in_t *in);
/* Whether the table's quantised row takes the call: a sum, a format asked
 * for, at or above the floor.  The call's transfer (core's final_call)
 * asks the same floor, so the two never disagree. */
bool qcoll__select_quantises(const qcoll__select_in_t *in);
/* Whether NCCL is known to stall for this call (more ranks on one GPU than
 * QCOLL_SHARED_GPU_NCCL_MAX_RANKS, a collective): the table keeps such
 * calls off NCCL, and forcing NCCL there draws a warning. */
bool qcoll__select_nccl_stalls(const qcoll__select_in_t *in);

#ifdef __cplusplus
}
#endif

#endif
