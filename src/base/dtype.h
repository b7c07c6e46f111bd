/*
 * Exact conversions between f16/bf16 and f32 (round to nearest even, NaN
 * kept quiet), so reductions can accumulate in f32 and round once.  One
 * header for host code (C and C++) and CUDA device code, so the host back
 * end and the IPC kernels (collectives.cu) round the same bits.  The
 * arithmetic goes through mul/sub helpers that are never contracted into
 * a fused multiply-add on the device (the host has no FMA in its default
 * target), so both sides compute the same value.
 */
#ifndef QCOLL_BASE_DTYPE_H
#define QCOLL_BASE_DTYPE_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define QCOLL__HD __host__ __device__
#else
#define QCOLL__HD
#endif

static inline QCOLL__HD float qcoll__bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
static inline QCOLL__HD uint32_t qcoll__f32_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
#endif
}
/* a * b and a - b, each rounded once. */
static inline QCOLL__HD float qcoll__mul_rn_f32(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
static inline QCOLL__HD float qcoll__sub_rn_f32(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

static inline QCOLL__HD float qcoll__bf16_to_f32(uint16_t h) {
  return qcoll__bits_to_f32((uint32_t)h << 16);
}

static inline QCOLL__HD uint16_t qcoll__f32_to_bf16(float f) {
  uint32_t u = qcoll__f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round half to even */
  return (uint16_t)(u >> 16);
}

static inline QCOLL__HD float qcoll__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return qcoll__bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float v = qcoll__mul_rn_f32((float)man, 1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return qcoll__bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline QCOLL__HD uint16_t qcoll__f32_to_f16(float f) {
  uint32_t u = qcoll__f32_to_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) {
    /* result is subnormal or zero: round a * 2^24 to an integer, half even */
    float v = qcoll__mul_rn_f32(qcoll__bits_to_f32(a), 16777216.0f);
    uint32_t i = (uint32_t)v;
    float rem = qcoll__sub_rn_f32(v, (float)i);
    if (rem > 0.5f || (rem == 0.5f && (i & 1u))) i++;
    return (uint16_t)(sign | i);
  }
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(sign | (((rounded >> 13) - (112u << 10)) & 0x7fffu));
}

#endif
