/*
 * Tiny kernels the GPU tests enqueue around collectives: fill an input with
 * a value, check an output against a value, bump a counter.  The value can
 * come from a counter in device memory, so a CUDA graph that contains
 * fill -> all-reduce -> check -> bump sees a new value on every replay
 * without any host work between replays.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu_test.h"

namespace {

__device__ float value_of(float value, const unsigned *counter) {
  return counter ? (float)(*counter % 32u + 1u) : value;
}

__device__ void store(void *buf, size_t i, float v, qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: static_cast<__half *>(buf)[i] = __float2half_rn(v); break;
    case QCOLL_BF16:
      static_cast<__nv_bfloat16 *>(buf)[i] = __float2bfloat16_rn(v);
      break;
    default: static_cast<float *>(buf)[i] = v; break;
  }
}

__device__ float load(const void *buf, size_t i, qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: return __half2float(static_cast<const __half *>(buf)[i]);
    case QCOLL_BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16 *>(buf)[i]);
    default: return static_cast<const float *>(buf)[i];
  }
}

__global__ void fill_kernel(void *buf, size_t n, qcoll_dtype_t dtype,
                            float value, const unsigned *counter) {
  float v = value_of(value, counter);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    store(buf, i, v, dtype);
}

__global__ void check_kernel(const void *buf, size_t n, qcoll_dtype_t dtype,
                             float scale, float value, const unsigned *counter,
                             gt_check_state_t *state) {
  float want = scale * value_of(value, counter);
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float got = load(buf, i, dtype);
    if (got == want) continue;
    bad++;
    if (atomicCAS(&state->has_first, 0u, 1u) == 0u) {
      state->first_iter = counter ? *counter : 0u;
      state->first_index_lo = (unsigned)i;
      state->first_expected = want;
      state->first_got = got;
    }
  }
  if (bad) atomicAdd(&state->bad, bad);
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&state->checks, 1ull);
}

__global__ void bump_kernel(unsigned *counter) {
  *counter += 1u;
}

unsigned grid_for(size_t n) {
  size_t g = (n + 255) / 256;
  return (unsigned)(g < 1 ? 1 : (g > 1024 ? 1024 : g));
}

}  // namespace

extern "C" cudaError_t gt_fill_launch(void *buf, size_t n, qcoll_dtype_t dtype,
                                      float value, const unsigned *counter,
                                      cudaStream_t stream) {
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(buf, n, dtype, value, counter);
  return cudaGetLastError();
}

extern "C" cudaError_t gt_check_launch(const void *buf, size_t n,
                                       qcoll_dtype_t dtype, float scale,
                                       float value, const unsigned *counter,
                                       gt_check_state_t *state,
                                       cudaStream_t stream) {
  check_kernel<<<grid_for(n), 256, 0, stream>>>(buf, n, dtype, scale, value,
                                                counter, state);
  return cudaGetLastError();
}

extern "C" cudaError_t gt_bump_launch(unsigned *counter, cudaStream_t stream) {
  bump_kernel<<<1, 1, 0, stream>>>(counter);
  return cudaGetLastError();
}
