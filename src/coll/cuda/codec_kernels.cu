/*
 * Whole-buffer encode and decode kernels for the quantisation formats of
 * ../codec.h, in three variants (codec_launch.h); all call the same header
 * functions as the host, so every one produces the CPU reference bit for
 * bit.  The buffer is ceil(n / 32) independent groups (the last one
 * zero-padded); grid-stride loops hand them out.
 *
 * Algorithm of the fast variant, "segment" (QCOLL_CODEC_CUDA_SEGMENT; "Four
 * elements per lane" in codec.h):
 *  - A warp is four segments of eight lanes; a segment holds one group,
 *    lane k of it elements 4k..4k+3 (one 16-byte load: a warp reads four
 *    consecutive groups, 512 bytes, per load instruction).
 *  - A warp step covers kEncUnroll (encode) or kDecUnroll (decode) such
 *    sets of four groups, 16 or 32 consecutive groups: every lane issues
 *    all its loads first (encode: 64 bytes per lane) before it needs the
 *    first one.  Warps take steps in a grid-stride loop; the grid gives
 *    every warp one step, up to kWaves rounds of the blocks the SMs hold
 *    at once.
 *  - Encode (codec.h's segment_encode_sets over the step's sets): amax =
 *    max of the lane's four abs_bits, reduced and scattered over the
 *    segment; plain warps derive each scale once per lane pair (a Newton
 *    reciprocal, no division) and share it, others derive every scale in
 *    every lane (enc_scale); the lane encodes its four values, packs them
 *    (pack_quad) and writes its share_bytes(fmt, k) = 4 / 3 / 2 bytes at
 *    group + 4 + share_offset(fmt, k) (INT3: even lanes write 3 bytes,
 *    their quad and their odd neighbour's, taken by one shuffle); lane 0 of
 *    the segment writes the scale.  No byte is written by two lanes.
 *  - Decode: every lane reads the group's scale word and its own code
 *    bytes (INT3: the pair's 3, its quad share_shift bits up), derives
 *    the scale and decodes four values per group (segment_decode_sets:
 *    plain_decode in plain warps, else dec_scale and decode_lane) and
 *    writes them with one 16-byte store.
 *  - Steps wholly inside n run without bounds checks; the last step checks
 *    every group (g < groups: no bytes past the last group) and every
 *    value (index < n: padding reads 0, decoding writes only n values).
 *  - Vector accesses (float4 values, 32/16-bit codes and scale words; INT6's
 *    3 bytes as a 16-bit and an 8-bit access) need the f32 buffer 16-byte
 *    and the encoded buffer 4-byte aligned (groups are multiples of 4
 *    bytes, so every scale is then aligned too); the launcher checks both
 *    pointers and otherwise runs the same kernel with scalar loads and byte
 *    accesses (kAligned = false).
 * The other variants: "warp" (one group per warp, lane i holds value i,
 * warp max of the |x| bit patterns, codes packed with shuffles: "One group
 * per warp" in codec.h) and "thread" (qcoll__codec_encode_group /
 * _decode_group_n in one thread).
 *
 * Synchronisation: none beyond the stream; groups never share bytes, and
 * inside a group every byte has one writer.  The warp and segment
 * variants exchange values with full-mask shuffles, so every lane of a
 * warp runs the same loop trips (the loop bounds are per warp; lanes past
 * the end take part with zeros and store nothing).
 *
 * Requirements: compiled without -ftz=true / -use_fast_math (tiny groups
 * depend on subnormals; codec.h's arithmetic uses __fmul_rn/__fmaf_rn so
 * contraction cannot change it); block sizes a
 * multiple of 32 (whole warps); little-endian words (the scale and codes
 * are read and written as words in the segment variant, as codec.h
 * allows).
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

/* ---- segment variant: eight lanes per group ------------------------------ */

constexpr int kSegLanes = QCOLL_CODEC_SEG_LANES;      /* lanes per group */
constexpr int kSegsPerWarp = 32 / kSegLanes;          /* groups per warp load */
constexpr int kLaneValues = QCOLL_CODEC_LANE_VALUES; /* 4: a float4 */
/* Sets of four groups per warp step: 16-byte loads each lane has in flight
 * (encode), or code and scale words (decode, which reads at most 36 bytes
 * per group against encode's 128, so it takes more groups per step). */
constexpr int kEncUnroll = 4;
constexpr int kDecUnroll = 8;
/* Grid: at most kWaves rounds of the blocks the SMs hold at once.  Many
 * rounds beat a grid that just fills the SMs: on an H200 (256 MiB of f32)
 * one round left FP8 at 0.78 of the copy bandwidth, 16 rounds (about one
 * step per warp) gave 0.88 and INT8/6/4 0.91-0.93: blocks starting as
 * others retire keep more loads in flight than warps going round a loop.
 * The cap keeps very large buffers to a few steps per warp instead of
 * millions of blocks. */
constexpr int kWaves = 16;

static_assert(kLaneValues == 4, "a lane holds one float4 and one quad");

/* The four values at in + e (zeros past n when kChecked).  kAligned: in is
 * 16-byte aligned, so in + e (e a multiple of 4) is too. */
template <bool kAligned, bool kChecked>
__device__ __forceinline__ void load_values(const float *__restrict__ in,
                                            size_t e, size_t n,
                                            float x[kLaneValues]) {
  if (kAligned && (!kChecked || e + kLaneValues <= n)) {
    const float4 v = *reinterpret_cast<const float4 *>(in + e);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else {
    for (int j = 0; j < kLaneValues; j++)
      x[j] = !kChecked || e + j < n ? in[e + j] : 0.0f;
  }
}

/* Store the four values at out + e (only those below n when kChecked). */
template <bool kAligned, bool kChecked>
__device__ __forceinline__ void store_values(float *__restrict__ out, size_t e,
                                             size_t n,
                                             const float y[kLaneValues]) {
  if (kAligned && (!kChecked || e + kLaneValues <= n)) {
    *reinterpret_cast<float4 *>(out + e) = make_float4(y[0], y[1], y[2], y[3]);
  } else {
    for (int j = 0; j < kLaneValues; j++)
      if (!kChecked || e + j < n) out[e + j] = y[j];
  }
}

/* The group's scale: one word when the group is 4-byte aligned (codec.h
 * stores it little-endian, as the GPU does). */
template <bool kAligned>
__device__ __forceinline__ void store_scale(uint8_t *group, uint32_t bits) {
  if (kAligned)
    *reinterpret_cast<uint32_t *>(group) = bits;
  else
    qcoll__codec_store_scale(group, bits);
}

template <bool kAligned>
__device__ __forceinline__ uint32_t load_scale(const uint8_t *group) {
  return kAligned ? *reinterpret_cast<const uint32_t *>(group)
                  : qcoll__codec_load_scale(group);
}

/* A lane's code bytes (`bytes` = qcoll__codec_share_bytes(fmt, k), a
 * constant once inlined but for INT3's odd lanes, which have none) at
 * p = group + 4 + `offset` (share_offset), little-endian: in aligned
 * groups with the fewest accesses (codec.h), else byte by byte. */
template <bool kAligned>
__device__ __forceinline__ void store_quad(uint8_t *p, uint32_t bytes,
                                           uint32_t quad, uint32_t offset) {
  if (kAligned) {
    qcoll__codec_store_quad_aligned(p, bytes, quad, offset);
  } else {
    for (uint32_t b = 0; b < bytes; b++) p[b] = (uint8_t)(quad >> (8 * b));
  }
}

/* The `bytes` (read_bytes) at p = group + 4 + `offset` (share_offset). */
template <bool kAligned>
__device__ __forceinline__ uint32_t load_quad(const uint8_t *p, uint32_t bytes,
                                              uint32_t offset) {
  if (!kAligned) {
    uint32_t quad = 0;
    for (uint32_t b = 0; b < bytes; b++) quad |= (uint32_t)p[b] << (8 * b);
    return quad;
  } else if (bytes == 4) {
    return *reinterpret_cast<const uint32_t *>(p);
  } else if (bytes == 2) {
    return *reinterpret_cast<const uint16_t *>(p);
  } else {
    const int odd = (int)(offset & 1u);
    const uint32_t half = *reinterpret_cast<const uint16_t *>(p + odd);
    const uint32_t byte = p[odd ? 0 : 2];
    return odd ? byte | half << 8 : half | byte << 16;
  }
}

/* One warp step of encoding: groups g0 .. g0 + 4 * kEncUnroll - 1.
 * kChecked: the step reaches past n (the last step). */
template <int F, bool kAligned, bool kChecked>
__device__ __forceinline__ void segment_encode_step(
    const float *__restrict__ in, size_t n, uint8_t *__restrict__ out,
    size_t g0, int lane) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const size_t groups = qcoll__codec_groups(n);
  const int seg = lane / kSegLanes, k = lane % kSegLanes;
  const uint32_t sb = qcoll__codec_share_bytes(fmt, k);
  const uint32_t so = qcoll__codec_share_offset(fmt, k);
  float x[kEncUnroll][kLaneValues];
  /* Lane l's values of set u: (g0 + 4u) * 32 + 4l, i.e. group
   * g0 + 4u + seg, elements 4k..4k+3. */
#pragma unroll
  for (int u = 0; u < kEncUnroll; u++)
    load_values<kAligned, kChecked>(
        in,
        (g0 + (size_t)u * kSegsPerWarp) * QCOLL_CODEC_GROUP +
            (size_t)lane * kLaneValues,
        n, x[u]);
  /* every lane, past the end too: full-mask shuffles */
  uint32_t stored[kEncUnroll], quads[kEncUnroll];
  qcoll__codec_segment_encode_sets<kEncUnroll>(fmt, x, lane, stored, quads);
#pragma unroll
  for (int u = 0; u < kEncUnroll; u++) {
    const uint32_t quad = qcoll__codec_segment_share(fmt, quads[u]);
    const size_t g = g0 + (size_t)u * kSegsPerWarp + seg;
    if (kChecked && g >= groups) continue;
    uint8_t *group = out + g * gb;
    if (k == 0) store_scale<kAligned>(group, stored[u]);
    store_quad<kAligned>(group + QCOLL_CODEC_SCALE_BYTES + so, sb, quad, so);
  }
}

/* One warp step of decoding: groups g0 .. g0 + 4 * kDecUnroll - 1. */
template <int F, bool kAligned, bool kChecked>
__device__ __forceinline__ void segment_decode_step(
    const uint8_t *__restrict__ in, size_t n, float *__restrict__ out,
    size_t g0, int lane) {
  const qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t rb = qcoll__codec_read_bytes(fmt);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const size_t groups = qcoll__codec_groups(n);
  const int seg = lane / kSegLanes, k = lane % kSegLanes;
  const uint32_t so = qcoll__codec_share_offset(fmt, k);
  uint32_t scale[kDecUnroll], quad[kDecUnroll];
#pragma unroll
  for (int u = 0; u < kDecUnroll; u++) {
    const size_t g = g0 + (size_t)u * kSegsPerWarp + seg;
    scale[u] = quad[u] = 0;
    if (kChecked && g >= groups) continue;
    const uint8_t *group = in + g * gb;
    scale[u] = load_scale<kAligned>(group);
    quad[u] = load_quad<kAligned>(group + QCOLL_CODEC_SCALE_BYTES + so, rb,
                                  so) >>
              qcoll__codec_share_shift(fmt, k);
  }
  float y[kDecUnroll][kLaneValues];
  qcoll__codec_segment_decode_sets<kDecUnroll>(fmt, scale, quad, y);
#pragma unroll
  for (int u = 0; u < kDecUnroll; u++)
    store_values<kAligned, kChecked>(
        out,
        (g0 + (size_t)u * kSegsPerWarp) * QCOLL_CODEC_GROUP +
            (size_t)lane * kLaneValues,
        n, y[u]);
}

/* Steps of kStep groups go to warps in a grid-stride loop; the bounds are
 * per warp, so all 32 lanes run the same trips (full-mask shuffles). */
template <int F, bool kAligned>
__global__ void __launch_bounds__(kThreads)
    encode_segment_kernel(const float *__restrict__ in, size_t n,
                          uint8_t *__restrict__ out) {
  constexpr size_t kStep = (size_t)kEncUnroll * kSegsPerWarp;
  const int lane = threadIdx.x & 31;
  const size_t groups = qcoll__codec_groups(n);
  const size_t whole = n / (kStep * QCOLL_CODEC_GROUP); /* steps inside n */
  const size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
  for (size_t step = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
       step * kStep < groups; step += warps) {
    if (step < whole)
      segment_encode_step<F, kAligned, false>(in, n, out, step * kStep, lane);
    else
      segment_encode_step<F, kAligned, true>(in, n, out, step * kStep, lane);
  }
}

template <int F, bool kAligned>
__global__ void __launch_bounds__(kThreads)
    decode_segment_kernel(const uint8_t *__restrict__ in, size_t n,
                          float *__restrict__ out) {
  constexpr size_t kStep = (size_t)kDecUnroll * kSegsPerWarp;
  const int lane = threadIdx.x & 31;
  const size_t groups = qcoll__codec_groups(n);
  const size_t whole = n / (kStep * QCOLL_CODEC_GROUP);
  const size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
  for (size_t step = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
       step * kStep < groups; step += warps) {
    if (step < whole)
      segment_decode_step<F, kAligned, false>(in, n, out, step * kStep, lane);
    else
      segment_decode_step<F, kAligned, true>(in, n, out, step * kStep, lane);
  }
}

/* ---- launchers ----------------------------------------------------------- */

int blocks_for(size_t workers) {
  size_t b = (workers + kThreads - 1) / kThreads;
  return (int)(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

/* Blocks for `steps` warp steps of kernel fn: one step per warp where that
 * fills fewer than kWaves rounds of the blocks the SMs hold at once, else
 * that many rounds (the grid-stride loop does the rest). */
cudaError_t segment_grid(const void *fn, size_t steps, int *grid) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess)
    err =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, 0);
  if (err != cudaSuccess) return err;
  const size_t warps_per_block = kThreads / 32;
  const size_t need = (steps + warps_per_block - 1) / warps_per_block;
  size_t limit = (size_t)sms * (size_t)(per_sm > 0 ? per_sm : 1) * kWaves;
  if (limit < 1) limit = 1;
  *grid = (int)(need < 1 ? 1 : need < limit ? need : limit);
  return cudaSuccess;
}

/* cudaLaunchKernel reports this launch's error only, not one left over from
 * the caller's earlier calls. */
template <typename In, typename Out>
cudaError_t launch(void (*fn)(const In *, size_t, Out *), int grid,
                   const In *in, size_t n, Out *out, cudaStream_t stream) {
  void *args[] = {&in, &n, &out};
  return cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(grid),
                          dim3(kThreads), args, 0, stream);
}

template <typename In, typename Out>
cudaError_t launch_segment(void (*fn)(const In *, size_t, Out *),
                           size_t step_groups, const In *in, size_t n, Out *out,
                           cudaStream_t stream) {
  int grid = 1;
  const size_t groups = qcoll__codec_groups(n);
  cudaError_t err =
      segment_grid(reinterpret_cast<const void *>(fn),
                   (groups + step_groups - 1) / step_groups, &grid);
  return err != cudaSuccess ? err : launch(fn, grid, in, n, out, stream);
}

bool aligned(const void *p, uintptr_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

template <int F>
cudaError_t launch_encode(qcoll__codec_cuda_variant_t variant, const float *in,
                          size_t n, uint8_t *out, cudaStream_t stream) {
  const size_t groups = qcoll__codec_groups(n);
  const size_t step = (size_t)kEncUnroll * kSegsPerWarp;
  switch (variant) {
    case QCOLL_CODEC_CUDA_SEGMENT:
      if (aligned(in, 16) && aligned(out, 4))
        return launch_segment(encode_segment_kernel<F, true>, step, in, n, out,
                              stream);
      return launch_segment(encode_segment_kernel<F, false>, step, in, n, out,
                            stream);
    case QCOLL_CODEC_CUDA_WARP:
      return launch(encode_warp_kernel<F>, blocks_for(groups * 32), in, n, out,
                    stream);
    default:
      return launch(encode_thread_kernel<F>, blocks_for(groups), in, n, out,
                    stream);
  }
}

template <int F>
cudaError_t launch_decode(qcoll__codec_cuda_variant_t variant,
                          const uint8_t *in, size_t n, float *out,
                          cudaStream_t stream) {
  const size_t groups = qcoll__codec_groups(n);
  const size_t step = (size_t)kDecUnroll * kSegsPerWarp;
  switch (variant) {
    case QCOLL_CODEC_CUDA_SEGMENT:
      if (aligned(in, 4) && aligned(out, 16))
        return launch_segment(decode_segment_kernel<F, true>, step, in, n, out,
                              stream);
      return launch_segment(decode_segment_kernel<F, false>, step, in, n, out,
                            stream);
    case QCOLL_CODEC_CUDA_WARP:
      return launch(decode_warp_kernel<F>, blocks_for(groups * 32), in, n, out,
                    stream);
    default:
      return launch(decode_thread_kernel<F>, blocks_for(groups), in, n, out,
                    stream);
  }
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
    case QCOLL_QUANT_INT3:
      return launch_encode<QCOLL_QUANT_INT3>(variant, in, n, out, s);
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
    case QCOLL_QUANT_INT3:
      return launch_decode<QCOLL_QUANT_INT3>(variant, in, n, out, s);
    default: return cudaErrorInvalidValue;
  }
}
