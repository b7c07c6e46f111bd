/*
 * The NCCL ABI subset qcoll declares for itself (src/transport/nccl.h)
 * against NCCL's own header: result codes, data types, reduction ops,
 * the unique id and the config struct prefix, and the dtype/op mapping.
 * Built only when nccl.h is found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nccl.h>

#include "qcoll.h"
#include "transport/nccl.h"

static void result_codes_match(void **state) {
  assert_int_equal(QCOLL__NCCL_SUCCESS, ncclSuccess);
  assert_int_equal(QCOLL__NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError);
  assert_int_equal(QCOLL__NCCL_SYSTEM_ERROR, ncclSystemError);
  assert_int_equal(QCOLL__NCCL_INTERNAL_ERROR, ncclInternalError);
  assert_int_equal(QCOLL__NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
  assert_int_equal(QCOLL__NCCL_INVALID_USAGE, ncclInvalidUsage);
  assert_int_equal(QCOLL__NCCL_REMOTE_ERROR, ncclRemoteError);
  assert_int_equal(QCOLL__NCCL_IN_PROGRESS, ncclInProgress);
  /* Enums travel as int through the function pointers. */
  assert_int_equal(sizeof(ncclResult_t), sizeof(int));
  assert_int_equal(sizeof(ncclDataType_t), sizeof(int));
  assert_int_equal(sizeof(ncclRedOp_t), sizeof(int));
}

static void dtype_mapping_matches(void **state) {
  static const struct {
    qcoll_dtype_t q;
    ncclDataType_t n;
  } table[] = {
      {QCOLL_I8, ncclInt8},     {QCOLL_U8, ncclUint8},
      {QCOLL_I32, ncclInt32},   {QCOLL_U32, ncclUint32},
      {QCOLL_I64, ncclInt64},   {QCOLL_U64, ncclUint64},
      {QCOLL_F16, ncclFloat16}, {QCOLL_BF16, ncclBfloat16},
      {QCOLL_F32, ncclFloat32}, {QCOLL_F64, ncclFloat64},
  };
  assert_int_equal(sizeof table / sizeof table[0], QCOLL_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    assert_int_equal(qcoll__nccl_dtype(table[i].q), (int)table[i].n);
  assert_int_equal(qcoll__nccl_dtype(QCOLL_DTYPE_COUNT), -1);
  assert_int_equal(qcoll__nccl_dtype((qcoll_dtype_t)-1), -1);
}

static void op_mapping_matches(void **state) {
  static const struct {
    qcoll_op_t q;
    ncclRedOp_t n;
  } table[] = {
      {QCOLL_SUM, ncclSum}, {QCOLL_PROD, ncclProd}, {QCOLL_MIN, ncclMin},
      {QCOLL_MAX, ncclMax}, {QCOLL_AVG, ncclAvg},
  };
  assert_int_equal(sizeof table / sizeof table[0], QCOLL_OP_COUNT);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    assert_int_equal(qcoll__nccl_op(table[i].q), (int)table[i].n);
  assert_int_equal(qcoll__nccl_op(QCOLL_OP_COUNT), -1);
}

static void unique_id_and_config_layout_match(void **state) {
  assert_int_equal(QCOLL__NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES);
  assert_int_equal(sizeof(qcoll__nccl_unique_id_t), sizeof(ncclUniqueId));
  assert_int_equal(QCOLL__NCCL_MIN_VERSION, NCCL_VERSION(2, 18, 0));
  assert_int_equal(QCOLL__NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT);

  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  assert_int_equal(QCOLL__NCCL_CONFIG_MAGIC, init.magic);
#define SAME_OFFSET(ours, theirs)                        \
  assert_int_equal(offsetof(qcoll__nccl_config_t, ours), \
                   offsetof(ncclConfig_t, theirs))
  SAME_OFFSET(size, size);
  SAME_OFFSET(magic, magic);
  SAME_OFFSET(version, version);
  SAME_OFFSET(blocking, blocking);
  SAME_OFFSET(cga_cluster_size, cgaClusterSize);
  SAME_OFFSET(min_ctas, minCTAs);
  SAME_OFFSET(max_ctas, maxCTAs);
  SAME_OFFSET(net_name, netName);
  SAME_OFFSET(split_share, splitShare);
#undef SAME_OFFSET
  /* Our struct is a prefix of NCCL's: NCCL copies only `size` bytes. */
  assert_true(sizeof(qcoll__nccl_config_t) <= sizeof(ncclConfig_t));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(result_codes_match),
      cmocka_unit_test(dtype_mapping_matches),
      cmocka_unit_test(op_mapping_matches),
      cmocka_unit_test(unique_id_and_config_layout_match),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
