/*
 * Included before every emulated kernel file (tests/gpu/emu): the CUDA
 * keywords and intrinsics the IPC and codec kernels use, for a CPU where a
 * block is an OS thread and a CUDA thread a coroutine of it (coll_emu.cpp).
 *  - __shared__ variables are per OS thread, so per block;
 *  - __syncthreads() switches coroutines until every thread of the block
 *    has arrived (or returned);
 *  - arithmetic intrinsics are the IEEE operations they name (the kernel
 *    files are compiled with -ffp-contract=off).
 */
#ifndef QCOLL_EMU_SHIM_H
#define QCOLL_EMU_SHIM_H

#include <math.h> /* fminf, fmaxf: device built-ins under nvcc */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cuda_runtime_api.h"

/* fminf/fmaxf with the sign of a zero result fixed (-0 is the smaller):
 * libm leaves it to the implementation, and the compiler may swap the
 * operands of what it knows to be commutative, so an -O3 build gave
 * different ranks different zeros where the GPU gives one answer. */
static inline float emu_fminf(float a, float b) {
  if (a == 0.0f && b == 0.0f) return signbit(a) ? a : b;
  return fminf(a, b);
}
static inline float emu_fmaxf(float a, float b) {
  if (a == 0.0f && b == 0.0f) return signbit(a) ? b : a;
  return fmaxf(a, b);
}
#define fminf emu_fminf
#define fmaxf emu_fmaxf

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct emu_idx {
  unsigned x, y, z;
};
extern thread_local emu_idx threadIdx, blockIdx, blockDim, gridDim;

void emu_syncthreads();
void emu_yield();
void emu_spin_hook();
cudaError_t emu_launch(const void *fn, dim3 grid, void **args, int nargs,
                       cudaStream_t stream);

#define __syncthreads() emu_syncthreads()
#define __threadfence_system() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __nanosleep(ns) emu_yield()
/* Blocks are OS threads: a device-scope atomic is a C++ atomic. */
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
/* The launchers pass an array of argument pointers: its length tells the
 * kernel's signature. */
#define cudaLaunchKernel(fn, grid, block, args, smem, stream) \
  emu_launch((const void *)(fn), grid, args,                  \
             (int)(sizeof(args) / sizeof(void *)), stream)

#define cudaLaunchKernelExC(cfg, fn, args)                        \
  emu_launch((const void *)(fn), (cfg)->gridDim, args,            \
             (int)(sizeof(args) / sizeof(void *)), (cfg)->stream)

static inline float __uint_as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float __fadd_rn(float a, float b) {
  return a + b;
}
static inline float __fsub_rn(float a, float b) {
  return a - b;
}
static inline float __fmul_rn(float a, float b) {
  return a * b;
}
static inline float __fdiv_rn(float a, float b) {
  return a / b;
}
static inline float __fmaf_rn(float a, float b, float c) {
  return fmaf(a, b, c);
}
static inline double __dadd_rn(double a, double b) {
  return a + b;
}
static inline double __dmul_rn(double a, double b) {
  return a * b;
}
static inline double __ddiv_rn(double a, double b) {
  return a / b;
}
static inline uint4 __ldcg(const uint4 *p) {
  uint4 v;
  memcpy(&v, (const void *)p, sizeof v);
  return v;
}
static inline uint32_t __ldcg(const uint32_t *p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Warp exchanges, for blocks of whole warps (emu_runtime.inc): every live
 * lane of a warp must call them together, as the full mask requires. */
uint32_t emu_shfl_u32(uint32_t v, int src_lane);
void emu_syncwarp();
#define __syncwarp(...) emu_syncwarp()
template <typename T>
static inline T emu_shfl(T v, int src_lane) {
  static_assert(sizeof(T) == 4, "32-bit exchanges only");
  uint32_t u;
  memcpy(&u, &v, 4);
  u = emu_shfl_u32(u, src_lane);
  memcpy(&v, &u, 4);
  return v;
}
template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int mask) {
  return emu_shfl(v, (int)((threadIdx.x & 31u) ^ (unsigned)mask));
}
template <typename T>
static inline T __shfl_down_sync(unsigned, T v, unsigned delta) {
  return emu_shfl(v, (int)((threadIdx.x & 31u) + delta)); /* >= 32: own */
}
template <typename T>
static inline T __shfl_sync(unsigned, T v, int src_lane) {
  return emu_shfl(v, src_lane & 31);
}
/* A vote: the AND of p over the warp, by exchanges. */
static inline int __all_sync(unsigned, int p) {
  uint32_t v = p != 0;
  for (unsigned m = 1; m < 32; m <<= 1)
    v &= emu_shfl_u32(v, (int)((threadIdx.x & 31u) ^ m));
  return (int)v;
}

#endif
