/*
 * The push one-shot all-reduce: data and readiness in one store.
 *
 * Algorithm.  Every rank pushes its whole input, in 16-byte stores, into
 * its own slot of every peer's current buffer (push_launch.h gives the
 * layout), then polls its own current buffer until every word of every
 * peer's slot has stopped holding the sentinel, reduces its own input and
 * the peers' slots in rank order (fp32, one rounding), writes the result
 * to the user's output and writes the sentinel back over what it read.
 * No flag, no barrier, no fence: one one-way trip between GPUs.  Messages
 * longer than a slot are a host loop of launches, each self-contained.
 * The elements are cut into 16-byte packs, the packs into one contiguous
 * range per block; block b pushes and reads the same range on every rank
 * (same grid, since every rank makes the same call), so a block waits only
 * on its peers' blocks of the same index.  A thread takes its packs U at a
 * time (push_shape): one per round when it has at most one (every launch
 * of the default slot size on a GPU of 132 SMs); when it has several, 4 per round
 * for up to 2 ranks and 2 for up to 4, all loaded before any is stored or
 * tested, so that its packs do not each pay a memory latency in turn.
 *
 * The sentinel.  An empty word holds 0xffffffff (QCOLL_PUSH_SENTINEL): in
 * f32 a negative NaN, in f16 and bf16 two of them.  Before a pack is sent
 * (and before a rank uses its own pack), every NaN in it becomes the
 * positive quiet NaN (0x7fc00000, 0x7e00, 0x7fc0), so no sent word ever
 * equals the sentinel, and every other value, signed zeros and infinities
 * included, is sent bit for bit.  The reduction makes no use of a NaN's
 * sign or payload (the GPU's fp32 arithmetic returns its canonical NaN,
 * fminf/fmaxf ignore NaN operands), so the results are those of the
 * inputs themselves: bitwise identical on every rank and equal to the
 * fp32 rank-order reduction.  A word is written and read whole (32-bit
 * accesses within the 16-byte ones): a reader that sees a word other than
 * the sentinel sees the word its sender wrote; a pack counts as arrived
 * only when all four words have.
 *
 * Rotation.  A control word in device memory (push area [1], local to
 * each rank) counts the rank's completed launches; launch c uses buffer
 * c mod 2.  Thread 0 of every block reads it before the block's first
 * __syncthreads (the previous launch's advance is visible: stream order,
 * or griddepcontrol.wait under programmatic dependent launch); after that
 * barrier the block's last thread announces the block on [0], and the
 * last block of the launch to announce itself advances [1] (and empties
 * [0]).  Every block has read [1] before it announces itself, so no block
 * reads the advanced value; the announcement is made by a thread that
 * holds no pack of a small message, so its atomic round trip is off the
 * path of the data.  The kernel advances the counter, never the host, so
 * a captured graph replays correctly.  Every rank makes the same
 * launches, so rank r's launch c and rank p's launch c use the same
 * buffer index.
 *
 * Why a buffer word is never written while its owner still needs it.
 * Only rank p writes slot p of rank r's buffer k; only r reads it and
 * writes the sentinel back.  Consider launch c (k = c mod 2) on r.
 *  1. Before p's launch c stores into the slot, r's write-back of launch
 *     c - 2 (the last use of buffer k) is done: p's launch c starts only
 *     after p's launch c - 1 finished, which waited for r's launch c - 1
 *     data, which r pushes only after its launch c - 2 completed (kernels
 *     of a stream run in order; with programmatic dependent launch the
 *     kernel pushes nothing before griddepcontrol.wait, which returns once
 *     the previous grid has completed and its memory is visible).  So p's
 *     store follows r's sentinel in the word's order and is not undone.
 *  2. p's next store into the slot (launch c + 2) comes after r has read
 *     launch c's data and written the sentinel back: by the same chain,
 *     p's launch c + 2 starts after p's launch c + 1 saw r's launch c + 1
 *     data, pushed after r's launch c completed.
 *  3. Launch c + 1 of p may run while r is still in launch c, but it
 *     writes buffer 1 - k.  Nothing goes further ahead: p's launch c + 2
 *     needs r's launch c + 1.
 * Two buffers are therefore enough; the sentinel is written back by the
 * thread that read the word, in the same launch, so no launch needs to
 * know an earlier launch's size.
 *
 * Every wait has a deadline (timeout_ns, %globaltimer) and stops when the
 * host raises its abort word or a peer writes this rank's abort word
 * (ipc_sync.cuh, wait_may_go_on); a failed wait is reported in the
 * host-mapped error word with phase QCOLL_IPC_PHASE_PUSH and tells the
 * peers to stop.
 *
 * Requirements.  As for the flag kernels (allreduce.cu): every block of
 * every rank that shares a GPU is resident at once (the host caps the
 * grid), every rank makes the same launches in the same order on one
 * stream.  The push areas start 0xff (the transport fills them at init).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "elem_ops.cuh"
#include "ipc_sync.cuh"
#include "push_launch.h"

namespace {

/* ---- NaNs made canonical, so that no sent word is the sentinel ------- */

__device__ __forceinline__ uint32_t canonical_f32(uint32_t u) {
  return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : u;
}
/* Both 16-bit halves of u, `exp_mask` the all-ones exponent of the format
 * and `quiet` its positive quiet NaN. */
__device__ __forceinline__ uint32_t canonical_16x2(uint32_t u,
                                                   uint32_t exp_mask,
                                                   uint32_t quiet) {
  uint32_t lo = u & 0xffffu, hi = u >> 16;
  if ((lo & 0x7fffu) > exp_mask) lo = quiet;
  if ((hi & 0x7fffu) > exp_mask) hi = quiet;
  return lo | (hi << 16);
}

template <typename T>
struct Canon;
template <>
struct Canon<float> {
  static __device__ __forceinline__ uint32_t word(uint32_t u) {
    return canonical_f32(u);
  }
};
template <>
struct Canon<__half> {
  static __device__ __forceinline__ uint32_t word(uint32_t u) {
    return canonical_16x2(u, 0x7c00u, 0x7e00u);
  }
};
template <>
struct Canon<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t word(uint32_t u) {
    return canonical_16x2(u, 0x7f80u, 0x7fc0u);
  }
};

template <typename T>
__device__ __forceinline__ uint4 canonical_pack(uint4 x) {
  return make_uint4(Canon<T>::word(x.x), Canon<T>::word(x.y),
                    Canon<T>::word(x.z), Canon<T>::word(x.w));
}

__device__ __forceinline__ bool holds_sentinel(uint4 x) {
  return x.x == QCOLL_PUSH_SENTINEL || x.y == QCOLL_PUSH_SENTINEL ||
         x.z == QCOLL_PUSH_SENTINEL || x.w == QCOLL_PUSH_SENTINEL;
}

/* ---- the kernel --------------------------------------------------------- */

/* Rank `owner`'s slot `sender` of buffer `buffer`, as packs. */
__device__ __forceinline__ uint4 *slot_packs(const qcoll__push_view_t &pv,
                                             const BlockState *s, int owner,
                                             unsigned buffer, int sender) {
  return reinterpret_cast<uint4 *>(
      s->bases[owner] + pv.area_offset +
      qcoll__push_slot_offset(pv.ipc.nranks, pv.slot_bytes, buffer, sender));
}

/* The rank's push control words: [0] blocks of this launch announced,
 * [1] launches completed.  From the view itself, not the block's shared
 * copy of the bases, so that thread 0 can read the launch index before
 * that copy is made. */
__device__ __forceinline__ uint32_t *push_control(const qcoll__push_view_t &pv) {
  return reinterpret_cast<uint32_t *>(pv.ipc.bases[pv.ipc.rank] +
                                      pv.area_offset);
}

/* Thread 0, before the block's first barrier: the launch's index (issued
 * early, so that the load is in flight together with the first pack's). */
__device__ __forceinline__ uint32_t launch_index(const qcoll__push_view_t &pv) {
  return load_relaxed_sys(&push_control(pv)[1]);
}

/* My pack i, canonical: pack `first` was loaded at the kernel's start. */
template <typename T>
__device__ __forceinline__ uint4 my_pack(size_t i, size_t first,
                                         uint4 first_pack, const T *send,
                                         size_t count, bool send_aligned) {
  return i == first
             ? first_pack
             : canonical_pack<T>(load_user(send, i, count, send_aligned).raw);
}

/* My own pack i into in[me]; the index is unrolled so that `in` stays in
 * registers. */
template <typename T, int R>
__device__ __forceinline__ void load_own(uint4 (&in)[R], int me, size_t i,
                                         size_t first, uint4 first_pack,
                                         const T *send, size_t count,
                                         bool send_aligned) {
#pragma unroll
  for (int p = 0; p < R; p++)
    if (p == me)
      in[p] = my_pack(i, first, first_pack, send, count, send_aligned);
}

/* U: packs per thread per round; R: a bound on the world size (the
 * arrays of peers' packs have R entries).  U = 1, R = 8 serves every
 * launch of at most one pack per thread; wider rounds serve threads with
 * several packs (push_shape). */
template <typename T, typename Op, int U, int R>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    push_kernel(qcoll__push_view_t pv, const T *send, T *recv, size_t count) {
  static_assert(U * R <= 32, "the pending mask has 32 bits");
  __shared__ BlockState s;
  const qcoll__ipc_view_t &v = pv.ipc;
  /* The input may come from the kernel before this one. */
  grid_dependency_wait();
  /* Thread 0 issues the load of the launch index first, then every thread
   * the load of its first pack, so both are in flight together; neither
   * value is used before both loads have been issued. */
  uint32_t index = 0;
  if (threadIdx.x == 0) index = launch_index(pv);
  const size_t packs = (count + Pack<T>::kElems - 1) / Pack<T>::kElems;
  size_t begin, end;
  block_range(packs, &begin, &end);
  const bool send_aligned =
      (reinterpret_cast<uintptr_t>(send) % kPackBytes) == 0;
  const bool recv_aligned =
      (reinterpret_cast<uintptr_t>(recv) % kPackBytes) == 0;
  const size_t first = begin + threadIdx.x;
  uint4 first_raw = make_uint4(0, 0, 0, 0);
  if (first < end) first_raw = load_user(send, first, count, send_aligned).raw;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++) s.bases[p] = v.bases[p];
    s.failed = 0;
    s.oneshots = index;
  }
  __syncthreads();
  /* The next launch may start its preamble; its data waits for us. */
  grid_dependents_launch();
  /* After that barrier the block has read the index: it counts itself out
   * (ipc_sync.cuh) from a thread that holds no pack of a small message. */
  if (threadIdx.x == blockDim.x - 1) count_out_of_launch(push_control(pv));

  const int n = v.nranks, me = v.rank;
  const unsigned buffer = s.oneshots % QCOLL_PUSH_BUFFERS;
  const uint4 first_pack = canonical_pack<T>(first_raw);

  /* Push: my packs into my slot of every peer's buffer, nearest peer
   * first so that the ranks do not all write to rank 0 at once; U packs
   * per round, all loaded before the first is stored. */
  const size_t stride = blockDim.x;
  for (size_t i0 = first; i0 < end; i0 += U * stride) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * stride;
      if (i < end)
        x[u] = my_pack(i, first, first_pack, send, count, send_aligned);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * stride;
      if (i >= end) break;
      for (int k = 1; k < n; k++) {
        const int p = (me + k) % n;
        store_volatile_v4(slot_packs(pv, &s, p, buffer, me) + i, x[u]);
      }
    }
  }

  /* Gather: every peer's pack from my own buffer, as soon as all four of
   * its words have arrived; then reduce in rank order and empty the slots.
   * U packs per round: bit u * R + p of `pending` says that peer p's pack
   * u has not arrived yet. */
  const uint4 empty = make_uint4(QCOLL_PUSH_SENTINEL, QCOLL_PUSH_SENTINEL,
                                 QCOLL_PUSH_SENTINEL, QCOLL_PUSH_SENTINEL);
  const uint32_t peers = ((1u << n) - 1u) & ~(1u << me);
  /* One pack per round: my own pack is loaded before the poll, so its
   * latency hides behind the peers'.  Wider rounds load theirs after it,
   * so that U packs of mine do not hold registers while the poll waits. */
  constexpr bool kOwnFirst = U == 1;
  for (size_t i0 = first; i0 < end; i0 += U * stride) {
    uint4 in[U][R];
    uint32_t pending = 0;
    uint64_t start = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * stride;
      if (i >= end) break;
      pending |= peers << (u * R);
      if (kOwnFirst) load_own<T, R>(in[u], me, i, first, first_pack, send,
                                    count, send_aligned);
    }
    for (uint32_t spins = 0;; spins++) {
      /* One poll issues the loads of every pending slot before it looks at
       * any (a pending slot's in[u][p] holds nothing yet), so the slots of
       * n - 1 peers cost one memory latency per poll, not n - 1 (on an
       * H100, 0.1-0.6 us per call at 2 ranks, 0.4-0.6 at 4, 0.8-1.1 at 8:
       * docs/results/2026-12-07-h100-push-poll.md), and so do U packs. */
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int p = 0; p < R; p++)
          if (pending & (1u << (u * R + p)))
            in[u][p] = load_volatile_v4(
                slot_packs(pv, &s, me, buffer, p) + i0 + u * stride);
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int p = 0; p < R; p++)
          if ((pending & (1u << (u * R + p))) && !holds_sentinel(in[u][p]))
            pending &= ~(1u << (u * R + p));
      if (pending == 0) break;
      if ((spins & 63u) != 63u) continue;
      /* Awaited "1", seen "0": the peer's data has not arrived. */
      int late = 0;
      while (!(pending & (1u << late))) late++;
      late %= R;
      if (!wait_may_go_on(v, &s, &start, spins, late, QCOLL_IPC_PHASE_PUSH, 1u,
                          0u)) {
        s.failed = 1;
        return;
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * stride;
      if (i >= end) break;
      if (!kOwnFirst) load_own<T, R>(in[u], me, i, first, first_pack, send,
                                     count, send_aligned);
#pragma unroll
      for (int p = 0; p < R; p++)
        if (p < n && p != me)
          store_volatile_v4(slot_packs(pv, &s, me, buffer, p) + i, empty);
      store_user(recv, i, count, recv_aligned,
                 reduce_in_rank_order<T, Op, R>(in[u], n));
    }
  }
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*push_fn)(qcoll__push_view_t, const void *, void *, size_t);

/* Most blocks a message is spread over below one pack per thread. */
constexpr size_t kSpreadBlocks = 16;

/* The kernel's shapes: the narrow one (one pack per thread per round,
 * any world size) and, for threads with several packs, U packs per round
 * for worlds of at most R ranks, within the same U * R = 8 loads in
 * flight per poll (and the same registers). */
enum PushShape { kNarrow, kWide2, kWide4, kShapes };

template <typename T, typename Op>
push_fn pick_shape(int shape) {
  switch (shape) {
    case kWide2: return reinterpret_cast<push_fn>(push_kernel<T, Op, 4, 2>);
    case kWide4: return reinterpret_cast<push_fn>(push_kernel<T, Op, 2, 4>);
    default:
      return reinterpret_cast<push_fn>(
          push_kernel<T, Op, 1, QCOLL_IPC_MAX_RANKS>);
  }
}

template <typename T>
push_fn pick_op(qcoll_op_t op, int shape) {
  switch (op) {
    case QCOLL_SUM: return pick_shape<T, OpSum>(shape);
    case QCOLL_MIN: return pick_shape<T, OpMin>(shape);
    case QCOLL_MAX: return pick_shape<T, OpMax>(shape);
    default: return nullptr;
  }
}

push_fn pick_kernel(qcoll_dtype_t dtype, qcoll_op_t op, int shape) {
  switch (dtype) {
    case QCOLL_F16: return pick_op<__half>(op, shape);
    case QCOLL_BF16: return pick_op<__nv_bfloat16>(op, shape);
    case QCOLL_F32: return pick_op<float>(op, shape);
    default: return nullptr;
  }
}

/* A launch whose threads hold at most one pack each (with the default
 * slot of 256 KiB, every launch of 2 and 4 ranks on a GPU of 132 SMs)
 * takes the narrow kernel; with several per thread (a larger
 * QCOLL_IPC_PUSH_BYTES, a small QCOLL_MAX_BLOCKS, fewer SMs) a thread
 * would otherwise load, wait for and store its packs one after the other. */
int push_shape(int nranks, size_t packs, int grid) {
  const size_t per_block = (packs + (size_t)grid - 1) / (size_t)grid;
  if (per_block <= (size_t)kThreads) return kNarrow;
  if (nranks <= 2) return kWide2;
  if (nranks <= 4) return kWide4;
  return kNarrow;
}

size_t elem_size(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16:
    case QCOLL_BF16: return 2;
    case QCOLL_F32: return 4;
    default: return 0;
  }
}

/* 16-byte packs of a message of `count` elements. */
size_t packs_of(size_t count, qcoll_dtype_t dtype) {
  return (count * elem_size(dtype) + kPackBytes - 1) / kPackBytes;
}

}  // namespace

extern "C" size_t qcoll__cuda_push_chunk_elems(const qcoll__push_view_t *view,
                                               qcoll_dtype_t dtype) {
  size_t es = elem_size(dtype);
  return es ? view->slot_bytes / es : 0;
}

extern "C" int qcoll__cuda_push_grid(const qcoll__push_view_t *view,
                                     size_t count, qcoll_dtype_t dtype) {
  size_t packs = packs_of(count, dtype);
  /* At most one pack per thread (each waits for nranks - 1 packs).  A
   * message of a few KiB is also spread at block_packs per block over up
   * to kSpreadBlocks blocks, so it waits on several SMs' memory pipes at
   * once instead of one's; more blocks than that were slower (64 blocks
   * of 128 packs at 128 KiB took 4.5 us where 16 of 512 took 4.1, on an
   * H200 at 2 ranks; docs/results/2026-12-02-h200-push-spread.md). */
  size_t per_block = view->block_packs > 0 && view->block_packs < kThreads
                         ? (size_t)view->block_packs
                         : (size_t)kThreads;
  size_t spread = (packs + per_block - 1) / per_block;
  if (spread > kSpreadBlocks) spread = kSpreadBlocks;
  size_t grid = (packs + kThreads - 1) / kThreads;
  if (grid < spread) grid = spread;
  const size_t limit = (size_t)grid_limit(&view->ipc);
  if (grid > limit) grid = limit;
  if (grid < 1) grid = 1;
  return (int)grid;
}

extern "C" cudaError_t qcoll__cuda_push_launch(
    const qcoll__push_view_t *view, const void *sendbuf, void *recvbuf,
    size_t count, qcoll_dtype_t dtype, qcoll_op_t op, cudaStream_t stream) {
  if (!pick_kernel(dtype, op, kNarrow) || view->slot_bytes == 0 ||
      count > qcoll__cuda_push_chunk_elems(view, dtype) ||
      view->ipc.nranks < 1 || view->ipc.nranks > QCOLL_IPC_MAX_RANKS)
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const int grid = qcoll__cuda_push_grid(view, count, dtype);
  push_fn fn = pick_kernel(dtype, op,
                           push_shape(view->ipc.nranks, packs_of(count, dtype), grid));
  qcoll__push_view_t v = *view;
  void *args[] = {&v, &sendbuf, &recvbuf, &count};
  return launch_kernel(reinterpret_cast<const void *>(fn), grid, args, stream,
                       v.ipc.pdl != 0);
}

extern "C" cudaError_t qcoll__cuda_push_blocks_per_sm(int *per_sm) {
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  int least = 1 << 30;
  for (qcoll_dtype_t d : dtypes)
    for (qcoll_op_t o : ops)
      for (int shape = 0; shape < kShapes; shape++) {
        int n = 0;
        cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, reinterpret_cast<const void *>(pick_kernel(d, o, shape)),
            kThreads, 0);
        if (err != cudaSuccess) return err;
        if (n < least) least = n;
      }
  *per_sm = least;
  return cudaSuccess;
}
