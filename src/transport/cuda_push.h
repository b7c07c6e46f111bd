/*
 * Host side of the push one-shot all-reduce (src/coll/cuda/allreduce_push.cu):
 * the size of its area in the IPC allocation, filling it at init, the view
 * its kernel gets, and the all-reduce entry the transport dispatches to.
 * Called by cuda_ipc.c under the device guard.
 */
#ifndef QCOLL_TRANSPORT_CUDA_PUSH_H
#define QCOLL_TRANSPORT_CUDA_PUSH_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "../coll/cuda/push_launch.h"
#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill the push area at `area` (area_bytes long): control zeroed, every
 * slot the sentinel.  Enqueued on s; the caller synchronises. */
cudaError_t qcoll__push_area_init(char *area, size_t area_bytes,
                                  cudaStream_t s);

/* All-reduce blocks of the push kernel this device keeps resident. */
cudaError_t qcoll__push_resident_blocks(int device, int *blocks);

/* Whether the IPC kernels launch with programmatic dependent launch on
 * `device`: `wanted` (QCOLL_PDL) and the device (compute capability 9.0 or
 * later) and the driver (CUDA 12.3 or later, needed to capture it into
 * graphs) support it. */
bool qcoll__cuda_pdl_enabled(int device, bool wanted);

/* The push view from the communicator's IPC view (its pdl included). */
qcoll__push_view_t qcoll__push_view_make(const qcoll__ipc_view_t *ipc,
                                         size_t area_offset, size_t slot_bytes,
                                         int block_packs);

/* Whether the push kernel serves a one-shot of count elements: it is on
 * and the message fits one slot.  Larger one-shots go to the flag-barrier
 * kernel, which was faster from 1 MiB on an H200
 * (docs/results/2026-12-h200-push-oneshot.md). */
bool qcoll__push_fits(const qcoll__push_view_t *view, size_t count,
                      qcoll_dtype_t dtype);

#ifdef __cplusplus
}
#endif

#endif
