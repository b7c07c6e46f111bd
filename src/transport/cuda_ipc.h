/*
 * GPU side of a communicator: the CUDA IPC buffers of the ranks of this host
 * and the collectives that run on them.  Everything here is called by core
 * under the device guard, after argument validation (buffers and stream are
 * on comm->device).
 */
#ifndef QCOLL_TRANSPORT_CUDA_IPC_H
#define QCOLL_TRANSPORT_CUDA_IPC_H

#include "../base/context.h"
#include "../base/colls.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over the communicator: allocate this rank's IPC buffer
 * (QCOLL_IPC_BYTES), exchange handles through the bootstrap, open the peers'
 * (de-duplicated), verify every pair by writing and reading back.  Sets
 * comm->cuda.  When IPC cannot serve (pairs failed, ranks on several hosts)
 * comm->cuda is still set but reports !qcoll__cuda_ipc_usable(). */
qcoll_status_t qcoll__cuda_comm_init(qcoll__ctx_t *comm);
void qcoll__cuda_comm_destroy(qcoll__ctx_t *comm);
bool qcoll__cuda_ipc_usable(qcoll__ctx_t *comm);
/* The most of the communicator's ranks that any one GPU holds (agreed: the
 * same answer on every rank); 1 when no GPU is shared, 0 when IPC is not
 * usable. */
int qcoll__cuda_ipc_most_ranks_per_gpu(qcoll__ctx_t *comm);

/* All-reduce of GPU buffers through the IPC kernels.  algo is ONESHOT,
 * TWOSHOT or AUTO (size-based choice); quant is resolved (never DEFAULT). */
qcoll_status_t qcoll__cuda_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream, qcoll_algo_t algo,
                                      qcoll_quant_t quant);

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

/* Error raised by a kernel whose peer never arrived (device-side deadline). */
qcoll_status_t qcoll__cuda_poll_async_error(qcoll__ctx_t *comm);

/* Make every device-side wait of this communicator's kernels (running or
 * later) stop and report QCOLL_ERR_ABORTED; peers' kernels then stop with
 * QCOLL_ERR_PEER_FAILURE.  A plain store to host-mapped memory: safe from
 * any thread, never blocks, no CUDA call. */
void qcoll__cuda_signal_abort(qcoll__ctx_t *comm);

#ifdef __cplusplus
}
#endif

#endif
