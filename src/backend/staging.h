/*
 * Host staging of GPU buffers (the "host" path for GPU collectives): where
 * a call's send and receive bytes go in host memory.  Buffers that overlap
 * (the in-place layouts: the same pointer, or an all-gather's or
 * reduce-scatter's block inside the other buffer) share one host block at
 * the same relative offsets, so the host back end sees the layout the
 * caller passed; others get a block each.
 */
#ifndef QCOLL_CORE_STAGING_H
#define QCOLL_CORE_STAGING_H

#include <stddef.h>

typedef struct qcoll__staging {
  size_t block_bytes[2]; /* bytes to allocate: block 0 and block 1 */
  int send_block, recv_block; /* which block (0 or 1); -1 when no bytes;
                                 both 0 when the buffers overlap */
  size_t send_offset, recv_offset; /* within their block */
} qcoll__staging_t;

/* The layout for send_bytes read at send and recv_bytes written at recv
 * (either may be 0, its pointer then unused). */
qcoll__staging_t qcoll__staging_layout(const void *send, size_t send_bytes,
                                       const void *recv, size_t recv_bytes);

#endif
