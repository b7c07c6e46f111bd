/*
 * Host staging layout of GPU buffers: see staging.h.
 */
#include "staging.h"

#include <stdbool.h>
#include <stdint.h>

qcoll__staging_t qcoll__staging_layout(const void *send, size_t send_bytes,
                                       const void *recv, size_t recv_bytes) {
  qcoll__staging_t l = {.send_block = -1, .recv_block = -1};
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  bool overlap = send_bytes && recv_bytes && s < r + recv_bytes &&
                 r < s + send_bytes;
  if (overlap) {
    uintptr_t lo = s < r ? s : r;
    uintptr_t send_end = s + send_bytes, recv_end = r + recv_bytes;
    uintptr_t hi = send_end > recv_end ? send_end : recv_end;
    l.block_bytes[0] = (size_t)(hi - lo);
    l.send_block = l.recv_block = 0;
    l.send_offset = (size_t)(s - lo);
    l.recv_offset = (size_t)(r - lo);
    return l;
  }
  if (send_bytes) {
    l.send_block = 0;
    l.block_bytes[0] = send_bytes;
  }
  if (recv_bytes) {
    l.recv_block = 1;
    l.block_bytes[1] = recv_bytes;
  }
  return l;
}
