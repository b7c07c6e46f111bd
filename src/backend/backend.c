/* The list of backends, which backend runs which path, and the barrier on
 * a stream that the ipc and staged backends share. */
#include "backend.h"

#include "../coll/host/host_coll.h"
#include "../runtime/runtime.h"
#include "../transport/cuda_ipc.h"
#include "cuda_ipc_launch.h"

const qcoll__backend_t *const qcoll__backends[QCOLL__BACKEND_COUNT] = {
    &qcoll__backend_host, &qcoll__backend_staged, &qcoll__backend_ipc,
    &qcoll__backend_nccl};

const char *qcoll__path_name(qcoll__path_t path) {
  static const char *names[] = {"host", "oneshot", "twoshot",
                                "nccl", "staged",  "ipc"};
  return (unsigned)path < QCOLL__PATH_COUNT ? names[path] : "invalid";
}

bool qcoll__ipc_kernel_supports(qcoll_dtype_t dtype, qcoll_op_t op) {
  bool dtype_ok =
      dtype == QCOLL_F16 || dtype == QCOLL_BF16 || dtype == QCOLL_F32;
  bool op_ok = op == QCOLL_SUM || op == QCOLL_MIN || op == QCOLL_MAX;
  return dtype_ok && op_ok;
}

const qcoll__backend_t *qcoll__backend_for(qcoll__path_t path) {
  switch (path) {
    case QCOLL__PATH_HOST: return &qcoll__backend_host;
    case QCOLL__PATH_ONESHOT:
    case QCOLL__PATH_TWOSHOT:
    case QCOLL__PATH_IPC: return &qcoll__backend_ipc;
    case QCOLL__PATH_NCCL: return &qcoll__backend_nccl;
    case QCOLL__PATH_STAGED:
    case QCOLL__PATH_COUNT: break;
  }
  return &qcoll__backend_staged;
}

qcoll_status_t qcoll__stream_barrier(qcoll__ctx_t *ctx,
                                     const qcoll__call_t *call, bool on_ipc) {
  bool capturing = false;
  qcoll_status_t st =
      qcoll__runtime()->stream_is_capturing(call->stream, &capturing);
  if (st != QCOLL_OK) return st;
#ifdef QCOLL_HAVE_CUDA
  if (on_ipc) {
    st = qcoll__cuda_collective(ctx, QCOLL__COLL_BARRIER, NULL, NULL, 0,
                                QCOLL_U8, QCOLL_SUM, 0, call->stream);
  } else if (capturing) {
    st = qcoll__error(ctx, QCOLL_ERR_UNSUPPORTED,
                      "qcoll_barrier: without CUDA IPC a barrier on a stream "
                      "drains the stream on the host and cannot be captured "
                      "into a CUDA graph");
  } else {
    st = qcoll__cuda_stream_wait(ctx, call->stream);
  }
#else
  (void)on_ipc;
#endif
  if (st != QCOLL_OK || capturing) return st;
  return qcoll__host_barrier(ctx);
}
