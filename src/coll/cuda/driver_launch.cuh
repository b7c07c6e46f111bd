/*
 * Host: the kernel launch through the driver's cuLaunchKernelEx, for the
 * IPC kernels' launch_kernel (ipc_sync.cuh).
 *
 * Why.  An eager all-reduce of a few KiB is bound by the host: the launch
 * is most of its host time, and the driver's cuLaunchKernelEx took 0.1-0.2
 * us less per launch than the runtime's cudaLaunchKernelExC on one H200
 * (docs/results/2026-12-04-h200-eager.md, bench/launch-cost.cu).  Through
 * it, an eager 2-rank all-reduce of 16 B-64 KiB took 0.1-0.5 us less on
 * one H100 (docs/results/2026-12-06-gpu-scope.md).
 *
 * How.  The driver entry point is resolved once (per kernel file) through
 * the runtime, so the library still loads where there is no driver.  A
 * kernel is named by its context-independent handle (cudaGetKernel), which
 * the driver launches in the context of the stream (or the current one on
 * the null stream); the handles are kept in a fixed table, filled under a
 * lock the first time each kernel is launched and read without one after.
 * Anything that does not work this way (an old driver, a full table, a
 * failed launch) returns false, and the caller launches through the runtime
 * instead, which reports the launch's error as before: a failed launch has
 * enqueued nothing.
 *
 * Compiled only by nvcc (__NVCC__): the CPU emulation of the kernels
 * (tests/gpu/emu), built by the host compiler,
 * launches through its stand-in for the runtime.
 */
#ifndef QCOLL_COLL_CUDA_DRIVER_LAUNCH_CUH
#define QCOLL_COLL_CUDA_DRIVER_LAUNCH_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <mutex>

namespace {

typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **,
                                 void **);

/* cuLaunchKernelEx (CUDA 12.0), or null. */
inline launch_ex_fn driver_launch_entry() {
  static const launch_ex_fn entry = [] {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000,
                                         cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<launch_ex_fn>(fn);
  }();
  return entry;
}

/* More than the kernel instantiations of any one kernel file. */
constexpr size_t kKernelSlots = 512;

struct KernelSlot {
  std::atomic<const void *> fn; /* published after kernel is written */
  CUkernel kernel;
};

/* The slot of fn, or the empty slot where it would go (null: table full). */
inline KernelSlot *find_kernel_slot(KernelSlot *slots, const void *fn) {
  const size_t home = (reinterpret_cast<uintptr_t>(fn) >> 4) % kKernelSlots;
  for (size_t i = 0; i < kKernelSlots; i++) {
    KernelSlot *s = &slots[(home + i) % kKernelSlots];
    const void *f = s->fn.load(std::memory_order_acquire);
    if (f == fn || f == nullptr) return s;
  }
  return nullptr;
}

/* The context-independent handle of kernel fn, or null. */
inline CUkernel kernel_handle(const void *fn) {
  static KernelSlot slots[kKernelSlots]; /* static storage: zeroed */
  static std::mutex adding;
  KernelSlot *s = find_kernel_slot(slots, fn);
  if (s && s->fn.load(std::memory_order_acquire) == fn) return s->kernel;
  std::lock_guard<std::mutex> lock(adding);
  s = find_kernel_slot(slots, fn); /* another thread may have added it */
  if (!s) return nullptr;
  if (s->fn.load(std::memory_order_acquire) == fn) return s->kernel;
  cudaKernel_t k = nullptr;
  if (cudaGetKernel(&k, fn) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  s->kernel = reinterpret_cast<CUkernel>(k);
  s->fn.store(fn, std::memory_order_release);
  return s->kernel;
}

/* Launch fn on `grid` blocks of `threads` through the driver, with
 * programmatic stream serialisation when `pdl`; false when it was not
 * launched (the caller then launches through the runtime). */
inline bool driver_launch(const void *fn, int grid, int threads, void **args,
                          cudaStream_t stream, bool pdl) {
  const launch_ex_fn launch = driver_launch_entry();
  if (!launch) return false;
  const CUkernel kernel = kernel_handle(fn);
  if (!kernel) return false;
  CUlaunchAttribute attr[1];
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = (unsigned)grid;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = (unsigned)threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = 0;
  cfg.hStream = reinterpret_cast<CUstream>(stream);
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return launch(&cfg, reinterpret_cast<CUfunction>(kernel), args, nullptr) ==
         CUDA_SUCCESS;
}

}  // namespace

#endif
