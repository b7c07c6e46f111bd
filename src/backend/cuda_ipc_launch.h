/*
 * The ipc backend's launches on the CUDA IPC transport's buffers (CUDA
 * builds only): called by backend/ipc.c under the device guard, after
 * argument validation (buffers and stream are on comm->device), with the
 * path chosen by the selection table.
 */
#ifndef QCOLL_BACKEND_CUDA_IPC_LAUNCH_H
#define QCOLL_BACKEND_CUDA_IPC_LAUNCH_H

#include "../base/colls.h"
#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All-reduce of GPU buffers through the IPC kernels.  algo is the
 * selection table's final choice, ONESHOT or TWOSHOT (anything else is
 * refused); quant is resolved (never DEFAULT). */
qcoll_status_t qcoll__cuda_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream, qcoll_algo_t algo,
                                      qcoll_quant_t quant, bool rotate);

/* Every collective of GPU buffers through the kernels of
 * src/coll/cuda/collectives.cu, for every dtype and op: all_reduce (exactly
 * the host back end's reduction, for the dtype/op pairs the fp32 kernels do
 * not serve), reduce, broadcast, all_gather, reduce_scatter, all_to_all,
 * and barrier (a kernel barrier on `stream`; buffers, count, dtype, op and
 * root ignored).  Enqueued on stream, capturable into a CUDA graph.  Every
 * rank makes the same calls in the same order, ordered with its all-reduce
 * calls the same way on every rank. */
qcoll_status_t qcoll__cuda_collective(qcoll__ctx_t *comm, qcoll__coll_t coll,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, qcoll_dtype_t dtype,
                                      qcoll_op_t op, int root, void *stream);

/* Send to / receive from peer through the pair's IPC channel; enqueued on
 * stream, capturable.  Ordering rules in src/coll/cuda/collectives.h: the
 * n-th send to a peer meets that peer's n-th recv from this rank (keep each
 * direction on one stream); a send of at most QCOLL_IPC_P2P_BYTES does not
 * wait for its recv, a larger one does. */
qcoll_status_t qcoll__cuda_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer,
                                void *stream);
qcoll_status_t qcoll__cuda_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer, void *stream);

/* Wait for everything enqueued on stream (on comm's device). */
qcoll_status_t qcoll__cuda_stream_wait(qcoll__ctx_t *comm, void *stream);

#ifdef __cplusplus
}
#endif

#endif
