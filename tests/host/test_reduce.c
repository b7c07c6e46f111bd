/*
 * qcoll__reduce_ranks against a straightforward per-element reference, for
 * every dtype and op, source counts 1..65 and lengths around the internal
 * block size, plus cases whose answer is known from arithmetic: f16/bf16
 * sums rounded once (not per step), integer wrap-around, AVG truncation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/host/host_coll.h"
#include "base/dtype.h"

/* ---- reference: one element at a time ----------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double load_float(qcoll_dtype_t t, const void *p, size_t i) {
  switch (t) {
    case QCOLL_F16: return qcoll__f16_to_f32(((const uint16_t *)p)[i]);
    case QCOLL_BF16: return qcoll__bf16_to_f32(((const uint16_t *)p)[i]);
    case QCOLL_F32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
  }
}

/* f16/bf16/f32 reference in float, f64 in double. */
static void ref_float(qcoll_dtype_t t, qcoll_op_t op, void *dst,
                      const void *const *srcs, int n, size_t i, int div) {
  if (t == QCOLL_F64) {
    double acc = load_float(t, srcs[0], i);
    for (int r = 1; r < n; r++) {
      double v = load_float(t, srcs[r], i);
      if (op == QCOLL_PROD)
        acc = acc * v;
      else if (op == QCOLL_MIN)
        acc = v < acc ? v : acc;
      else if (op == QCOLL_MAX)
        acc = v > acc ? v : acc;
      else
        acc = acc + v;
    }
    if (op == QCOLL_AVG) acc = acc / (double)div;
    ((double *)dst)[i] = acc;
    return;
  }
  float acc = (float)load_float(t, srcs[0], i);
  for (int r = 1; r < n; r++) {
    float v = (float)load_float(t, srcs[r], i);
    if (op == QCOLL_PROD)
      acc = acc * v;
    else if (op == QCOLL_MIN)
      acc = v < acc ? v : acc;
    else if (op == QCOLL_MAX)
      acc = v > acc ? v : acc;
    else
      acc = acc + v;
  }
  if (op == QCOLL_AVG) acc = acc / (float)div;
  if (t == QCOLL_F16)
    ((uint16_t *)dst)[i] = qcoll__f32_to_f16(acc);
  else if (t == QCOLL_BF16)
    ((uint16_t *)dst)[i] = qcoll__f32_to_bf16(acc);
  else
    ((float *)dst)[i] = acc;
}

/* Integers: values widened to 64 bits (signed or not), sums and products
 * reduced modulo 2^bits after every step, compares on the signed value. */
static int64_t load_int(qcoll_dtype_t t, const void *p, size_t i) {
  switch (t) {
    case QCOLL_I8: return ((const int8_t *)p)[i];
    case QCOLL_U8: return ((const uint8_t *)p)[i];
    case QCOLL_I32: return ((const int32_t *)p)[i];
    case QCOLL_U32: return ((const uint32_t *)p)[i];
    case QCOLL_I64: return ((const int64_t *)p)[i];
    default: return (int64_t)((const uint64_t *)p)[i];
  }
}

static int bits_of(qcoll_dtype_t t) {
  return t <= QCOLL_U8 ? 8 : t <= QCOLL_U32 ? 32 : 64;
}
static int is_signed(qcoll_dtype_t t) {
  return t == QCOLL_I8 || t == QCOLL_I32 || t == QCOLL_I64;
}

/* Wrap a 64-bit pattern to the type's width and sign-extend if signed. */
static int64_t wrap(qcoll_dtype_t t, uint64_t x) {
  int b = bits_of(t);
  if (b == 64) return (int64_t)x;
  x &= (1ull << b) - 1;
  if (is_signed(t) && (x >> (b - 1))) x |= ~((1ull << b) - 1);
  return (int64_t)x;
}

static void ref_int(qcoll_dtype_t t, qcoll_op_t op, void *dst,
                    const void *const *srcs, int n, size_t i, int div) {
  int64_t acc = load_int(t, srcs[0], i);
  for (int r = 1; r < n; r++) {
    int64_t v = load_int(t, srcs[r], i);
    if (op == QCOLL_SUM || op == QCOLL_AVG)
      acc = wrap(t, (uint64_t)acc + (uint64_t)v);
    else if (op == QCOLL_PROD)
      acc = wrap(t, (uint64_t)acc * (uint64_t)v);
    else if (is_signed(t) || bits_of(t) < 64)
      acc = op == QCOLL_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
    else /* u64 compares unsigned */
      acc = op == QCOLL_MIN ? ((uint64_t)v < (uint64_t)acc ? v : acc)
                            : ((uint64_t)v > (uint64_t)acc ? v : acc);
  }
  if (op == QCOLL_AVG) {
    if (t == QCOLL_U64)
      acc = (int64_t)((uint64_t)acc / (uint64_t)div);
    else
      acc = acc / div; /* C truncates toward zero */
  }
  switch (t) {
    case QCOLL_I8: ((int8_t *)dst)[i] = (int8_t)acc; break;
    case QCOLL_U8: ((uint8_t *)dst)[i] = (uint8_t)acc; break;
    case QCOLL_I32: ((int32_t *)dst)[i] = (int32_t)acc; break;
    case QCOLL_U32: ((uint32_t *)dst)[i] = (uint32_t)acc; break;
    case QCOLL_I64: ((int64_t *)dst)[i] = acc; break;
    default: ((uint64_t *)dst)[i] = (uint64_t)acc; break;
  }
}

static void reference(void *dst, const void *const *srcs, int n, size_t count,
                      qcoll_dtype_t t, qcoll_op_t op, int div) {
  for (size_t i = 0; i < count; i++) {
    if (t >= QCOLL_F16)
      ref_float(t, op, dst, srcs, n, i, div);
    else
      ref_int(t, op, dst, srcs, n, i, div);
  }
}

/* Random element bits; floats are mostly ordinary values of either sign,
 * with some infinities and NaNs in f16/bf16 (whose raw patterns are used). */
static void fill_random(qcoll_dtype_t t, void *p, size_t count) {
  size_t esz = qcoll_dtype_size(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t x = rng();
    if (t == QCOLL_F32) {
      float f = (float)((int64_t)(x % 2000001) - 1000000) / 1024.0f;
      memcpy((char *)p + i * 4, &f, 4);
    } else if (t == QCOLL_F64) {
      double d = (double)((int64_t)(x % 2000001) - 1000000) / 3.0;
      memcpy((char *)p + i * 8, &d, 8);
    } else {
      memcpy((char *)p + i * esz, &x, esz);
    }
  }
}

/* Equal bits, or both NaN: when several NaNs meet, which payload survives
 * depends on operand order inside an addition, which the compiler may
 * commute; the ops only promise a NaN. */
static int same_element(qcoll_dtype_t t, const void *a, const void *b,
                        size_t i) {
  size_t esz = qcoll_dtype_size(t);
  if (!memcmp((const char *)a + i * esz, (const char *)b + i * esz, esz))
    return 1;
  if (t < QCOLL_F16) return 0;
  double x = load_float(t, a, i), y = load_float(t, b, i);
  return x != x && y != y;
}

static void check_case(qcoll_dtype_t t, qcoll_op_t op, int n, size_t count,
                       int in_place) {
  size_t esz = qcoll_dtype_size(t), bytes = count * esz + 1;
  void **bufs = calloc((size_t)n, sizeof *bufs);
  const void **srcs = calloc((size_t)n, sizeof *srcs);
  assert_non_null(bufs);
  for (int r = 0; r < n; r++) {
    bufs[r] = malloc(bytes);
    assert_non_null(bufs[r]);
    fill_random(t, bufs[r], count);
    srcs[r] = bufs[r];
  }
  void *want = malloc(bytes), *got = malloc(bytes);
  assert_non_null(want);
  assert_non_null(got);
  int div = n + (int)(rng() % 3); /* the divisor is independent of n */
  reference(want, srcs, n, count, t, op, div);
  void *dst = in_place ? bufs[0] : got;
  qcoll__reduce_ranks(dst, srcs, n, count, t, op, div);
  if (memcmp(dst, want, count * esz) != 0) {
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
      if (!same_element(t, dst, want, i)) {
        bad = 1;
        print_error("%s %s n=%d count=%zu in_place=%d: element %zu differs\n",
                    qcoll_dtype_name(t), qcoll_op_name(op), n, count, in_place,
                    i);
      }
    if (bad) fail();
  }
  for (int r = 0; r < n; r++) free(bufs[r]);
  free(bufs);
  free(srcs);
  free(want);
  free(got);
}

static void test_all_against_reference(void **state) {
  (void)state;
  static const size_t counts[] = {1, 7, 1023, 1024, 1025, 3000};
  static const int nsrcs[] = {1, 2, 3, 8, 65};
  for (int t = 0; t < QCOLL_DTYPE_COUNT; t++)
    for (int op = 0; op < QCOLL_OP_COUNT; op++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t k = 0; k < sizeof nsrcs / sizeof nsrcs[0]; k++) {
          if (nsrcs[k] == 65 && counts[c] > 1025) continue; /* keep it quick */
          check_case((qcoll_dtype_t)t, (qcoll_op_t)op, nsrcs[k], counts[c],
                     (int)((c + k) & 1));
        }
}

static void test_count_zero_touches_nothing(void **state) {
  (void)state;
  float a = 1.0f, d = 42.0f;
  const void *srcs[1] = {&a};
  qcoll__reduce_ranks(&d, srcs, 1, 0, QCOLL_F32, QCOLL_SUM, 1);
  assert_true(d == 42.0f);
}

/* f16 has 11 significant bits: 2048 + 1 rounds back to 2048 (tie to even),
 * so rounding after every step would give 2048 + 1 + 1 = 2048; rounding
 * once gives 2050, which is representable. */
static void test_f16_sum_rounds_once(void **state) {
  (void)state;
  uint16_t a = qcoll__f32_to_f16(2048.0f), b = qcoll__f32_to_f16(1.0f), d;
  const void *srcs[3] = {&a, &b, &b};
  qcoll__reduce_ranks(&d, srcs, 3, 1, QCOLL_F16, QCOLL_SUM, 3);
  assert_true(qcoll__f16_to_f32(d) == 2050.0f);
  /* AVG: (2048 + 1 + 1) / 3 = 683.33..., rounded once to f16 (spacing
   * 0.5 in [512, 1024)) -> 683.5. */
  qcoll__reduce_ranks(&d, srcs, 3, 1, QCOLL_F16, QCOLL_AVG, 3);
  assert_true(qcoll__f16_to_f32(d) == 683.5f);
}

/* bf16 has 8 significant bits: 256 + 1 is a tie that rounds to 256. */
static void test_bf16_sum_rounds_once(void **state) {
  (void)state;
  uint16_t a = qcoll__f32_to_bf16(256.0f), b = qcoll__f32_to_bf16(1.0f), d;
  const void *srcs[3] = {&a, &b, &b};
  qcoll__reduce_ranks(&d, srcs, 3, 1, QCOLL_BF16, QCOLL_SUM, 3);
  assert_true(qcoll__bf16_to_f32(d) == 258.0f);
}

static void test_integer_wrap_and_avg(void **state) {
  (void)state;
  int8_t a8 = 100, d8;
  const void *s8[2] = {&a8, &a8};
  qcoll__reduce_ranks(&d8, s8, 2, 1, QCOLL_I8, QCOLL_SUM, 2);
  assert_int_equal(d8, -56); /* 200 wraps to 200 - 256 */
  qcoll__reduce_ranks(&d8, s8, 2, 1, QCOLL_I8, QCOLL_AVG, 2);
  assert_int_equal(d8, -28); /* the wrapped sum, divided */

  uint8_t u = 16, du;
  const void *su[2] = {&u, &u};
  qcoll__reduce_ranks(&du, su, 2, 1, QCOLL_U8, QCOLL_PROD, 2);
  assert_int_equal(du, 0); /* 256 wraps to 0 */

  int32_t x = -3, y = -4, d32;
  const void *s32[2] = {&x, &y};
  qcoll__reduce_ranks(&d32, s32, 2, 1, QCOLL_I32, QCOLL_AVG, 2);
  assert_int_equal(d32, -3); /* -7 / 2 truncates toward zero */
  qcoll__reduce_ranks(&d32, s32, 2, 1, QCOLL_I32, QCOLL_MIN, 2);
  assert_int_equal(d32, -4);

  int64_t big = INT64_MAX, one = 1, d64;
  const void *s64[2] = {&big, &one};
  qcoll__reduce_ranks(&d64, s64, 2, 1, QCOLL_I64, QCOLL_SUM, 2);
  assert_true(d64 == INT64_MIN);

  uint64_t ubig = UINT64_MAX, uone = 1, du64;
  const void *su64[2] = {&ubig, &uone};
  qcoll__reduce_ranks(&du64, su64, 2, 1, QCOLL_U64, QCOLL_MAX, 2);
  assert_true(du64 == UINT64_MAX); /* unsigned compare */
}

/* Rank order matters for floats: (1e8 + 1) - 1e8 = 0 in f32, whereas
 * 1e8 - 1e8 + 1 = 1.  The result must follow srcs order. */
static void test_float_order_is_rank_order(void **state) {
  (void)state;
  float a = 1e8f, b = 1.0f, c = -1e8f, d;
  const void *srcs[3] = {&a, &b, &c};
  qcoll__reduce_ranks(&d, srcs, 3, 1, QCOLL_F32, QCOLL_SUM, 3);
  assert_true(d == 0.0f);
  const void *srcs2[3] = {&a, &c, &b};
  qcoll__reduce_ranks(&d, srcs2, 3, 1, QCOLL_F32, QCOLL_SUM, 3);
  assert_true(d == 1.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_against_reference),
      cmocka_unit_test(test_count_zero_touches_nothing),
      cmocka_unit_test(test_f16_sum_rounds_once),
      cmocka_unit_test(test_bf16_sum_rounds_once),
      cmocka_unit_test(test_integer_wrap_and_avg),
      cmocka_unit_test(test_float_order_is_rank_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
