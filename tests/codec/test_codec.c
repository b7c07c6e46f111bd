/*
 * The quantisation formats of codec.h on the CPU: exact bytes of crafted
 * groups, an independent double-precision model of the specification
 * compared byte for byte on random groups, the documented error bounds,
 * the warp packing recipe, and the accuracy of qcoll's two-shot scheme
 * against the f16/bf16-accumulating comparison scheme.
 *
 * Compiled with -ffp-contract=off.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/codec.h"
#include "base/dtype.h"
#include "ref_scheme.h"

#define G QCOLL_CODEC_GROUP

static const qcoll_quant_t FP8 = QCOLL_QUANT_FP8;
static const qcoll_quant_t INT8 = QCOLL_QUANT_INT8;
static const qcoll_quant_t INT6 = QCOLL_QUANT_INT6;
static const qcoll_quant_t INT4 = QCOLL_QUANT_INT4;
static const qcoll_quant_t INT3 = QCOLL_QUANT_INT3;
static const qcoll_quant_t ALL_FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                            QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                            QCOLL_QUANT_FP8};
#define NFMT (sizeof ALL_FORMATS / sizeof ALL_FORMATS[0])

static const char *fmt_name(qcoll_quant_t fmt) {
  switch (fmt) {
    case QCOLL_QUANT_FP8: return "FP8";
    case QCOLL_QUANT_INT8: return "INT8";
    case QCOLL_QUANT_INT6: return "INT6";
    case QCOLL_QUANT_INT4: return "INT4";
    case QCOLL_QUANT_INT3: return "INT3";
    default: return "?";
  }
}

static float fbits(uint32_t u) {
  return qcoll__bits_to_f32(u);
}
static uint32_t bitsf(float f) {
  return qcoll__f32_to_bits(f);
}

/* ---- deterministic random numbers ------------------------------------- */

typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_uniform(rng_t *r) { /* (0, 1) */
  return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double rng_gauss(rng_t *r) {
  double u1 = rng_uniform(r), u2 = rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- an independent model of the specification -------------------------
 * Double arithmetic rounded to f32 where the specification rounds: the
 * product of two floats is exact in double, and a quotient rounded first to
 * double then to float is the correctly rounded float quotient (53 >= 2*24+2),
 * so (float)(double op double) is the f32 operation.  Integer rounding by
 * floor, e4m3 by searching the table of all values, packing as an LSB-first
 * bit stream.  inv is R / a rounded once, except where it is subnormal
 * (INT3 near FLT_MAX), where the specification rounds R / m first (a =
 * m 2^e). */

static uint32_t model_range(qcoll_quant_t fmt) {
  return fmt == FP8    ? 448
         : fmt == INT8 ? 127
         : fmt == INT6 ? 31
         : fmt == INT4 ? 7
                       : 3;
}
static int model_bits(qcoll_quant_t fmt) {
  return fmt == INT6 ? 6 : fmt == INT4 ? 4 : fmt == INT3 ? 3 : 8;
}

/* fl(R / a) as codec.h specifies it: R / m rounded, then scaled by 2^-e
 * (exact unless the result is subnormal). */
static float model_inv(double R, double a) {
  int e;
  double m = 2 * frexp(a, &e); /* a = m 2^(e - 1), m in [1, 2) */
  return (float)ldexp((double)(float)(R / m), 1 - e);
}
static size_t model_group_bytes(qcoll_quant_t fmt) {
  return 4 + (size_t)G * model_bits(fmt) / 8;
}

static double e4m3_value(int b) { /* b in 0..0x7e, non-negative */
  int e = b >> 3, m = b & 7;
  return e == 0 ? m * ldexp(1.0, -9) : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
}

static uint32_t model_e4m3(float t) {
  double a = fabs((double)t);
  int best = 0;
  if (a >= 448.0) {
    best = 0x7e;
  } else {
    double bd = a;
    for (int b = 1; b <= 0x7e; b++) {
      double d = fabs(e4m3_value(b) - a);
      if (d < bd || (d == bd && (b & 1) == 0)) best = b, bd = d;
    }
  }
  if (best == 0) return 0;
  return (uint32_t)best | (t < 0 ? 0x80u : 0u);
}

static int64_t model_rne(double t) {
  double f = floor(t), d = t - f;
  int64_t i = (int64_t)f;
  if (d > 0.5 || (d == 0.5 && (i & 1))) i++;
  return i;
}

static void put_bits(uint8_t *dst, int pos, int nbits, uint32_t v) {
  for (int k = 0; k < nbits; k++)
    if (v >> k & 1u) dst[(pos + k) / 8] |= (uint8_t)(1u << ((pos + k) % 8));
}

/* Bytes of a group from its scale bits and 32 codes. */
static void model_pack(qcoll_quant_t fmt, uint32_t scale,
                       const uint32_t codes[G], uint8_t *out) {
  memset(out, 0, model_group_bytes(fmt));
  for (int k = 0; k < 4; k++) out[k] = (uint8_t)(scale >> (8 * k));
  for (int i = 0; i < G; i++)
    put_bits(out + 4, i * model_bits(fmt), model_bits(fmt), codes[i]);
}

static void model_encode(qcoll_quant_t fmt, const float x[G], uint8_t *out) {
  uint32_t codes[G];
  double amax = 0, R = model_range(fmt);
  int nonfinite = 0;
  for (int i = 0; i < G; i++) {
    if (isnan(x[i]) || isinf(x[i]))
      nonfinite = 1;
    else if (fabs(x[i]) > amax)
      amax = fabs(x[i]);
  }
  if (nonfinite) {
    for (int i = 0; i < G; i++) codes[i] = fmt == FP8 ? 0 : (uint32_t)R;
    model_pack(fmt, 0x7fc00000u, codes, out);
    return;
  }
  double p = amax < ldexp(1.0, -64) ? ldexp(1.0, 64) : 1.0;
  float inv = amax == 0 ? 0.0f : model_inv(R, amax * p);
  for (int i = 0; i < G; i++) {
    float t = (float)((double)(float)(x[i] * p) * (double)inv);
    if (fmt == FP8) {
      codes[i] = model_e4m3(t);
    } else {
      double c = t > R ? R : t < -R ? -R : t;
      codes[i] = (uint32_t)(model_rne(c) + (int64_t)R);
    }
  }
  model_pack(fmt, bitsf((float)amax), codes, out);
}

static uint32_t get_bits(const uint8_t *src, int pos, int nbits) {
  uint32_t v = 0;
  for (int k = 0; k < nbits; k++)
    v |= (uint32_t)(src[(pos + k) / 8] >> ((pos + k) % 8) & 1u) << k;
  return v;
}

static void model_decode(qcoll_quant_t fmt, const uint8_t *in, float out[G]) {
  uint32_t scale = 0;
  for (int k = 0; k < 4; k++) scale |= (uint32_t)in[k] << (8 * k);
  float amax = fabsf(fbits(scale));
  double R = model_range(fmt);
  for (int i = 0; i < G; i++) {
    uint32_t c = get_bits(in + 4, i * model_bits(fmt), model_bits(fmt));
    if (isnan(amax) || isinf(amax) || (fmt == FP8 && (c & 0x7f) == 0x7f)) {
      out[i] = fbits(0x7fc00000u);
      continue;
    }
    double p = amax < ldexp(1.0, -64) ? ldexp(1.0, 64) : 1.0;
    float step = (float)((double)amax * p / R);
    double v = fmt == FP8 ? ((c & 0x80) ? -1 : 1) * e4m3_value((int)(c & 0x7f))
                          : (double)c - R;
    float y = (float)((double)(float)(v * step) / p);
    out[i] = y > amax ? amax : y < -amax ? -amax : y;
  }
}

/* ---- helpers ------------------------------------------------------------ */

static void fill_group(float g[G], const float *vals, int n) {
  for (int i = 0; i < G; i++) g[i] = i < n ? vals[i] : 0.0f;
}

static void assert_bytes(const uint8_t *got, const uint8_t *want, size_t n,
                         const char *what) {
  if (memcmp(got, want, n) == 0) return;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      print_error("%s: byte %zu is 0x%02x, expected 0x%02x\n", what, i, got[i],
                  want[i]);
      break;
    }
  fail();
}

/* Encode the group given by vals (zero-padded) and compare with the bytes
 * built from the expected scale and the first n expected codes (the rest
 * the zero code). */
static void check_group(qcoll_quant_t fmt, const float *vals, int n,
                        uint32_t scale, const uint32_t *want_codes,
                        const char *what) {
  float g[G];
  uint32_t codes[G];
  uint8_t got[QCOLL_CODEC_MAX_GROUP_BYTES], want[QCOLL_CODEC_MAX_GROUP_BYTES];
  char label[128];
  fill_group(g, vals, n);
  for (int i = 0; i < G; i++)
    codes[i] = i < n ? want_codes[i] : (fmt == FP8 ? 0 : model_range(fmt));
  model_pack(fmt, scale, codes, want);
  memset(got, 0xa5, sizeof got);
  qcoll__codec_encode_group(fmt, g, got);
  snprintf(label, sizeof label, "%s %s", what, fmt_name(fmt));
  assert_bytes(got, want, model_group_bytes(fmt), label);
}

/* ---- sizes ----------------------------------------------------------------
 */

static void test_sizes(void **state) {
  (void)state;
  assert_int_equal(qcoll__codec_group_bytes(INT8), 36);
  assert_int_equal(qcoll__codec_group_bytes(INT6), 28);
  assert_int_equal(qcoll__codec_group_bytes(INT4), 20);
  assert_int_equal(qcoll__codec_group_bytes(INT3), 16);
  assert_int_equal(qcoll__codec_group_bytes(FP8), 36);
  assert_int_equal(qcoll__codec_group_bytes(QCOLL_QUANT_NONE), 0);
  assert_int_equal(qcoll__codec_group_bytes(QCOLL_QUANT_DEFAULT), 0);
  assert_int_equal(qcoll__codec_range(INT8), 127);
  assert_int_equal(qcoll__codec_range(INT6), 31);
  assert_int_equal(qcoll__codec_range(INT4), 7);
  assert_int_equal(qcoll__codec_range(INT3), 3);
  assert_int_equal(qcoll__codec_range(FP8), 448);
  assert_int_equal(qcoll__codec_encoded_bytes(INT6, 0), 0);
  assert_int_equal(qcoll__codec_encoded_bytes(INT6, 1), 28);
  assert_int_equal(qcoll__codec_encoded_bytes(INT6, 32), 28);
  assert_int_equal(qcoll__codec_encoded_bytes(INT6, 33), 56);
  assert_int_equal(qcoll__codec_encoded_bytes(INT4, 1024), 32 * 20);
  assert_int_equal(qcoll__codec_encoded_bytes(INT8, 1000), 32 * 36);
  for (size_t i = 0; i < NFMT; i++)
    assert_int_equal(qcoll__codec_group_bytes(ALL_FORMATS[i]) % 4, 0);
}

/* ---- crafted groups, literal bytes ----------------------------------------
 */

static void test_all_zero_bytes(void **state) {
  (void)state;
  float g[G];
  uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES], want[QCOLL_CODEC_MAX_GROUP_BYTES];
  for (int i = 0; i < G; i++)
    g[i] = (i & 1) ? -0.0f : 0.0f; /* -0 is zero too */

  memset(want, 0, sizeof want);
  memset(want + 4, 0x7f, 32); /* INT8: code 127 */
  qcoll__codec_encode_group(INT8, g, out);
  assert_bytes(out, want, 36, "zeros INT8");

  memset(want, 0, sizeof want);
  for (int k = 0; k < 8; k++) { /* INT6: 4 codes 31 = 0x7df7df */
    want[4 + 3 * k] = 0xdf, want[5 + 3 * k] = 0xf7, want[6 + 3 * k] = 0x7d;
  }
  qcoll__codec_encode_group(INT6, g, out);
  assert_bytes(out, want, 28, "zeros INT6");

  memset(want, 0, sizeof want);
  memset(want + 4, 0x77, 16); /* INT4: code 7 twice */
  qcoll__codec_encode_group(INT4, g, out);
  assert_bytes(out, want, 20, "zeros INT4");

  memset(want, 0, sizeof want);
  for (int k = 0; k < 4; k++) { /* INT3: 8 codes 3 = 0x6db6db */
    want[4 + 3 * k] = 0xdb, want[5 + 3 * k] = 0xb6, want[6 + 3 * k] = 0x6d;
  }
  qcoll__codec_encode_group(INT3, g, out);
  assert_bytes(out, want, 16, "zeros INT3");

  memset(want, 0, sizeof want); /* FP8: +0 */
  qcoll__codec_encode_group(FP8, g, out);
  assert_bytes(out, want, 36, "zeros FP8");

  for (size_t f = 0; f < NFMT; f++) { /* decodes to +0 exactly */
    float back[G];
    qcoll__codec_encode_group(ALL_FORMATS[f], g, out);
    qcoll__codec_decode_group(ALL_FORMATS[f], out, back);
    for (int i = 0; i < G; i++) assert_int_equal(bitsf(back[i]), 0);
  }
}

static void test_all_equal_bytes(void **state) {
  (void)state;
  float g[G], back[G];
  uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES], want[QCOLL_CODEC_MAX_GROUP_BYTES];
  const uint8_t scale3[4] = {0x00, 0x00, 0x40, 0x40}; /* 3.0f little-endian */

  for (int sign = 1; sign >= -1; sign -= 2) {
    for (int i = 0; i < G; i++) g[i] = 3.0f * sign;
    memcpy(want, scale3, 4);
    memset(want + 4, sign > 0 ? 0xfe : 0x00, 32); /* INT8: 2R = 254 or 0 */
    qcoll__codec_encode_group(INT8, g, out);
    assert_bytes(out, want, 36, "equal INT8");

    for (int k = 0; k < 8; k++) { /* INT6: 4 codes 62 = 0xfbefbe */
      want[4 + 3 * k] = sign > 0 ? 0xbe : 0,
                   want[5 + 3 * k] = sign > 0 ? 0xef : 0;
      want[6 + 3 * k] = sign > 0 ? 0xfb : 0;
    }
    qcoll__codec_encode_group(INT6, g, out);
    assert_bytes(out, want, 28, "equal INT6");

    memset(want + 4, sign > 0 ? 0xee : 0x00, 16); /* INT4: code 14 twice */
    qcoll__codec_encode_group(INT4, g, out);
    assert_bytes(out, want, 20, "equal INT4");

    for (int k = 0; k < 4; k++) { /* INT3: 8 codes 6 = 0xdb6db6 */
      want[4 + 3 * k] = sign > 0 ? 0xb6 : 0;
      want[5 + 3 * k] = sign > 0 ? 0x6d : 0;
      want[6 + 3 * k] = sign > 0 ? 0xdb : 0;
    }
    qcoll__codec_encode_group(INT3, g, out);
    assert_bytes(out, want, 16, "equal INT3");

    memset(want + 4, sign > 0 ? 0x7e : 0xfe, 32); /* FP8: +-448 */
    qcoll__codec_encode_group(FP8, g, out);
    assert_bytes(out, want, 36, "equal FP8");

    /* step = 3/R: R * step rounds back to 3 or clamps to it */
    for (size_t f = 0; f < NFMT; f++) {
      qcoll__codec_encode_group(ALL_FORMATS[f], g, out);
      qcoll__codec_decode_group(ALL_FORMATS[f], out, back);
      for (int i = 0; i < G; i++) assert_true(back[i] == 3.0f * sign);
    }
  }
}

/* One outlier and small values that round to the zero code (INT) or to
 * small e4m3 values.  INT8: 3.9 * 127/1000 = 0.495 -> 0.  FP8: t = 0.448 x:
 * 1.0 -> 0.448 = 1.792 * 2^-2 -> 1.75 * 2^-2 (0x2e); 3.9 -> 1.747 -> 1.75
 * (0x3e); 0.001 -> 0.000448 < 2^-10 -> 0 (0x00, also for -0.001). */
static void test_outlier_bytes(void **state) {
  (void)state;
  const float v[] = {1.0f, -1.0f, 3.9f, -3.9f, 0.001f, -0.001f, 0.0f, 1000.0f};
  const uint32_t scale = 0x447a0000u; /* 1000.0f */
  const uint32_t i8[] = {127, 127, 127, 127, 127, 127, 127, 254};
  const uint32_t i6[] = {31, 31, 31, 31, 31, 31, 31, 62};
  const uint32_t i4[] = {7, 7, 7, 7, 7, 7, 7, 14};
  const uint32_t i3[] = {3, 3, 3, 3, 3, 3, 3, 6};
  const uint32_t f8[] = {0x2e, 0xae, 0x3e, 0xbe, 0x00, 0x00, 0x00, 0x7e};
  check_group(INT8, v, 8, scale, i8, "outlier");
  check_group(INT6, v, 8, scale, i6, "outlier");
  check_group(INT4, v, 8, scale, i4, "outlier");
  check_group(INT3, v, 8, scale, i3, "outlier");
  check_group(FP8, v, 8, scale, f8, "outlier");
}

/* amax = R makes inv = 1 exactly, so t = x and the ties are real ties:
 * +-2.5 -> +-2, +-3.5 -> +-4, +-0.5 -> 0, 1.5 -> 2, R - 0.5 -> R - 1. */
static void test_ties_int_bytes(void **state) {
  (void)state;
  const float v8[] = {127,  2.5f,  3.5f, -2.5f,  -3.5f,
                      0.5f, -0.5f, 1.5f, 126.5f, -126.5f};
  const uint32_t c8[] = {254, 129, 131, 125, 123, 127, 127, 129, 253, 1};
  const float v6[] = {31,   2.5f,  3.5f, -2.5f, -3.5f,
                      0.5f, -0.5f, 1.5f, 30.5f, -30.5f};
  const uint32_t c6[] = {62, 33, 35, 29, 27, 31, 31, 33, 61, 1};
  const float v4[] = {7,    2.5f,  3.5f, -2.5f, -3.5f,
                      0.5f, -0.5f, 1.5f, 6.5f,  -6.5f};
  const uint32_t c4[] = {14, 9, 11, 5, 3, 7, 7, 9, 13, 1};
  const float v3[] = {3,    2.5f,  1.5f, -2.5f, -1.5f,
                      0.5f, -0.5f, 2.5f, -3.0f, 1.0f};
  const uint32_t c3[] = {6, 5, 5, 1, 1, 3, 3, 5, 0, 4};
  check_group(INT8, v8, 10, bitsf(127.0f), c8, "ties");
  check_group(INT6, v6, 10, bitsf(31.0f), c6, "ties");
  check_group(INT4, v4, 10, bitsf(7.0f), c4, "ties");
  check_group(INT3, v3, 10, bitsf(3.0f), c3, "ties");

  /* step = 1: the decoded values are the integers themselves */
  const float *vals[] = {v8, v6, v4, v3};
  const qcoll_quant_t fmts[] = {INT8, INT6, INT4, INT3};
  const uint32_t *codes[] = {c8, c6, c4, c3};
  for (int f = 0; f < 4; f++) {
    float g[G], back[G];
    uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES];
    fill_group(g, vals[f], 10);
    qcoll__codec_encode_group(fmts[f], g, out);
    qcoll__codec_decode_group(fmts[f], out, back);
    for (int i = 0; i < 10; i++)
      assert_true(back[i] ==
                  (float)((int)codes[f][i] - (int)model_range(fmts[f])));
  }
}

/* amax = 448 makes inv = 1.  e4m3 ties: 1.0625 between 1.0 (0x38) and
 * 1.125 (0x39) -> 0x38; 1.1875 -> 1.25 (0x3a); 432 between 416 (0x7d) and
 * 448 -> 0x7e; 232 between 224 (0x76) and 240 (0x77) -> 0x76; 2^-10 (half
 * the smallest subnormal) -> 0; 3*2^-10 -> 2*2^-9 (0x02); 5*2^-10 -> 0x02;
 * 2^-6 * 17/16 -> 2^-6 (0x08); 15*2^-10 (7.5 subnormal steps) -> 8 steps,
 * the smallest normal (0x08). */
static void test_ties_fp8_bytes(void **state) {
  (void)state;
  const float v[] = {448.0f,   1.0625f,   1.1875f,  432.0f,
                     232.0f,   0x1p-10f,  0x3p-10f, -1.0625f,
                     0x5p-10f, 0x11p-10f, 0xfp-10f, -448.0f};
  const uint32_t c[] = {0x7e, 0x38, 0x3a, 0x7e, 0x76, 0x00,
                        0x02, 0xb8, 0x02, 0x08, 0x08, 0xfe};
  check_group(FP8, v, 12, bitsf(448.0f), c, "ties");
  /* every e4m3 value except NaN decodes to itself with step 1 */
  for (uint32_t b = 0; b < 256; b++) {
    if ((b & 0x7f) == 0x7f) {
      assert_true(isnan(qcoll__codec_e4m3_to_f32(b)));
      continue;
    }
    double want = ((b & 0x80) ? -1 : 1) * e4m3_value((int)(b & 0x7f));
    assert_true((double)qcoll__codec_e4m3_to_f32(b) == want);
    /* and encodes back to itself (no -0) */
    uint32_t again = qcoll__codec_e4m3_from_f32((float)want);
    assert_int_equal(again, b == 0x80 ? 0 : b);
  }
}

/* FLT_MAX as amax.  inv = fl(127 / FLT_MAX) = (127 + 2^-17) 2^-128, so
 * FLT_MAX/2 gives t = 63.5 exactly (63.5 + 2^-25 - 2^-42 rounded) and then
 * 64 (code 0xbf); the other codes were derived the same way with exact
 * rational arithmetic.  R * fl(FLT_MAX / R) overflows for INT6 and INT4:
 * the clamp must bring the decoded maximum back to FLT_MAX.  INT3: R / a is
 * subnormal; fl(3 / m) = 1.5 + 2^-23 and * 2^-127 is a tie between 1.5 and
 * 1.5 + 2^-22 (in units of 2^-127), to even: inv = 3 * 2^-128, so
 * FLT_MAX / 2 gives t = 1.5 - 0.75 * 2^-23 -> 1.5 - 2^-23 -> 1 (code 4, not
 * the tie a correctly rounded inv would make); FLT_MAX / 4 -> 0.75 -> 1
 * (4); -FLT_MAX / 3 -> -1 (2). */
static void test_largest_f32_bytes(void **state) {
  (void)state;
  const float v[] = {FLT_MAX, -FLT_MAX, FLT_MAX / 2, FLT_MAX / 4, -FLT_MAX / 3};
  const uint32_t scale = 0x7f7fffffu;
  const uint32_t i8[] = {0xfe, 0x00, 0xbf, 0x9f, 0x55};
  const uint32_t i6[] = {0x3e, 0x00, 0x2f, 0x27, 0x15};
  const uint32_t i4[] = {0x0e, 0x00, 0x0b, 0x09, 0x05};
  const uint32_t i3[] = {6, 0, 4, 4, 2};
  const uint32_t f8[] = {0x7e, 0xfe, 0x76, 0x6e, 0xf1};
  check_group(INT8, v, 5, scale, i8, "FLT_MAX");
  check_group(INT6, v, 5, scale, i6, "FLT_MAX");
  check_group(INT4, v, 5, scale, i4, "FLT_MAX");
  check_group(INT3, v, 5, scale, i3, "FLT_MAX");
  check_group(FP8, v, 5, scale, f8, "FLT_MAX");
  for (size_t f = 0; f < NFMT; f++) {
    float g[G], back[G];
    uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES];
    fill_group(g, v, 5);
    qcoll__codec_encode_group(ALL_FORMATS[f], g, out);
    qcoll__codec_decode_group(ALL_FORMATS[f], out, back);
    assert_true(back[0] == FLT_MAX);
    assert_true(back[1] == -FLT_MAX);
    for (int i = 0; i < G; i++) assert_true(isfinite(back[i]));
  }
}

/* 65504, the largest f16, as amax: 32752 = amax/2 is again a rounding tie
 * resolved to 64 (INT8); 1000 * 127/65504 = 1.94 -> 2 (0x81); -1 -> 0. */
static void test_largest_f16_bytes(void **state) {
  (void)state;
  const float v[] = {65504.0f, -65504.0f, 32752.0f, 1000.0f, -1.0f};
  const uint32_t scale = 0x477fe000u;
  const uint32_t i8[] = {0xfe, 0x00, 0xbf, 0x81, 0x7f};
  const uint32_t i6[] = {0x3e, 0x00, 0x2f, 0x1f, 0x1f};
  const uint32_t i4[] = {0x0e, 0x00, 0x0b, 0x07, 0x07};
  const uint32_t i3[] = {6, 0, 5, 3, 3}; /* 32752 -> 1.5 -> 2 */
  const uint32_t f8[] = {0x7e, 0xfe, 0x76, 0x4e, 0x84};
  check_group(INT8, v, 5, scale, i8, "f16 max");
  check_group(INT6, v, 5, scale, i6, "f16 max");
  check_group(INT4, v, 5, scale, i4, "f16 max");
  check_group(INT3, v, 5, scale, i3, "f16 max");
  check_group(FP8, v, 5, scale, f8, "f16 max");
}

/* Tiny amax.  FLT_MIN = 2^-126 < 2^-64: p = 2^64, a = 2^-62, inv = 127 *
 * 2^62 exactly, 2^-127 -> t = 63.5 -> 64 (0xbf), 2^-149 -> 1.5e-5 -> 0.
 * FP8: inv = 7 * 2^68, 2^-127 -> 224 (0x76), 2^-149 -> 7 * 2^-17 -> 0.
 * 2^-149 (smallest subnormal) as amax: codes 2R, 0.  f16's smallest normal
 * 2^-14 and subnormal 2^-24 (p = 1): 2^-24 * 127 * 2^14 = 0.124 -> 0;
 * -2^-15 -> -63.5 -> -64 (0x3f); FP8: 2^-24 -> 448 * 2^-10 = 0.4375 exactly
 * (0x2e), -2^-15 -> -224 (0xf6). */
static void test_tiny_amax_bytes(void **state) {
  (void)state;
  const float vn[] = {0x1p-126f, -0x1p-126f, 0x1p-127f, 0x1p-149f};
  const uint32_t n8[] = {0xfe, 0x00, 0xbf, 0x7f},
                 n6[] = {0x3e, 0x00, 0x2f, 0x1f};
  const uint32_t n4[] = {0x0e, 0x00, 0x0b, 0x07},
                 nf[] = {0x7e, 0xfe, 0x76, 0x00};
  check_group(INT8, vn, 4, 0x00800000u, n8, "FLT_MIN");
  check_group(INT6, vn, 4, 0x00800000u, n6, "FLT_MIN");
  check_group(INT4, vn, 4, 0x00800000u, n4, "FLT_MIN");
  const uint32_t n3[] = {6, 0, 5, 3}; /* 2^-127 -> 1.5 -> 2 */
  check_group(INT3, vn, 4, 0x00800000u, n3, "FLT_MIN");
  check_group(FP8, vn, 4, 0x00800000u, nf, "FLT_MIN");

  const float vs[] = {0x1p-149f, -0x1p-149f};
  const uint32_t s8[] = {254, 0}, s6[] = {62, 0}, s4[] = {14, 0},
                 sf[] = {0x7e, 0xfe};
  check_group(INT8, vs, 2, 0x00000001u, s8, "2^-149");
  check_group(INT6, vs, 2, 0x00000001u, s6, "2^-149");
  check_group(INT4, vs, 2, 0x00000001u, s4, "2^-149");
  const uint32_t s3[] = {6, 0};
  check_group(INT3, vs, 2, 0x00000001u, s3, "2^-149");
  check_group(FP8, vs, 2, 0x00000001u, sf, "2^-149");

  const float vh[] = {0x1p-14f, 0x1p-24f, -0x1p-15f};
  const uint32_t h8[] = {0xfe, 0x7f, 0x3f}, h6[] = {0x3e, 0x1f, 0x0f};
  const uint32_t h4[] = {0x0e, 0x07, 0x03}, hf[] = {0x7e, 0x2e, 0xf6};
  check_group(INT8, vh, 3, 0x38800000u, h8, "f16 min normal");
  check_group(INT6, vh, 3, 0x38800000u, h6, "f16 min normal");
  check_group(INT4, vh, 3, 0x38800000u, h4, "f16 min normal");
  const uint32_t h3[] = {6, 3, 1}; /* -2^-15 -> -1.5 -> -2 */
  check_group(INT3, vh, 3, 0x38800000u, h3, "f16 min normal");
  check_group(FP8, vh, 3, 0x38800000u, hf, "f16 min normal");

  const float vu[] = {0x1p-24f, -0x1p-24f};
  check_group(INT8, vu, 2, 0x33800000u, s8, "f16 min subnormal");
  check_group(INT6, vu, 2, 0x33800000u, s6, "f16 min subnormal");
  check_group(INT4, vu, 2, 0x33800000u, s4, "f16 min subnormal");
  check_group(INT3, vu, 2, 0x33800000u, s3, "f16 min subnormal");
  check_group(FP8, vu, 2, 0x33800000u, sf, "f16 min subnormal");

  /* decoding: the extremes come back exactly, nothing is inf or NaN */
  const float *tv[] = {vn, vs, vh, vu};
  const int tn[] = {4, 2, 3, 2};
  for (int k = 0; k < 4; k++)
    for (size_t f = 0; f < NFMT; f++) {
      float g[G], back[G];
      uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES];
      fill_group(g, tv[k], tn[k]);
      qcoll__codec_encode_group(ALL_FORMATS[f], g, out);
      qcoll__codec_decode_group(ALL_FORMATS[f], out, back);
      assert_true(back[0] == tv[k][0]);
      for (int i = 0; i < G; i++) assert_true(isfinite(back[i]));
    }
  /* 2^-149 groups: every element is 0 or +-2^-149, all exact */
  for (size_t f = 0; f < NFMT; f++) {
    float g[G], back[G];
    uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES];
    fill_group(g, vs, 2);
    qcoll__codec_encode_group(ALL_FORMATS[f], g, out);
    qcoll__codec_decode_group(ALL_FORMATS[f], out, back);
    for (int i = 0; i < G; i++) assert_int_equal(bitsf(back[i]), bitsf(g[i]));
  }
}

/* The largest magnitude is negative: the scale is +5 and -5 gets code 0
 * (INT) / -448 (FP8).  inv = fl(127/5); 4 -> 101.6 -> 102 (0xe5),
 * -2 -> -50.8 -> -51 (0x4c), 1.25 -> 31.75 -> 32 (0x9f). */
static void test_negative_amax_bytes(void **state) {
  (void)state;
  const float v[] = {-5.0f, 4.0f, -2.0f, 1.25f};
  const uint32_t i8[] = {0x00, 0xe5, 0x4c, 0x9f},
                 i6[] = {0x00, 0x38, 0x13, 0x27};
  const uint32_t i4[] = {0x00, 0x0d, 0x04, 0x09},
                 f8[] = {0xfe, 0x7b, 0xf3, 0x6e};
  check_group(INT8, v, 4, 0x40a00000u, i8, "negative amax");
  check_group(INT6, v, 4, 0x40a00000u, i6, "negative amax");
  check_group(INT4, v, 4, 0x40a00000u, i4, "negative amax");
  const uint32_t i3[] = {0x00, 0x05, 0x02, 0x04}; /* 2.4, -1.2, 0.75 */
  check_group(INT3, v, 4, 0x40a00000u, i3, "negative amax");
  check_group(FP8, v, 4, 0x40a00000u, f8, "negative amax");
}

/* A group holding inf or NaN: scale = canonical NaN, zero codes, decodes to
 * 32 canonical NaNs.  The next group is unaffected. */
static void test_nonfinite_policy(void **state) {
  (void)state;
  const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u,
                          0xffc00000u, 0x7f800001u, 0x7fbfffffu};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
      for (int pos = 0; pos < G; pos += 13) {
        float in[2 * G], back[2 * G];
        uint8_t out[2 * QCOLL_CODEC_MAX_GROUP_BYTES];
        for (int i = 0; i < 2 * G; i++) in[i] = (float)(i - 20) * 0.25f;
        in[pos] = fbits(bad[b]);
        qcoll__codec_encode(fmt, in, 2 * G, out);
        uint8_t want[QCOLL_CODEC_MAX_GROUP_BYTES];
        uint32_t codes[G];
        for (int i = 0; i < G; i++)
          codes[i] = fmt == FP8 ? 0 : model_range(fmt);
        model_pack(fmt, QCOLL_CODEC_NAN_BITS, codes, want);
        assert_bytes(out, want, model_group_bytes(fmt), "non-finite group");
        qcoll__codec_decode(fmt, out, 2 * G, back);
        for (int i = 0; i < G; i++)
          assert_int_equal(bitsf(back[i]), QCOLL_CODEC_NAN_BITS);
        for (int i = G; i < 2 * G; i++) assert_true(isfinite(back[i]));
      }
  }
}

/* ---- +-amax lands exactly on +-R ---------------------------------------- */

static void test_amax_exact(void **state) {
  (void)state;
  rng_t rng = {42};
  long checked = 0;
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    uint32_t top = fmt == FP8 ? 0x7eu : 2 * model_range(fmt);
    uint32_t bottom = fmt == FP8 ? 0xfeu : 0u;
    for (int k = 0; k < 200000; k++) {
      /* every exponent from subnormal to FLT_MAX, random mantissas, plus the
       * extremes */
      uint32_t ab = k == 0   ? 1u
                    : k == 1 ? 0x7f7fffffu
                    : k == 2 ? 0x00800000u
                             : (uint32_t)(rng_next(&rng) % 0x7f7fffffu) + 1u;
      qcoll__codec_enc_t s = qcoll__codec_enc_scale(fmt, ab);
      float amax = fbits(ab);
      assert_int_equal(qcoll__codec_encode_lane(fmt, amax, s), top);
      assert_int_equal(qcoll__codec_encode_lane(fmt, -amax, s), bottom);
      checked++;
    }
  }
  print_message(
      "amax -> +-R exactly for %ld random amax values (%zu formats)\n",
      checked, NFMT);
}

/* ---- inv and step without division: correctly rounded ----------------- */

/* inv = fl(R / m) for every mantissa m in [1, 2) and every format, and
 * step = fl(a / R) for every mantissa at exponent 0 and at random
 * exponents -85..127 (the range of a = amax * p): codec.h computes both
 * from a Newton reciprocal and Markstein's correction, no division. */
static void test_division_free_quotients(void **state) {
  (void)state;
  rng_t rng = {3};
  long wrong = 0;
  for (uint32_t b = 0; b < (1u << 23); b++) {
    const float m = fbits(0x3f800000u | b);
    for (size_t f = 0; f < NFMT; f++) {
      const qcoll_quant_t fmt = ALL_FORMATS[f];
      const double R = model_range(fmt);
      const float inv = qcoll__codec_inv_scale(fmt, m);
      const float step = qcoll__codec_step_scale(fmt, m);
      wrong += inv != (float)(R / m);
      wrong += step != (float)(m / R);
      if ((b & 63) == 0) {
        const int e = (int)(rng_next(&rng) % 213) - 85;
        const float a = (float)ldexp(m, e);
        wrong += qcoll__codec_step_scale(fmt, a) != (float)((double)a / R);
        if (fmt != INT3 || e < 126)
          wrong += qcoll__codec_inv_scale(fmt, a) != (float)(R / (double)a);
      }
    }
  }
  assert_int_equal(wrong, 0);
}

/* ---- the implementation equals the independent model ------------------- */

typedef enum gen_kind {
  GEN_GAUSS,
  GEN_OUTLIER,
  GEN_BITS,
  GEN_TIES,
  GEN_TINY,
  GEN_KINDS
} gen_kind_t;

/* Random groups: Gaussian at a random scale 2^-150..2^120; Gaussian with
 * rare outliers (x1000..x2^20); arbitrary finite bit patterns; exact ties
 * (amax = R 2^k, elements (m + 1/2) 2^k); tiny (subnormal) groups. */
static void gen_group(rng_t *r, gen_kind_t kind, qcoll_quant_t fmt,
                      float g[G]) {
  int e = (int)(rng_next(r) % 271) - 150;
  switch (kind) {
    case GEN_GAUSS:
      for (int i = 0; i < G; i++) g[i] = (float)ldexp(rng_gauss(r), e);
      break;
    case GEN_OUTLIER:
      for (int i = 0; i < G; i++) {
        double x = rng_gauss(r);
        if (rng_next(r) % 64 == 0) x *= ldexp(1000.0, (int)(rng_next(r) % 11));
        g[i] = (float)x;
      }
      break;
    case GEN_BITS:
      for (int i = 0; i < G; i++) {
        uint32_t u;
        do u = (uint32_t)rng_next(r);
        while ((u & 0x7f800000u) == 0x7f800000u);
        g[i] = fbits(u);
      }
      break;
    case GEN_TIES: {
      int k = (int)(rng_next(r) % 200) - 100;
      double R = model_range(fmt);
      for (int i = 0; i < G; i++) {
        double m = (double)(rng_next(r) % (uint64_t)(2 * R)) - R + 0.5;
        g[i] = (float)ldexp(m, k);
      }
      g[rng_next(r) % G] = (float)ldexp(rng_next(r) & 1 ? R : -R, k);
      break;
    }
    case GEN_TINY:
      for (int i = 0; i < G; i++)
        g[i] = fbits((uint32_t)(rng_next(r) % 0x01000000u) |
                     (uint32_t)(rng_next(r) & 1) << 31);
      break;
    default: break;
  }
}

static void test_matches_model(void **state) {
  (void)state;
  rng_t rng = {7};
  long groups = 0;
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    size_t gb = model_group_bytes(fmt);
    for (int kind = 0; kind < GEN_KINDS; kind++)
      for (int k = 0; k < 4000; k++) {
        float g[G], back[G], want_back[G];
        uint8_t got[QCOLL_CODEC_MAX_GROUP_BYTES],
            want[QCOLL_CODEC_MAX_GROUP_BYTES];
        gen_group(&rng, (gen_kind_t)kind, fmt, g);
        qcoll__codec_encode_group(fmt, g, got);
        model_encode(fmt, g, want);
        assert_bytes(got, want, gb, fmt_name(fmt));
        qcoll__codec_decode_group(fmt, got, back);
        model_decode(fmt, got, want_back);
        for (int i = 0; i < G; i++)
          assert_int_equal(bitsf(back[i]), bitsf(want_back[i]));
        groups++;
      }
  }
  print_message("%ld random groups: bytes and decoded bits equal the model\n",
                groups);
}

/* ---- error bounds ------------------------------------------------------- */

/* The bounds of codec.h; see the derivation there. */
static double bound_slack(qcoll_quant_t fmt, double x, double amax) {
  return (fmt == FP8 ? fabs(x) + amax : amax) * ldexp(1.0, -21) +
         ldexp(1.0, -149);
}
static double bound(qcoll_quant_t fmt, double x, double amax) {
  if (fmt != FP8)
    return amax / (2.0 * model_range(fmt)) + bound_slack(fmt, x, amax);
  double rel = fabs(x) * ldexp(1.0, -4), sub = amax / 448.0 * ldexp(1.0, -10);
  return (rel > sub ? rel : sub) + bound_slack(fmt, x, amax);
}

static void test_roundtrip_bounds(void **state) {
  (void)state;
  rng_t rng = {2024};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    /* largest error / (rounding term of the bound), for groups whose step is
     * far from the subnormal range, and for all groups */
    double worst = 0, worst_all = 0;
    long n = 0;
    for (int kind = 0; kind < GEN_KINDS; kind++)
      for (int k = 0; k < 4000; k++) {
        float g[G], back[G];
        uint8_t out[QCOLL_CODEC_MAX_GROUP_BYTES];
        double amax = 0;
        gen_group(&rng, (gen_kind_t)kind, fmt, g);
        for (int i = 0; i < G; i++) amax = fmax(amax, fabs(g[i]));
        qcoll__codec_encode_group(fmt, g, out);
        qcoll__codec_decode_group(fmt, out, back);
        for (int i = 0; i < G; i++) {
          double err = fabs((double)g[i] - back[i]);
          double b = bound(fmt, g[i], amax);
          if (!(err <= b)) {
            print_error("%s: x=%a amax=%a decoded=%a err=%g > bound %g\n",
                        fmt_name(fmt), (double)g[i], amax, (double)back[i], err,
                        b);
            fail();
          }
          double main_term = b - bound_slack(fmt, g[i], amax);
          if (main_term > 0 && err / main_term > worst_all)
            worst_all = err / main_term;
          if (main_term > 0 && amax >= 0x1p-90 && err / main_term > worst)
            worst = err / main_term;
          assert_true(fabs(back[i]) <= amax);
          n++;
        }
      }
    print_message(
        "%-4s round trip: %ld values within the bound; worst error / (half a "
        "step or "
        "half an e4m3 ulp) = %.7f (amax >= 2^-90), %.3f (all, subnormal "
        "outputs "
        "round to 2^-149)\n",
        fmt_name(fmt), n, worst, worst_all);
  }
}

/* ---- buffers: zero padding, decode writes only n ----------------------- */

static void test_buffers(void **state) {
  (void)state;
  rng_t rng = {99};
  const size_t sizes[] = {1, 31, 32, 33, 64, 100, 1000};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    size_t gb = model_group_bytes(fmt);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      size_t n = sizes[s], groups = (n + G - 1) / G;
      float *in = malloc(groups * G * sizeof(float)),
            *back = malloc((n + 4) * sizeof(float));
      uint8_t *out = malloc(groups * gb + 8), want[QCOLL_CODEC_MAX_GROUP_BYTES];
      assert_non_null(in), assert_non_null(back), assert_non_null(out);
      for (size_t i = 0; i < groups * G; i++)
        in[i] = i < n ? (float)rng_gauss(&rng) : 0.0f;
      memset(out, 0xcc, groups * gb + 8);
      qcoll__codec_encode(fmt, in, n, out);
      for (size_t g = 0; g < groups; g++) { /* = zero-padded groups */
        model_encode(fmt, in + g * G, want);
        assert_bytes(out + g * gb, want, gb, "buffer group");
      }
      for (size_t i = 0; i < 8; i++)
        assert_int_equal(out[groups * gb + i], 0xcc);
      for (size_t i = 0; i < n + 4; i++) back[i] = 12345.0f;
      qcoll__codec_decode(fmt, out, n, back);
      for (size_t g = 0; g < groups; g++) {
        float gd[G];
        model_decode(fmt, out + g * gb, gd);
        for (size_t i = 0; i < G && g * G + i < n; i++)
          assert_int_equal(bitsf(back[g * G + i]), bitsf(gd[i]));
      }
      for (size_t i = n; i < n + 4; i++) assert_true(back[i] == 12345.0f);
      free(in), free(back), free(out);
    }
  }
}

/* ---- the one-group-per-warp recipe, emulated lane by lane --------------- */

/* The plain path (codec.h "plain groups") gives the general path's bits:
 * for every plain group of the random kinds (and all-zero ones), each
 * quad's plain_quad equals pack_quad of encode_lane's codes, and
 * plain_words + plain_value (and plain_decode) of random quads decode like
 * decode_lane; plain_words equals 2^23 + code (INT) or the code (FP8).
 * (The device's own FP8 conversions are checked by codec_gpu and
 * gpu.quant_kernels.) */
static void test_plain_path(void **state) {
  (void)state;
  rng_t rng = {11};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    const uint32_t b = qcoll__codec_code_bits(fmt);
    int plain_groups = 0;
    for (int k = 0; k < 4000; k++) {
      float g[G];
      if (k % 50 == 0)
        memset(g, 0, sizeof g);
      else
        gen_group(&rng, (gen_kind_t)(k % GEN_KINDS), fmt, g);
      uint32_t amax_bits = 0;
      for (int l = 0; l < G; l++) {
        uint32_t a = qcoll__codec_abs_bits(g[l]);
        amax_bits = a > amax_bits ? a : amax_bits;
      }
      if (!qcoll__codec_plain(amax_bits)) continue;
      plain_groups++;
      qcoll__codec_enc_t s = qcoll__codec_enc_scale(fmt, amax_bits);
      qcoll__codec_dec_t d = qcoll__codec_dec_scale(fmt, s.stored);
      const float inv = qcoll__codec_plain_inv(fmt, amax_bits);
      const float amax = fbits(amax_bits);
      const float step = qcoll__codec_step_scale(fmt, amax);
      for (int q = 0; q < G; q += 4) {
        uint32_t c[4], w[4];
        for (int j = 0; j < 4; j++)
          c[j] = qcoll__codec_encode_lane(fmt, g[q + j], s);
        const uint32_t quad = qcoll__codec_plain_quad(fmt, g + q, inv);
        if (quad != qcoll__codec_pack_quad(fmt, c))
          fail_msg("%s plain_quad 0x%08x, encode_lane 0x%08x (group %d)",
                   fmt_name(fmt), quad, qcoll__codec_pack_quad(fmt, c), k);
        /* Any codes the group may hold, with bits of a neighbour above
         * (INT8 and FP8 fill the word). */
        for (int j = 0; j < 4; j++)
          c[j] = (uint32_t)rng_next(&rng) % (fmt == FP8 ? 0x7fu : (1u << b));
        const uint32_t above =
            4 * b < 32 ? (uint32_t)rng_next(&rng) << (4 * b) : 0u;
        const uint32_t any = qcoll__codec_pack_quad(fmt, c) | above;
        qcoll__codec_plain_words(fmt, any, w);
        float y4[4];
        qcoll__codec_plain_decode(fmt, any, step, amax, y4);
        for (int j = 0; j < 4; j++) {
          const uint32_t code = qcoll__codec_quad_code(fmt, any, j);
          assert_int_equal(w[j], fmt == FP8 ? code : 0x4b000000u | code);
          const float y = qcoll__codec_plain_value(fmt, w[j], step, amax);
          const float r = qcoll__codec_decode_lane(fmt, code, d);
          if (bitsf(y) != bitsf(r) || bitsf(y4[j]) != bitsf(r))
            fail_msg("%s code %u: plain_value 0x%08x, plain_decode 0x%08x, "
                     "decode_lane 0x%08x",
                     fmt_name(fmt), code, bitsf(y), bitsf(y4[j]), bitsf(r));
        }
      }
    }
    assert_true(plain_groups > 1000);
  }
}

static void test_warp_recipe(void **state) {
  (void)state;
  rng_t rng = {5};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    for (int k = 0; k < 2000; k++) {
      float g[G];
      uint32_t lane_bits[G], c[G], w[G];
      uint8_t warp[QCOLL_CODEC_MAX_GROUP_BYTES],
          ref[QCOLL_CODEC_MAX_GROUP_BYTES];
      gen_group(&rng, (gen_kind_t)(k % GEN_KINDS), fmt, g);
      memset(warp, 0xee, sizeof warp);
      uint32_t amax_bits = 0;
      for (int l = 0; l < G; l++) { /* step 1: warp max of the |x| bits */
        lane_bits[l] = qcoll__codec_abs_bits(g[l]);
        amax_bits = lane_bits[l] > amax_bits ? lane_bits[l] : amax_bits;
      }
      qcoll__codec_enc_t s = qcoll__codec_enc_scale(fmt, amax_bits);
      qcoll__codec_store_scale(warp, s.stored);
      for (int l = 0; l < G; l++) c[l] = qcoll__codec_encode_lane(fmt, g[l], s);
      uint8_t *codes = warp + 4;
      if (fmt == INT4) {
        for (int l = 0; l < G; l += 2)
          codes[l >> 1] = (uint8_t)(c[l] | c[l + 1] << 4);
      } else if (fmt == INT3) {
        for (int l = 0; l < G; l++) w[l] = c[l] << (3 * (l & 7));
        for (int o = 1; o < 8; o <<= 1) { /* shuffle xor 1, 2, 4 */
          uint32_t x[G];
          for (int l = 0; l < G; l++) x[l] = w[l] | w[l ^ o];
          memcpy(w, x, sizeof w);
        }
        for (int l = 0; l < G; l++)
          if ((l & 7) < 3)
            codes[3 * (l >> 3) + (l & 7)] = (uint8_t)(w[l] >> (8 * (l & 7)));
      } else if (fmt == INT6) {
        for (int l = 0; l < G; l++) w[l] = c[l] << (6 * (l & 3));
        uint32_t w1[G], w2[G];
        for (int l = 0; l < G; l++) w1[l] = w[l] | w[l ^ 1]; /* shuffle xor 1 */
        for (int l = 0; l < G; l++)
          w2[l] = w1[l] | w1[l ^ 2]; /* shuffle xor 2 */
        for (int l = 0; l < G; l++)
          if ((l & 3) != 3)
            codes[3 * (l >> 2) + (l & 3)] = (uint8_t)(w2[l] >> (8 * (l & 3)));
      } else {
        for (int l = 0; l < G; l++) codes[l] = (uint8_t)c[l];
      }
      qcoll__codec_encode_group(fmt, g, ref);
      assert_bytes(warp, ref, model_group_bytes(fmt), "warp recipe");
      qcoll__codec_dec_t d =
          qcoll__codec_dec_scale(fmt, qcoll__codec_load_scale(ref));
      float back[G];
      qcoll__codec_decode_group(fmt, ref, back);
      for (int l = 0; l < G; l++)
        assert_int_equal(bitsf(qcoll__codec_decode_lane(
                             fmt, qcoll__codec_unpack_one(fmt, ref + 4, l), d)),
                         bitsf(back[l]));
    }
  }
}

/* ---- two-shot accuracy: qcoll vs the comparison scheme ------------------ */

static double rms(const float *y, const double *ref, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (y[i] - ref[i]) * (y[i] - ref[i]);
  return sqrt(s / (double)n);
}

/* Paired comparison of squared errors: z = mean(d) / (sd(d) / sqrt(n)) with
 * d_i = (a_i - ref_i)^2 - (b_i - ref_i)^2.  z < 0: a is more accurate;
 * |z| < 3: the difference is within the sampling noise of n values. */
static double paired_z(const float *a, const float *b, const double *ref,
                       size_t n) {
  double sum = 0, sum2 = 0;
  for (size_t i = 0; i < n; i++) {
    double ea = a[i] - ref[i], eb = b[i] - ref[i], d = ea * ea - eb * eb;
    sum += d, sum2 += d * d;
  }
  double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
  if (var <= 0) return 0;
  return mean / sqrt(var / (double)n);
}

/* Gaussian inputs that are exact in the input type (f16 or bf16), as the
 * comparison scheme's callers would pass them. */
typedef struct scheme_tally {
  int strictly_worse; /* cases where qcoll's RMS error exceeded the comparison's
                       */
  int significantly_worse;  /* ... by more than the sampling noise (z > 3) */
  int int8_bf16_not_better; /* INT8 with bf16 accumulation: not better by z < -3
                             */
} scheme_tally_t;

static void scheme_case(ref_acc_t acc, int nranks, size_t n, uint64_t seed,
                        scheme_tally_t *tally) {
  rng_t rng = {seed};
  float **in = malloc((size_t)nranks * sizeof(float *));
  float *outq = malloc(n * sizeof(float)), *outc = malloc(n * sizeof(float));
  float *outq_rounded = malloc(n * sizeof(float));
  double *ref = malloc(n * sizeof(double));
  assert_non_null(in), assert_non_null(outq), assert_non_null(outc),
      assert_non_null(ref);
  assert_non_null(outq_rounded);
  for (int r = 0; r < nranks; r++) {
    in[r] = malloc(n * sizeof(float));
    assert_non_null(in[r]);
    for (size_t i = 0; i < n; i++)
      in[r][i] = ref_round_acc(acc, (float)rng_gauss(&rng));
  }
  ref_scheme_exact(nranks, n, (const float *const *)in, ref);
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    assert_int_equal(
        ref_scheme_qcoll(fmt, nranks, n, (const float *const *)in, outq), 0);
    assert_int_equal(
        ref_scheme_compare(fmt, acc, nranks, n, (const float *const *)in, outc),
        0);
    /* qcoll's result stored in the callers' type, as an f16/bf16 all-reduce
     * would return it */
    for (size_t i = 0; i < n; i++)
      outq_rounded[i] = ref_round_acc(acc, outq[i]);
    double eq = rms(outq, ref, n), eqr = rms(outq_rounded, ref, n),
           ec = rms(outc, ref, n);
    double z = paired_z(outq_rounded, outc, ref, n);
    int strictly_worse = !(eq <= ec && eqr <= ec);
    print_message(
        "%-4s %s ranks=%d  rms error: qcoll %.5e  qcoll->%s %.5e  comparison "
        "%.5e  "
        "ratio %.4f  z %+6.1f%s\n",
        fmt_name(fmt), acc == REF_ACC_F16 ? "f16 " : "bf16", nranks, eq,
        acc == REF_ACC_F16 ? "f16 " : "bf16", eqr, ec, eqr / ec, z,
        strictly_worse ? "  (qcoll larger)" : "");
    tally->strictly_worse += strictly_worse;
    tally->significantly_worse += z > 3;
    if (fmt == INT8 && acc == REF_ACC_BF16)
      tally->int8_bf16_not_better += !(z < -3);

    /* Per element: phase-1 errors of every rank plus the phase-2 error of
     * the f32 sum (the bound of codec.h, with that group's amax), plus the
     * f32 accumulation (nranks roundings of at most 2^-24 |partial|). */
    for (size_t g0 = 0; g0 < n; g0 += G) {
      double amax_r[8] = {0}, amax_s = 0, sum_abs[G] = {0};
      float s[G];
      size_t len = n - g0 < G ? n - g0 : G;
      for (int r = 0; r < nranks; r++) {
        float dec[G];
        uint8_t wire[QCOLL_CODEC_MAX_GROUP_BYTES];
        qcoll__codec_encode(fmt, in[r] + g0, len, wire);
        qcoll__codec_decode(fmt, wire, len, dec);
        for (size_t i = 0; i < len; i++) {
          amax_r[r] = fmax(amax_r[r], fabs(in[r][g0 + i]));
          s[i] = r == 0 ? dec[i] : s[i] + dec[i];
          sum_abs[i] += fabs(dec[i]);
        }
      }
      for (size_t i = 0; i < len; i++) amax_s = fmax(amax_s, fabs(s[i]));
      for (size_t i = 0; i < len; i++) {
        double b = bound(fmt, s[i], amax_s) + nranks * ldexp(sum_abs[i], -24);
        for (int r = 0; r < nranks; r++)
          b += bound(fmt, in[r][g0 + i], amax_r[r]);
        double err = fabs(outq[g0 + i] - ref[g0 + i]);
        if (!(err <= b)) {
          print_error("%s: element %zu error %g > bound %g\n", fmt_name(fmt),
                      g0 + i, err, b);
          fail();
        }
      }
    }
  }
  for (int r = 0; r < nranks; r++) free(in[r]);
  free(in), free(outq), free(outc), free(outq_rounded), free(ref);
}

/* qcoll's fp32 accumulation against f16/bf16 accumulation, both through
 * the same codec, 65536 Gaussian values (exact in f16/bf16) per rank, 2, 4
 * and 8 ranks.  Asserted: qcoll is never less accurate beyond sampling noise
 * (paired z <= 3) and, for INT8 with bf16, where bf16's rounding (2^-9
 * relative) is comparable to INT8's half step (amax/254), clearly more
 * accurate (z < -3).  Where the codec's own rounding dominates (INT4, FP8,
 * f16 accumulation) the two schemes differ by less than the noise of the
 * sample, either way; the count of such cases is printed, not asserted. */
static void test_scheme_accuracy(void **state) {
  (void)state;
  scheme_tally_t t = {0, 0, 0};
  const int ranks[] = {2, 4, 8};
  for (size_t k = 0; k < 3; k++)
    scheme_case(REF_ACC_F16, ranks[k], 1 << 16, 11 + k, &t);
  for (size_t k = 0; k < 3; k++)
    scheme_case(REF_ACC_BF16, ranks[k], 1 << 16, 21 + k, &t);
  print_message(
      "cases with qcoll's rms error larger: %d of %d (all within noise: %s)\n",
      t.strictly_worse, (int)(6 * NFMT), t.significantly_worse ? "no" : "yes");
  assert_int_equal(t.significantly_worse, 0);
  assert_int_equal(t.int8_bf16_not_better, 0);
}

/* Exact sums: every rank holds the same values v, integers of the format
 * with +-R in every group, so phase 1 is exact; the sum 8v has amax 8R, so
 * inv = 1/8 and step = 8 are exact and phase 2 is exact too.  Both schemes
 * must return 8v exactly (it is also exact in f16). */
static void test_scheme_exact_sums(void **state) {
  (void)state;
  enum { N = 8, LEN = 32 * 40 + 7 };
  static const float fp8_vals[] = {0, 1,  -1, 2,  -3,  4,  5,   -6,  7,
                                   8, -9, 10, 12, -14, 16, 448, -448};
  float *in[N], out[LEN], outc[LEN], v[LEN];
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = ALL_FORMATS[f];
    int R = (int)model_range(fmt);
    for (int i = 0; i < LEN; i++) {
      if (fmt == FP8)
        v[i] = fp8_vals[(i * 7 + 3) % 17];
      else
        v[i] = (float)((i * 7 + 3) % (2 * R + 1) - R);
      if (i % G == 5) v[i] = (float)((i / G) & 1 ? R : -R);
    }
    for (int r = 0; r < N; r++) in[r] = v;
    assert_int_equal(
        ref_scheme_qcoll(fmt, N, LEN, (const float *const *)in, out), 0);
    assert_int_equal(ref_scheme_compare(fmt, REF_ACC_F16, N, LEN,
                                        (const float *const *)in, outc),
                     0);
    for (int i = 0; i < LEN; i++) {
      assert_true(out[i] == 8 * v[i]);
      assert_true(outc[i] == 8 * v[i]);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_all_zero_bytes),
      cmocka_unit_test(test_all_equal_bytes),
      cmocka_unit_test(test_outlier_bytes),
      cmocka_unit_test(test_ties_int_bytes),
      cmocka_unit_test(test_ties_fp8_bytes),
      cmocka_unit_test(test_largest_f32_bytes),
      cmocka_unit_test(test_largest_f16_bytes),
      cmocka_unit_test(test_tiny_amax_bytes),
      cmocka_unit_test(test_negative_amax_bytes),
      cmocka_unit_test(test_nonfinite_policy),
      cmocka_unit_test(test_amax_exact),
      cmocka_unit_test(test_division_free_quotients),
      cmocka_unit_test(test_matches_model),
      cmocka_unit_test(test_roundtrip_bounds),
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_warp_recipe),
      cmocka_unit_test(test_plain_path),
      cmocka_unit_test(test_scheme_exact_sums),
      cmocka_unit_test(test_scheme_accuracy),
  };
  return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
