/*
 * Element types, reduction operators and 16-byte packs of the unquantised
 * all-reduce kernels (allreduce.cu, allreduce_push.cu): fp32 accumulation, one
 * rounding to the element type at the end, user buffers read and written
 * in 16-byte packs where aligned and whole, element by element elsewhere.
 *
 * Everything lives in an unnamed namespace, like ipc_sync.cuh.
 */
#ifndef QCOLL_COLL_CUDA_ELEM_OPS_CUH
#define QCOLL_COLL_CUDA_ELEM_OPS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kPackBytes = 16;

template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float to_f32(float x) { return x; }
  static __device__ __forceinline__ float from_f32(float x) { return x; }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_f32(__half x) {
    return __half2float(x);
  }
  static __device__ __forceinline__ __half from_f32(float x) {
    return __float2half_rn(x);
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static __device__ __forceinline__ __nv_bfloat16 from_f32(float x) {
    return __float2bfloat16_rn(x);
  }
};

struct OpSum {
  static __device__ __forceinline__ float apply(float a, float b) {
    return a + b;
  }
};
struct OpMin {
  static __device__ __forceinline__ float apply(float a, float b) {
    return fminf(a, b);
  }
};
struct OpMax {
  static __device__ __forceinline__ float apply(float a, float b) {
    return fmaxf(a, b);
  }
};

/* 16 bytes of elements. */
template <typename T>
struct Pack {
  static constexpr int kElems = kPackBytes / sizeof(T);
  uint4 raw;
  __device__ __forceinline__ T get(int j) const {
    return reinterpret_cast<const T *>(&raw)[j];
  }
  __device__ __forceinline__ void set(int j, T v) {
    reinterpret_cast<T *>(&raw)[j] = v;
  }
};

/* This block's pack range [begin, end) of `packs`. */
__device__ __forceinline__ void block_range(size_t packs, size_t *begin,
                                            size_t *end) {
  size_t per_block = (packs + gridDim.x - 1) / gridDim.x;
  size_t b = per_block * blockIdx.x;
  *begin = b < packs ? b : packs;
  *end = b + per_block < packs ? b + per_block : packs;
}

/* Pack i of the user's buffer: one 16-byte load when aligned and whole,
 * else element by element (zeros past count). */
template <typename T>
__device__ __forceinline__ Pack<T> load_user(const T *src, size_t i,
                                             size_t count, bool aligned) {
  constexpr int E = Pack<T>::kElems;
  Pack<T> p;
  size_t first = i * E;
  if (aligned && first + E <= count) {
    p.raw = *reinterpret_cast<const uint4 *>(src + first);
  } else {
    p.raw = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < E; j++)
      if (first + j < count) p.set(j, src[first + j]);
  }
  return p;
}

template <typename T>
__device__ __forceinline__ void store_user(T *dst, size_t i, size_t count,
                                           bool aligned, const Pack<T> &p) {
  constexpr int E = Pack<T>::kElems;
  size_t first = i * E;
  if (aligned && first + E <= count) {
    *reinterpret_cast<uint4 *>(dst + first) = p.raw;
  } else {
#pragma unroll
    for (int j = 0; j < E; j++)
      if (first + j < count) dst[first + j] = p.get(j);
  }
}

/* Packs of every rank (in[0 .. nranks)) reduced in rank order: fp32
 * accumulation, one rounding to T. */
template <typename T, typename Op, int MaxRanks>
__device__ __forceinline__ Pack<T> reduce_in_rank_order(const uint4 *in,
                                                        int nranks) {
  constexpr int E = Pack<T>::kElems;
  float acc[E];
  Pack<T> x;
  x.raw = in[0];
#pragma unroll
  for (int j = 0; j < E; j++) acc[j] = Elem<T>::to_f32(x.get(j));
#pragma unroll
  for (int p = 1; p < MaxRanks; p++) {
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

}  // namespace

#endif
