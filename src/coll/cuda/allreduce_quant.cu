/*
 * Quantised two-shot all-reduce (sum) over CUDA IPC peer memory: every
 * transfer carries the groups of ../codec.h (FP8, INT8, INT6, INT4: 32
 * values and one scale per group) instead of the elements themselves.
 *
 * Algorithm.  A launch handles count <= chunk elements (a host loop cuts
 * larger messages into chunks of whole groups).  Its G = ceil(count / 32)
 * groups are cut into one segment per owner rank and every segment into one
 * piece per block, as quant_layout.h describes; block b of every rank
 * handles piece b of every segment, so blocks only wait on peer blocks of
 * the same index, as in allreduce.cu.
 *
 *  phase 1:  for every owner s, encode my piece of segment s of the input
 *            (f16/bf16/f32 -> f32, exact) and write the groups into slot
 *            <my rank> of owner s's region 0 (a push; my own segment goes to
 *            my own region the same way);  barrier 0.
 *  phase 2:  as owner of segment r: for each group of my piece, load the n
 *            encoded contributions from my region 0 (slot p = rank p's,
 *            mine included), decode each, add them in f32 in rank order
 *            0..n-1 (one rounding per addition, __fadd_rn), encode the sum
 *            once and write it into slot r of region 1 of every rank (mine
 *            included);  barrier 1.
 *  phase 3:  decode every segment's groups from my own region 1 and store
 *            the values rounded once (nearest even) to the element type.
 *
 * Each value is therefore rounded by the codec twice (once on the way to
 * its owner, once on the way back) and once to the element type at the
 * end; the owner's own contribution goes through the codec like every other
 * (so the result does not depend on who owns what).  The operations are
 * those of ref_scheme_qcoll() in tests/codec/ref_scheme.c, with the same
 * correctly rounded f32 operations (codec.h's __fmul_rn/__fdiv_rn and
 * __fadd_rn here: nothing is contracted into an FMA), so the output is that
 * CPU model's f32 result rounded to the element type, bit for bit, on every
 * rank.  A NaN (a group that held inf or NaN, see codec.h's policies) is
 * stored as the host conversions of codec.h's canonical NaN produce it:
 * f16 0x7e00, bf16 0x7fc0, f32 0x7fc00000.
 *
 * Tails.  The last group of a launch is zero-padded past count in phase 1
 * and its padded lanes are zero again in phase 2 (they decode to zero
 * anyway, or to NaN in a group whose real values are not finite, which
 * makes the whole group NaN either way); phase 3 stores only the count
 * values.  Zero padding changes neither a group's scale nor any code, so a
 * message split into chunks at group boundaries gives the same bits as one
 * launch, and the same as the CPU model on the whole message.
 *
 * One group per warp: lane i holds value i (codec.h "One group per warp").
 * A warp works on a batch of groups at a time (kBatch in phases 1 and 3),
 * issuing every load of the batch before using the first, so that memory
 * latency is paid once per batch; the order of the arithmetic within each
 * group is unchanged.  Encoded groups are staged in shared memory and moved
 * as 32-bit words (every group size is a multiple of 4 and every slot
 * 16-byte aligned): remote writes are a few coalesced words rather than
 * bytes, and all reads of data that peers wrote are L2 loads (__ldcg) into
 * the stage, never L1.
 *
 * Synchronisation protocol: exactly that of allreduce.cu (ipc_sync.cuh): a
 * per-block epoch in device memory advanced by the kernel, release/acquire
 * flags at system scope, deadlines and abort.  Two barriers, phases 0 and 1.
 * No closing barrier is needed:
 *  - region 0 of owner s is written (phase 1 of the next launch, by any
 *    rank p) only after p's kernel for this launch has finished, hence
 *    after p passed barrier 1 of this launch, which needs s's arrival at
 *    barrier 1, which s reaches after reading its region 0;
 *  - region 1 of rank q is written (phase 2 of the next launch, by any
 *    owner) only after that owner passed barrier 0 of the next launch,
 *    which needs q's arrival there, after q's kernel for this launch
 *    finished reading its region 1.
 * The same two arguments hold across the unquantised one-shot and two-shot
 * kernels in either order (they read their peers' regions only between
 * their own barriers 0 and 1, or their own region 1 after barrier 1), so
 * the three kinds of launch may be mixed on one communicator.
 *
 * Requirements: those of allreduce.cu (residency of the whole grid on every
 * GPU, the same launches in the same order on every rank), plus: no
 * -ftz=true / -use_fast_math (codec.h), and blocks of whole warps.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../codec.h"
#include "ipc_sync.cuh"
#include "launch.h"

namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kGroupWords = QCOLL_CODEC_MAX_GROUP_BYTES / 4;
/* Groups a warp has in flight at once: their loads are all issued before
 * the first is used, so memory latency is paid once per batch rather than
 * once per group (phases 1 and 3: one group each; phase 2: n each). */
constexpr int kBatch = 4;
constexpr int kReduceBatch = 1;

/* One warp's staging area: the encoded groups it loaded (phase 3: one per
 * group of the batch; phase 2: n contributions per group) and the groups it
 * encodes (phases 1 and 2). */
struct WarpStage {
  uint32_t in[kReduceBatch * QCOLL_IPC_MAX_RANKS][kGroupWords];
  uint32_t out[kBatch][kGroupWords];
};
static_assert(kReduceBatch * QCOLL_IPC_MAX_RANKS >= kBatch,
              "phase 3 stages one group per row");
static_assert(kReduceBatch <= kBatch, "phase 2 encodes into out[]");

/* ---- element types: exact to f32, one rounding back ------------------- */

template <typename T>
struct QElem;
template <>
struct QElem<float> {
  static __device__ __forceinline__ float to_f32(float x) { return x; }
  /* codec.h's only NaN is 0x7fc00000 already. */
  static __device__ __forceinline__ float from_f32(float y) { return y; }
};
template <>
struct QElem<__half> {
  static __device__ __forceinline__ float to_f32(__half x) {
    return __half2float(x);
  }
  static __device__ __forceinline__ __half from_f32(float y) {
    return y != y ? __ushort_as_half((unsigned short)0x7e00u)
                  : __float2half_rn(y);
  }
};
template <>
struct QElem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static __device__ __forceinline__ __nv_bfloat16 from_f32(float y) {
    return y != y ? __ushort_as_bfloat16((unsigned short)0x7fc0u)
                  : __float2bfloat16_rn(y);
  }
};

/* ---- addressing --------------------------------------------------------- */

/* Slot `slot` of data region `index` of `owner`'s buffer, as words. */
__device__ __forceinline__ uint32_t *slot_words(const qcoll__ipc_view_t &v,
                                                const BlockState *s, int owner,
                                                int index, int slot) {
  return reinterpret_cast<uint32_t *>(
      s->bases[owner] +
      qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, 0) +
      qcoll__qlayout_slot_offset(v.region_bytes, v.nranks, index, slot));
}

/* This block's piece [*begin, *end) of owner's segment, and the segment's
 * first group *seg_begin. */
__device__ __forceinline__ void my_piece(size_t groups, int nranks, int owner,
                                         size_t *seg_begin, size_t *begin,
                                         size_t *end) {
  size_t seg_end;
  qcoll__qlayout_segment(groups, nranks, owner, seg_begin, &seg_end);
  qcoll__qlayout_piece(*seg_begin, seg_end, blockIdx.x, gridDim.x, begin, end);
}

/* ---- the three phases --------------------------------------------------- */

/* Group u of the batch starting at g0 (warps interleave: warp w handles
 * groups begin + w, begin + w + kWarps, ...). */
__device__ __forceinline__ size_t batch_group(size_t g0, int u) {
  return g0 + (size_t)u * kWarps;
}

/* Phase 1: my piece of every segment, encoded, into its owner's region 0
 * (slot: my rank).  Owners are visited starting after me, so that ranks do
 * not all write to the same owner at once. */
template <typename T, int F>
__device__ __forceinline__ void encode_parts(const qcoll__ipc_view_t &v,
                                             const BlockState *s, const T *send,
                                             size_t count, WarpStage *st,
                                             int warp, int lane) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const int words = (int)(gb / 4);
  const size_t groups = qcoll__codec_groups(count);
  for (int k = 0; k < v.nranks; k++) {
    const int owner = (v.rank + 1 + k) % v.nranks;
    size_t seg_begin, begin, end;
    my_piece(groups, v.nranks, owner, &seg_begin, &begin, &end);
    uint32_t *dst = slot_words(v, s, owner, 0, v.rank);
    for (size_t g0 = begin + warp; g0 < end; g0 += (size_t)kWarps * kBatch) {
      float x[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; u++) {
        const size_t g = batch_group(g0, u);
        const size_t i = g * QCOLL_CODEC_GROUP + lane;
        x[u] = g < end && i < count ? QElem<T>::to_f32(send[i]) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; u++)
        if (batch_group(g0, u) < end) /* the same for the whole warp */
          qcoll__codec_warp_encode(fmt, x[u], lane,
                                   reinterpret_cast<uint8_t *>(st->out[u]));
      __syncwarp();
      if (lane < words)
#pragma unroll
        for (int u = 0; u < kBatch; u++) {
          const size_t g = batch_group(g0, u);
          if (g < end)
            dst[qcoll__qlayout_group_offset(g, seg_begin, gb) / 4 + lane] =
                st->out[u][lane];
        }
      __syncwarp(); /* the stage is rewritten by the next batch */
    }
  }
}

/* Phase 2: my segment's piece, reduced from every rank's contribution in
 * rank order and pushed, encoded once, into every rank's region 1 (slot: my
 * rank). */
template <int F>
__device__ __forceinline__ void reduce_segment(const qcoll__ipc_view_t &v,
                                               const BlockState *s,
                                               size_t count, WarpStage *st,
                                               int warp, int lane) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const int words = (int)(gb / 4);
  const int n = v.nranks;
  const size_t groups = qcoll__codec_groups(count);
  const size_t slot_words_n = qcoll__qlayout_slot_bytes(v.region_bytes, n) / 4;
  size_t seg_begin, begin, end;
  my_piece(groups, n, v.rank, &seg_begin, &begin, &end);
  const uint32_t *in = slot_words(v, s, v.rank, 0, 0);
  for (size_t g0 = begin + warp; g0 < end;
       g0 += (size_t)kWarps * kReduceBatch) {
    if (lane < words) {
      /* Every load of the batch in flight before the first store to the
       * stage. */
      uint32_t w[kReduceBatch][QCOLL_IPC_MAX_RANKS];
#pragma unroll
      for (int u = 0; u < kReduceBatch; u++) {
        const size_t g = batch_group(g0, u);
        const size_t at = qcoll__qlayout_group_offset(g, seg_begin, gb) / 4;
#pragma unroll
        for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++)
          if (p < n && g < end)
            w[u][p] = __ldcg(in + (size_t)p * slot_words_n + at + lane);
      }
#pragma unroll
      for (int u = 0; u < kReduceBatch; u++)
#pragma unroll
        for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++)
          if (p < n && batch_group(g0, u) < end)
            st->in[u * n + p][lane] = w[u][p];
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kReduceBatch; u++) {
      const size_t g = batch_group(g0, u);
      if (g >= end) break; /* the same for the whole warp */
      float acc = qcoll__codec_warp_decode(
          fmt, reinterpret_cast<const uint8_t *>(st->in[u * n]), lane);
      for (int p = 1; p < n; p++)
        acc = __fadd_rn(
            acc, qcoll__codec_warp_decode(
                     fmt, reinterpret_cast<const uint8_t *>(st->in[u * n + p]),
                     lane));
      if (g * QCOLL_CODEC_GROUP + lane >= count) acc = 0.0f; /* padding */
      qcoll__codec_warp_encode(fmt, acc, lane,
                               reinterpret_cast<uint8_t *>(st->out[u]));
    }
    __syncwarp();
    if (lane < words)
#pragma unroll
      for (int u = 0; u < kReduceBatch; u++) {
        const size_t g = batch_group(g0, u);
        if (g >= end) break;
        const size_t at = qcoll__qlayout_group_offset(g, seg_begin, gb) / 4;
        const uint32_t word = st->out[u][lane];
        for (int k = 0; k < n; k++) {
          const int q = (v.rank + 1 + k) % n;
          slot_words(v, s, q, 1, v.rank)[at + lane] = word;
        }
      }
    __syncwarp(); /* the stage is rewritten by the next batch */
  }
}

/* Phase 3: every segment's piece, decoded from my region 1 into recv. */
template <typename T, int F>
__device__ __forceinline__ void decode_all(const qcoll__ipc_view_t &v,
                                           const BlockState *s, T *recv,
                                           size_t count, WarpStage *st,
                                           int warp, int lane) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const int words = (int)(gb / 4);
  const size_t groups = qcoll__codec_groups(count);
  for (int owner = 0; owner < v.nranks; owner++) {
    size_t seg_begin, begin, end;
    my_piece(groups, v.nranks, owner, &seg_begin, &begin, &end);
    const uint32_t *src = slot_words(v, s, v.rank, 1, owner);
    for (size_t g0 = begin + warp; g0 < end; g0 += (size_t)kWarps * kBatch) {
      if (lane < words) {
        uint32_t w[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; u++) {
          const size_t g = batch_group(g0, u);
          w[u] =
              g < end
                  ? __ldcg(src +
                           qcoll__qlayout_group_offset(g, seg_begin, gb) / 4 +
                           lane)
                  : 0u;
        }
#pragma unroll
        for (int u = 0; u < kBatch; u++) st->in[u][lane] = w[u];
      }
      __syncwarp();
      float y[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; u++)
        y[u] = qcoll__codec_warp_decode(
            fmt, reinterpret_cast<const uint8_t *>(st->in[u]), lane);
      __syncwarp(); /* the stage is rewritten by the next batch */
#pragma unroll
      for (int u = 0; u < kBatch; u++) {
        const size_t i = batch_group(g0, u) * QCOLL_CODEC_GROUP + lane;
        if (batch_group(g0, u) < end && i < count)
          recv[i] = QElem<T>::from_f32(y[u]);
      }
    }
  }
}

/* ---- the kernel ---------------------------------------------------------- */

template <typename T, int F>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    quant_twoshot_kernel(qcoll__ipc_view_t v, const T *send, T *recv,
                         size_t count) {
  __shared__ BlockState s;
  __shared__ WarpStage stages[kWarps];
  block_begin(v, &s);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  WarpStage *st = &stages[warp];

  encode_parts<T, F>(v, &s, send, count, st, warp, lane);
  if (!block_barrier(v, 0, &s)) return;
  reduce_segment<F>(v, &s, count, st, warp, lane);
  if (!block_barrier(v, 1, &s)) return;
  decode_all<T, F>(v, &s, recv, count, st, warp, lane);
  block_end(v, &s);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*kernel_fn)(qcoll__ipc_view_t, const void *, void *, size_t);

template <typename T>
kernel_fn pick_format(qcoll_quant_t quant) {
  switch (quant) {
    case QCOLL_QUANT_FP8:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_FP8>);
    case QCOLL_QUANT_INT8:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT8>);
    case QCOLL_QUANT_INT6:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT6>);
    case QCOLL_QUANT_INT4:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT4>);
    default: return nullptr;
  }
}

kernel_fn pick_kernel(qcoll_dtype_t dtype, qcoll_op_t op, qcoll_quant_t quant) {
  if (op != QCOLL_SUM) return nullptr;
  switch (dtype) {
    case QCOLL_F16: return pick_format<__half>(quant);
    case QCOLL_BF16: return pick_format<__nv_bfloat16>(quant);
    case QCOLL_F32: return pick_format<float>(quant);
    default: return nullptr;
  }
}

}  // namespace

extern "C" int qcoll__cuda_all_reduce_quant_supported(qcoll_dtype_t dtype,
                                                      qcoll_op_t op,
                                                      qcoll_quant_t quant) {
  return pick_kernel(dtype, op, quant) != nullptr;
}

extern "C" size_t qcoll__cuda_all_reduce_quant_chunk_elems(
    const qcoll__ipc_view_t *view, qcoll_quant_t quant) {
  return qcoll__qlayout_chunk_elems(view->region_bytes, view->nranks,
                                    qcoll__codec_group_bytes(quant));
}

extern "C" int qcoll__cuda_all_reduce_quant_grid(const qcoll__ipc_view_t *view,
                                                 size_t count) {
  int limit = view->max_grid > 0 ? view->max_grid : 1;
  if (limit > QCOLL_IPC_MAX_BLOCKS) limit = QCOLL_IPC_MAX_BLOCKS;
  return qcoll__qlayout_grid(qcoll__codec_groups(count), limit);
}

extern "C" cudaError_t qcoll__cuda_all_reduce_quant_launch(
    const qcoll__ipc_view_t *view, const void *sendbuf, void *recvbuf,
    size_t count, qcoll_dtype_t dtype, qcoll_quant_t quant,
    cudaStream_t stream) {
  kernel_fn fn = pick_kernel(dtype, QCOLL_SUM, quant);
  if (!fn || view->nranks < 1 || view->nranks > QCOLL_IPC_MAX_RANKS ||
      count > qcoll__cuda_all_reduce_quant_chunk_elems(view, quant))
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  int grid = qcoll__cuda_all_reduce_quant_grid(view, count);
  qcoll__ipc_view_t v = *view;
  void *args[] = {&v, &sendbuf, &recvbuf, &count};
  return cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(grid),
                          dim3(kThreads), args, 0, stream);
}

extern "C" cudaError_t qcoll__cuda_all_reduce_quant_blocks_per_sm(int *per_sm) {
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_quant_t formats[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                          QCOLL_QUANT_INT6, QCOLL_QUANT_INT4};
  int least = 1 << 30;
  for (qcoll_dtype_t d : dtypes)
    for (qcoll_quant_t q : formats) {
      int n = 0;
      cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, reinterpret_cast<const void *>(pick_kernel(d, QCOLL_SUM, q)),
          kThreads, 0);
      if (err != cudaSuccess) return err;
      if (n < least) least = n;
    }
  *per_sm = least;
  return cudaSuccess;
}
