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
 *  one-shot:  copy my input range into my one-shot region P (unless my
 *             input is registered, see below);  barrier 0;
 *             read the range from every rank's one-shot region P (or its
 *             registered input), reduce, write my output.  P is the
 *             parity of the number of one-shot launches this rank has
 *             completed (a counter in its buffer,
 *             advanced by the last block of each launch), so consecutive
 *             one-shot launches alternate between the two regions.  No
 *             closing barrier is needed: peers may still read my region P
 *             after I finish, but my next one-shot writes the other region,
 *             and the one-shot after that starts only once this rank has
 *             passed barrier 0 of the next one, which every peer reaches
 *             only after its kernel for this launch has finished.  No other
 *             kernel touches the one-shot regions, and the one-shot writes
 *             nothing else that a peer reads.  When some rank's input is
 *             registered, peers read that user buffer itself after barrier
 *             0, and the rank's stream may overwrite it as soon as its
 *             kernel returns: every rank then takes a closing barrier 1
 *             after its reads (all ranks see the same descriptors, so all
 *             take it or none).  Its flags say only "done reading" and
 *             carry no release (reads_done_barrier, ipc_sync.cuh): no peer
 *             reads what the one-shot writes.  The host asks for this only
 *             from QCOLL_ONESHOT_REG_MIN_BYTES.  An in-place one-shot
 *             always stages (peers would read what the owner is
 *             overwriting).
 *  two-shot:  the range is cut into nranks segments, rank r owns segment
 *             r.  Copy my input's packs of the other ranks' segments into
 *             my region 0 (my own segment is read by me alone, in place
 *             from my user buffer, when that holds whole 16-byte aligned
 *             packs; else it is staged too);  barrier 0;  rank r reduces
 *             segment r from every rank's region 0 (its own input in place)
 *             into its
 *             own region 1 and its own output;  barrier 1;  everyone copies
 *             every other segment from its owner's region 1 to its output.
 *             In place, a rank overwrites its input's packs of segment p
 *             (p != r) only after barrier 1, long after it staged them.
 *             No closing barrier is needed: my region 0 is
 *             read by peers only before they arrive at barrier 1, which this
 *             launch waits for, and my region 1 is written by the next
 *             launch only after its barrier 0, which every peer reaches
 *             only once its kernel for this launch has finished (launches
 *             of a communicator are stream-ordered on every rank).
 *             Registered buffers: a registered input is not copied in;
 *             owners read it in place after barrier 0 and before they
 *             arrive at barrier 1, which its rank waits for before it
 *             returns.  When every rank's output is registered, owner r
 *             writes its reduced segment straight into every rank's output
 *             (no region 1, no copy-out): those writes precede the owner's
 *             barrier-1 flag, which every rank waits for before it returns.
 *             In place too: the packs of segment r are read (every rank's)
 *             and then written (every rank's) only by owner r's thread that
 *             reduces them, and no rank reads its own output in this
 *             launch.
 *
 * Registered buffers.  The host passes, for my send and recv buffers, a
 * reference (slot, generation, offset) into my registry, or "none".  Each
 * block checks it against my own row of the registry table (a valid own
 * entry means every peer has mapped the allocation; deregistration clears
 * it first), writes its descriptor (the checked references, or staged)
 * into every peer's descriptor area and then releases its barrier-0 flag;
 * a peer reads the descriptor after acquiring that flag and reads that
 * rank's user buffer at its own mapping (table row of that rank) plus the
 * offset, or its staged region.  A rank whose buffer is not registered, or
 * was deregistered before a graph replay, thus stages as before while the
 * others go on in place; a descriptor naming a registration the reader has
 * not mapped (the ranks' registries disagree) is reported as an error,
 * never guessed at.  Registered pointers are 16-byte aligned and their
 * allocation holds every whole pack the launch reads (the host checks
 * both), so peers read whole packs; outputs are written element by element
 * in the last pack.  The descriptor slot of a block alternates with the
 * parity of its epoch: it is written again only two launches later, after
 * the launch in between passed barrier 0, which the reader joins only
 * after its kernel for this launch completed.
 *
 * Every copy and reduce loop of both kernels keeps several 16-byte
 * accesses in flight per thread (kCopyUnroll packs per round when
 * copying, kReduceLoads loads per round when reducing): a round issues all
 * its loads before its first store.  (The one-shot once took one pack per
 * thread per round, so a thread with several packs paid one memory latency
 * for each.)
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
 * rank) issues a release store (system scope, or GPU scope where every
 * rank shares this GPU: ipc_sync.cuh flag_store; it orders the block's
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
 * stream, so grids and ranges agree.  The kernels are launched with
 * programmatic dependent launch when the view says so; block_begin waits
 * on the grid dependency before touching any data or flag, and then lets
 * the stream's next launch start its preamble (all of this grid's blocks
 * are resident by then, so the next grid's never displace one of them).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "elem_ops.cuh"
#include "ipc_sync.cuh"
#include "launch.h"

namespace {

/* ---- several 16-byte accesses in flight per thread ----------------------
 * Both kernels copy and reduce with these loops.  A thread takes packs
 * i, i + B, ..., i + (U - 1) B (B = blockDim.x) of a range per round and
 * issues all their loads before its first store, so U accesses per thread
 * are in flight instead of one.  The last round of a range skips the packs
 * past its end, so a range shorter than U B (a segment of a few MiB split
 * over the grid) still has all its loads in flight at once instead of
 * going one pack per thread.  The order of the arithmetic per pack is
 * unchanged, so results are the same bits. */

/* Packs of one round per thread when copying (input in, result out). */
constexpr int kCopyUnroll = 4;
/* Packs of one round per thread when reducing: kReduceLoads 16-byte loads
 * (U packs of n ranks) in flight, within the 64 registers per thread of
 * two 512-thread blocks per SM. */
constexpr int kReduceLoads = 8;

/* Packs [begin, end) of the user's input staged at byte `offset` of this
 * rank's buffer, U at a time. */
template <typename T, int U = kCopyUnroll>
__device__ __forceinline__ void copy_in(const qcoll__ipc_view_t &v,
                                        const BlockState *s, size_t offset,
                                        const T *src, size_t count,
                                        size_t begin, size_t end) {
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % kPackBytes) == 0;
  uint4 *mine = reinterpret_cast<uint4 *>(s->bases[v.rank] + offset);
  const size_t b = blockDim.x;
  for (size_t i = begin + threadIdx.x; i < end; i += U * b) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i + u * b < end) r[u] = load_user(src, i + u * b, count, aligned).raw;
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i + u * b < end) mine[i + u * b] = r[u];
  }
}

/* Where the two-shot's reduced packs go: the owner's region 1 (peers copy
 * them out after barrier 1) and the owner's own output, or straight into
 * every rank's registered output (the owner is the only one to read or
 * write its segment's packs, in place too).  store_user writes only the
 * elements below count. */
template <typename T>
struct RegionAndOwnSink {
  uint4 *result;
  T *recv;
  size_t count;
  bool aligned;
  template <typename U>
  __device__ __forceinline__ void put(size_t i, const Pack<U> &x) const {
    result[i] = x.raw;
    store_user(recv, i, count, aligned, x);
  }
};
/* The one-shot's: my own output only. */
template <typename T>
struct OwnSink {
  T *recv;
  size_t count;
  bool aligned;
  template <typename U>
  __device__ __forceinline__ void put(size_t i, const Pack<U> &x) const {
    store_user(recv, i, count, aligned, x);
  }
};
struct DirectSink {
  char *const *dst; /* every rank's output, in shared memory */
  int nranks;
  size_t count;
  template <typename T>
  __device__ __forceinline__ void put(size_t i, const Pack<T> &x) const {
    for (int p = 0; p < nranks; p++)
      store_user(reinterpret_cast<T *>(dst[p]), i, count, true, x);
  }
};

/* Packs [begin, end) reduced over every rank's input (src[p]) into sink,
 * U packs (of kRanks >= nranks loads each) per round. */
template <typename T, typename Op, int U, int kRanks, typename Sink>
__device__ __forceinline__ void reduce_range(const qcoll__ipc_view_t &v,
                                             const char *const *src,
                                             const Sink &sink, size_t begin,
                                             size_t end) {
  const size_t b = blockDim.x;
  const int n = v.nranks;
  for (size_t i = begin + threadIdx.x; i < end; i += U * b) {
    uint4 in[U][kRanks];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int p = 0; p < kRanks; p++)
        if (p < n && i + u * b < end)
          in[u][p] =
              __ldcg(reinterpret_cast<const uint4 *>(src[p]) + i + u * b);
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i + u * b < end)
        sink.template put<T>(i + u * b,
                             reduce_in_rank_order<T, Op, kRanks>(in[u], n));
  }
}

/* The two-shot's reduction of my segment with as many packs per round as
 * the world leaves registers for: 4 for 2 ranks, 2 for up to 4, else 1.
 * Loads bypass L1 (peers wrote the data). */
template <typename T, typename Op, typename Sink>
__device__ __forceinline__ void reduce_packs(const qcoll__ipc_view_t &v,
                                             const char *const *src,
                                             const Sink &sink, size_t begin,
                                             size_t end) {
  if (v.nranks <= 2)
    reduce_range<T, Op, kReduceLoads / 2, 2>(v, src, sink, begin, end);
  else if (v.nranks <= 4)
    reduce_range<T, Op, kReduceLoads / 4, 4>(v, src, sink, begin, end);
  else
    reduce_range<T, Op, 1, QCOLL_IPC_MAX_RANKS>(v, src, sink, begin, end);
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
  for (size_t i = begin + threadIdx.x; i < end; i += U * b) {
    Pack<T> p[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i + u * b < end) p[u].raw = __ldcg(result + i + u * b);
#pragma unroll
    for (int u = 0; u < U; u++)
      if (i + u * b < end) store_user(recv, i + u * b, count, aligned, p[u]);
  }
}

/* ---- the one-shot launch counter ----------------------------------------- */

/* Thread 0 of every block, on every exit path: the last block of the
 * launch to get here advances the launch counter. */
__device__ __forceinline__ void oneshot_count_out(const qcoll__ipc_view_t &v,
                                                  const BlockState *s) {
  if (threadIdx.x == 0) count_out_of_launch(oneshot_counter(v, s));
}

/* ---- registered buffers --------------------------------------------------
 * Per launch, each rank checks the references the host found for its send
 * and recv buffers against its own table row (a stale one becomes "staged"),
 * writes the result as its descriptor into every peer's descriptor area,
 * then releases its barrier-0 flag; a peer reads the descriptor after it
 * acquired that flag.  The area is indexed by block and by the parity of
 * the block's epoch: the writer's next write to the same descriptor comes
 * two launches of the block later, after it passed barrier 0 of the launch
 * in between, which the reader reaches only after its kernel for this
 * launch completed (stream order; with programmatic dependent launch, the
 * grid dependency wait in block_begin). */

/* What barrier 0 told this block about every rank's buffers. */
struct RegState {
  const char *src[QCOLL_IPC_MAX_RANKS]; /* rank p's input of this launch */
  char *dst[QCOLL_IPC_MAX_RANKS];       /* rank p's registered output */
  int send_reg[QCOLL_IPC_MAX_RANKS];    /* rank p's input is its user buffer */
  int recv_reg[QCOLL_IPC_MAX_RANKS];    /* rank p's output is registered */
};

__device__ __forceinline__ qcoll__ipc_reg_ref_t no_ref() {
  qcoll__ipc_reg_ref_t r;
  r.slot = 0;
  r.gen = 0;
  r.offset = 0;
  return r;
}

/* The host's reference for one of this rank's buffers, if this rank's own
 * table row still holds that registration (it may have been deregistered
 * since a graph was captured); else staged. */
__device__ __forceinline__ qcoll__ipc_reg_ref_t own_ref(
    const qcoll__ipc_view_t &v, const qcoll__ipc_ar_args_t &a,
    const qcoll__ipc_reg_ref_t &ref) {
  if (!a.exchange || ref.gen == 0 || ref.slot >= QCOLL_IPC_REG_SLOTS)
    return no_ref();
  const qcoll__ipc_reg_entry_t *e =
      v.reg_table + (size_t)v.rank * QCOLL_IPC_REG_SLOTS + ref.slot;
  return __ldcg(&e->gen) == ref.gen ? ref : no_ref();
}

/* Rank p's registered buffer `ref` as mapped here; false when this rank's
 * table has no such registration (the ranks' registries disagree). */
__device__ __forceinline__ bool mapped_ref(const qcoll__ipc_view_t &v, int p,
                                           const qcoll__ipc_reg_ref_t &ref,
                                           char **out) {
  if (ref.slot >= QCOLL_IPC_REG_SLOTS) return false;
  const qcoll__ipc_reg_entry_t *e =
      v.reg_table + (size_t)p * QCOLL_IPC_REG_SLOTS + ref.slot;
  if (__ldcg(&e->gen) != ref.gen) return false;
  *out = reinterpret_cast<char *>((uintptr_t)e->base + ref.offset);
  return true;
}

__device__ __forceinline__ uint4 *desc_words(const qcoll__ipc_view_t &v,
                                             const BlockState *s, int owner,
                                             int writer) {
  return reinterpret_cast<uint4 *>(
      reinterpret_cast<qcoll__ipc_reg_desc_t *>(s->bases[owner] +
                                                v.desc_offset) +
      qcoll__ipc_desc_index(blockIdx.x, s->epoch, writer));
}

/* Rank t's pointers from its descriptor d (thread t); an unregistered
 * input of mine is at `own_src` when that is set (read in place), else
 * staged.  False after reporting when d names a registration this rank
 * has not mapped. */
__device__ __forceinline__ bool resolve_rank(const qcoll__ipc_view_t &v,
                                             BlockState *s,
                                             const qcoll__ipc_ar_args_t &a,
                                             int t,
                                             const qcoll__ipc_reg_desc_t &d,
                                             size_t staged,
                                             const void *own_src,
                                             RegState *r) {
  const bool me = t == v.rank;
  char *src = s->bases[t] + staged, *dst = nullptr;
  bool ok = true;
  if (me && !d.send.gen && own_src)
    src = const_cast<char *>(static_cast<const char *>(own_src));
  else if (d.send.gen && me)
    src = const_cast<char *>(static_cast<const char *>(a.send));
  else if (d.send.gen)
    ok = mapped_ref(v, t, d.send, &src);
  if (d.recv.gen && me)
    dst = static_cast<char *>(a.recv);
  else if (d.recv.gen && ok)
    ok = mapped_ref(v, t, d.recv, &dst);
  r->src[t] = src;
  r->dst[t] = dst;
  r->send_reg[t] = d.send.gen != 0;
  r->recv_reg[t] = d.recv.gen != 0;
  if (!ok) report_failure(v, s, QCOLL_IPC_ERR_REGISTRY, t, 0);
  return ok;
}

/* Barrier 0 of a one-shot or two-shot launch (block_barrier's protocol)
 * that also exchanges the ranks' descriptors when a.exchange, and fills r
 * with where every rank's input (its region at `staged`, or its user
 * buffer; mine at `own_src` when that is set) and registered output lie.
 * False when the launch must stop. */
__device__ __forceinline__ bool exchange_barrier(const qcoll__ipc_view_t &v,
                                                 BlockState *s,
                                                 const qcoll__ipc_ar_args_t &a,
                                                 const qcoll__ipc_reg_desc_t &mine,
                                                 size_t staged,
                                                 const void *own_src,
                                                 RegState *r) {
  __syncthreads(); /* the block's earlier writes happen before the flag */
  const int t = threadIdx.x;
  if (t < v.nranks) {
    qcoll__ipc_reg_desc_t d = mine;
    if (t != v.rank) {
      if (a.exchange) {
        const uint4 *w = reinterpret_cast<const uint4 *>(&mine);
        uint4 *slot = desc_words(v, s, t, v.rank);
        slot[0] = w[0];
        slot[1] = w[1];
      }
      /* The release orders this thread's descriptor stores before it. */
      flag_store(v, flag_slot(s, t, v.rank, 0), s->epoch, true);
      if (!wait_flag(v, s, flag_slot(s, v.rank, t, 0), t, 0)) {
        s->failed = 1;
        d.send = d.recv = no_ref();
      } else if (a.exchange) {
        const uint4 *slot = desc_words(v, s, v.rank, t);
        uint4 *w = reinterpret_cast<uint4 *>(&d);
        w[0] = __ldcg(slot);
        w[1] = __ldcg(slot + 1);
      } else {
        d.send = d.recv = no_ref();
      }
    }
    if (!resolve_rank(v, s, a, t, d, staged, own_src, r)) s->failed = 1;
  }
  __syncthreads(); /* the acquires happen before the block's later reads */
  return !s->failed;
}

__device__ __forceinline__ bool any_of(const int *flags, int n) {
  for (int p = 0; p < n; p++)
    if (flags[p]) return true;
  return false;
}
__device__ __forceinline__ bool all_of(const int *flags, int n) {
  for (int p = 0; p < n; p++)
    if (!flags[p]) return false;
  return true;
}

/* ---- kernels ------------------------------------------------------------ */

/* The one-shot's registered input, if any: its input only, and not in
 * place (peers would read what this rank overwrites). */
__device__ __forceinline__ qcoll__ipc_reg_ref_t
own_send_ref(const qcoll__ipc_view_t &v, const qcoll__ipc_ar_args_t &a) {
  return a.send != a.recv ? own_ref(v, a, a.send_ref) : no_ref();
}

/* kWide: two ranks and more than one pack per thread, copied and reduced
 * kCopyUnroll and kReduceLoads / 2 packs per round; else one pack per
 * thread per round for any world size.  Two kernels rather than a branch:
 * the small one-shot's time grew by about 1 us at 8 ranks on one H200 when
 * its kernel also held the unrolled loops. */
template <typename T, typename Op, bool kWide>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    oneshot_kernel(qcoll__ipc_view_t v, qcoll__ipc_ar_args_t a) {
  __shared__ BlockState s;
  __shared__ RegState r;
  /* The wide kernel reads my registry row as soon as the grid may read
   * memory (block_begin's own grid wait then returns at once), so that it
   * and block_begin's counters are in flight together, as in the two-shot:
   * 0.05-0.13 us less per graph-replayed call at 2 ranks from 1 MiB to
   * 4 MiB on an H100, eager unchanged
   * (docs/results/2026-12-07-h100-wide-first-load.md).  The small kernel
   * reads it after block_begin, the order measured fastest at 8 ranks
   * (docs/results/2026-12-07-h100-torch-wide.md); its code is that of the
   * one-shot before the wide kernel read early. */
  qcoll__ipc_reg_ref_t early_send = no_ref();
  if (kWide) {
    grid_dependency_wait();
    early_send = own_send_ref(v, a);
  }
  /* block_begin read the launch counter (s.oneshots) before any block of
   * this launch can advance it (oneshot_count_out), and after the previous
   * launch's last write: kernels of a stream run one after another. */
  block_begin(v, &s);
  const T *send = static_cast<const T *>(a.send);
  T *recv = static_cast<T *>(a.recv);
  const size_t count = a.count;
  const size_t staged = qcoll__ipc_oneshot_offset(v.oneshot_bytes, s.oneshots);
  const size_t packs = (count + Pack<T>::kElems - 1) / Pack<T>::kElems;
  size_t begin, end;
  block_range(packs, &begin, &end);

  qcoll__ipc_reg_desc_t mine;
  mine.send = kWide ? early_send : own_send_ref(v, a);
  mine.recv = no_ref();
  if (!mine.send.gen)
    copy_in<T, kWide ? kCopyUnroll : 1>(v, &s, staged, send, count, begin, end);
  if (exchange_barrier(v, &s, a, mine, staged, nullptr, &r)) {
    const bool aligned = (reinterpret_cast<uintptr_t>(recv) % kPackBytes) == 0;
    OwnSink<T> sink = {recv, count, aligned};
    if (kWide)
      reduce_range<T, Op, kReduceLoads / 2, 2>(v, r.src, sink, begin, end);
    else
      reduce_range<T, Op, 1, QCOLL_IPC_MAX_RANKS>(v, r.src, sink, begin, end);
    /* Peers read registered inputs in place: no rank may return (and let
     * its stream overwrite its input) before every peer has read it.  All
     * ranks see the same descriptors, so all take this barrier or none. */
    if (!any_of(r.send_reg, v.nranks) || reads_done_barrier(v, 1, &s))
      block_end(v, &s);
  }
  oneshot_count_out(v, &s);
}

/* Packs [begin, end) of rank `owner`'s segment within a block's range
 * [begin, begin + len). */
__device__ __forceinline__ void segment_of(size_t begin, size_t len, int owner,
                                           int n, size_t *seg_begin,
                                           size_t *seg_end) {
  *seg_begin = begin + len * (size_t)owner / (size_t)n;
  *seg_end = begin + len * (size_t)(owner + 1) / (size_t)n;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    twoshot_kernel(qcoll__ipc_view_t v, qcoll__ipc_ar_args_t a) {
  __shared__ BlockState s;
  __shared__ RegState r;
  /* My registry row is checked as the grid may read memory (after the
   * grid dependency, as block_begin reads its counters; its second wait
   * returns at once), so that these loads and block_begin's are in flight
   * together: one memory latency before the first barrier, not two. */
  grid_dependency_wait();
  qcoll__ipc_reg_desc_t mine;
  mine.send = own_ref(v, a, a.send_ref);
  mine.recv = own_ref(v, a, a.recv_ref);
  block_begin(v, &s,
              !long_launch(a.count * sizeof(T), QCOLL_IPC_LONG_TWOSHOT_BYTES));
  const T *send = static_cast<const T *>(a.send);
  T *recv = static_cast<T *>(a.recv);
  const size_t count = a.count;
  const size_t packs = (count + Pack<T>::kElems - 1) / Pack<T>::kElems;
  size_t begin, end;
  block_range(packs, &begin, &end);
  const size_t len = end - begin;
  const int n = v.nranks;
  size_t mine_begin, mine_end;
  segment_of(begin, len, v.rank, n, &mine_begin, &mine_end);

  const size_t inputs =
      qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, 0);
  /* An unregistered input of whole, 16-byte aligned packs is staged for
   * the peers' segments only: my own segment is read by no one but me, in
   * place.  Any other is staged whole (a pack read in place past the
   * input's end could leave its allocation). */
  const bool in_place_mine =
      !mine.send.gen && count % Pack<T>::kElems == 0 &&
      (reinterpret_cast<uintptr_t>(send) % kPackBytes) == 0;
  if (in_place_mine) {
    copy_in(v, &s, inputs, send, count, begin, mine_begin);
    copy_in(v, &s, inputs, send, count, mine_end, end);
  } else if (!mine.send.gen) {
    copy_in(v, &s, inputs, send, count, begin, end);
  }
  if (!exchange_barrier(v, &s, a, mine, inputs, in_place_mine ? send : nullptr,
                        &r))
    return;

  /* My segment, reduced from every rank's input (staged or in place) into
   * every rank's output when all are registered, else into my region 1
   * and my own output. */
  const bool direct = all_of(r.recv_reg, n);
  const bool aligned = (reinterpret_cast<uintptr_t>(recv) % kPackBytes) == 0;
  if (direct) {
    DirectSink sink = {r.dst, n, count};
    reduce_packs<T, Op>(v, r.src, sink, mine_begin, mine_end);
  } else {
    RegionAndOwnSink<T> sink = {
        reinterpret_cast<uint4 *>(region(v, &s, v.rank, 1)), recv, count,
        aligned};
    reduce_packs<T, Op>(v, r.src, sink, mine_begin, mine_end);
  }
  if (!block_barrier(v, 1, &s)) return;
  if (direct) {
    block_end(v, &s);
    return;
  }

  /* Every peer's segment from its owner, nearest first so that ranks do
   * not all read owner 0 first.  In place, my input's packs there were
   * staged before barrier 0, so overwriting them now loses nothing. */
  for (int k = 1; k < n; k++) {
    int owner = (v.rank + k) % n;
    size_t seg_begin, seg_end;
    segment_of(begin, len, owner, n, &seg_begin, &seg_end);
    const uint4 *result =
        reinterpret_cast<const uint4 *>(region(v, &s, owner, 1));
    twoshot_copy_out(recv, count, aligned, result, seg_begin, seg_end);
  }
  block_end(v, &s);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*kernel_fn)(qcoll__ipc_view_t, qcoll__ipc_ar_args_t);

template <typename T, typename Op>
kernel_fn pick_algo(qcoll__ipc_algo_t algo, bool wide) {
  if (algo == QCOLL_IPC_TWOSHOT)
    return reinterpret_cast<kernel_fn>(twoshot_kernel<T, Op>);
  return wide ? reinterpret_cast<kernel_fn>(oneshot_kernel<T, Op, true>)
              : reinterpret_cast<kernel_fn>(oneshot_kernel<T, Op, false>);
}

template <typename T>
kernel_fn pick_op(qcoll__ipc_algo_t algo, bool wide, qcoll_op_t op) {
  switch (op) {
    case QCOLL_SUM: return pick_algo<T, OpSum>(algo, wide);
    case QCOLL_MIN: return pick_algo<T, OpMin>(algo, wide);
    case QCOLL_MAX: return pick_algo<T, OpMax>(algo, wide);
    default: return nullptr;
  }
}

/* wide: the one-shot's two-rank kernel with several packs per thread. */
kernel_fn pick_kernel(qcoll__ipc_algo_t algo, bool wide, qcoll_dtype_t dtype,
                      qcoll_op_t op) {
  if (algo != QCOLL_IPC_ONESHOT && algo != QCOLL_IPC_TWOSHOT) return nullptr;
  switch (dtype) {
    case QCOLL_F16: return pick_op<__half>(algo, wide, op);
    case QCOLL_BF16: return pick_op<__nv_bfloat16>(algo, wide, op);
    case QCOLL_F32: return pick_op<float>(algo, wide, op);
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
  return pick_kernel(QCOLL_IPC_ONESHOT, false, dtype, op) != nullptr;
}

extern "C" size_t qcoll__cuda_all_reduce_chunk_elems(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo,
    qcoll_dtype_t dtype) {
  size_t es = elem_bytes(dtype);
  size_t bytes =
      algo == QCOLL_IPC_ONESHOT ? view->oneshot_bytes : view->region_bytes;
  return es ? bytes / es : 0;
}

/* Whether this launch runs alone (ipc_sync.cuh long_launch): a two-shot
 * above QCOLL_IPC_LONG_TWOSHOT_BYTES; the one-shot never. */
static bool runs_alone(qcoll__ipc_algo_t algo, size_t count,
                       qcoll_dtype_t dtype) {
  return algo == QCOLL_IPC_TWOSHOT &&
         long_launch(count * elem_bytes(dtype), QCOLL_IPC_LONG_TWOSHOT_BYTES);
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
  const size_t limit = (size_t)grid_limit(view, runs_alone(algo, count, dtype));
  if (grid > limit) grid = limit;
  if (grid < 1) grid = 1;
  return (int)grid;
}

extern "C" cudaError_t qcoll__cuda_all_reduce_launch_reg(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo, const void *sendbuf,
    void *recvbuf, size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
    const qcoll__ipc_reg_ref_t *send_ref, const qcoll__ipc_reg_ref_t *recv_ref,
    cudaStream_t stream) {
  int grid = qcoll__cuda_all_reduce_grid(view, algo, count, dtype);
  const size_t packs =
      (count * elem_bytes(dtype) + kPackBytes - 1) / kPackBytes;
  const bool wide = algo == QCOLL_IPC_ONESHOT && view->nranks == 2 &&
                    packs > (size_t)grid * kThreads;
  kernel_fn fn = pick_kernel(algo, wide, dtype, op);
  const bool exchange = send_ref || recv_ref;
  if (!fn || count > qcoll__cuda_all_reduce_chunk_elems(view, algo, dtype) ||
      view->nranks < 1 || view->nranks > QCOLL_IPC_MAX_RANKS ||
      (exchange && (!view->reg_table || !view->desc_offset)))
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  qcoll__ipc_view_t v = *view;
  qcoll__ipc_ar_args_t a;
  memset(&a, 0, sizeof a);
  a.send = sendbuf;
  a.recv = recvbuf;
  a.count = count;
  if (send_ref) a.send_ref = *send_ref;
  if (recv_ref) a.recv_ref = *recv_ref;
  a.exchange = exchange;
  void *args[] = {&v, &a};
  /* Reports this launch's error only, not one left over from the caller's
   * earlier calls.  block_begin waits on the grid dependency first. */
  return launch_kernel(reinterpret_cast<const void *>(fn), grid, args, stream,
                       v.pdl != 0 && !runs_alone(algo, count, dtype));
}

extern "C" cudaError_t qcoll__cuda_all_reduce_launch(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo, const void *sendbuf,
    void *recvbuf, size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
    cudaStream_t stream) {
  return qcoll__cuda_all_reduce_launch_reg(view, algo, sendbuf, recvbuf, count,
                                           dtype, op, NULL, NULL, stream);
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
  for (int k = 0; k < 3; k++)
    for (qcoll_dtype_t d : dtypes)
      for (qcoll_op_t o : ops) {
        int n = 0;
        /* k: the one-shot, its wide form, the two-shot */
        const qcoll__ipc_algo_t algo =
            k == 2 ? QCOLL_IPC_TWOSHOT : QCOLL_IPC_ONESHOT;
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n,
            reinterpret_cast<const void *>(pick_kernel(algo, k == 1, d, o)),
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
