/*
 * Whole-buffer encode and decode kernels for the quantisation formats of
 * ../codec.h.
 *
 * Algorithm: the buffer is ceil(n / 32) independent groups (the last one
 * zero-padded).  A grid-stride loop hands out groups either to warps (lane i
 * holds value i; the warp max of the |x| bit patterns is the scale; codes
 * are packed with shuffles, see "One group per warp" in codec.h) or to
 * single threads (qcoll__codec_encode_group / _decode_group_n).  Both call
 * the same header functions as the host, so the output is the CPU
 * reference bit for bit.
 *
 * Synchronisation: none beyond the stream; groups never share bytes.
 *
 * Requirements: compiled without -ftz=true / -use_fast_math (tiny groups
 * depend on subnormals; codec.h's arithmetic uses __fmul_rn/__fdiv_rn so
 * contraction and approximate division cannot change it); block sizes a
 * multiple of 32 (whole warps, every lane of a warp takes part in its
 * group's shuffles).
 */
#include <cuda_runtime.h>

#include "../codec.h"
#include "codec_launch.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

template <int F>
__global__ void encode_warp_kernel(const float *__restrict__ in, size_t n,
                                   uint8_t *__restrict__ out) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const int lane = threadIdx.x & 31;
  const size_t groups = qcoll__codec_groups(n);
  const size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  for (size_t g = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
       g < groups; g += warps) {
    const size_t i = g * QCOLL_CODEC_GROUP + lane;
    const float x = i < n ? in[i] : 0.0f;
    qcoll__codec_warp_encode(fmt, x, lane, out + g * gb);
  }
}

template <int F>
__global__ void decode_warp_kernel(const uint8_t *__restrict__ in, size_t n,
                                   float *__restrict__ out) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const int lane = threadIdx.x & 31;
  const size_t groups = qcoll__codec_groups(n);
  const size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  for (size_t g = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
       g < groups; g += warps) {
    const float y = qcoll__codec_warp_decode(fmt, in + g * gb, lane);
    const size_t i = g * QCOLL_CODEC_GROUP + lane;
    if (i < n) out[i] = y;
  }
}

template <int F>
__global__ void encode_thread_kernel(const float *__restrict__ in, size_t n,
                                     uint8_t *__restrict__ out) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const size_t groups = qcoll__codec_groups(n);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
       g += (size_t)gridDim.x * blockDim.x) {
    float x[QCOLL_CODEC_GROUP];
    for (int k = 0; k < QCOLL_CODEC_GROUP; k++) {
      const size_t i = g * QCOLL_CODEC_GROUP + k;
      x[k] = i < n ? in[i] : 0.0f;
    }
    qcoll__codec_encode_group(fmt, x, out + g * gb);
  }
}

template <int F>
__global__ void decode_thread_kernel(const uint8_t *__restrict__ in, size_t n,
                                     float *__restrict__ out) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const size_t groups = qcoll__codec_groups(n);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
       g += (size_t)gridDim.x * blockDim.x) {
    const size_t left = n - g * QCOLL_CODEC_GROUP;
    qcoll__codec_decode_group_n(
        fmt, in + g * gb, out + g * QCOLL_CODEC_GROUP,
        left < QCOLL_CODEC_GROUP ? (int)left : QCOLL_CODEC_GROUP);
  }
}

int blocks_for(size_t workers) {
  size_t b = (workers + kThreads - 1) / kThreads;
  return (int)(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

template <int F>
cudaError_t launch_encode(qcoll__codec_cuda_variant_t variant, const float *in,
                          size_t n, uint8_t *out, cudaStream_t stream) {
  const size_t groups = qcoll__codec_groups(n);
  if (variant == QCOLL_CODEC_CUDA_WARP)
    encode_warp_kernel<F>
        <<<blocks_for(groups * 32), kThreads, 0, stream>>>(in, n, out);
  else
    encode_thread_kernel<F>
        <<<blocks_for(groups), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

template <int F>
cudaError_t launch_decode(qcoll__codec_cuda_variant_t variant,
                          const uint8_t *in, size_t n, float *out,
                          cudaStream_t stream) {
  const size_t groups = qcoll__codec_groups(n);
  if (variant == QCOLL_CODEC_CUDA_WARP)
    decode_warp_kernel<F>
        <<<blocks_for(groups * 32), kThreads, 0, stream>>>(in, n, out);
  else
    decode_thread_kernel<F>
        <<<blocks_for(groups), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

}  // namespace

extern "C" int qcoll__codec_cuda_encode(qcoll_quant_t fmt,
                                        qcoll__codec_cuda_variant_t variant,
                                        const float *in, size_t n, uint8_t *out,
                                        void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (n == 0 && qcoll__codec_valid(fmt)) return cudaSuccess;
  switch (fmt) {
    case QCOLL_QUANT_FP8:
      return launch_encode<QCOLL_QUANT_FP8>(variant, in, n, out, s);
    case QCOLL_QUANT_INT8:
      return launch_encode<QCOLL_QUANT_INT8>(variant, in, n, out, s);
    case QCOLL_QUANT_INT6:
      return launch_encode<QCOLL_QUANT_INT6>(variant, in, n, out, s);
    case QCOLL_QUANT_INT4:
      return launch_encode<QCOLL_QUANT_INT4>(variant, in, n, out, s);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" int qcoll__codec_cuda_decode(qcoll_quant_t fmt,
                                        qcoll__codec_cuda_variant_t variant,
                                        const uint8_t *in, size_t n, float *out,
                                        void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (n == 0 && qcoll__codec_valid(fmt)) return cudaSuccess;
  switch (fmt) {
    case QCOLL_QUANT_FP8:
      return launch_decode<QCOLL_QUANT_FP8>(variant, in, n, out, s);
    case QCOLL_QUANT_INT8:
      return launch_decode<QCOLL_QUANT_INT8>(variant, in, n, out, s);
    case QCOLL_QUANT_INT6:
      return launch_decode<QCOLL_QUANT_INT6>(variant, in, n, out, s);
    case QCOLL_QUANT_INT4:
      return launch_decode<QCOLL_QUANT_INT4>(variant, in, n, out, s);
    default: return cudaErrorInvalidValue;
  }
}
