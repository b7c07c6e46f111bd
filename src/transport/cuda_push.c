/*
 * Host side of the push one-shot all-reduce (cuda_push.h).  Everything
 * that can be decided once is decided at init.
 */
#ifdef QCOLL_HAVE_CUDA /* the whole file: CUDA builds only */

#include "cuda_push.h"

#include <string.h>

#include "../base/common.h"

cudaError_t qcoll__push_area_init(char *area, size_t area_bytes,
                                  cudaStream_t s) {
  if (area_bytes == 0) return cudaSuccess;
  cudaError_t err = cudaMemsetAsync(area, 0, QCOLL_PUSH_CONTROL_BYTES, s);
  if (err != cudaSuccess) return err;
  return cudaMemsetAsync(area + QCOLL_PUSH_CONTROL_BYTES,
                         QCOLL_PUSH_SENTINEL_BYTE,
                         area_bytes - QCOLL_PUSH_CONTROL_BYTES, s);
}

cudaError_t qcoll__push_resident_blocks(int device, int *blocks) {
  int sms = 0, per_sm = 0;
  cudaError_t err =
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = qcoll__cuda_push_blocks_per_sm(&per_sm);
  if (err == cudaSuccess) *blocks = sms * per_sm;
  return err;
}

bool qcoll__cuda_pdl_enabled(int device, bool wanted) {
  if (!wanted) return false;
  int major = 0, driver = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess ||
      cudaDriverGetVersion(&driver) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 9 && driver >= 12030;
}

qcoll__push_view_t qcoll__push_view_make(const qcoll__ipc_view_t *ipc,
                                         size_t area_offset,
                                         size_t slot_bytes,
                                         int block_packs) {
  qcoll__push_view_t v;
  memset(&v, 0, sizeof v);
  v.ipc = *ipc;
  v.area_offset = area_offset;
  v.slot_bytes = slot_bytes;
  v.block_packs = block_packs;
  return v;
}

bool qcoll__push_fits(const qcoll__push_view_t *view, size_t count,
                      qcoll_dtype_t dtype) {
  return view->slot_bytes && count <= qcoll__cuda_push_chunk_elems(view, dtype);
}


#endif
