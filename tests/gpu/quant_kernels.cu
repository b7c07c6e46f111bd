/*
 * Device helpers of the quantised all-reduce GPU tests: fill an input with
 * quant_gen.h's values for a seed read from a device counter (so a graph
 * replay gets new inputs), and save each replay's output to its own slot
 * of a history buffer (so the host can check every replay afterwards).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "quant_check.h"
#include "quant_gen.h"

namespace {

__global__ void fill_kernel(void *buf, size_t n, qcoll_dtype_t dtype, int rank,
                            uint32_t seed, const unsigned *counter) {
  const uint32_t s = seed + (counter ? *counter : 0u);
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float v = qg_value(rank, i, s);
    switch (dtype) {
      case QCOLL_F16: static_cast<__half *>(buf)[i] = __float2half_rn(v); break;
      case QCOLL_BF16:
        static_cast<__nv_bfloat16 *>(buf)[i] = __float2bfloat16_rn(v);
        break;
      default: static_cast<float *>(buf)[i] = v; break;
    }
  }
}

__global__ void save_kernel(unsigned char *history, const unsigned char *src,
                            size_t bytes, const unsigned *counter,
                            unsigned slots) {
  unsigned char *dst = history + (size_t)(*counter % slots) * bytes;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

int blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (int)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

}  // namespace

extern "C" cudaError_t qt_fill_launch(void *buf, size_t n, qcoll_dtype_t dtype,
                                      int rank, uint32_t seed,
                                      const unsigned *counter,
                                      cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), 256, 0, stream>>>(buf, n, dtype, rank, seed,
                                                 counter);
  return cudaGetLastError();
}

extern "C" cudaError_t qt_save_launch(void *history, const void *src,
                                      size_t bytes, const unsigned *counter,
                                      unsigned slots, cudaStream_t stream) {
  save_kernel<<<blocks_for(bytes), 256, 0, stream>>>(
      static_cast<unsigned char *>(history),
      static_cast<const unsigned char *>(src), bytes, counter, slots);
  return cudaGetLastError();
}
