/*
 * Init-time check of a peer mapping.  Drivers have reported peer access
 * that silently dropped writes, so before a communicator trusts a mapping
 * each rank writes a pattern through it with ordinary SM stores (the path
 * the all-reduce kernels use), reads it back through the same mapping, and
 * the owner later checks what arrived in its own memory.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "launch.h"

namespace {

__global__ void probe_kernel(uint32_t *dst, uint32_t seed,
                             unsigned *mismatches) {
  const uint32_t i = threadIdx.x;
  const uint32_t word = qcoll__ipc_probe_word(seed, i);
  volatile uint32_t *slot = dst + i;
  *slot = word;
  __threadfence_system();
  __syncthreads();
  if (*slot != word) atomicAdd(mismatches, 1u);
}

}  // namespace

extern "C" cudaError_t qcoll__cuda_ipc_probe_launch(uint32_t *dst,
                                                    uint32_t seed,
                                                    unsigned *mismatches,
                                                    cudaStream_t stream) {
  void *args[] = {&dst, &seed, &mismatches};
  return cudaLaunchKernel(reinterpret_cast<const void *>(probe_kernel), dim3(1),
                          dim3(QCOLL_IPC_PROBE_WORDS), args, 0, stream);
}
