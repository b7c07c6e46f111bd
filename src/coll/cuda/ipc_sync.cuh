/*
 * Device-side pieces shared by the CUDA IPC all-reduce kernels
 * (allreduce.cu, allreduce_quant.cu): launch shape, memory-model
 * primitives, the per-block epoch, the barrier of a block with the same
 * block of every peer, deadlines, and the data regions.  The protocol is
 * described at the top of allreduce.cu; these are its only implementation.
 *
 * Everything here lives in an unnamed namespace: each kernel file gets its
 * own copy, and nothing is exported.
 */
#ifndef QCOLL_COLL_CUDA_IPC_SYNC_CUH
#define QCOLL_COLL_CUDA_IPC_SYNC_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "launch.h"
/* nvcc only: the CPU emulation (which defines __CUDACC__) has no driver. */
#ifdef __NVCC__
#include "driver_launch.cuh"
#endif

namespace {

constexpr int kThreads = 512;
/* Two blocks per SM keep enough blocks resident for 8 ranks on one GPU. */
constexpr int kMinBlocksPerSm = 2;

/* ---- memory-model primitives ------------------------------------------ */

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void store_release_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}
__device__ __forceinline__ void store_relaxed_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}
__device__ __forceinline__ void store_relaxed_sys_u64(unsigned long long *p,
                                                      unsigned long long v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v)
               : "memory");
}
/* GPU scope: enough where every rank runs on this GPU (flag_store). */
__device__ __forceinline__ void store_release_gpu(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}
__device__ __forceinline__ void store_relaxed_gpu(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_gpu(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long load_relaxed_sys_u64(
    const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];"
               : "=l"(v)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ uint32_t load_relaxed_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}

/* 16 bytes, bypassing L1, as four 32-bit words each written and read
 * whole (the vector is not one atomic access: allreduce_push.cu checks
 * every word). */
__device__ __forceinline__ uint4 load_volatile_v4(const uint4 *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void store_volatile_v4(uint4 *p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
/* Programmatic dependent launch (sm_90): wait until the grid this launch
 * depends on has completed and its memory is visible (returns at once
 * when the launch has no such dependency), and let the next launch of the
 * stream start its own preamble.  No-ops before sm_90. */
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ---- block state, barriers, deadlines ---------------------------------- */

struct BlockState {
  char *bases[QCOLL_IPC_MAX_RANKS]; /* the view's, in shared memory: indexed
                                       by a run-time rank without a local
                                       copy of the kernel parameters */
  uint32_t epoch;
  uint32_t oneshots; /* one-shot launches this rank completed (allreduce.cu) */
  int failed; /* set by any thread whose wait failed; read after a barrier */
};

__device__ __forceinline__ uint32_t *flag_slot(const BlockState *s, int owner,
                                               int writer, int phase) {
  return reinterpret_cast<uint32_t *>(s->bases[owner] +
                                      QCOLL_IPC_FLAGS_OFFSET) +
         qcoll__ipc_flag_index(blockIdx.x, writer, phase);
}
__device__ __forceinline__ uint32_t *abort_word(const BlockState *s,
                                                int owner) {
  return reinterpret_cast<uint32_t *>(s->bases[owner] + QCOLL_IPC_ABORT_OFFSET);
}
/* [0]: blocks of the running one-shot launch that finished; [1]: one-shot
 * launches completed.  Local to this rank (launch.h layout; allreduce.cu
 * advances it). */
__device__ __forceinline__ uint32_t *oneshot_counter(const qcoll__ipc_view_t &v,
                                                     const BlockState *s) {
  return reinterpret_cast<uint32_t *>(s->bases[v.rank] +
                                      QCOLL_IPC_ONESHOT_COUNTER_OFFSET);
}
__device__ __forceinline__ uint32_t *epoch_counter(const qcoll__ipc_view_t &v,
                                                   const BlockState *s) {
  return reinterpret_cast<uint32_t *>(s->bases[v.rank] +
                                      QCOLL_IPC_EPOCHS_OFFSET) +
         blockIdx.x;
}

/* Records the first failure of this rank in the host-mapped error word
 * and, unless a peer already gave up, tells every peer to stop waiting.
 * `want`/`seen`: the flag value awaited and the last one read (timeouts). */
__device__ __forceinline__ void report_failure(const qcoll__ipc_view_t &v,
                                               const BlockState *s,
                                               unsigned kind, int peer,
                                               int phase, uint32_t want = 0,
                                               uint32_t seen = 0) {
  /* Keep the first report: it names the cause, while the reports that
   * follow it (blocks told by a peer that it gave up) only echo it. */
  if (load_relaxed_sys_u64(v.error_word) == 0)
    store_relaxed_sys_u64(
        v.error_word,
        qcoll__ipc_err_encode(kind, v.rank, peer, blockIdx.x, phase) |
            qcoll__ipc_err_flags(want, seen));
  if (kind != QCOLL_IPC_ERR_PEER_ABORTED)
    for (int p = 0; p < v.nranks; p++)
      if (p != v.rank)
        store_relaxed_sys(abort_word(s, p), (uint32_t)v.rank + 1u);
  __threadfence_system();
}

/* The checks of a wait that has not succeeded yet, made every 64 spins:
 * false (after reporting) when the deadline passes (counted from the
 * first call, *start 0 before it), this rank's host aborts, a peer gave
 * up, or another thread of the block already failed.  `want`/`seen` go
 * into a timeout's report. */
__device__ __forceinline__ bool wait_may_go_on(const qcoll__ipc_view_t &v,
                                               BlockState *s, uint64_t *start,
                                               uint32_t spins, int peer,
                                               int phase, uint32_t want,
                                               uint32_t seen) {
  volatile int *block_failed = &s->failed;
  uint64_t now = global_timer_ns();
  if (*start == 0) *start = now;
  if (now - *start > v.timeout_ns) {
    report_failure(v, s, QCOLL_IPC_ERR_TIMEOUT, peer, phase, want, seen);
    return false;
  }
  if (load_relaxed_sys_u64(v.host_abort) != 0) {
    report_failure(v, s, QCOLL_IPC_ERR_ABORTED, peer, phase);
    return false;
  }
  uint32_t aborted_by = load_relaxed_sys(abort_word(s, v.rank));
  if (aborted_by != 0) {
    report_failure(v, s, QCOLL_IPC_ERR_PEER_ABORTED, (int)aborted_by - 1,
                   phase);
    return false;
  }
  /* This rank already failed (another block, or an earlier launch of a
   * message cut into chunks): the flags no longer agree, so stop rather
   * than wait out the deadline once per enqueued launch. */
  if (*block_failed || load_relaxed_sys_u64(v.error_word) != 0) return false;
  /* Long waits (ranks time-sliced on one GPU) need not hog issue slots. */
  if (spins > 65536u) __nanosleep(256);
  return true;
}

/* A flag between ranks: system scope, which ranks on different GPUs
 * need, or GPU scope where every rank of the communicator runs on this GPU
 * (view.flags_gpu_scope): the scope covers every thread of the device,
 * other processes' included, and its release waits only for the device's
 * memory, not the system's.  With 8 ranks on one H100 this took a bare
 * barrier from 4.8 to 3.2 us and the 8-rank one-shot from 7.8-8.3 to
 * 6.3-6.7 us (docs/results/2026-12-06-h100-mps-skew.md).  The branch is
 * uniform: every thread reads the same view. */
__device__ __forceinline__ void flag_store(const qcoll__ipc_view_t &v,
                                           uint32_t *slot, uint32_t value,
                                           bool release) {
  if (v.flags_gpu_scope) {
    if (release)
      store_release_gpu(slot, value);
    else
      store_relaxed_gpu(slot, value);
  } else if (release) {
    store_release_sys(slot, value);
  } else {
    store_relaxed_sys(slot, value);
  }
}

__device__ __forceinline__ uint32_t flag_load(const qcoll__ipc_view_t &v,
                                              const uint32_t *slot) {
  return v.flags_gpu_scope ? load_acquire_gpu(slot) : load_acquire_sys(slot);
}

/* Spin until the word at `slot` equals `want` (at_least: has reached it,
 * modulo 2^32, i.e. the signed distance is not negative).  False (after
 * reporting) when the deadline passes, this rank's host aborts, a peer
 * gave up, or another thread of the block already failed. */
__device__ __forceinline__ bool wait_until(const qcoll__ipc_view_t &v,
                                           BlockState *s, const uint32_t *slot,
                                           uint32_t want, bool at_least,
                                           int peer, int phase) {
  uint64_t start = 0;
  for (uint32_t spins = 0;; spins++) {
    const uint32_t seen = flag_load(v, slot);
    if (at_least ? (int32_t)(seen - want) >= 0 : seen == want) return true;
    if ((spins & 63u) != 63u) continue;
    if (!wait_may_go_on(v, s, &start, spins, peer, phase, want, seen))
      return false;
  }
}

/* Spin until *slot holds this launch's epoch or a later one: a peer may
 * already have moved on to its next launch and overwritten the slot (the
 * one-shot has no closing barrier), but never further, since its next
 * barrier needs this rank's next flag. */
__device__ __forceinline__ bool wait_flag(const qcoll__ipc_view_t &v,
                                          BlockState *s, const uint32_t *slot,
                                          int peer, int phase) {
  return wait_until(v, s, slot, s->epoch, true, peer, phase);
}

/* This block's flag `phase` with the same block of every peer: kArrive
 * raises it to `epoch` at every peer, kWait waits until every peer's flag
 * `phase` here has reached `epoch` (at_least: a peer may be further on).
 * Both: the barrier (flag_barrier); one of them: its halves, for a kernel
 * that works between them (the pipelined quantised all-reduce).  Every
 * thread of the block calls it; thread t < nranks handles peer t.  False
 * when the launch must stop (the failure is already reported).  `epoch`
 * is a reference so that the barrier reads the block's epoch where it
 * uses it, as it always has. */
template <bool kArrive, bool kWait>
__device__ __forceinline__ bool flag_step(const qcoll__ipc_view_t &v,
                                          int phase, BlockState *s,
                                          const uint32_t &epoch,
                                          bool release) {
  if (kArrive)
    __syncthreads(); /* the block's earlier accesses happen before the flag */
  const int t = threadIdx.x;
  if (t < v.nranks && t != v.rank) {
    /* The release store (flag_store's scope) orders before it everything
     * that happens before it: the block's writes, through the
     * __syncthreads above.  No separate fence is needed. */
    if (kArrive) flag_store(v, flag_slot(s, t, v.rank, phase), epoch, release);
    if (kWait && !wait_until(v, s, flag_slot(s, v.rank, t, phase), epoch, true,
                             t, phase))
      s->failed = 1;
  }
  if (!kWait) return true;
  __syncthreads(); /* the acquires happen before the block's later reads */
  return !s->failed;
}

/* The halves of a barrier (flag_step): raise flag `phase` to `epoch` at
 * every peer (with `release`, publishing the block's earlier writes); wait
 * for every peer's. */
__device__ __forceinline__ void flags_arrive(const qcoll__ipc_view_t &v,
                                             int phase, BlockState *s,
                                             const uint32_t &epoch,
                                             bool release) {
  flag_step<true, false>(v, phase, s, epoch, release);
}
__device__ __forceinline__ bool flags_wait(const qcoll__ipc_view_t &v,
                                           int phase, BlockState *s,
                                           const uint32_t &epoch) {
  return flag_step<false, true>(v, phase, s, epoch, false);
}

/* Barrier of this block with the same block of every peer (wait_flag's
 * rule: this launch's epoch or a later one).  Returns false when the
 * launch must stop (the failure is already reported).  With `release`
 * (block_barrier), the flag publishes the block's earlier writes; without
 * (reads_done_barrier), it says only that the block has finished reading
 * the peers' buffers. */
__device__ __forceinline__ bool flag_barrier(const qcoll__ipc_view_t &v,
                                             int phase, BlockState *s,
                                             bool release) {
  return flag_step<true, true>(v, phase, s, s->epoch, release);
}

__device__ __forceinline__ bool block_barrier(const qcoll__ipc_view_t &v,
                                              int phase, BlockState *s) {
  return flag_barrier(v, phase, s, true);
}

/* The closing barrier of a launch that read peers' buffers in place and
 * wrote nothing a peer reads: a peer may reuse its buffer once every rank's
 * flag says it is done reading.  A system-scope release would wait until
 * every earlier write of the block (the whole output) is visible system
 * wide before the flag could leave; the reads need no such wait.  They are
 * complete: every thread's stores of the values it loaded were issued
 * before the opening __syncthreads, and a store of a loaded value issues
 * only once the load has returned. */
__device__ __forceinline__ bool reads_done_barrier(const qcoll__ipc_view_t &v,
                                                   int phase, BlockState *s) {
  return flag_barrier(v, phase, s, false);
}

/* The epoch that follows e: zero is skipped, it is what unwritten flags
 * hold. */
__device__ __forceinline__ uint32_t epoch_after(uint32_t e) {
  return e + 1u == 0 ? 1u : e + 1u;
}

/* A long launch (more bytes per rank than `threshold`, launch.h) is
 * launched without programmatic dependent launch and lets the stream's
 * next launch in only as its blocks exit (block_begin's
 * `early_dependents` false), so no other grid of its rank is resident
 * beside it, and it may take the larger grid of view.max_grid_long.  A
 * long kernel gains nothing from overlapping launches, and letting the
 * next grid in early made whole runs of large messages about twice as slow
 * on one H200 shared by two ranks (INT4 at 256 MiB 1498 against 768 us,
 * INT8 at 64 MiB 465 against 221 us with PDL off: the next grid's waiting
 * blocks, resident for the whole run, changed where the ranks' working
 * blocks were placed).  A two-shot of 16 MiB still gains from the overlap
 * (28-33 against 33-35 us), hence its higher threshold.
 * docs/results/2026-12-03-h200-long-launches.md. */
__host__ __device__ __forceinline__ bool long_launch(size_t bytes,
                                                     size_t threshold) {
  return bytes > threshold;
}

__device__ __forceinline__ void block_begin(const qcoll__ipc_view_t &v,
                                            BlockState *s,
                                            bool early_dependents = true) {
  /* Launched with programmatic dependent launch, the kernel may start
   * before the previous one ends: nothing is read before it has. */
  grid_dependency_wait();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++) s->bases[p] = v.bases[p];
    /* Both loads are issued before either is used: one memory latency. */
    const uint32_t oneshots = oneshot_counter(v, s)[1];
    s->epoch = epoch_after(*epoch_counter(v, s));
    s->oneshots = oneshots;
    s->failed = 0;
  }
  __syncthreads();
  /* The next launch of the stream may start its own preamble (it waits in
   * grid_dependency_wait for this grid to end before touching data): every
   * block of this grid is resident once all have passed here, so the
   * next grid's blocks never take the place of one of ours.  A long
   * launch lets it in only as its blocks exit (see long_launch). */
  if (early_dependents) grid_dependents_launch();
}

/* A launch counter in device memory: control[0] counts the blocks of the
 * running launch that are done with control[1], the launches completed.
 * One thread per block, once its block has read control[1]: the block
 * counts itself out, and the last block of the launch empties the count
 * and advances the counter (so no block of the launch reads the advanced
 * value).  The kernel advances it, never the host, so a captured graph
 * replays correctly. */
__device__ __forceinline__ void count_out_of_launch(uint32_t *control) {
  if (atomicAdd(&control[0], 1u) == gridDim.x - 1) {
    control[0] = 0;
    control[1] += 1u;
  }
}

__device__ __forceinline__ void block_end(const qcoll__ipc_view_t &v,
                                          const BlockState *s) {
  if (threadIdx.x == 0) *epoch_counter(v, s) = s->epoch;
}

/* Host: the most blocks a launch on this view may have (the grid the
 * ranks agreed at init for launches that may share the GPU with their
 * rank's next grid, or for long ones, see long_launch; at least one,
 * at most the flag slots' blocks). */
inline int grid_limit(const qcoll__ipc_view_t *view, bool long_run = false) {
  const int max_grid = long_run && view->max_grid_long > 0 ? view->max_grid_long
                                                           : view->max_grid;
  int limit = max_grid > 0 ? max_grid : 1;
  return limit < QCOLL_IPC_MAX_BLOCKS ? limit : QCOLL_IPC_MAX_BLOCKS;
}

/* Host: launch fn on `grid` blocks of kThreads, with programmatic stream
 * serialisation when `pdl` (its kernel must call grid_dependency_wait before
 * it touches data).  Reports this launch's error only, like
 * cudaLaunchKernel.  `args` is the kernel's argument array.  Through the
 * driver where it can (driver_launch.cuh: cheaper per launch), else, and
 * for the error report, through the runtime. */
template <size_t N>
cudaError_t launch_kernel(const void *fn, int grid, void *(&args)[N],
                          cudaStream_t stream, bool pdl) {
#ifdef __NVCC__
  if (driver_launch(fn, grid, kThreads, args, stream, pdl)) return cudaSuccess;
#endif
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg;
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelExC(&cfg, fn, args);
}

__device__ __forceinline__ char *region(const qcoll__ipc_view_t &v,
                                        const BlockState *s, int owner,
                                        int index) {
  return s->bases[owner] +
         qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, index);
}

}  // namespace

#endif
