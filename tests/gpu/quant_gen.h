/*
 * Inputs of the quantised all-reduce GPU tests, computed the same way on the
 * host (for the CPU reference) and on the device (so a CUDA graph can fill
 * a new input before every replay without host work).
 *
 * Element i of rank r for seed s: a sum of four uniform bytes, centred
 * (roughly Gaussian, |v| <= 510), times 2^-7, times a per-group power of two
 * (2^-2 .. 2^2, so groups have different scales), and for about one value
 * in 1024 times 64 (an outlier).  Every step is exact in f32; the callers
 * round the f32 value to the element type to nearest even, which the host
 * (base/dtype.h) and the device (__float2half_rn, __float2bfloat16_rn) do
 * identically for these finite, normal values.
 */
#ifndef QCOLL_TESTS_GPU_QUANT_GEN_H
#define QCOLL_TESTS_GPU_QUANT_GEN_H

#include <stdint.h>

#ifdef __CUDACC__
#define QG_HD static __host__ __device__ __forceinline__
#else
#define QG_HD static inline
#endif

QG_HD uint32_t qg_mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

QG_HD float qg_value(int rank, uint64_t i, uint32_t seed) {
  uint32_t h =
      qg_mix((uint32_t)i * 0x9e3779b1u ^
             qg_mix((uint32_t)(i >> 32) ^
                    qg_mix(seed * 0x85ebca6bu + (uint32_t)rank * 0xc2b2ae35u)));
  int s = (int)(h & 0xffu) + (int)((h >> 8) & 0xffu) +
          (int)((h >> 16) & 0xffu) + (int)(h >> 24) - 510;
  float v = (float)s * 0.0078125f; /* 2^-7 */
  const uint32_t k = (uint32_t)((i / 32 + (uint64_t)rank + seed) % 5u);
  v *= (float)(1u << k) * 0.25f; /* 2^-2 .. 2^2 */
  if (qg_mix(h ^ 0x27d4eb2fu) % 1024u == 0) v *= 64.0f;
  return v;
}

#endif
