/* f16 / bf16 conversions: exhaustive round trips and rounding of ties. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/dtype.h"

static void f16_round_trip_is_identity(void **state) {
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = qcoll__f16_to_f32((uint16_t)h);
    if (isnan(f)) {
      assert_true(isnan(qcoll__f16_to_f32(qcoll__f32_to_f16(f))));
      continue;
    }
    assert_int_equal(qcoll__f32_to_f16(f), h);
  }
}

static void bf16_round_trip_is_identity(void **state) {
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = qcoll__bf16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    assert_int_equal(qcoll__f32_to_bf16(f), h);
  }
}

static void f16_values_are_exact(void **state) {
  assert_true(qcoll__f16_to_f32(0x3c00) == 1.0f);
  assert_true(qcoll__f16_to_f32(0xc000) == -2.0f);
  assert_true(qcoll__f16_to_f32(0x7bff) == 65504.0f);
  assert_true(qcoll__f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  assert_true(isinf(qcoll__f16_to_f32(0x7c00)));
}

static void f16_rounds_half_to_even(void **state) {
  /* 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even (1). */
  assert_int_equal(qcoll__f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
  /* 1 + 3*2^-11 lies halfway between 1+2^-10 (odd) and 1+2^-9: up. */
  assert_int_equal(qcoll__f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
  /* Just above 65504 + half an ulp overflows to inf; below stays finite. */
  assert_int_equal(qcoll__f32_to_f16(65519.0f), 0x7bff);
  assert_int_equal(qcoll__f32_to_f16(65520.0f), 0x7c00);
  /* Subnormal ties: 2^-25 is half of the smallest subnormal: to zero. */
  assert_int_equal(qcoll__f32_to_f16(ldexpf(1.0f, -25)), 0x0000);
  assert_int_equal(qcoll__f32_to_f16(3 * ldexpf(1.0f, -25)), 0x0002);
  assert_int_equal(qcoll__f32_to_f16(-0.0f), 0x8000);
}

static void bf16_rounds_half_to_even(void **state) {
  assert_int_equal(qcoll__f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
  assert_int_equal(qcoll__f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
  assert_true(isnan(qcoll__bf16_to_f32(qcoll__f32_to_bf16(NAN))));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(f16_round_trip_is_identity),
      cmocka_unit_test(bf16_round_trip_is_identity),
      cmocka_unit_test(f16_values_are_exact),
      cmocka_unit_test(f16_rounds_half_to_even),
      cmocka_unit_test(bf16_rounds_half_to_even),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
