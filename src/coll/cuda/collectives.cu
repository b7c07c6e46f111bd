/*
 * Every collective over CUDA IPC peer memory, for every dtype and op:
 * broadcast, reduce, all-gather, reduce-scatter, all-to-all, an all-reduce
 * that reduces exactly as the host back end does (so it serves the
 * dtype/op pairs the fp32 kernels of allreduce.cu do not), a barrier on a
 * stream, and send/recv between two ranks.
 *
 * Collectives.  They use the buffer layout, the view, the per-block epochs
 * and the barrier of allreduce.cu (ipc_sync.cuh): read its header first.
 * A launch handles at most one chunk (collectives.h gives its size: a
 * region, and for reduce and broadcast at most 12 MiB over all ranks,
 * which measured faster per byte); larger messages are a host loop of
 * launches, each self-contained.  The elements
 * of a launch are cut into 16-byte packs and the packs into one contiguous
 * range per block; block b of every rank takes the same range, and after a
 * barrier a block reads only packs that the same block of its peers wrote
 * before that barrier.
 *
 *  all-reduce, reduce  copy my input into my region 0;  barrier 0;  rank r
 *        reduces segment r of the range from every rank's region 0, in rank
 *        order, into its region 1;  barrier 1;  every rank (reduce: root
 *        only) copies every segment from its owner's region 1 to its output.
 *  broadcast  root copies its input into its region 0 (and to its output);
 *        barrier 0;  the others copy root's region 0 out;  barrier 1.
 *  all-gather  copy my block into my region 0;  barrier 0;  copy every
 *        rank's region 0 to block q of the output;  barrier 1.
 *  reduce-scatter  region 0 holds one sub-block per destination: copy
 *        block q of my input into sub-block q;  barrier 0;  rank r reduces
 *        sub-block r of every rank in rank order into its output;  barrier 1.
 *  all-to-all  as reduce-scatter for the copy in;  barrier 0;  rank r copies
 *        sub-block r of rank q's region 0 to block q of its output;  barrier 1.
 *  barrier  one block, barriers 0 and 1.
 *
 * Every launch passes barrier 0 and then barrier 1, never only one of them:
 * that is what lets a flag slot be rewritten safely (see barrier_kernel).
 *
 * Reuse of the regions: before its first barrier a launch writes IPC
 * memory only in region 0 (these kernels: their own); region 0 is read only
 * between the first and the last barrier; region 1 is written only after
 * the first barrier.  So a rank that has passed a launch's last barrier
 * may start the next launch at once: every rank has arrived there, so
 * nobody reads any region 0 any more, and region 1 is written only after a
 * barrier of the next launch, which every rank reaches only once it has
 * finished this one.  Launches that read region 0 until their end
 * therefore close with barrier 1; the all-reduce and reduce read only
 * region 1 after barrier 1, as the two-shot all-reduce does.  The kernels
 * of allreduce.cu and allreduce_quant.cu keep the same rules, so launches
 * of all three files interleave freely (in the same order on every rank).
 *
 * Reductions follow src/coll/host/reduce.c exactly, so that GPU and host
 * results are the same bits (NaN payloads aside: the GPU's arithmetic
 * returns its canonical NaN, the host's keeps an operand's payload, and the
 * host compiler may swap operands): sources in rank order 0..n-1; f16 and bf16
 * accumulate in f32 and round once (with the host's conversions), f32 in
 * f32, f64 in f64, with IEEE operations that are never contracted;
 * integers add and multiply in the unsigned type of their width (they
 * wrap) and compare with their own signedness; AVG is the sum then one
 * division by the world size in the accumulation type (integers: the
 * wrapped sum read as the element type, C division, truncating); MIN and
 * MAX are `x < acc ? x : acc` and its mirror.
 *
 * Send/recv: a channel per ordered pair, described in collectives.h, with
 * its own counters, independent of the collectives' epochs.
 *
 * Requirements: as allreduce.cu (every block of every rank sharing a GPU
 * resident at once: the host caps the grid at view->max_grid, computed from
 * qcoll__cuda_coll_resident_blocks; same launches in the same order on
 * every rank).
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "base/dtype.h" /* f16/bf16 conversions, the host's bit for bit */
#include "collectives.h"
#include "ipc_sync.cuh"

static_assert(QCOLL_IPC_P2P_FLAGS_OFFSET >=
                  QCOLL_IPC_EPOCHS_OFFSET + QCOLL_IPC_EPOCHS_BYTES,
              "send/recv flags overlap the epochs");
static_assert(QCOLL_IPC_P2P_FLAGS_OFFSET + QCOLL_IPC_P2P_FLAGS_BYTES <=
                  QCOLL_IPC_HEADER_BYTES,
              "send/recv flags do not fit the zeroed header");
static_assert(QCOLL_IPC_REGIONS >= 2, "the kernels use regions 0 and 1");
static_assert(QCOLL_IPC_PHASES >= 2, "the kernels use barrier phases 0 and 1");

namespace {

constexpr int kPack = 16; /* bytes */

/* ---- element types ------------------------------------------------------ */

/* IEEE operations that the compiler never fuses, as on the host. */
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ double div_rn(double a, double b) {
  return __ddiv_rn(a, b);
}

/* A dtype: its storage S, and for floats the accumulation type and the
 * conversions; for integers the unsigned type U of the same width. */
template <typename T, typename A>
struct FloatType {
  using S = T;
  using Acc = A;
  static constexpr bool kInt = false;
  static __device__ __forceinline__ Acc load(S x) { return (Acc)x; }
  static __device__ __forceinline__ S store(Acc x) { return (S)x; }
};
struct F16Type {
  using S = uint16_t;
  using Acc = float;
  static constexpr bool kInt = false;
  static __device__ __forceinline__ Acc load(S x) { return qcoll__f16_to_f32(x); }
  static __device__ __forceinline__ S store(Acc x) { return qcoll__f32_to_f16(x); }
};
struct BF16Type {
  using S = uint16_t;
  using Acc = float;
  static constexpr bool kInt = false;
  static __device__ __forceinline__ Acc load(S x) { return qcoll__bf16_to_f32(x); }
  static __device__ __forceinline__ S store(Acc x) { return qcoll__f32_to_bf16(x); }
};
template <typename T, typename UT>
struct IntType {
  using S = T;
  using U = UT;
  static constexpr bool kInt = true;
};

/* first(x0), fold(acc, x) for every later rank in order, last(acc, n). */
template <typename D, int OP, bool kInt = D::kInt>
struct Reducer;

template <typename D, int OP>
struct Reducer<D, OP, false> {
  using S = typename D::S;
  using Acc = typename D::Acc;
  static __device__ __forceinline__ Acc first(S x) { return D::load(x); }
  static __device__ __forceinline__ Acc fold(Acc acc, S x) {
    Acc v = D::load(x);
    switch (OP) {
      case QCOLL_PROD: return mul_rn(acc, v);
      case QCOLL_MIN: return v < acc ? v : acc;
      case QCOLL_MAX: return v > acc ? v : acc;
      default: return add_rn(acc, v); /* SUM, AVG */
    }
  }
  static __device__ __forceinline__ S last(Acc acc, int n) {
    if (OP == QCOLL_AVG) acc = div_rn(acc, (Acc)n);
    return D::store(acc);
  }
};

template <typename D, int OP>
struct Reducer<D, OP, true> {
  using S = typename D::S;
  using Acc = typename D::U; /* MIN/MAX keep S's bits in it */
  static __device__ __forceinline__ Acc first(S x) { return (Acc)x; }
  static __device__ __forceinline__ Acc fold(Acc acc, S x) {
    switch (OP) {
      case QCOLL_PROD: return (Acc)(acc * (Acc)x);
      case QCOLL_MIN: {
        S a = (S)acc;
        return (Acc)(x < a ? x : a);
      }
      case QCOLL_MAX: {
        S a = (S)acc;
        return (Acc)(x > a ? x : a);
      }
      default: return (Acc)(acc + (Acc)x); /* SUM, AVG */
    }
  }
  static __device__ __forceinline__ S last(Acc acc, int n) {
    if (OP == QCOLL_AVG) return (S)((S)acc / n);
    return (S)acc;
  }
};

/* ---- data movement ------------------------------------------------------ */

/* This block's range [begin, end) of `packs`. */
__device__ __forceinline__ void pack_range(size_t packs, size_t *begin,
                                           size_t *end) {
  size_t per_block = (packs + gridDim.x - 1) / gridDim.x;
  size_t b = per_block * blockIdx.x;
  *begin = b < packs ? b : packs;
  *end = b + per_block < packs ? b + per_block : packs;
}

/* This block's range [begin, end) of the packs of `len` elements of W. */
template <typename W>
__device__ __forceinline__ void elem_pack_range(size_t len, size_t *begin,
                                                size_t *end) {
  constexpr size_t E = kPack / sizeof(W);
  pack_range((len + E - 1) / E, begin, end);
}

template <typename W>
__device__ __forceinline__ bool pack_aligned(const W *p) {
  return (reinterpret_cast<uintptr_t>(p) % kPack) == 0;
}

/* Pack i of n elements at src: one 16-byte load when aligned and whole,
 * else element by element (zeros past n). */
template <typename W>
__device__ __forceinline__ uint4 load_elems(const W *src, size_t i, size_t n,
                                            bool aligned) {
  constexpr int E = kPack / sizeof(W);
  size_t first = i * E;
  if (aligned && first + E <= n)
    return *reinterpret_cast<const uint4 *>(src + first);
  uint4 p = make_uint4(0, 0, 0, 0);
  W *w = reinterpret_cast<W *>(&p);
#pragma unroll
  for (int j = 0; j < E; j++)
    if (first + j < n) w[j] = src[first + j];
  return p;
}

/* Store pack i of n elements at dst (nothing past n). */
template <typename W>
__device__ __forceinline__ void store_elems(W *dst, size_t i, size_t n,
                                            bool aligned, uint4 p) {
  constexpr int E = kPack / sizeof(W);
  size_t first = i * E;
  if (aligned && first + E <= n) {
    *reinterpret_cast<uint4 *>(dst + first) = p;
    return;
  }
  const W *w = reinterpret_cast<const W *>(&p);
#pragma unroll
  for (int j = 0; j < E; j++)
    if (first + j < n) dst[first + j] = w[j];
}

/* Packs [begin, end) of n elements from src into packs at dst (IPC). */
template <typename W>
__device__ __forceinline__ void copy_in(uint4 *dst, const W *src, size_t n,
                                        size_t begin, size_t end) {
  const bool aligned = pack_aligned(src);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    dst[i] = load_elems(src, i, n, aligned);
}

/* Packs [begin, end) at src (IPC, written by a peer: bypass L1) to n
 * elements at dst. */
template <typename W>
__device__ __forceinline__ void copy_out(W *dst, const uint4 *src, size_t n,
                                         size_t begin, size_t end) {
  const bool aligned = pack_aligned(dst);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    store_elems(dst, i, n, aligned, __ldcg(src + i));
}

/* Pack i at byte `offset` of every rank's buffer, reduced in rank order.
 * All loads are issued before the first operation. */
template <typename D, int OP>
__device__ __forceinline__ uint4 reduce_pack(const BlockState *s, int nranks,
                                             size_t offset, size_t i) {
  using S = typename D::S;
  using R = Reducer<D, OP>;
  constexpr int E = kPack / sizeof(S);
  uint4 in[QCOLL_IPC_MAX_RANKS];
#pragma unroll
  for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++)
    if (p < nranks)
      in[p] = __ldcg(reinterpret_cast<const uint4 *>(s->bases[p] + offset) + i);
  typename R::Acc acc[E];
  {
    const S *x = reinterpret_cast<const S *>(&in[0]);
#pragma unroll
    for (int j = 0; j < E; j++) acc[j] = R::first(x[j]);
  }
#pragma unroll
  for (int p = 1; p < QCOLL_IPC_MAX_RANKS; p++) {
    if (p < nranks) {
      const S *x = reinterpret_cast<const S *>(&in[p]);
#pragma unroll
      for (int j = 0; j < E; j++) acc[j] = R::fold(acc[j], x[j]);
    }
  }
  uint4 out;
  S *o = reinterpret_cast<S *>(&out);
#pragma unroll
  for (int j = 0; j < E; j++) o[j] = R::last(acc[j], nranks);
  return out;
}

/* Byte offset of data region `index` in every rank's buffer. */
__device__ __forceinline__ size_t region_offset(const qcoll__ipc_view_t &v,
                                                int index) {
  return qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, index);
}

/* Bytes of one sub-block of region 0 (reduce-scatter, all-to-all). */
__host__ __device__ __forceinline__ size_t sub_block_bytes(size_t region_bytes,
                                                           int nranks) {
  return nranks > 0 ? region_bytes / (size_t)nranks / kPack * kPack : 0;
}

template <typename W>
__device__ __forceinline__ uint4 *region_packs(const BlockState *s, int owner,
                                               size_t offset) {
  return reinterpret_cast<uint4 *>(s->bases[owner] + offset);
}

/* The block for each peer q (at send + q * count + offset) into sub-block
 * q of my region at byte `off` (sub-blocks of `sub` bytes): the first phase
 * of reduce-scatter and all-to-all. */
template <typename W>
__device__ __forceinline__ void copy_in_per_peer(
    const BlockState *s, const qcoll__ipc_view_t &v,
    const qcoll__ipc_coll_args_t &a, const W *send, size_t off, size_t sub,
    size_t begin, size_t end) {
  for (int q = 0; q < v.nranks; q++)
    copy_in(region_packs<W>(s, v.rank, off + (size_t)q * sub),
            send + (size_t)q * a.count + a.offset, a.len, begin, end);
}

/* ---- collective kernels -------------------------------------------------- */

#define QCOLL_KERNEL \
  __global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)

/* all-reduce and reduce */
template <typename D, int OP>
QCOLL_KERNEL reduce_kernel(qcoll__ipc_view_t v, qcoll__ipc_coll_args_t a) {
  using S = typename D::S;
  __shared__ BlockState s;
  block_begin(v, &s);
  size_t begin, end;
  elem_pack_range<S>(a.len, &begin, &end);
  const size_t range = end - begin;
  const int n = v.nranks;
  const size_t in_off = region_offset(v, 0), out_off = region_offset(v, 1);

  copy_in(region_packs<S>(&s, v.rank, in_off),
          static_cast<const S *>(a.send) + a.offset, a.len, begin, end);
  if (!block_barrier(v, 0, &s)) return;

  {
    size_t seg_begin = begin + range * (size_t)v.rank / (size_t)n;
    size_t seg_end = begin + range * (size_t)(v.rank + 1) / (size_t)n;
    uint4 *result = region_packs<S>(&s, v.rank, out_off);
    for (size_t i = seg_begin + threadIdx.x; i < seg_end; i += blockDim.x)
      result[i] = reduce_pack<D, OP>(&s, n, in_off, i);
  }
  if (!block_barrier(v, 1, &s)) return;

  if (a.kind == QCOLL_IPC_COLL_ALL_REDUCE || v.rank == a.root) {
    S *recv = static_cast<S *>(a.recv) + a.offset;
    /* Start with my own segment so that ranks do not all read owner 0. */
    for (int k = 0; k < n; k++) {
      int owner = (v.rank + k) % n;
      size_t seg_begin = begin + range * (size_t)owner / (size_t)n;
      size_t seg_end = begin + range * (size_t)(owner + 1) / (size_t)n;
      copy_out(recv, region_packs<S>(&s, owner, out_off), a.len, seg_begin,
               seg_end);
    }
  }
  block_end(v, &s);
}

template <typename D, int OP>
QCOLL_KERNEL reduce_scatter_kernel(qcoll__ipc_view_t v,
                                   qcoll__ipc_coll_args_t a) {
  using S = typename D::S;
  __shared__ BlockState s;
  block_begin(v, &s);
  size_t begin, end;
  elem_pack_range<S>(a.len, &begin, &end);
  const int n = v.nranks;
  const size_t in_off = region_offset(v, 0);
  const size_t sub = sub_block_bytes(v.region_bytes, n);
  const S *send = static_cast<const S *>(a.send);

  copy_in_per_peer(&s, v, a, send, in_off, sub, begin, end);
  if (!block_barrier(v, 0, &s)) return;

  S *recv = static_cast<S *>(a.recv) + a.offset;
  const bool aligned = pack_aligned(recv);
  const size_t mine = in_off + (size_t)v.rank * sub;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    store_elems(recv, i, a.len, aligned, reduce_pack<D, OP>(&s, n, mine, i));
  if (!block_barrier(v, 1, &s)) return;
  block_end(v, &s);
}

/* Movers: W is an unsigned word of the element's size (the data are only
 * copied). */
template <typename W>
QCOLL_KERNEL broadcast_kernel(qcoll__ipc_view_t v, qcoll__ipc_coll_args_t a) {
  __shared__ BlockState s;
  block_begin(v, &s);
  size_t begin, end;
  elem_pack_range<W>(a.len, &begin, &end);
  const size_t off = region_offset(v, 0);
  W *recv = static_cast<W *>(a.recv) + a.offset;

  if (v.rank == a.root) {
    const W *send = static_cast<const W *>(a.send) + a.offset;
    const bool send_aligned = pack_aligned(send);
    const bool recv_aligned = pack_aligned(recv);
    uint4 *mine = region_packs<W>(&s, v.rank, off);
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      uint4 p = load_elems(send, i, a.len, send_aligned);
      mine[i] = p;
      if (recv != send) store_elems(recv, i, a.len, recv_aligned, p);
    }
  }
  if (!block_barrier(v, 0, &s)) return;
  if (v.rank != a.root)
    copy_out(recv, region_packs<W>(&s, a.root, off), a.len, begin, end);
  if (!block_barrier(v, 1, &s)) return;
  block_end(v, &s);
}

template <typename W>
QCOLL_KERNEL all_gather_kernel(qcoll__ipc_view_t v, qcoll__ipc_coll_args_t a) {
  __shared__ BlockState s;
  block_begin(v, &s);
  size_t begin, end;
  elem_pack_range<W>(a.len, &begin, &end);
  const int n = v.nranks;
  const size_t off = region_offset(v, 0);
  const W *send = static_cast<const W *>(a.send) + a.offset;

  copy_in(region_packs<W>(&s, v.rank, off), send, a.len, begin, end);
  if (!block_barrier(v, 0, &s)) return;
  for (int k = 0; k < n; k++) {
    int q = (v.rank + k) % n;
    W *dst = static_cast<W *>(a.recv) + (size_t)q * a.count + a.offset;
    if (dst == send) continue; /* in place: my block is already there */
    copy_out(dst, region_packs<W>(&s, q, off), a.len, begin, end);
  }
  if (!block_barrier(v, 1, &s)) return;
  block_end(v, &s);
}

template <typename W>
QCOLL_KERNEL all_to_all_kernel(qcoll__ipc_view_t v, qcoll__ipc_coll_args_t a) {
  __shared__ BlockState s;
  block_begin(v, &s);
  size_t begin, end;
  elem_pack_range<W>(a.len, &begin, &end);
  const int n = v.nranks;
  const size_t off = region_offset(v, 0);
  const size_t sub = sub_block_bytes(v.region_bytes, n);
  const W *send = static_cast<const W *>(a.send);

  copy_in_per_peer(&s, v, a, send, off, sub, begin, end);
  if (!block_barrier(v, 0, &s)) return;
  for (int k = 0; k < n; k++) {
    int q = (v.rank + k) % n;
    copy_out(static_cast<W *>(a.recv) + (size_t)q * a.count + a.offset,
             region_packs<W>(&s, q, off + (size_t)v.rank * sub), a.len, begin,
             end);
  }
  if (!block_barrier(v, 1, &s)) return;
  block_end(v, &s);
}

/* Two phases, not one: a rank rewrites a peer's flag slot of phase p only
 * after it has passed a barrier of the other phase, which the peer reaches
 * only after reading the earlier flag of phase p.  With a single phase, a
 * rank leaving barrier k could overwrite its flag of barrier k with that of
 * barrier k + 1 before a slower peer had seen it. */
QCOLL_KERNEL barrier_kernel(qcoll__ipc_view_t v, qcoll__ipc_coll_args_t a) {
  __shared__ BlockState s;
  block_begin(v, &s);
  if (!block_barrier(v, 0, &s)) return;
  if (!block_barrier(v, 1, &s)) return;
  block_end(v, &s);
}

/* ---- send / recv ------------------------------------------------------------
 */

/* Spin until the counter at `slot` has reached `target` (modulo 2^32).
 * Called by one thread. */
__device__ bool wait_reached(const qcoll__ipc_view_t &v, BlockState *s,
                             const uint32_t *slot, uint32_t target, int peer,
                             int phase) {
  return wait_until(v, s, slot, target, true, peer, phase);
}

__device__ __forceinline__ uint32_t *p2p_word(const BlockState *s, int owner,
                                              int which, int peer, int lane) {
  return reinterpret_cast<uint32_t *>(s->bases[owner] +
                                      QCOLL_IPC_P2P_FLAGS_OFFSET) +
         qcoll__ipc_p2p_word(which, peer, lane);
}

__device__ __forceinline__ void p2p_begin(const qcoll__ipc_view_t &v,
                                          BlockState *s) {
  grid_dependency_wait(); /* as in block_begin */
  if (threadIdx.x == 0) {
#pragma unroll
    for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++) s->bases[p] = v.bases[p];
    s->epoch = 0; /* unused: channels count steps instead */
    s->failed = 0;
  }
  __syncthreads();
}

/* Steps (slot uses) of one lane.  A lane carries, in every step of
 * step_elems, the elements [lane * slot_elems, (lane + 1) * slot_elems) of
 * that step. */
struct LaneSteps {
  size_t slot_elems, step_elems;
};

__device__ __forceinline__ LaneSteps lane_steps(const qcoll__ipc_p2p_t &c,
                                                size_t elem) {
  LaneSteps l;
  l.slot_elems = c.pair_bytes / (2 * QCOLL_IPC_P2P_LANES) / elem;
  l.step_elems = l.slot_elems * QCOLL_IPC_P2P_LANES;
  return l;
}

/* Inbox lane slot: lane's two slots follow each other. */
__device__ __forceinline__ uint4 *lane_slot(char *inbox,
                                            const qcoll__ipc_p2p_t &c, int lane,
                                            uint32_t seq) {
  size_t slot_bytes = c.pair_bytes / (2 * QCOLL_IPC_P2P_LANES);
  return reinterpret_cast<uint4 *>(inbox + ((size_t)lane * 2 + (seq & 1u)) *
                                               slot_bytes);
}

template <typename W>
QCOLL_KERNEL send_kernel(qcoll__ipc_view_t v, qcoll__ipc_p2p_t c, const W *src,
                         size_t n, int peer) {
  constexpr int E = kPack / sizeof(W);
  __shared__ BlockState s;
  __shared__ uint32_t start_seq;
  p2p_begin(v, &s);
  const LaneSteps l = lane_steps(c, sizeof(W));
  char *inbox = s.bases[peer] + c.offset + (size_t)v.rank * c.pair_bytes;
  for (int lane = blockIdx.x; lane < QCOLL_IPC_P2P_LANES; lane += gridDim.x) {
    size_t lane_first = (size_t)lane * l.slot_elems;
    if (lane_first >= n) break;
    uint32_t *seq_word =
        p2p_word(&s, v.rank, QCOLL_IPC_P2P_SEND_SEQ, peer, lane);
    const uint32_t *consumed =
        p2p_word(&s, v.rank, QCOLL_IPC_P2P_CONSUMED, peer, lane);
    uint32_t *ready = p2p_word(&s, peer, QCOLL_IPC_P2P_READY, v.rank, lane);
    if (threadIdx.x == 0) start_seq = *seq_word;
    __syncthreads();
    uint32_t seq = start_seq;
    for (size_t base = lane_first; base < n; base += l.step_elems) {
      seq++;
      size_t m = n - base < l.slot_elems ? n - base : l.slot_elems;
      /* The slot's previous use, step seq - 2, must have been taken out. */
      if (threadIdx.x == 0 &&
          !wait_reached(v, &s, consumed, seq - 2u, peer, QCOLL_IPC_PHASE_SEND))
        s.failed = 1;
      __syncthreads();
      if (s.failed) return;
      copy_in(lane_slot(inbox, c, lane, seq), src + base, m, 0,
              (m + E - 1) / E);
      __syncthreads(); /* the block's copies happen before the flag */
      if (threadIdx.x == 0) {
        __threadfence_system();
        store_release_sys(ready, seq);
      }
    }
    if (threadIdx.x == 0) *seq_word = seq;
    __syncthreads(); /* start_seq is rewritten for the next lane */
  }
}

template <typename W>
QCOLL_KERNEL recv_kernel(qcoll__ipc_view_t v, qcoll__ipc_p2p_t c, W *dst,
                         size_t n, int peer) {
  constexpr int E = kPack / sizeof(W);
  __shared__ BlockState s;
  __shared__ uint32_t start_seq;
  p2p_begin(v, &s);
  const LaneSteps l = lane_steps(c, sizeof(W));
  char *inbox = s.bases[v.rank] + c.offset + (size_t)peer * c.pair_bytes;
  for (int lane = blockIdx.x; lane < QCOLL_IPC_P2P_LANES; lane += gridDim.x) {
    size_t lane_first = (size_t)lane * l.slot_elems;
    if (lane_first >= n) break;
    uint32_t *seq_word =
        p2p_word(&s, v.rank, QCOLL_IPC_P2P_RECV_SEQ, peer, lane);
    const uint32_t *ready =
        p2p_word(&s, v.rank, QCOLL_IPC_P2P_READY, peer, lane);
    uint32_t *consumed =
        p2p_word(&s, peer, QCOLL_IPC_P2P_CONSUMED, v.rank, lane);
    if (threadIdx.x == 0) start_seq = *seq_word;
    __syncthreads();
    uint32_t seq = start_seq;
    for (size_t base = lane_first; base < n; base += l.step_elems) {
      seq++;
      size_t m = n - base < l.slot_elems ? n - base : l.slot_elems;
      if (threadIdx.x == 0 &&
          !wait_reached(v, &s, ready, seq, peer, QCOLL_IPC_PHASE_RECV))
        s.failed = 1;
      __syncthreads(); /* the acquire happens before the block's reads */
      if (s.failed) return;
      copy_out(dst + base, lane_slot(inbox, c, lane, seq), m, 0,
               (m + E - 1) / E);
      __syncthreads(); /* every read is done before the slot is released */
      if (threadIdx.x == 0) {
        __threadfence_system();
        store_release_sys(consumed, seq);
      }
    }
    if (threadIdx.x == 0) *seq_word = seq;
    __syncthreads();
  }
}

/* ---- dispatch -------------------------------------------------------------
 */

typedef void (*coll_fn)(qcoll__ipc_view_t, qcoll__ipc_coll_args_t);

template <typename D>
coll_fn pick_reduction(qcoll__ipc_coll_t kind, qcoll_op_t op) {
  const bool scatter = kind == QCOLL_IPC_COLL_REDUCE_SCATTER;
#define QCOLL_PICK(OP)                                                     \
  return scatter ? reinterpret_cast<coll_fn>(reduce_scatter_kernel<D, OP>) \
                 : reinterpret_cast<coll_fn>(reduce_kernel<D, OP>)
  switch (op) {
    case QCOLL_SUM: QCOLL_PICK(QCOLL_SUM);
    case QCOLL_PROD: QCOLL_PICK(QCOLL_PROD);
    case QCOLL_MIN: QCOLL_PICK(QCOLL_MIN);
    case QCOLL_MAX: QCOLL_PICK(QCOLL_MAX);
    case QCOLL_AVG: QCOLL_PICK(QCOLL_AVG);
    default: return nullptr;
  }
#undef QCOLL_PICK
}

coll_fn pick_reduction_dtype(qcoll__ipc_coll_t kind, qcoll_dtype_t dtype,
                             qcoll_op_t op) {
  switch (dtype) {
    case QCOLL_I8: return pick_reduction<IntType<int8_t, uint8_t>>(kind, op);
    case QCOLL_U8: return pick_reduction<IntType<uint8_t, uint8_t>>(kind, op);
    case QCOLL_I32: return pick_reduction<IntType<int32_t, uint32_t>>(kind, op);
    case QCOLL_U32:
      return pick_reduction<IntType<uint32_t, uint32_t>>(kind, op);
    case QCOLL_I64: return pick_reduction<IntType<int64_t, uint64_t>>(kind, op);
    case QCOLL_U64:
      return pick_reduction<IntType<uint64_t, uint64_t>>(kind, op);
    case QCOLL_F16: return pick_reduction<F16Type>(kind, op);
    case QCOLL_BF16: return pick_reduction<BF16Type>(kind, op);
    case QCOLL_F32: return pick_reduction<FloatType<float, float>>(kind, op);
    case QCOLL_F64: return pick_reduction<FloatType<double, double>>(kind, op);
    default: return nullptr;
  }
}

template <typename W>
coll_fn pick_mover(qcoll__ipc_coll_t kind) {
  switch (kind) {
    case QCOLL_IPC_COLL_BROADCAST:
      return reinterpret_cast<coll_fn>(broadcast_kernel<W>);
    case QCOLL_IPC_COLL_ALL_GATHER:
      return reinterpret_cast<coll_fn>(all_gather_kernel<W>);
    case QCOLL_IPC_COLL_ALL_TO_ALL:
      return reinterpret_cast<coll_fn>(all_to_all_kernel<W>);
    default: return nullptr;
  }
}

size_t elem_size(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_I8:
    case QCOLL_U8: return 1;
    case QCOLL_F16:
    case QCOLL_BF16: return 2;
    case QCOLL_I32:
    case QCOLL_U32:
    case QCOLL_F32: return 4;
    case QCOLL_I64:
    case QCOLL_U64:
    case QCOLL_F64: return 8;
    default: return 0;
  }
}

coll_fn pick_mover_size(qcoll__ipc_coll_t kind, size_t es) {
  switch (es) {
    case 1: return pick_mover<uint8_t>(kind);
    case 2: return pick_mover<uint16_t>(kind);
    case 4: return pick_mover<uint32_t>(kind);
    case 8: return pick_mover<uint64_t>(kind);
    default: return nullptr;
  }
}

coll_fn pick_kernel(qcoll__ipc_coll_t kind, qcoll_dtype_t dtype,
                    qcoll_op_t op) {
  switch (kind) {
    case QCOLL_IPC_COLL_ALL_REDUCE:
    case QCOLL_IPC_COLL_REDUCE:
    case QCOLL_IPC_COLL_REDUCE_SCATTER:
      return pick_reduction_dtype(kind, dtype, op);
    case QCOLL_IPC_COLL_BROADCAST:
    case QCOLL_IPC_COLL_ALL_GATHER:
    case QCOLL_IPC_COLL_ALL_TO_ALL:
      return pick_mover_size(kind, elem_size(dtype));
    case QCOLL_IPC_COLL_BARRIER: return barrier_kernel;
    default: return nullptr;
  }
}

typedef void (*p2p_fn)(qcoll__ipc_view_t, qcoll__ipc_p2p_t, void *, size_t,
                       int);

p2p_fn pick_p2p(bool send, size_t es) {
#define QCOLL_PICK(W)                                    \
  return send ? reinterpret_cast<p2p_fn>(send_kernel<W>) \
              : reinterpret_cast<p2p_fn>(recv_kernel<W>)
  switch (es) {
    case 1: QCOLL_PICK(uint8_t);
    case 2: QCOLL_PICK(uint16_t);
    case 4: QCOLL_PICK(uint32_t);
    case 8: QCOLL_PICK(uint64_t);
    default: return nullptr;
  }
#undef QCOLL_PICK
}

bool view_ok(const qcoll__ipc_view_t *view) {
  return view->nranks >= 1 && view->nranks <= QCOLL_IPC_MAX_RANKS &&
         view->rank >= 0 && view->rank < view->nranks;
}

/* Bytes per word the p2p kernels move at once: the largest of 8, 4, 2, 1
 * that divides both the message and the buffer's address.  Each side picks
 * its own: the channel's layout is in bytes (slots are multiples of 256
 * bytes), so sender and receiver agree whatever words they use. */
size_t p2p_word_size(const void *buf, size_t bytes) {
  size_t both = bytes | (size_t) reinterpret_cast<uintptr_t>(buf);
  if (both % 8 == 0) return 8;
  if (both % 4 == 0) return 4;
  if (both % 2 == 0) return 2;
  return 1;
}

int p2p_grid(const qcoll__ipc_view_t *view, const qcoll__ipc_p2p_t *p2p,
             size_t bytes) {
  size_t slot = p2p->pair_bytes / (2 * QCOLL_IPC_P2P_LANES);
  size_t lanes = (bytes + slot - 1) / slot;
  if (lanes > QCOLL_IPC_P2P_LANES) lanes = QCOLL_IPC_P2P_LANES;
  size_t limit = (size_t)grid_limit(view);
  if (lanes > limit) lanes = limit;
  return lanes < 1 ? 1 : (int)lanes;
}

cudaError_t p2p_launch(bool send, const qcoll__ipc_view_t *view,
                       const qcoll__ipc_p2p_t *p2p, void *buf, size_t bytes,
                       int peer, cudaStream_t stream) {
  if (!view_ok(view) || peer < 0 || peer >= view->nranks ||
      peer == view->rank || !p2p || p2p->pair_bytes < QCOLL_IPC_P2P_ALIGN ||
      p2p->pair_bytes % QCOLL_IPC_P2P_ALIGN != 0)
    return cudaErrorInvalidValue;
  if (bytes == 0) return cudaSuccess;
  size_t es = p2p_word_size(buf, bytes);
  p2p_fn fn = pick_p2p(send, es);
  size_t n = bytes / es;
  int grid = p2p_grid(view, p2p, bytes);
  qcoll__ipc_view_t v = *view;
  qcoll__ipc_p2p_t c = *p2p;
  void *args[] = {&v, &c, &buf, &n, &peer};
  return launch_kernel(reinterpret_cast<const void *>(fn), grid, args, stream,
                       v.pdl != 0);
}

}  // namespace

extern "C" int qcoll__cuda_coll_supported(qcoll__ipc_coll_t kind,
                                          qcoll_dtype_t dtype, qcoll_op_t op) {
  if (kind == QCOLL_IPC_COLL_BARRIER) return 1;
  bool reduces = kind == QCOLL_IPC_COLL_ALL_REDUCE ||
                 kind == QCOLL_IPC_COLL_REDUCE ||
                 kind == QCOLL_IPC_COLL_REDUCE_SCATTER;
  return pick_kernel(kind, dtype, reduces ? op : QCOLL_SUM) != nullptr;
}

extern "C" size_t qcoll__cuda_coll_chunk_elems(const qcoll__ipc_view_t *view,
                                               qcoll__ipc_coll_t kind,
                                               qcoll_dtype_t dtype) {
  size_t es = elem_size(dtype);
  if (!es || !view_ok(view)) return 0;
  if (kind == QCOLL_IPC_COLL_REDUCE_SCATTER ||
      kind == QCOLL_IPC_COLL_ALL_TO_ALL)
    return sub_block_bytes(view->region_bytes, view->nranks) / es;
  size_t bytes = view->region_bytes;
  if (kind == QCOLL_IPC_COLL_REDUCE || kind == QCOLL_IPC_COLL_BROADCAST) {
    /* whole 4 KiB keep every launch's offset pack-aligned */
    size_t cap = QCOLL_IPC_ROOTED_LAUNCH_BYTES / (size_t)view->nranks /
                 4096 * 4096;
    if (cap >= 4096 && cap < bytes) bytes = cap;
  }
  return bytes / es;
}

extern "C" int qcoll__cuda_coll_grid(const qcoll__ipc_view_t *view,
                                     const qcoll__ipc_coll_args_t *args) {
  if (args->kind == QCOLL_IPC_COLL_BARRIER) return 1;
  size_t es = elem_size(args->dtype);
  size_t packs = (args->len * es + kPack - 1) / kPack;
  /* The all-reduce and reduce give two packs to a thread, so the
   * reduction step (one nranks-th of the range per rank) has work too;
   * the others one pack per thread per destination or source. */
  bool two = args->kind == QCOLL_IPC_COLL_ALL_REDUCE ||
             args->kind == QCOLL_IPC_COLL_REDUCE;
  size_t per_block = two ? 2 * (size_t)kThreads : (size_t)kThreads;
  size_t grid = (packs + per_block - 1) / per_block;
  size_t limit = (size_t)grid_limit(view);
  if (grid > limit) grid = limit;
  if (grid < 1) grid = 1;
  return (int)grid;
}

extern "C" cudaError_t qcoll__cuda_coll_launch(
    const qcoll__ipc_view_t *view, const qcoll__ipc_coll_args_t *args,
    cudaStream_t stream) {
  if (!view_ok(view) || !args) return cudaErrorInvalidValue;
  const bool barrier = args->kind == QCOLL_IPC_COLL_BARRIER;
  coll_fn fn = pick_kernel(args->kind, args->dtype, args->op);
  if (!fn) return cudaErrorInvalidValue;
  if (!barrier) {
    if (args->len > qcoll__cuda_coll_chunk_elems(view, args->kind, args->dtype))
      return cudaErrorInvalidValue;
    if ((args->kind == QCOLL_IPC_COLL_REDUCE ||
         args->kind == QCOLL_IPC_COLL_BROADCAST) &&
        (args->root < 0 || args->root >= view->nranks))
      return cudaErrorInvalidValue;
    if (args->len == 0) return cudaSuccess;
  }
  int grid = qcoll__cuda_coll_grid(view, args);
  qcoll__ipc_view_t v = *view;
  qcoll__ipc_coll_args_t a = *args;
  void *params[] = {&v, &a};
  return launch_kernel(reinterpret_cast<const void *>(fn), grid, params,
                       stream, v.pdl != 0);
}

extern "C" cudaError_t qcoll__cuda_send_launch(const qcoll__ipc_view_t *view,
                                               const qcoll__ipc_p2p_t *p2p,
                                               const void *sendbuf,
                                               size_t bytes, int peer,
                                               cudaStream_t stream) {
  return p2p_launch(true, view, p2p, const_cast<void *>(sendbuf), bytes, peer,
                    stream);
}

extern "C" cudaError_t qcoll__cuda_recv_launch(const qcoll__ipc_view_t *view,
                                               const qcoll__ipc_p2p_t *p2p,
                                               void *recvbuf, size_t bytes,
                                               int peer, cudaStream_t stream) {
  return p2p_launch(false, view, p2p, recvbuf, bytes, peer, stream);
}

extern "C" cudaError_t qcoll__cuda_coll_resident_blocks(int *blocks) {
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  int per_sm = 1 << 30;
  auto consider = [&](const void *fn) -> cudaError_t {
    int k = 0;
    cudaError_t e =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k, fn, kThreads, 0);
    if (e == cudaSuccess && k < per_sm) per_sm = k;
    return e;
  };
  for (int kind = 0; kind < QCOLL_IPC_COLL_COUNT && err == cudaSuccess; kind++)
    for (int d = 0; d < QCOLL_DTYPE_COUNT && err == cudaSuccess; d++)
      for (int o = 0; o < QCOLL_OP_COUNT && err == cudaSuccess; o++) {
        coll_fn fn = pick_kernel((qcoll__ipc_coll_t)kind, (qcoll_dtype_t)d,
                                 (qcoll_op_t)o);
        if (fn) err = consider(reinterpret_cast<const void *>(fn));
      }
  for (size_t es = 1; es <= 8 && err == cudaSuccess; es *= 2)
    for (int send = 0; send < 2 && err == cudaSuccess; send++)
      err = consider(reinterpret_cast<const void *>(pick_p2p(send != 0, es)));
  if (err != cudaSuccess) return err;
  *blocks = per_sm * sms;
  return cudaSuccess;
}
