/*
 * qcoll__reduce_ranks2 (the result stored to two destinations) against
 * qcoll__reduce_ranks: both destinations hold the same bits as the
 * one-destination reduction, for every dtype and op, around the internal
 * block size, with the second destination separate or aliasing a source
 * other than the first at the same offset (how the host all-reduce writes
 * a rank's own share in place), and with NULL as the second destination.
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

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Floats with rounding (so order and double stores show), integers with
 * random bits. */
static void fill_random(qcoll_dtype_t t, void *p, size_t count) {
  size_t esz = qcoll_dtype_size(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t x = rng();
    double v = ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 3.0;
    switch (t) {
      case QCOLL_F16: ((uint16_t *)p)[i] = qcoll__f32_to_f16((float)v); break;
      case QCOLL_BF16: ((uint16_t *)p)[i] = qcoll__f32_to_bf16((float)v); break;
      case QCOLL_F32: ((float *)p)[i] = (float)v; break;
      case QCOLL_F64: ((double *)p)[i] = v; break;
      default: memcpy((char *)p + i * esz, &x, esz);
    }
  }
}

enum placement { SEPARATE, SECOND_ALIASES_LAST, BOTH_ALIAS, NO_SECOND };

static void check_case(qcoll_dtype_t t, qcoll_op_t op, int n, size_t count,
                       enum placement where) {
  size_t esz = qcoll_dtype_size(t), bytes = count * esz;
  void **bufs = calloc((size_t)n, sizeof *bufs);
  const void **srcs = calloc((size_t)n, sizeof *srcs);
  assert_non_null(bufs);
  assert_non_null(srcs);
  for (int r = 0; r < n; r++) {
    bufs[r] = malloc(bytes);
    assert_non_null(bufs[r]);
    fill_random(t, bufs[r], count);
    srcs[r] = bufs[r];
  }
  void *want = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
  assert_non_null(want);
  assert_non_null(a);
  assert_non_null(b);
  qcoll__reduce_ranks(want, srcs, n, count, t, op, n);
  memset(b, 0x77, bytes);
  void *dst = a, *dst2 = b;
  if (where == SECOND_ALIASES_LAST) dst2 = bufs[n - 1];
  if (where == BOTH_ALIAS) {
    dst = bufs[0];
    dst2 = bufs[n - 1]; /* the same buffer when n == 1 */
  }
  if (where == NO_SECOND) dst2 = NULL;
  qcoll__reduce_ranks2(dst, dst2, srcs, n, count, t, op, n);
  if (memcmp(dst, want, bytes) != 0) {
    print_error(
        "%s %s n=%d count=%zu placement %d: first destination "
        "differs\n",
        qcoll_dtype_name(t), qcoll_op_name(op), n, count, (int)where);
    fail();
  }
  if (dst2 && memcmp(dst2, want, bytes) != 0) {
    print_error(
        "%s %s n=%d count=%zu placement %d: second destination "
        "differs\n",
        qcoll_dtype_name(t), qcoll_op_name(op), n, count, (int)where);
    fail();
  }
  if (!dst2) {
    /* Nothing else written. */
    for (size_t i = 0; i < bytes; i++)
      assert_int_equal(((uint8_t *)b)[i], 0x77);
  }
  for (int r = 0; r < n; r++) free(bufs[r]);
  free(bufs);
  free(srcs);
  free(want);
  free(a);
  free(b);
}

static void test_two_destinations_match_one(void **state) {
  (void)state;
  static const size_t counts[] = {1, 7, 1023, 1024, 1025, 3000};
  static const int nsrcs[] = {1, 2, 3, 8};
  for (int t = 0; t < QCOLL_DTYPE_COUNT; t++)
    for (int op = 0; op < QCOLL_OP_COUNT; op++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t k = 0; k < sizeof nsrcs / sizeof nsrcs[0]; k++)
          for (int w = SEPARATE; w <= NO_SECOND; w++)
            check_case((qcoll_dtype_t)t, (qcoll_op_t)op, nsrcs[k], counts[c],
                       (enum placement)w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_destinations_match_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
