/* The QCOLL_* table and its parsers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/config.h"
#include "qcoll.h"

static void byte_sizes_parse_with_suffixes(void **state) {
  size_t x = 0;
  assert_true(qcoll__parse_bytes("123", &x));
  assert_int_equal(x, 123);
  assert_true(qcoll__parse_bytes("4K", &x));
  assert_int_equal(x, 4096);
  assert_true(qcoll__parse_bytes("16MiB", &x));
  assert_int_equal(x, 16u << 20);
  assert_true(qcoll__parse_bytes("1g", &x));
  assert_int_equal(x, 1u << 30);
  assert_false(qcoll__parse_bytes("", &x));
  assert_false(qcoll__parse_bytes("12Q", &x));
  assert_false(qcoll__parse_bytes("K", &x));
  assert_false(qcoll__parse_bytes("99999999999999999999G", &x));
}

static void table_lists_every_variable_once(void **state) {
  const char *name, *def, *doc;
  int n = 0;
  while (qcoll_env_describe(n, &name, &def, &doc) == QCOLL_OK) {
    assert_non_null(name);
    assert_non_null(def);
    assert_true(strncmp(name, "QCOLL_", 6) == 0);
    assert_true(strlen(doc) > 10);
    for (int j = 0; j < n; j++) {
      const char *other;
      qcoll_env_describe(j, &other, NULL, NULL);
      assert_string_not_equal(name, other);
    }
    n++;
  }
  assert_true(n >= 10);
  assert_int_equal(qcoll_env_describe(-1, &name, &def, &doc),
                   QCOLL_ERR_INVALID_ARGUMENT);
}

static void environment_overrides_default(void **state) {
  unsetenv("QCOLL_TIMEOUT");
  assert_true(qcoll__env_double("QCOLL_TIMEOUT") == 300.0);
  setenv("QCOLL_TIMEOUT", "2.5", 1);
  assert_true(qcoll__env_double("QCOLL_TIMEOUT") == 2.5);
  setenv("QCOLL_TIMEOUT", "soon", 1); /* malformed: default, with a warning */
  assert_true(qcoll__env_double("QCOLL_TIMEOUT") == 300.0);
  unsetenv("QCOLL_TIMEOUT");
  setenv("QCOLL_SHM_BYTES", "8M", 1);
  assert_int_equal(qcoll__env_bytes("QCOLL_SHM_BYTES"), 8u << 20);
  unsetenv("QCOLL_SHM_BYTES");
  assert_null(qcoll__env_str("QCOLL_NOT_A_VARIABLE"));
}

/* Every typed variable lands in its field; bad values (unparsable, out of
 * range, not a boolean) give the default. */
static void config_is_typed_and_bad_values_give_defaults(void **state) {
  qcoll__config_t c;
  qcoll__config_read(&c);
  assert_true(c.timeout_s == 300.0);
  assert_int_equal(c.root_port, 0);
  assert_int_equal(c.shm_bytes, 32u << 20);
  assert_int_equal(c.spin_us, 50);
  assert_false(c.check);
  assert_true(c.nccl_blocking);
  assert_int_equal(c.oneshot_max_bytes, 0);
  assert_int_equal(c.oneshot_reg_min_bytes, 4u << 20);
  assert_int_equal(c.ipc_push_max_ranks, 4);
  assert_int_equal(c.shared_gpu_nccl_max_ranks, 2);
  assert_int_equal(c.quant_round_bytes, 0); /* the measured per-format sizes */
  assert_int_equal(c.quant_pipeline, 1); /* limited rounds */

  setenv("QCOLL_TIMEOUT", "2.5", 1);
  setenv("QCOLL_ROOT_PORT", "29500", 1);
  setenv("QCOLL_CHECK", "yes", 1);
  setenv("QCOLL_NCCL_BLOCKING", "off", 1);
  setenv("QCOLL_ONESHOT_MAX_BYTES", "1M", 1);
  setenv("QCOLL_QUANT_ROUND_BYTES", "44M", 1);
  setenv("QCOLL_QUANT_PIPELINE", "0", 1);
  qcoll__config_read(&c);
  assert_int_equal(c.quant_round_bytes, 44u << 20);
  assert_int_equal(c.quant_pipeline, 0);
  assert_true(c.timeout_s == 2.5);
  assert_int_equal(c.root_port, 29500);
  assert_true(c.check);
  assert_false(c.nccl_blocking);
  assert_int_equal(c.oneshot_max_bytes, 1u << 20);

  setenv("QCOLL_TIMEOUT", "0", 1);       /* out of range */
  setenv("QCOLL_ROOT_PORT", "70000", 1); /* out of range */
  setenv("QCOLL_SPIN_US", "-4", 1);      /* out of range */
  setenv("QCOLL_CHECK", "maybe", 1);     /* not a boolean */
  setenv("QCOLL_NCCL_BLOCKING", "2", 1); /* not a boolean */
  setenv("QCOLL_ONESHOT_MAX_BYTES", "big", 1);
  setenv("QCOLL_QUANT_ROUND_BYTES", "a lot", 1);
  setenv("QCOLL_QUANT_PIPELINE", "3", 1); /* out of range */
  qcoll__config_read(&c);
  assert_int_equal(c.quant_round_bytes, 0);
  assert_int_equal(c.quant_pipeline, 1);
  setenv("QCOLL_QUANT_PIPELINE", "2", 1);
  qcoll__config_read(&c);
  assert_int_equal(c.quant_pipeline, 2);
  assert_true(c.timeout_s == 300.0);
  assert_int_equal(c.root_port, 0);
  assert_int_equal(c.spin_us, 50);
  assert_false(c.check);
  assert_true(c.nccl_blocking);
  assert_int_equal(c.oneshot_max_bytes, 0);
  const char *vars[] = {"QCOLL_TIMEOUT",           "QCOLL_ROOT_PORT",
                        "QCOLL_SPIN_US",           "QCOLL_CHECK",
                        "QCOLL_NCCL_BLOCKING",     "QCOLL_ONESHOT_MAX_BYTES",
                        "QCOLL_QUANT_ROUND_BYTES", "QCOLL_QUANT_PIPELINE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* The one-shot limit: 4 MiB over the ranks by default (the crossovers
 * measured at 2 and 8 ranks), the variable's value when it is set. */
static void oneshot_limit_scales_with_ranks_unless_set(void **state) {
  qcoll__config_t c;
  qcoll__config_read(&c);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 2), 4u << 20);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 3), (4u << 20) / 3);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 4), 1u << 20);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 8), 512u << 10);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 1), 4u << 20);
  setenv("QCOLL_ONESHOT_MAX_BYTES", "256K", 1);
  qcoll__config_read(&c);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 2), 256u << 10);
  assert_int_equal(qcoll__config_oneshot_max_bytes(&c, 8), 256u << 10);
  unsetenv("QCOLL_ONESHOT_MAX_BYTES");
}

/* A misspelt name is answered with the known name nearest to it. */
static void unknown_names_get_the_nearest_known_one(void **state) {
  assert_string_equal(qcoll__env_nearest("QCOLL_TIMOUT"), "QCOLL_TIMEOUT");
  assert_string_equal(qcoll__env_nearest("QCOLL_SHM_BYTE"), "QCOLL_SHM_BYTES");
  assert_string_equal(qcoll__env_nearest("QCOLL_ONESHOT_MAX"),
                      "QCOLL_ONESHOT_MAX_BYTES");
  assert_string_equal(qcoll__env_nearest("QCOLL_DISABLE_CUD"),
                      "QCOLL_DISABLE_CUDA");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(byte_sizes_parse_with_suffixes),
      cmocka_unit_test(oneshot_limit_scales_with_ranks_unless_set),
      cmocka_unit_test(table_lists_every_variable_once),
      cmocka_unit_test(environment_overrides_default),
      cmocka_unit_test(config_is_typed_and_bad_values_give_defaults),
      cmocka_unit_test(unknown_names_get_the_nearest_known_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
