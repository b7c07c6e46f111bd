/*
 * One-shot and two-shot all-reduce over CUDA IPC peer memory.
 *
 * Algorithm.  Every rank of the communicator maps every other rank's IPC
 * buffer (launch.h gives its layout).  A launch handles at most one data
 * region of elements; larger messages are a host loop of launches, each
 * self-contained.  The elements are cut into 16-byte packs and the packs
 * into one contiguous range per block; block b of every rank handles the
 * same range, so blocks only ever wait on peer blocks of the same index.
 *
 *  one-shot:  copy my input range into my one-shot region P;  barrier 0;
 *             read the range from every rank's one-shot region P, reduce,
 *             write my output.  P is the parity of the number of one-shot
 *             launches this rank has completed (a counter in its buffer,
 *             advanced by the last block of each launch), so consecutive
 *             one-shot launches alternate between the two regions.  No
 *             closing barrier is needed: peers may still read my region P
 *             after I finish, but my next one-shot writes the other region,
 *             and the one-shot after that starts only once this rank has
 *             passed barrier 0 of the next one, which every peer reaches
 *             only after its kernel for this launch has finished.  No other
 *             kernel touches the one-shot regions, and the one-shot writes
 *             nothing else that a peer reads.
 *  two-shot:  copy my input range into my region 0;  barrier 0;  the range
 *             is cut into nranks segments and rank r reduces segment r from
 *             every rank's region 0 into its own region 1;  barrier 1;
 *             everyone copies every segment from its owner's region 1 to
 *             its output.  No closing barrier is needed: my region 0 is
 *             read by peers only before they arrive at barrier 1, which this
 *             launch waits for, and my region 1 is written by the next
 *             launch only after its barrier 0, which every peer reaches
 *             only once its kernel for this launch has finished (launches
 *             of a communicator are stream-ordered on every rank).
 *
 * The two-shot's three loops keep several 16-byte accesses in flight per
 * thread (kCopyUnroll packs per round when copying, kReduceLoads loads per
 * round when reducing): a round issues all its loads before its first
 * store.
 *
 * Reductions load every rank's pack, convert to fp32 and combine them in
 * rank order 0..n-1, then round once to the element type: every rank
 * computes the same operations on the same values, so results are bitwise
 * identical on all ranks.
 *
 * Synchronisation protocol.  Each block has an epoch counter in device
 * memory (this rank's buffer).  Thread 0 reads it at kernel start and the
 * launch uses e = counter + 1 (0 skipped on wrap, so zeroed flags never
 * match) for every flag it writes; thread 0 stores e back at the end.  The
 * kernel advances the epoch, never the host, so a captured graph replays
 * correctly: nothing that changes between calls is a kernel argument.  A
 * barrier of phase p in block b: __syncthreads; thread t < nranks (t !=
 * rank) issues a release store (system scope; it orders the block's
 * writes, which the __syncthreads ordered before it) of e into peer t's
 * slot [b][rank][p], then spins with acquire loads on its own slot
 * [b][t][p] until it reaches e (signed distance modulo 2^32).  Because
 * every rank's block b runs the same sequence of launches, their epochs
 * advance in lockstep, at most one launch apart: after a one-shot a peer
 * may overwrite a slot with its next epoch before this rank has read it,
 * which "reaches" accepts, but it cannot go further without this rank's
 * next flag.  Flag and data regions are fixed per
 * phase, independent of message and grid size.
 *
 * The protocol's code (primitives, epochs, barriers, deadlines) is in
 * ipc_sync.cuh, shared with the quantised two-shot of allreduce_quant.cu.
 *
 * Every wait has a deadline (timeout_ns, measured with %globaltimer) and
 * also stops when the host raises the host-mapped abort word
 * (qcoll_comm_abort) or a peer writes this rank's abort word.  On expiry or
 * local abort the block writes a description into the host-mapped error
 * word, writes its rank into every peer's abort word (so they stop waiting
 * and report a peer failure instead of timing out one after another) and
 * returns.
 *
 * Requirements.  All blocks of all ranks that share a GPU must be resident
 * at once (a block spinning on a peer block that cannot be scheduled would
 * deadlock): the host caps the grid at the GPU's resident blocks (halved
 * and divided among the ranks when several share the GPU, leaving room for
 * other work), at QCOLL_MAX_BLOCKS and at QCOLL_IPC_MAX_BLOCKS (see
 * agreed_max_grid in src/transport/cuda_ipc.c).  Every rank makes the
 * same launches (count, dtype, op, algorithm) in the same order on one
 * stream, so grids and ranges agree.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "elem_ops.cuh"
#include "ipc_sync.cuh"
#include "launch.h"

namespace {

/* Packs [begin, end) of the user's input staged at byte `offset` of this
 * rank's buffer. */
template <typename T>
__device__ __forceinline__ void copy_in(const qcoll__ipc_view_t &v,
                                        const BlockState *s, size_t offset,
                                        const T *src, size_t count,
                                        size_t begin, size_t end) {
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % kPackBytes) == 0;
  uint4 *mine = reinterpret_cast<uint4 *>(s->bases[v.rank] + offset);
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    mine[i] = load_user(src, i, count, aligned).raw;
}

/* Pack i reduced over every rank's staged input (at byte `offset` of each
 * rank's buffer), in rank order.  All loads are issued before the first
 * add.  Loads bypass L1 (peers wrote the data). */
template <typename T, typename Op, int kRanks = QCOLL_IPC_MAX_RANKS>
__device__ __forceinline__ Pack<T> combine_packs(int nranks,
                                                 const uint4 in[kRanks]);

template <typename T, typename Op>
__device__ __forceinline__ Pack<T> reduce_pack(const qcoll__ipc_view_t &v,
                                               const BlockState *s,
                                               size_t offset, size_t i) {
  uint4 in[QCOLL_IPC_MAX_RANKS];
#pragma unroll
  for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++)
    if (p < v.nranks)
      in[p] = __ldcg(reinterpret_cast<const uint4 *>(s->bases[p] + offset) + i);
  return combine_packs<T, Op>(v.nranks, in);
}

/* The packs in[0 .. nranks - 1] (nranks <= kRanks) combined in rank order
 * in fp32, rounded once. */
template <typename T, typename Op, int kRanks>
__device__ __forceinline__ Pack<T> combine_packs(int nranks,
                                                 const uint4 in[kRanks]) {
  constexpr int E = Pack<T>::kElems;
  float acc[E];
  Pack<T> x;
  x.raw = in[0];
#pragma unroll
  for (int j = 0; j < E; j++) acc[j] = Elem<T>::to_f32(x.get(j));
#pragma unroll
  for (int p = 1; p < kRanks; p++) {
    if (p < nranks) {
      x.raw = in[p];
#pragma unroll
      for (int j = 0; j < E; j++)
        acc[j] = Op::apply(acc[j], Elem<T>::to_f32(x.get(j)));
    }
  }
  Pack<T> out;
#pragma unroll
  for (int j = 0; j < E; j++) out.set(j, Elem<T>::from_f32(acc[j]));
  return out;
}

/* ---- two-shot: several 16-byte accesses in flight per thread ------------
 * A thread takes packs i, i + B, ..., i + (U - 1) B (B = blockDim.x) of a
 * range per round and issues all their loads before its first store, so U
 * accesses per thread are in flight instead of one; the rest of the range
 * (fewer than U B packs) goes one pack per thread.  The order of the
 * arithmetic per pack is unchanged, so results are the same bits. */

/* Packs of one round per thread when copying (input in, result out). */
constexpr int kCopyUnroll = 4;
/* Packs of one round per thread when reducing: kReduceLoads 16-byte loads
 * (U packs of n ranks) in flight, within the 64 registers per thread of
 * two 512-thread blocks per SM. */
constexpr int kReduceLoads = 8;

/* Packs [begin, end) of the user's input staged at byte `offset` of this
 * rank's buffer, kCopyUnroll at a time. */
template <typename T>
__device__ __forceinline__ void twoshot_copy_in(const qcoll__ipc_view_t &v,
                                                const BlockState *s,
                                                size_t offset, const T *src,
                                                size_t count, size_t begin,
                                                size_t end) {
  constexpr int U = kCopyUnroll;
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % kPackBytes) == 0;
  uint4 *mine = reinterpret_cast<uint4 *>(s->bases[v.rank] + offset);
  const size_t b = blockDim.x;
  size_t i = begin + threadIdx.x;
  for (; i + (U - 1) * b < end; i += U * b) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      r[u] = load_user(src, i + u * b, count, aligned).raw;
#pragma unroll
    for (int u = 0; u < U; u++) mine[i + u * b] = r[u];
  }
  for (; i < end; i += b) mine[i] = load_user(src, i, count, aligned).raw;
}

/* Packs [begin, end) reduced over every rank's staged input into `result`,
 * U packs (of kRanks >= nranks loads each) per round. */
template <typename T, typename Op, int U, int kRanks>
__device__ __forceinline__ void twoshot_reduce_range(
    const qcoll__ipc_view_t &v, const BlockState *s, size_t offset,
    uint4 *result, size_t begin, size_t end) {
  const size_t b = blockDim.x;
  const int n = v.nranks;
  size_t i = begin + threadIdx.x;
  for (; i + (U - 1) * b < end; i += U * b) {
    uint4 in[U][kRanks];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int p = 0; p < kRanks; p++)
        if (p < n)
          in[u][p] = __ldcg(
              reinterpret_cast<const uint4 *>(s->bases[p] + offset) + i +
              u * b);
#pragma unroll
    for (int u = 0; u < U; u++)
      result[i + u * b] = combine_packs<T, Op, kRanks>(n, in[u]).raw;
  }
  for (; i < end; i += b) result[i] = reduce_pack<T, Op>(v, s, offset, i).raw;
}

/* The reduction of my segment with as many packs per round as the world
 * leaves registers for: 4 for 2 ranks, 2 for up to 4, else 1. */
template <typename T, typename Op>
__device__ __forceinline__ void twoshot_reduce(const qcoll__ipc_view_t &v,
                                               const BlockState *s,
                                               size_t offset, uint4 *result,
                                               size_t begin, size_t end) {
  if (v.nranks <= 2)
    twoshot_reduce_range<T, Op, kReduceLoads / 2, 2>(v, s, offset, result,
                                                     begin, end);
  else if (v.nranks <= 4)
    twoshot_reduce_range<T, Op, kReduceLoads / 4, 4>(v, s, offset, result,
                                                     begin, end);
  else
    twoshot_reduce_range<T, Op, 1, QCOLL_IPC_MAX_RANKS>(v, s, offset, result,
                                                        begin, end);
}

/* Packs [begin, end) of an owner's region 1 (`result`) to the user's
 * output, kCopyUnroll at a time. */
template <typename T>
__device__ __forceinline__ void twoshot_copy_out(T *recv, size_t count,
                                                 bool aligned,
                                                 const uint4 *result,
                                                 size_t begin, size_t end) {
  constexpr int U = kCopyUnroll;
  const size_t b = blockDim.x;
  size_t i = begin + threadIdx.x;
  for (; i + (U - 1) * b < end; i += U * b) {
    Pack<T> p[U];
#pragma unroll
    for (int u = 0; u < U; u++) p[u].raw = __ldcg(result + i + u * b);
#pragma unroll
    for (int u = 0; u < U; u++)
      store_user(recv, i + u * b, count, aligned, p[u]);
  }
  for (; i < end; i += b) {
    Pack<T> p;
    p.raw = __ldcg(result + i);
    store_user(recv, i, count, aligned, p);
  }
}

/* ---- the one-shot launch counter ----------------------------------------- */

/* Thread 0 of every block, on every exit path: the last block of the
 * launch to get here advances the launch counter. */
__device__ __forceinline__ void oneshot_count_out(const qcoll__ipc_view_t &v,
                                                  const BlockState *s) {
  if (threadIdx.x != 0) return;
  uint32_t *c = oneshot_counter(v, s);
  if (atomicAdd(&c[0], 1u) == gridDim.x - 1) {
    c[0] = 0;
    c[1] += 1u;
  }
}

/* ---- kernels ------------------------------------------------------------ */

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    oneshot_kernel(qcoll__ipc_view_t v, const T *send, T *recv, size_t count) {
  __shared__ BlockState s;
  /* block_begin read the launch counter (s.oneshots) before any block of
   * this launch can advance it (oneshot_count_out), and after the previous
   * launch's last write: kernels of a stream run one after another. */
  block_begin(v, &s);
  const size_t staged = qcoll__ipc_oneshot_offset(v.oneshot_bytes, s.oneshots);
  const size_t packs = (count + Pack<T>::kElems - 1) / Pack<T>::kElems;
  size_t begin, end;
  block_range(packs, &begin, &end);

  copy_in(v, &s, staged, send, count, begin, end);
  if (block_barrier(v, 0, &s)) {
    const bool aligned = (reinterpret_cast<uintptr_t>(recv) % kPackBytes) == 0;
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      store_user(recv, i, count, aligned, reduce_pack<T, Op>(v, &s, staged, i));
    block_end(v, &s);
  }
  oneshot_count_out(v, &s);
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    twoshot_kernel(qcoll__ipc_view_t v, const T *send, T *recv, size_t count) {
  __shared__ BlockState s;
  block_begin(v, &s);
  const size_t packs = (count + Pack<T>::kElems - 1) / Pack<T>::kElems;
  size_t begin, end;
  block_range(packs, &begin, &end);
  const size_t len = end - begin;
  const int n = v.nranks;

  const size_t inputs =
      qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, 0);
  twoshot_copy_in(v, &s, inputs, send, count, begin, end);
  if (!block_barrier(v, 0, &s)) return;

  /* My segment, reduced into my region 1. */
  {
    size_t seg_begin = begin + len * (size_t)v.rank / (size_t)n;
    size_t seg_end = begin + len * (size_t)(v.rank + 1) / (size_t)n;
    uint4 *result = reinterpret_cast<uint4 *>(region(v, &s, v.rank, 1));
    twoshot_reduce<T, Op>(v, &s, inputs, result, seg_begin, seg_end);
  }
  if (!block_barrier(v, 1, &s)) return;

  /* Every segment from its owner, starting with mine so that ranks do not
   * all read owner 0 first. */
  const bool aligned = (reinterpret_cast<uintptr_t>(recv) % kPackBytes) == 0;
  for (int k = 0; k < n; k++) {
    int owner = (v.rank + k) % n;
    size_t seg_begin = begin + len * (size_t)owner / (size_t)n;
    size_t seg_end = begin + len * (size_t)(owner + 1) / (size_t)n;
    const uint4 *result =
        reinterpret_cast<const uint4 *>(region(v, &s, owner, 1));
    twoshot_copy_out(recv, count, aligned, result, seg_begin, seg_end);
  }
  block_end(v, &s);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*kernel_fn)(qcoll__ipc_view_t, const void *, void *, size_t);

template <typename T, typename Op>
kernel_fn pick_algo(qcoll__ipc_algo_t algo) {
  return algo == QCOLL_IPC_ONESHOT
             ? reinterpret_cast<kernel_fn>(oneshot_kernel<T, Op>)
             : reinterpret_cast<kernel_fn>(twoshot_kernel<T, Op>);
}

template <typename T>
kernel_fn pick_op(qcoll__ipc_algo_t algo, qcoll_op_t op) {
  switch (op) {
    case QCOLL_SUM: return pick_algo<T, OpSum>(algo);
    case QCOLL_MIN: return pick_algo<T, OpMin>(algo);
    case QCOLL_MAX: return pick_algo<T, OpMax>(algo);
    default: return nullptr;
  }
}

kernel_fn pick_kernel(qcoll__ipc_algo_t algo, qcoll_dtype_t dtype,
                      qcoll_op_t op) {
  if (algo != QCOLL_IPC_ONESHOT && algo != QCOLL_IPC_TWOSHOT) return nullptr;
  switch (dtype) {
    case QCOLL_F16: return pick_op<__half>(algo, op);
    case QCOLL_BF16: return pick_op<__nv_bfloat16>(algo, op);
    case QCOLL_F32: return pick_op<float>(algo, op);
    default: return nullptr;
  }
}

size_t elem_bytes(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16:
    case QCOLL_BF16: return 2;
    case QCOLL_F32: return 4;
    default: return 0;
  }
}

}  // namespace

extern "C" int qcoll__cuda_all_reduce_supported(qcoll_dtype_t dtype,
                                                qcoll_op_t op) {
  return pick_kernel(QCOLL_IPC_ONESHOT, dtype, op) != nullptr;
}

extern "C" size_t qcoll__cuda_all_reduce_chunk_elems(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo,
    qcoll_dtype_t dtype) {
  size_t es = elem_bytes(dtype);
  size_t bytes =
      algo == QCOLL_IPC_ONESHOT ? view->oneshot_bytes : view->region_bytes;
  return es ? bytes / es : 0;
}

extern "C" int qcoll__cuda_all_reduce_grid(const qcoll__ipc_view_t *view,
                                           qcoll__ipc_algo_t algo, size_t count,
                                           qcoll_dtype_t dtype) {
  size_t bytes = count * elem_bytes(dtype);
  size_t packs = (bytes + kPackBytes - 1) / kPackBytes;
  /* One-shot: about one pack per thread (each reads nranks packs).
   * Two-shot: two packs per thread, so the reduce step has work too. */
  size_t per_block = algo == QCOLL_IPC_ONESHOT ? kThreads : 2 * kThreads;
  size_t grid = (packs + per_block - 1) / per_block;
  size_t limit = view->max_grid > 0 ? (size_t)view->max_grid : 1;
  if (limit > QCOLL_IPC_MAX_BLOCKS) limit = QCOLL_IPC_MAX_BLOCKS;
  if (grid > limit) grid = limit;
  if (grid < 1) grid = 1;
  return (int)grid;
}

extern "C" cudaError_t qcoll__cuda_all_reduce_launch(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo, const void *sendbuf,
    void *recvbuf, size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
    cudaStream_t stream) {
  kernel_fn fn = pick_kernel(algo, dtype, op);
  if (!fn || count > qcoll__cuda_all_reduce_chunk_elems(view, algo, dtype) ||
      view->nranks < 1 || view->nranks > QCOLL_IPC_MAX_RANKS)
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  int grid = qcoll__cuda_all_reduce_grid(view, algo, count, dtype);
  qcoll__ipc_view_t v = *view;
  void *args[] = {&v, &sendbuf, &recvbuf, &count};
  /* cudaLaunchKernel reports this launch's error only, not one left over
   * from the caller's earlier calls. */
  return cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(grid),
                          dim3(kThreads), args, 0, stream);
}

extern "C" cudaError_t qcoll__cuda_all_reduce_resident_blocks(int *blocks) {
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  int per_sm = 1 << 30;
  for (int a = 0; a < 2; a++)
    for (qcoll_dtype_t d : dtypes)
      for (qcoll_op_t o : ops) {
        int n = 0;
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n,
            reinterpret_cast<const void *>(
                pick_kernel((qcoll__ipc_algo_t)a, d, o)),
            kThreads, 0);
        if (err != cudaSuccess) return err;
        if (n < per_sm) per_sm = n;
      }
  int quant_per_sm = 0;
  err = qcoll__cuda_all_reduce_quant_blocks_per_sm(&quant_per_sm);
  if (err != cudaSuccess) return err;
  if (quant_per_sm < per_sm) per_sm = quant_per_sm;
  *blocks = per_sm * sms;
  return cudaSuccess;
}
