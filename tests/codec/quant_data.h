/*
 * Test data for the quantised all-reduce programs of this directory:
 * deterministic random numbers (splitmix64, Box-Muller), inputs exact in
 * the element type, and conversions between element types and f32 that
 * match the GPU kernel's (round to nearest even; a NaN becomes the value
 * the host conversions give codec.h's canonical NaN).
 */
#ifndef QCOLL_TESTS_CODEC_QUANT_DATA_H
#define QCOLL_TESTS_CODEC_QUANT_DATA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "qcoll.h"

typedef struct qd_rng {
  uint64_t s;
} qd_rng_t;

static inline uint64_t qd_next(qd_rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static inline double qd_uniform(qd_rng_t *r) {
  return ((double)(qd_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static inline double qd_gauss(qd_rng_t *r) {
  double u1 = qd_uniform(r), u2 = qd_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* f32 -> element type -> f32, nearest even (identity for f32). */
static inline float qd_round(qcoll_dtype_t dtype, float x) {
  if (dtype == QCOLL_F16) return qcoll__f16_to_f32(qcoll__f32_to_f16(x));
  if (dtype == QCOLL_BF16) return qcoll__bf16_to_f32(qcoll__f32_to_bf16(x));
  return x;
}

/* Bits of x stored as the element type, as the quantised kernel stores it. */
static inline uint32_t qd_store_bits(qcoll_dtype_t dtype, float x) {
  if (dtype == QCOLL_F16) return x != x ? 0x7e00u : qcoll__f32_to_f16(x);
  if (dtype == QCOLL_BF16) return x != x ? 0x7fc0u : qcoll__f32_to_bf16(x);
  return qcoll__f32_to_bits(x);
}

static inline const char *qd_dtype_name(qcoll_dtype_t dtype) {
  return dtype == QCOLL_F16 ? "f16" : dtype == QCOLL_BF16 ? "bf16" : "f32";
}

static inline const char *qd_quant_name(qcoll_quant_t fmt) {
  switch (fmt) {
    case QCOLL_QUANT_FP8: return "fp8";
    case QCOLL_QUANT_INT8: return "int8";
    case QCOLL_QUANT_INT6: return "int6";
    case QCOLL_QUANT_INT4: return "int4";
    case QCOLL_QUANT_INT3: return "int3";
    default: return "?";
  }
}

#endif
