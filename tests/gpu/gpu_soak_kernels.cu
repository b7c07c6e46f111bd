/*
 * The fill and check kernels of the GPU soak.  Both read the replay index
 * from device memory, so a captured graph fill -> all-reduce -> check ->
 * bump stays the same graph while every replay reduces new values.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu_soak.h"

namespace {

__device__ void store(void *buf, size_t i, float v, qcoll_dtype_t dtype) {
  if (dtype == QCOLL_BF16)
    static_cast<__nv_bfloat16 *>(buf)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(buf)[i] = v;
}

__device__ float load(const void *buf, size_t i, qcoll_dtype_t dtype) {
  if (dtype == QCOLL_BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(buf)[i]);
  return static_cast<const float *>(buf)[i];
}

__global__ void fill_kernel(void *send, size_t count, qcoll_dtype_t dtype,
                            uint32_t salt, int rank, const unsigned *replay) {
  uint32_t k = *replay;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    store(send, i, (float)soak_input(salt, rank, (uint32_t)i, k), dtype);
}

__global__ void check_kernel(const void *recv, size_t count,
                             qcoll_dtype_t dtype, uint32_t salt, int nranks,
                             const unsigned *replay, gt_check_state_t *state) {
  uint32_t k = *replay;
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x) {
    float want = soak_expected(salt, nranks, (uint32_t)i, k);
    float got = load(recv, i, dtype);
    if (got == want) continue;
    bad++;
    if (atomicCAS(&state->has_first, 0u, 1u) == 0u) {
      state->first_iter = k;
      state->first_index_lo = (unsigned)i;
      state->first_expected = want;
      state->first_got = got;
    }
  }
  if (bad) atomicAdd(&state->bad, bad);
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&state->checks, 1ull);
}

unsigned grid_for(size_t n) {
  size_t g = (n + 255) / 256;
  return (unsigned)(g < 1 ? 1 : (g > 1024 ? 1024 : g));
}

}  // namespace

extern "C" cudaError_t soak_fill_launch(void *send, size_t count,
                                        qcoll_dtype_t dtype, uint32_t salt,
                                        int rank, const unsigned *replay,
                                        cudaStream_t stream) {
  fill_kernel<<<grid_for(count), 256, 0, stream>>>(send, count, dtype, salt,
                                                   rank, replay);
  return cudaGetLastError();
}

extern "C" cudaError_t soak_check_launch(const void *recv, size_t count,
                                         qcoll_dtype_t dtype, uint32_t salt,
                                         int nranks, const unsigned *replay,
                                         gt_check_state_t *state,
                                         cudaStream_t stream) {
  check_kernel<<<grid_for(count), 256, 0, stream>>>(recv, count, dtype, salt,
                                                    nranks, replay, state);
  return cudaGetLastError();
}
