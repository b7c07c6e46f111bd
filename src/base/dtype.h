/*
 * Element types on the host: sizes, and exact conversions between f16/bf16
 * and f32 (round to nearest even, NaN kept quiet), so host reductions can
 * accumulate in f32 and round once.
 */
#ifndef QCOLL_CORE_DTYPE_H
#define QCOLL_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline float qcoll__bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t qcoll__f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float qcoll__bf16_to_f32(uint16_t h) {
  return qcoll__bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t qcoll__f32_to_bf16(float f) {
  uint32_t u = qcoll__f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round half to even */
  return (uint16_t)(u >> 16);
}

static inline float qcoll__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return qcoll__bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return qcoll__bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t qcoll__f32_to_f16(float f) {
  uint32_t u = qcoll__f32_to_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) {
    /* result is subnormal or zero: round a * 2^24 to an integer, half even */
    float v = qcoll__bits_to_f32(a) * 16777216.0f;
    uint32_t i = (uint32_t)v;
    float rem = v - (float)i;
    if (rem > 0.5f || (rem == 0.5f && (i & 1u))) i++;
    return (uint16_t)(sign | i);
  }
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(sign | (((rounded >> 13) - (112u << 10)) & 0x7fffu));
}

#ifdef __cplusplus
}
#endif

#endif
