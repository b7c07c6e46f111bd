/*
 * GPU side of a communicator: the CUDA IPC buffers of the ranks of this host
 * and the collectives that run on them.  Everything here is called by core
 * under the device guard, after argument validation (buffers and stream are
 * on comm->device).
 */
#ifndef QCOLL_TRANSPORT_CUDA_IPC_H
#define QCOLL_TRANSPORT_CUDA_IPC_H

#include "../core/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over the communicator: allocate this rank's IPC buffer
 * (QCOLL_IPC_BYTES), exchange handles through the bootstrap, open the peers'
 * (de-duplicated), verify every pair by writing and reading back.  Sets
 * comm->cuda.  When IPC cannot serve (pairs failed, ranks on several hosts)
 * comm->cuda is still set but reports !qcoll__cuda_ipc_usable(). */
qcoll_status_t qcoll__cuda_comm_init(qcoll_comm_t comm);
void qcoll__cuda_comm_destroy(qcoll_comm_t comm);
bool qcoll__cuda_ipc_usable(qcoll_comm_t comm);

/* All-reduce of GPU buffers through the IPC kernels.  algo is ONESHOT,
 * TWOSHOT or AUTO (size-based choice); quant is resolved (never DEFAULT). */
qcoll_status_t qcoll__cuda_all_reduce(qcoll_comm_t comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream, qcoll_algo_t algo,
                                      qcoll_quant_t quant);

/* Error raised by a kernel whose peer never arrived (device-side deadline). */
qcoll_status_t qcoll__cuda_poll_async_error(qcoll_comm_t comm);

/* Make every device-side wait of this communicator's kernels (running or
 * later) stop and report QCOLL_ERR_ABORTED; peers' kernels then stop with
 * QCOLL_ERR_PEER_FAILURE.  A plain store to host-mapped memory: safe from
 * any thread, never blocks, no CUDA call. */
void qcoll__cuda_signal_abort(qcoll_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif
