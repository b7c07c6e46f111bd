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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(byte_sizes_parse_with_suffixes),
      cmocka_unit_test(table_lists_every_variable_once),
      cmocka_unit_test(environment_overrides_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
