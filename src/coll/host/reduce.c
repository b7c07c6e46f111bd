/*
 * Element-wise reduction of several host buffers in rank order: the one
 * place where the host back end computes, and the CPU reference tests
 * compare against.
 *
 * Semantics (every rank must get the same bits, so they are fixed here):
 *  - sources are combined strictly in order srcs[0], srcs[1], ...;
 *  - f16 and bf16 accumulate in f32 and are rounded once, at the end;
 *    f32 accumulates in f32, f64 in f64;
 *  - integers are combined in the unsigned type of the same width, so sums
 *    and products wrap (two's complement) without undefined behaviour; MIN
 *    and MAX compare with the element's own signedness;
 *  - AVG is the SUM followed by one division by avg_divisor in the
 *    accumulation type: for integers the wrapped sum, read with the
 *    element's signedness, divided with C's truncation toward zero;
 *  - MIN/MAX use `x < acc ? x : acc` (and the mirror), which is what the
 *    vector min/max instructions compute, so vectorised and scalar tails
 *    agree.  NaN handling is therefore positional but deterministic.
 *
 * The work is done in blocks of BLOCK elements: the block of srcs[0] is
 * loaded into a local accumulator, every other source is folded in, and the
 * block is stored to dst (and copied from there, while it is in L1, to a
 * second destination when the caller wants the result in two places).
 * Each block is read from every source before any destination is written,
 * so a destination may alias any source at the same offset (in-place
 * callers pass dst == srcs[0]).  The dtype/op switch sits outside the
 * element loops, which are plain `acc[i] = f(acc[i], s[i])` loops over a
 * local array the compiler can vectorise.
 */
#include <string.h>

#include "../../base/dtype.h"
#include "host_coll.h"

/* Elements per accumulator block: 8 KiB of f64, so the accumulator stays in
 * L1 while the sources stream past it. */
#define BLOCK 1024

#define ID(x) (x)

/* Call an element loop with the constant BLOCK on full blocks: once inlined
 * its trip count is known, which lets the compiler vectorise it even at -O2
 * (whose cost model refuses loops that need a scalar epilogue). */
#define RUN(fn, ...)                  \
  do {                                \
    if (m == BLOCK)                   \
      fn(__VA_ARGS__, (size_t)BLOCK); \
    else                              \
      fn(__VA_ARGS__, m);             \
  } while (0)

/* The second destination, if any, gets the block just stored to the first
 * (still in L1): converting or dividing again would cost more. */
static inline void copy_second(void *const *dsts, size_t offset, size_t bytes) {
  if (dsts[1] && dsts[1] != dsts[0])
    memcpy((char *)dsts[1] + offset, (const char *)dsts[0] + offset, bytes);
}

/* ---- integers ------------------------------------------------------ */

#define DEFINE_INT_REDUCE(NAME, T, UT)                                        \
  static void NAME##_sum(UT *acc, const T *s, size_t m) {                     \
    for (size_t i = 0; i < m; i++) acc[i] = (UT)(acc[i] + (UT)s[i]);          \
  }                                                                           \
  static void NAME##_prod(UT *acc, const T *s, size_t m) {                    \
    for (size_t i = 0; i < m; i++) acc[i] = (UT)(acc[i] * (UT)s[i]);          \
  }                                                                           \
  static void NAME##_min(T *acc, const T *s, size_t m) {                      \
    for (size_t i = 0; i < m; i++) acc[i] = s[i] < acc[i] ? s[i] : acc[i];    \
  }                                                                           \
  static void NAME##_max(T *acc, const T *s, size_t m) {                      \
    for (size_t i = 0; i < m; i++) acc[i] = s[i] > acc[i] ? s[i] : acc[i];    \
  }                                                                           \
  static void NAME##_avg_store(T *d, const UT *acc, int div, size_t m) {      \
    for (size_t i = 0; i < m; i++) d[i] = (T)((T)acc[i] / div);               \
  }                                                                           \
  static void NAME##_block(void *const *dsts, const void *const *srcs, int n, \
                           size_t base, size_t m, qcoll_op_t op, int div) {   \
    if (op == QCOLL_MIN || op == QCOLL_MAX) {                                 \
      T acc[BLOCK];                                                           \
      memcpy(acc, (const T *)srcs[0] + base, m * sizeof(T));                  \
      for (int r = 1; r < n; r++) {                                           \
        if (op == QCOLL_MIN)                                                  \
          RUN(NAME##_min, acc, (const T *)srcs[r] + base);                    \
        else                                                                  \
          RUN(NAME##_max, acc, (const T *)srcs[r] + base);                    \
      }                                                                       \
      memcpy((T *)dsts[0] + base, acc, m * sizeof(T));                        \
      copy_second(dsts, base * sizeof(T), m * sizeof(T));                     \
      return;                                                                 \
    }                                                                         \
    UT acc[BLOCK]; /* same representation as T */                             \
    memcpy(acc, (const T *)srcs[0] + base, m * sizeof(T));                    \
    for (int r = 1; r < n; r++) {                                             \
      if (op == QCOLL_PROD)                                                   \
        RUN(NAME##_prod, acc, (const T *)srcs[r] + base);                     \
      else                                                                    \
        RUN(NAME##_sum, acc, (const T *)srcs[r] + base);                      \
    }                                                                         \
    if (op == QCOLL_AVG)                                                      \
      RUN(NAME##_avg_store, (T *)dsts[0] + base, acc, div);                   \
    else                                                                      \
      memcpy((T *)dsts[0] + base, acc, m * sizeof(T));                        \
    copy_second(dsts, base * sizeof(T), m * sizeof(T));                       \
  }

DEFINE_INT_REDUCE(i8, int8_t, uint8_t)
DEFINE_INT_REDUCE(u8, uint8_t, uint8_t)
DEFINE_INT_REDUCE(i32, int32_t, uint32_t)
DEFINE_INT_REDUCE(u32, uint32_t, uint32_t)
DEFINE_INT_REDUCE(i64, int64_t, uint64_t)
DEFINE_INT_REDUCE(u64, uint64_t, uint64_t)

/* ---- floating point ------------------------------------------------ */

#define DEFINE_FLOAT_REDUCE(NAME, T, ACC, LOAD, STORE)                        \
  static void NAME##_load(ACC *acc, const T *s, size_t m) {                   \
    for (size_t i = 0; i < m; i++) acc[i] = LOAD(s[i]);                       \
  }                                                                           \
  static void NAME##_sum(ACC *acc, const T *s, size_t m) {                    \
    for (size_t i = 0; i < m; i++) acc[i] = acc[i] + LOAD(s[i]);              \
  }                                                                           \
  static void NAME##_prod(ACC *acc, const T *s, size_t m) {                   \
    for (size_t i = 0; i < m; i++) acc[i] = acc[i] * LOAD(s[i]);              \
  }                                                                           \
  static void NAME##_min(ACC *acc, const T *s, size_t m) {                    \
    for (size_t i = 0; i < m; i++) {                                          \
      ACC v = LOAD(s[i]);                                                     \
      acc[i] = v < acc[i] ? v : acc[i];                                       \
    }                                                                         \
  }                                                                           \
  static void NAME##_max(ACC *acc, const T *s, size_t m) {                    \
    for (size_t i = 0; i < m; i++) {                                          \
      ACC v = LOAD(s[i]);                                                     \
      acc[i] = v > acc[i] ? v : acc[i];                                       \
    }                                                                         \
  }                                                                           \
  static void NAME##_div(ACC *acc, ACC d, size_t m) {                         \
    for (size_t i = 0; i < m; i++) acc[i] = acc[i] / d;                       \
  }                                                                           \
  static void NAME##_store(T *d, const ACC *acc, size_t m) {                  \
    for (size_t i = 0; i < m; i++) d[i] = STORE(acc[i]);                      \
  }                                                                           \
  static void NAME##_block(void *const *dsts, const void *const *srcs, int n, \
                           size_t base, size_t m, qcoll_op_t op, int div) {   \
    ACC acc[BLOCK];                                                           \
    RUN(NAME##_load, acc, (const T *)srcs[0] + base);                         \
    for (int r = 1; r < n; r++) {                                             \
      const T *s = (const T *)srcs[r] + base;                                 \
      switch (op) {                                                           \
        case QCOLL_PROD: RUN(NAME##_prod, acc, s); break;                     \
        case QCOLL_MIN: RUN(NAME##_min, acc, s); break;                       \
        case QCOLL_MAX: RUN(NAME##_max, acc, s); break;                       \
        default: RUN(NAME##_sum, acc, s); break;                              \
      }                                                                       \
    }                                                                         \
    if (op == QCOLL_AVG) RUN(NAME##_div, acc, (ACC)div);                      \
    RUN(NAME##_store, (T *)dsts[0] + base, acc);                              \
    copy_second(dsts, base * sizeof(T), m * sizeof(T));                       \
  }

DEFINE_FLOAT_REDUCE(f16, uint16_t, float, qcoll__f16_to_f32, qcoll__f32_to_f16)
DEFINE_FLOAT_REDUCE(bf16, uint16_t, float, qcoll__bf16_to_f32,
                    qcoll__f32_to_bf16)
DEFINE_FLOAT_REDUCE(f32, float, float, ID, ID)
DEFINE_FLOAT_REDUCE(f64, double, double, ID, ID)

/* ---- dispatch ------------------------------------------------------ */

typedef void (*block_fn)(void *const *dsts, const void *const *srcs, int n,
                         size_t base, size_t m, qcoll_op_t op, int div);

static block_fn block_for(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_I8: return i8_block;
    case QCOLL_U8: return u8_block;
    case QCOLL_I32: return i32_block;
    case QCOLL_U32: return u32_block;
    case QCOLL_I64: return i64_block;
    case QCOLL_U64: return u64_block;
    case QCOLL_F16: return f16_block;
    case QCOLL_BF16: return bf16_block;
    case QCOLL_F32: return f32_block;
    case QCOLL_F64: return f64_block;
    default: return NULL;
  }
}

void qcoll__reduce_ranks2(void *dst, void *dst2, const void *const *srcs,
                          int nsrcs, size_t count, qcoll_dtype_t dtype,
                          qcoll_op_t op, int avg_divisor) {
  block_fn fn = block_for(dtype);
  if (!fn || nsrcs < 1 || count == 0) return;
  if (avg_divisor < 1) avg_divisor = 1; /* callers pass the world size */
  void *dsts[2] = {dst, dst2};
  for (size_t base = 0; base < count; base += BLOCK) {
    size_t m = QCOLL_MIN((size_t)BLOCK, count - base);
    fn(dsts, srcs, nsrcs, base, m, op, avg_divisor);
  }
}

void qcoll__reduce_ranks(void *dst, const void *const *srcs, int nsrcs,
                         size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
                         int avg_divisor) {
  qcoll__reduce_ranks2(dst, NULL, srcs, nsrcs, count, dtype, op, avg_divisor);
}
