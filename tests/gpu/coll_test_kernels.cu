/*
 * Kernels of the collectives GPU test (gpu_collectives.c): a spin that
 * holds a stream for a while, and a time stamp, both read from the GPU's
 * global timer (shared by every process using that GPU), so a test can
 * check the order in which work on different ranks' streams ran.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "coll_test.h"

namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns, unsigned long long *end) {
  unsigned long long start = now_ns();
  while (now_ns() - start < ns) __nanosleep(1000);
  *end = now_ns();
}

__global__ void stamp_kernel(unsigned long long *stamp) {
  *stamp = now_ns();
}

}  // namespace

extern "C" cudaError_t ct_spin_launch(unsigned long long ns,
                                      unsigned long long *end,
                                      cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(ns, end);
  return cudaGetLastError();
}

extern "C" cudaError_t ct_stamp_launch(unsigned long long *stamp,
                                       cudaStream_t stream) {
  stamp_kernel<<<1, 1, 0, stream>>>(stamp);
  return cudaGetLastError();
}
