/*
 * Checking a collective's result exactly.
 *
 * Inputs are small integers that depend on the rank and on a hash of the
 * element index (so an element that lands at the wrong index is caught).
 * Small integers are exact in every dtype, f16 and bf16 included, and their
 * sums are exact in the f32/f64 accumulators the library uses, so the
 * expected result is computed on the host exactly and rounded once to the
 * dtype, as the library does:
 *   sum       exact sum; integers wrap to the dtype's width
 *   prod      inputs in {1, 2} with at most one rank contributing 2
 *   min, max  exact
 *   avg       the sum divided once by the world size in the accumulation
 *             type (f32 for f16/bf16/f32, f64 for f64), integers truncate;
 *             for 8-bit integers the inputs shrink so the sum cannot wrap
 * Results are compared bit for bit, or within a stated absolute tolerance
 * when a quantised transfer rounds on purpose.
 */
#include <math.h>
#include <string.h>

#include "perf.h"

/* Bytes written into output regions before a checked call, so a call that
 * writes nothing cannot pass on the previous call's results. */
#define POISON_BYTE 0xA5

/* ---- f16 / bf16 ------------------------------------------------------ */

uint16_t perf_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) /* inf stays inf, NaN stays a quiet NaN */
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* f16 subnormal (or zero) */
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  /* Round half to even; a carry into the exponent is the right answer. */
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float perf_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = (float)mant * 0x1p-24f;
    return sign ? -f : f;
  }
  uint32_t x = exp == 0x1f ? sign | 0x7f800000u | (mant << 13)
                           : sign | ((exp + 112) << 23) | (mant << 13);
  memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t perf_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float perf_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* ---- element access -------------------------------------------------- */

static bool is_float(qcoll_dtype_t dt) {
  return dt == QCOLL_F16 || dt == QCOLL_BF16 || dt == QCOLL_F32 ||
         dt == QCOLL_F64;
}

static bool is_unsigned(qcoll_dtype_t dt) {
  return dt == QCOLL_U8 || dt == QCOLL_U32 || dt == QCOLL_U64;
}

/* Store v as element k: floats round to nearest even, integers keep the
 * low bits (two's complement wrap, as the library's integer ops). */
static void store_double(qcoll_dtype_t dt, void *p, size_t k, double v) {
  switch (dt) {
    case QCOLL_F64: ((double *)p)[k] = v; break;
    case QCOLL_F32: ((float *)p)[k] = (float)v; break;
    case QCOLL_F16: ((uint16_t *)p)[k] = perf_f32_to_f16((float)v); break;
    case QCOLL_BF16: ((uint16_t *)p)[k] = perf_f32_to_bf16((float)v); break;
    default: break;
  }
}

static void store_int(qcoll_dtype_t dt, void *p, size_t k, int64_t v) {
  switch (dt) {
    case QCOLL_I8:
    case QCOLL_U8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case QCOLL_I32:
    case QCOLL_U32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case QCOLL_I64:
    case QCOLL_U64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    default: store_double(dt, p, k, (double)v); break; /* small ints: exact */
  }
}

static double load_double(qcoll_dtype_t dt, const void *p, size_t k) {
  switch (dt) {
    case QCOLL_I8: return ((const int8_t *)p)[k];
    case QCOLL_U8: return ((const uint8_t *)p)[k];
    case QCOLL_I32: return ((const int32_t *)p)[k];
    case QCOLL_U32: return ((const uint32_t *)p)[k];
    case QCOLL_I64: return (double)((const int64_t *)p)[k];
    case QCOLL_U64: return (double)((const uint64_t *)p)[k];
    case QCOLL_F16: return perf_f16_to_f32(((const uint16_t *)p)[k]);
    case QCOLL_BF16: return perf_bf16_to_f32(((const uint16_t *)p)[k]);
    case QCOLL_F32: return ((const float *)p)[k];
    case QCOLL_F64: return ((const double *)p)[k];
    default: return NAN;
  }
}

/* ---- the input pattern ------------------------------------------------ */

/* Number of distinct input values: 8, fewer for an 8-bit average so that
 * the sum of all ranks cannot wrap before the division. */
static int value_span(qcoll_dtype_t dt, qcoll_op_t op, int nranks) {
  int span = 8;
  if (op == QCOLL_AVG && (dt == QCOLL_I8 || dt == QCOLL_U8)) {
    int limit = 127 / nranks + 1; /* nranks * (span-1) <= 127 */
    if (limit < span) span = limit;
  }
  return span;
}

/* Signed types get values around zero, unsigned types non-negative ones. */
static bool centred(qcoll_dtype_t dt, qcoll_op_t op) {
  return !is_unsigned(dt) && !(op == QCOLL_AVG && dt == QCOLL_I8);
}

/* The inputs of this dtype and op (perf_common.h has the pattern). */
static perf_pattern_t pattern(qcoll_dtype_t dt, qcoll_op_t op, int nranks) {
  return (perf_pattern_t){.nranks = nranks,
                          .prod = op == QCOLL_PROD,
                          .span = value_span(dt, op, nranks),
                          .centred = centred(dt, op)};
}

double perf_check_max_input(qcoll_dtype_t dt, qcoll_op_t op, int nranks) {
  if (op == QCOLL_PROD) return 2;
  int span = value_span(dt, op, nranks);
  return centred(dt, op) ? span - 1 - (span - 1) / 2 : span - 1;
}

/* ---- expected results --------------------------------------------------- */

static perf_red_t reduction(qcoll_op_t op) {
  switch (op) {
    case QCOLL_PROD: return PERF_RED_PROD;
    case QCOLL_MIN: return PERF_RED_MIN;
    case QCOLL_MAX: return PERF_RED_MAX;
    default: return PERF_RED_SUM; /* sum, avg */
  }
}

/* Store op over all ranks of input element j into out[0]. */
static void store_reduced(const perf_call_t *c, const perf_pattern_t *p,
                          void *out, size_t j) {
  int64_t acc = perf_pattern_reduce(p, reduction(c->op), j);
  if (c->op != QCOLL_AVG) {
    store_int(c->dtype, out, 0, acc);
    return;
  }
  if (!is_float(c->dtype))
    store_int(c->dtype, out, 0, acc / c->nranks); /* C truncates toward zero */
  else if (c->dtype == QCOLL_F64)
    store_double(c->dtype, out, 0, (double)acc / (double)c->nranks);
  else /* one division in f32, then one rounding to the dtype */
    store_double(c->dtype, out, 0, (double)((float)acc / (float)c->nranks));
}

/* Store the expected value of this rank's output element k into out[0].
 * Returns false when the element has no defined value (reduce on a
 * non-root). */
static bool store_expected(const perf_call_t *c, const perf_pattern_t *p,
                           size_t k, void *out) {
  perf_source_t src;
  if (!perf_expected_source(c->coll->id, c->shape.count, c->rank, c->nranks,
                            c->root, k, &src))
    return false;
  if (src.reduced)
    store_reduced(c, p, out, src.index);
  else
    store_int(c->dtype, out, 0, perf_pattern_value(p, src.rank, src.index));
  return true;
}

/* ---- prepare and compare ----------------------------------------------- */

/* Where the call reads its input and writes its output. */
typedef struct regions {
  perf_buf_t *in_buf, *out_buf;
  size_t in_off, out_off; /* bytes */
  size_t in_elems, out_elems;
} regions_t;

static regions_t call_regions(const perf_call_t *c) {
  void *send, *recv;
  regions_t g;
  perf_call_pointers(c, &send, &recv, &g.in_off, &g.out_off);
  g.in_buf = c->in_place ? c->recv : c->send;
  g.out_buf = c->recv;
  g.in_elems = c->shape.send_elems;
  g.out_elems = c->shape.recv_elems;
  return g;
}

int perf_check_prepare(const perf_call_t *c) {
  if (c->coll->id == PERF_BARRIER) return 0;
  regions_t g = call_regions(c);
  size_t es = qcoll_dtype_size(c->dtype);
  /* Poison first: in place, the input is a part of the output region. */
  memset((char *)g.out_buf->host + g.out_off, POISON_BYTE, g.out_elems * es);
  /* A broadcast reads only the root's input; elsewhere, in place, the
   * buffer must stay poisoned so a missing copy shows. */
  bool reads_input = c->coll->id != PERF_BROADCAST || c->rank == c->root;
  void *in = (char *)g.in_buf->host + g.in_off;
  perf_pattern_t p = pattern(c->dtype, c->op, c->nranks);
  for (size_t j = 0; reads_input && j < g.in_elems; j++)
    store_int(c->dtype, in, j, perf_pattern_value(&p, c->rank, j));
  if (perf_buf_upload(g.out_buf, g.out_off, g.out_elems * es, c->stream) != 0 ||
      perf_buf_upload(g.in_buf, g.in_off, g.in_elems * es, c->stream) != 0)
    return -1;
  return 0;
}

int perf_check_compare(const perf_call_t *c, perf_tolerance_t tol,
                       int64_t *wrong, double *max_err) {
  double worst = 0;
  *wrong = 0;
  if (max_err) *max_err = 0;
  if (c->coll->id == PERF_BARRIER) return 0;
  if (c->coll->id == PERF_REDUCE && c->rank != c->root) return 0;
  regions_t g = call_regions(c);
  size_t es = qcoll_dtype_size(c->dtype);
  if (perf_buf_download(g.out_buf, g.out_off, g.out_elems * es, c->stream) != 0)
    return -1;
  const char *got = (const char *)g.out_buf->host + g.out_off;
  perf_pattern_t p = pattern(c->dtype, c->op, c->nranks);
  uint64_t expect[1]; /* one element of any dtype */
  for (size_t k = 0; k < g.out_elems; k++) {
    if (!store_expected(c, &p, k, expect)) continue;
    bool ok;
    if (tol.abs > 0) {
      double d = fabs(load_double(c->dtype, got, k) -
                      load_double(c->dtype, expect, 0));
      ok = d <= tol.abs; /* false for NaN */
      if (d > worst) worst = d;
    } else {
      ok = memcmp(got + k * es, expect, es) == 0;
    }
    if (!ok) (*wrong)++;
  }
  if (max_err) *max_err = worst;
  return 0;
}

int perf_check_count_wrong(const perf_call_t *c, perf_tolerance_t tol,
                           int64_t *wrong) {
  return perf_check_compare(c, tol, wrong, NULL);
}

/* ---- the tolerance of a quantised transfer --------------------------------
 */

/* Quantisation maps each group of 32 values onto a signed range whose end
 * is the group's largest magnitude amax, so one value moves by at most half
 * a step, amax / (2 L), with L the range end (INT8 127, INT6 31, INT4 7,
 * INT3 3);
 * FP8 e4m3 keeps 3 mantissa bits, a relative error of at most 2^-4, which
 * is amax / 16, i.e. L = 8.  A quantised all-reduce rounds each input once
 * (amax <= max_in, so by at most d = max_in / (2 L)), reduces, and rounds
 * the result once more (by at most its own largest magnitude / (2 L));
 * the result is then rounded to the dtype (relative eps), perhaps twice if
 * an implementation stores the reduced values before encoding them.
 *   sum       the n input errors add up: n d
 *   min, max, avg   at most one input's error: d
 *   prod      on this checker's inputs (1 or 2, at most one 2 per element)
 *             the errors multiply: (1 + d)^(n-1) (2 + d) - 2
 * 1% covers the f32 arithmetic of scaling and reducing. */
perf_tolerance_t perf_quant_tolerance(qcoll_quant_t quant, qcoll_dtype_t dtype,
                                      qcoll_op_t op, int nranks) {
  perf_tolerance_t tol = {0};
  double levels;
  switch (quant) {
    case QCOLL_QUANT_INT8: levels = 127; break;
    case QCOLL_QUANT_INT6: levels = 31; break;
    case QCOLL_QUANT_INT4: levels = 7; break;
    case QCOLL_QUANT_INT3: levels = 3; break;
    case QCOLL_QUANT_FP8: levels = 8; break;
    default: return tol;
  }
  if (!is_float(dtype)) return tol; /* integers are never quantised: exact */
  double n = nranks;
  double max_in = perf_check_max_input(dtype, op, nranks);
  double d = max_in / (2 * levels);
  double in_err, max_out;
  switch (op) {
    case QCOLL_SUM:
      in_err = n * d;
      max_out = n * max_in;
      break;
    case QCOLL_PROD:
      in_err = pow(1 + d, n - 1) * (2 + d) - 2;
      max_out = 2;
      break;
    default:
      in_err = d;
      max_out = max_in;
      break;
  }
  double max_result = max_out + in_err;
  double eps = dtype == QCOLL_BF16  ? 0x1p-8
               : dtype == QCOLL_F16 ? 0x1p-11
               : dtype == QCOLL_F32 ? 0x1p-24
                                    : 0x1p-53;
  tol.abs = (in_err + max_result / (2 * levels)) * 1.01 + 2 * max_result * eps;
  return tol;
}
