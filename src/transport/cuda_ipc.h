/*
 * CUDA IPC transport of a communicator: the IPC buffers of the ranks of
 * this host, their mapping and verification, the agreement on what they
 * can do, and the host-mapped error and abort words of their kernels.  The
 * launches are the ipc backend's (backend/cuda_ipc_launch.h).  Called
 * under the device guard.
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
