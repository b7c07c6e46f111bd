/*
 * Inputs of the push one-shot's tests (tests/gpu/gpu_push.c on the GPU,
 * tests/gpu/emu/push_emu.cpp on the CPU) and the reduction they are checked
 * against: random values, and the values the sentinel must not disturb,
 * signed zeros, infinities and NaNs of both signs and every payload, the
 * sentinel's own pattern (all bits set) among them.  C and C++.
 */
#ifndef QCOLL_TESTS_GPU_PUSH_VALUES_H
#define QCOLL_TESTS_GPU_PUSH_VALUES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "qcoll.h"

/* v (not a NaN) as the bits of dtype d, rounded to nearest even. */
static inline uint32_t push_bits_of(float v, qcoll_dtype_t d) {
  if (d == QCOLL_F32) return qcoll__f32_to_bits(v);
  return d == QCOLL_F16 ? qcoll__f32_to_f16(v) : qcoll__f32_to_bf16(v);
}

/* The value of bits b of dtype d, every NaN quiet: the GPU's fminf/fmaxf
 * ignore signalling NaNs as they do quiet ones (the CPU's return NaN). */
static inline float push_value_of(uint32_t b, qcoll_dtype_t d) {
  float f = d == QCOLL_F32   ? qcoll__bits_to_f32(b)
            : d == QCOLL_F16 ? qcoll__f16_to_f32((uint16_t)b)
                             : qcoll__bf16_to_f32((uint16_t)b);
  return isnan(f) ? NAN : f;
}

static inline float push_combine(qcoll_op_t op, float a, float b) {
  return op == QCOLL_SUM ? a + b : op == QCOLL_MIN ? fminf(a, b) : fmaxf(a, b);
}

/* NaN number k of d: both signs, quiet and signalling, all ones first. */
static inline uint32_t push_nan_bits(qcoll_dtype_t d, unsigned k) {
  static const uint32_t f32[] = {0xffffffffu, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0xff812345u, 0x7fffffffu};
  static const uint32_t f16[] = {0xffffu, 0x7e00u, 0xfe00u,
                                 0x7c01u, 0xfd23u, 0x7fffu};
  static const uint32_t bf16[] = {0xffffu, 0x7fc0u, 0xffc0u,
                                  0x7f81u, 0xff93u, 0x7fffu};
  k %= 6;
  return d == QCOLL_F32 ? f32[k] : d == QCOLL_F16 ? f16[k] : bf16[k];
}

/* Rank r's input bits for element i.  With specials: every rank -0 at
 * i % 13 == 1 (the sum is -0), -0 on odd ranks and +0 on even ones at
 * i % 13 == 2 (+0), an infinity on rank 0 at i % 29 == 3, a NaN on one
 * rank at i % 31 == 4; elsewhere values k/64 for k in [-1000, 1000]. */
static inline uint32_t push_input_bits(int r, size_t i, qcoll_dtype_t d,
                                       uint32_t seed, bool specials) {
  const uint32_t neg_zero = d == QCOLL_F32 ? 0x80000000u : 0x8000u;
  if (specials) {
    if (i % 13 == 1) return neg_zero;
    if (i % 13 == 2) return r % 2 ? neg_zero : 0u;
    if (i % 29 == 3 && r == 0)
      return push_bits_of(i % 2 ? INFINITY : -INFINITY, d);
    if (i % 31 == 4 && r == (int)(i / 31) % 3)
      return push_nan_bits(d, (unsigned)i);
  }
  uint32_t h = (uint32_t)i * 2654435761u ^ seed * 40503u ^ (uint32_t)r * 97u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return push_bits_of(((float)(h % 2001u) - 1000.0f) / 64.0f, d);
}

/* The rank-order reduction of element i over nranks ranks, in fp32. */
static inline float push_reference(int nranks, size_t i, qcoll_dtype_t d,
                                   qcoll_op_t op, uint32_t seed,
                                   bool specials) {
  float acc = push_value_of(push_input_bits(0, i, d, seed, specials), d);
  for (int p = 1; p < nranks; p++)
    acc = push_combine(
        op, acc, push_value_of(push_input_bits(p, i, d, seed, specials), d));
  return acc;
}

#endif
