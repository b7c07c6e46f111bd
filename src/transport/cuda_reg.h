/*
 * Buffer registration of the CUDA IPC transport (CUDA builds only): a
 * rank's registered allocations are mapped by every peer, and a table in
 * each rank's device memory (launch.h: reg_layout.h) tells the all-reduce
 * kernels where every rank's registered buffers lie in this process, so
 * they read peers' user buffers with no copy-in (allreduce.cu).
 *
 * Registration and deregistration are collective: every rank of the
 * communicator makes the same calls in the same order (each with its own
 * buffers, or none), and every rank takes part in the exchange even after
 * a local failure, so the ranks never wait for one another in vain.
 * Called under the device guard.
 */
#ifndef QCOLL_TRANSPORT_CUDA_REG_H
#define QCOLL_TRANSPORT_CUDA_REG_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/context.h"
#include "../coll/cuda/reg_layout.h"
#include "reg_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At IPC init: the device table (empty) and the view's registry fields. */
qcoll_status_t qcoll__cuda_reg_init(qcoll__ctx_t *comm);
/* At destroy, after the device is idle: every peer mapping closed. */
void qcoll__cuda_reg_destroy(qcoll__ctx_t *comm);

/* Collective: register the allocations that hold bufs[i] (bytes[i] long;
 * NULL: nothing), nbufs per rank, the same nbufs on every rank.  Peers
 * open and map each new allocation once; it becomes usable (its rank's own
 * table entry valid) only when every rank mapped it.  out[i] says what
 * became of bufs[i].  automatic: registered by graph capture (kept until
 * the communicator is destroyed or the allocation is replaced; a buffer
 * that cannot be registered is staged, QCOLL_OK).  Otherwise the first
 * local refusal is returned, naming what was wrong; peers are unaffected. */
qcoll_status_t qcoll__cuda_reg_register(qcoll__ctx_t *comm,
                                        const void *const *bufs,
                                        const size_t *bytes, int nbufs,
                                        bool automatic,
                                        qcoll__reg_result_t *out);

/* Collective: drop this rank's explicit registration `reg` (NULL, or one
 * no longer registered: nothing, but the call still takes part).  The
 * device is synchronised and every rank waits for every other before the
 * mappings are closed, so no kernel reads the buffer any more when this
 * returns; a graph captured with it stages it when replayed. */
qcoll_status_t qcoll__cuda_reg_deregister(qcoll__ctx_t *comm,
                                          const qcoll__reg_result_t *reg);

/* The kernels' references for one launch's buffers (`bytes` each): false
 * when no rank has registered anything (launch without descriptors).
 * captured: the call is being captured (and its buffers were registered
 * just now); eager calls use explicit registrations only. */
bool qcoll__cuda_reg_refs(qcoll__ctx_t *comm, const void *send, void *recv,
                          size_t bytes, bool captured,
                          qcoll__ipc_reg_ref_t *send_ref,
                          qcoll__ipc_reg_ref_t *recv_ref);

#ifdef __cplusplus
}
#endif

#endif
