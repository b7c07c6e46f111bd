/* Names and sizes of the public enums and of the collectives. */
#include "colls.h"
#include "common.h"

size_t qcoll_dtype_size(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_I8:
    case QCOLL_U8: return 1;
    case QCOLL_F16:
    case QCOLL_BF16: return 2;
    case QCOLL_I32:
    case QCOLL_U32:
    case QCOLL_F32: return 4;
    case QCOLL_I64:
    case QCOLL_U64:
    case QCOLL_F64: return 8;
    default: return 0;
  }
}

const char *qcoll_dtype_name(qcoll_dtype_t dtype) {
  static const char *names[] = {"i8",  "u8",  "i32",  "u32", "i64",
                                "u64", "f16", "bf16", "f32", "f64"};
  return (unsigned)dtype < QCOLL_DTYPE_COUNT ? names[dtype] : "invalid";
}

const char *qcoll_op_name(qcoll_op_t op) {
  static const char *names[] = {"sum", "prod", "min", "max", "avg"};
  return (unsigned)op < QCOLL_OP_COUNT ? names[op] : "invalid";
}

const char *qcoll_algo_name(qcoll_algo_t algo) {
  static const char *names[] = {"auto", "host", "oneshot", "twoshot", "nccl",
                                "ipc"};
  return (unsigned)algo < QCOLL_ALGO_COUNT ? names[algo] : "invalid";
}

const char *qcoll_quant_name(qcoll_quant_t quant) {
  static const char *names[] = {"default", "none", "fp8",
                                "int8",    "int6", "int4", "int3"};
  return (unsigned)quant < QCOLL_QUANT_COUNT ? names[quant] : "invalid";
}

static const struct coll_row {
  const char *name, *fn;
  bool reduces, rooted, p2p;
} coll_rows[] = {
#define QCOLL__COLL_ROW_(id, name, reduces, rooted, p2p, ipc) \
  {name, "qcoll_" name, reduces, rooted, p2p},
    QCOLL__COLLS(QCOLL__COLL_ROW_)
#undef QCOLL__COLL_ROW_
};

static const struct coll_row *coll_row(qcoll__coll_t coll) {
  return (unsigned)coll < QCOLL__COLL_COUNT ? &coll_rows[coll] : NULL;
}

const char *qcoll__coll_name(qcoll__coll_t coll) {
  return coll_row(coll) ? coll_row(coll)->name : "invalid";
}
const char *qcoll__coll_fn(qcoll__coll_t coll) {
  return coll_row(coll) ? coll_row(coll)->fn : "invalid";
}
bool qcoll__coll_reduces(qcoll__coll_t coll) {
  return coll_row(coll) && coll_row(coll)->reduces;
}
bool qcoll__coll_rooted(qcoll__coll_t coll) {
  return coll_row(coll) && coll_row(coll)->rooted;
}
bool qcoll__coll_p2p(qcoll__coll_t coll) {
  return coll_row(coll) && coll_row(coll)->p2p;
}

qcoll_status_t qcoll_get_version(int *version) {
  if (!version)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_get_version: version is NULL");
  *version = QCOLL_VERSION_CODE;
  return QCOLL_OK;
}
