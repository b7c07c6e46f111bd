/*
 * Rotated groups (codec.h "Rotated groups") on the CPU: exact values of the
 * transform on crafted groups (a single outlier, all equal, zeros, inf and
 * NaN), the round trip rotate -> encode -> decode -> unrotate within its
 * stated bound for every format, and the rotated all-reduce scheme
 * (ref_scheme_qcoll_rot) on crafted inputs.
 *
 * Compiled with -ffp-contract=off.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll/codec.h"
#include "quant_data.h"
#include "ref_scheme.h"

#define G QCOLL_CODEC_GROUP

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                        QCOLL_QUANT_FP8};
#define NFMT (sizeof FORMATS / sizeof FORMATS[0])

static int sign_of(int i) {
  return (QCOLL_CODEC_ROT_SIGNS >> i) & 1u ? -1 : 1;
}

/* Sylvester's Hadamard entry: (-1)^popcount(i & j). */
static int hadamard(int i, int j) {
  return __builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1;
}

/* Integers small enough that every partial sum is exact: the transform is
 * then H D x exactly and the inverse gives x back bit for bit. */
static void test_exact_on_integers(void **state) {
  (void)state;
  qd_rng_t rng = {7};
  for (int t = 0; t < 1000; t++) {
    float x[G], y[G];
    for (int i = 0; i < G; i++)
      x[i] = (float)((int)(qd_next(&rng) % 2001) - 1000);
    memcpy(y, x, sizeof y);
    qcoll__codec_rotate_group(y);
    for (int j = 0; j < G; j++) {
      double want = 0;
      for (int i = 0; i < G; i++) want += hadamard(j, i) * sign_of(i) * x[i];
      assert_true((double)y[j] == want);
    }
    qcoll__codec_unrotate_group(y);
    for (int i = 0; i < G; i++)
      assert_int_equal(qcoll__f32_to_bits(y[i]),
                       qcoll__f32_to_bits(x[i] + 0.0f));
  }
}

/* One outlier becomes 32 values of its magnitude: the scale of the group
 * is no longer set by one element.  Every format reproduces it exactly
 * (each rotated value lands on +-R), so the round trip is exact. */
static void test_single_outlier(void **state) {
  (void)state;
  for (int at = 0; at < G; at++) {
    float x[G] = {0}, y[G];
    x[at] = 1000.0f;
    memcpy(y, x, sizeof y);
    qcoll__codec_rotate_group(y);
    for (int j = 0; j < G; j++)
      assert_true(y[j] == 1000.0f * hadamard(j, at) * sign_of(at));
    for (size_t f = 0; f < NFMT; f++) {
      uint8_t wire[QCOLL_CODEC_MAX_GROUP_BYTES];
      float back[G];
      qcoll__codec_encode_group(FORMATS[f], y, wire);
      qcoll__codec_decode_group(FORMATS[f], wire, back);
      qcoll__codec_unrotate_group(back);
      for (int i = 0; i < G; i++)
        assert_int_equal(qcoll__f32_to_bits(back[i]),
                         qcoll__f32_to_bits(x[i]));
    }
  }
}

/* All equal (short mantissas, so every partial sum is exact): D x is +-c
 * by the sign pattern; the inverse restores c. */
static void test_all_equal(void **state) {
  (void)state;
  const float c[] = {1.0f, -3.5f, 0x1p-140f, 0x1.8p120f};
  for (size_t t = 0; t < sizeof c / sizeof c[0]; t++) {
    float y[G];
    for (int i = 0; i < G; i++) y[i] = c[t];
    qcoll__codec_rotate_group(y);
    for (int j = 0; j < G; j++) {
      double want = 0;
      for (int i = 0; i < G; i++) want += hadamard(j, i) * sign_of(i);
      assert_true((double)y[j] == want * c[t]);
    }
    qcoll__codec_unrotate_group(y);
    for (int i = 0; i < G; i++) assert_true(y[i] == c[t]);
  }
}

/* Zeros (either sign) rotate to zeros and come back as +0, as an unrotated
 * decode gives them. */
static void test_zeros(void **state) {
  (void)state;
  float y[G];
  for (int i = 0; i < G; i++) y[i] = i & 1 ? -0.0f : 0.0f;
  qcoll__codec_rotate_group(y);
  for (int j = 0; j < G; j++) assert_true(y[j] == 0.0f);
  qcoll__codec_unrotate_group(y);
  for (int i = 0; i < G; i++) assert_int_equal(qcoll__f32_to_bits(y[i]), 0u);
}

/* inf or NaN anywhere: the rotated group is non-finite, its scale the
 * canonical NaN, and the whole group decodes and unrotates to the canonical
 * NaN; the neighbouring group is untouched. */
static void test_nonfinite(void **state) {
  (void)state;
  const float bad[] = {INFINITY, -INFINITY, NAN};
  for (size_t t = 0; t < 3; t++)
    for (size_t f = 0; f < NFMT; f++) {
      float x[2 * G], y[2 * G], back[2 * G];
      uint8_t wire[2 * QCOLL_CODEC_MAX_GROUP_BYTES];
      for (int i = 0; i < 2 * G; i++) x[i] = (float)(i % 5) - 2.0f;
      x[G + 17] = bad[t];
      qcoll__codec_rotate(x, 2 * G, y);
      qcoll__codec_encode(FORMATS[f], y, 2 * G, wire);
      qcoll__codec_decode(FORMATS[f], wire, 2 * G, back);
      qcoll__codec_unrotate(back, 2 * G, y);
      for (int i = 0; i < G; i++) assert_true(fabsf(y[i] - x[i]) <= 2.0f);
      for (int i = G; i < 2 * G; i++)
        assert_int_equal(qcoll__f32_to_bits(y[i]), QCOLL_CODEC_NAN_BITS);
    }
}

/* Round trip of random groups, Gaussian with and without an outlier:
 * |x_i - x'_i| = |sum_j +-e_j| / 32 <= max_j |e_j| where e is the codec's
 * error on the rotated group, bounded as in codec.h by the rotated amax A:
 * A / (2R) for INT, A * 2^-4 for FP8, plus A * 2^-21; the two transforms'
 * f32 roundings (ten stages) add at most A * 2^-18. */
static void test_roundtrip_bound(void **state) {
  (void)state;
  qd_rng_t rng = {11};
  for (size_t f = 0; f < NFMT; f++) {
    qcoll_quant_t fmt = FORMATS[f];
    double r = (double)qcoll__codec_range(fmt);
    double worst = 0;
    for (int t = 0; t < 4000; t++) {
      float x[G], y[G];
      uint8_t wire[QCOLL_CODEC_MAX_GROUP_BYTES];
      for (int i = 0; i < G; i++) x[i] = (float)qd_gauss(&rng);
      if (t & 1) x[qd_next(&rng) % G] = (float)(100.0 * qd_gauss(&rng));
      memcpy(y, x, sizeof y);
      qcoll__codec_rotate_group(y);
      double a = 0;
      for (int j = 0; j < G; j++) a = fmax(a, fabs(y[j]));
      qcoll__codec_encode_group(fmt, y, wire);
      qcoll__codec_decode_group(fmt, wire, y);
      qcoll__codec_unrotate_group(y);
      double main_term = fmt == QCOLL_QUANT_FP8 ? a * 0x1p-4 : a / (2 * r);
      double b = main_term + a * 0x1p-21 + a * 0x1p-18;
      for (int i = 0; i < G; i++) {
        double err = fabs((double)x[i] - y[i]);
        if (!(err <= b)) {
          print_error("%s: x=%a back=%a err=%g > %g\n", qd_quant_name(fmt),
                      (double)x[i], (double)y[i], err, b);
          fail();
        }
        if (err / main_term > worst) worst = err / main_term;
      }
    }
    print_message("%-4s rotated round trip: worst error / main term %.4f\n",
                  qd_quant_name(fmt), worst);
  }
}

/* The rotated scheme over ranks: one outlier on one rank comes back exactly
 * (every rotated value is +-R times a step, and the other ranks add zeros),
 * zeros come back +0, a tail group is handled like a full one, and a
 * non-finite value makes its group NaN and nothing else. */
static void test_scheme_crafted(void **state) {
  (void)state;
  enum { N = 3 * G + 5, RANKS = 4 };
  for (size_t f = 0; f < NFMT; f++) {
    float in[RANKS][N], out[N];
    const float *p[RANKS] = {in[0], in[1], in[2], in[3]};
    memset(in, 0, sizeof in);
    in[2][G + 3] = -512.0f;
    in[1][3 * G + 4] = 64.0f; /* the tail group */
    assert_int_equal(ref_scheme_qcoll_rot(FORMATS[f], RANKS, N, p, out), 0);
    for (int i = 0; i < N; i++) {
      float want = i == G + 3 ? -512.0f : i == 3 * G + 4 ? 64.0f : 0.0f;
      assert_int_equal(qcoll__f32_to_bits(out[i]), qcoll__f32_to_bits(want));
    }
    in[3][2 * G] = NAN;
    assert_int_equal(ref_scheme_qcoll_rot(FORMATS[f], RANKS, N, p, out), 0);
    for (int i = 0; i < N; i++) {
      if (i >= 2 * G && i < 3 * G)
        assert_int_equal(qcoll__f32_to_bits(out[i]), QCOLL_CODEC_NAN_BITS);
      else
        assert_true(out[i] == (i == G + 3 ? -512.0f : i == 3 * G + 4 ? 64.0f
                                                                     : 0.0f));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_on_integers),
      cmocka_unit_test(test_single_outlier),
      cmocka_unit_test(test_all_equal),
      cmocka_unit_test(test_zeros),
      cmocka_unit_test(test_nonfinite),
      cmocka_unit_test(test_roundtrip_bound),
      cmocka_unit_test(test_scheme_crafted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
