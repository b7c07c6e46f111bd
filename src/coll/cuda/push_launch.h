/*
 * Launcher of the push one-shot all-reduce (allreduce_push.cu), callable
 * from C, and the layout of its area, which host code (the transport) and
 * the kernel agree on.
 *
 * The push area of a rank lies at the same offset `area_offset` of every
 * rank's IPC allocation (after the send/recv inboxes), nothing in it
 * depends on the message or the grid:
 *
 *   [0, 256)        control, local to its owner, zeroed at init:
 *                   [0] blocks of the running launch that have read [1],
 *                   [1] launches completed (its parity picks the buffer)
 *   [4 KiB, ...)    QCOLL_PUSH_BUFFERS buffers, each of nranks slots of
 *                   slot_bytes; slot s of buffer k receives rank s's input
 *                   (the owner's own slot stays unused).  Every byte is
 *                   0xff at init and again after each read: every 32-bit
 *                   word holds QCOLL_PUSH_SENTINEL unless it holds data.
 */
#ifndef QCOLL_COLL_CUDA_PUSH_LAUNCH_H
#define QCOLL_COLL_CUDA_PUSH_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Buffers the push one-shot rotates through (allreduce_push.cu proves two
 * suffice). */
#define QCOLL_PUSH_BUFFERS 2
/* What an empty word holds: a negative NaN with every payload bit set, in
 * f32, and two such NaNs in f16 and bf16.  Inputs are sent with every NaN
 * made the positive quiet NaN, so no sent word ever holds it. */
#define QCOLL_PUSH_SENTINEL 0xffffffffu
#define QCOLL_PUSH_SENTINEL_BYTE 0xff
#define QCOLL_PUSH_CONTROL_BYTES 4096u
/* Slots are multiples of this (16-byte packs, page-aligned slots). */
#define QCOLL_PUSH_SLOT_ALIGN 4096u
/* Phase reported in the error word by a push one-shot waiting for data. */
#define QCOLL_IPC_PHASE_PUSH 10

/* Slot bytes for a requested size: rounded down to QCOLL_PUSH_SLOT_ALIGN;
 * 0 (the push one-shot is off) below it. */
static inline size_t qcoll__push_slot_bytes(size_t requested) {
  return requested / QCOLL_PUSH_SLOT_ALIGN * QCOLL_PUSH_SLOT_ALIGN;
}

/* Bytes of a push area for nranks slots of slot_bytes (0: none). */
static inline size_t qcoll__push_area_bytes(int nranks, size_t slot_bytes) {
  if (slot_bytes == 0) return 0;
  return QCOLL_PUSH_CONTROL_BYTES +
         (size_t)QCOLL_PUSH_BUFFERS * (size_t)nranks * slot_bytes;
}

/* Where the push area starts in an allocation whose first `used` bytes
 * hold the rest (rounded up to a page). */
static inline size_t qcoll__push_area_offset(size_t used) {
  return (used + QCOLL_PUSH_SLOT_ALIGN - 1) / QCOLL_PUSH_SLOT_ALIGN *
         QCOLL_PUSH_SLOT_ALIGN;
}

/* Offset in a push area of slot `sender` of buffer `buffer`. */
static inline QCOLL_IPC_HD size_t qcoll__push_slot_offset(int nranks,
                                                          size_t slot_bytes,
                                                          unsigned buffer,
                                                          int sender) {
  return QCOLL_PUSH_CONTROL_BYTES +
         ((size_t)buffer * (size_t)nranks + (size_t)sender) * slot_bytes;
}

/* What the push kernel needs: the IPC view (every rank's buffer, error and
 * abort words, deadline, grid limit, whether to launch with programmatic
 * dependent launch) and where the push areas are.  Passed by value;
 * nothing in it changes from one call to the next. */
typedef struct qcoll__push_view {
  qcoll__ipc_view_t ipc;
  size_t area_offset; /* of the push area, in every rank's allocation */
  size_t slot_bytes;  /* 0: the push one-shot is off */
  int block_packs;    /* 16-byte packs per block (1..512), the same on every
                         rank; 0: one per thread */
} qcoll__push_view_t;

/* Largest number of elements one launch handles (one slot). */
size_t qcoll__cuda_push_chunk_elems(const qcoll__push_view_t *view,
                                    qcoll_dtype_t dtype);

/* Grid of one launch of `count` elements (the same on every rank). */
int qcoll__cuda_push_grid(const qcoll__push_view_t *view, size_t count,
                          qcoll_dtype_t dtype);

/* Enqueue one push all-reduce of count <= chunk_elems elements (f16, bf16,
 * f32 with sum, min, max) on stream.  Every rank makes the same call in the
 * same order; unlike the flag kernels it needs no epoch shared with them,
 * so it interleaves freely with every other kernel. */
cudaError_t qcoll__cuda_push_launch(const qcoll__push_view_t *view,
                                    const void *sendbuf, void *recvbuf,
                                    size_t count, qcoll_dtype_t dtype,
                                    qcoll_op_t op, cudaStream_t stream);

/* Smallest number of push blocks per SM that the current device keeps
 * resident (of every dtype/op variant). */
cudaError_t qcoll__cuda_push_blocks_per_sm(int *per_sm);

#ifdef __cplusplus
}
#endif

#endif
