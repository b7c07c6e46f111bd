/*
 * Unit tests of qcoll-perf's checker: the f16/bf16 conversions it rounds
 * with, and that it accepts a correct collective result and counts every
 * wrong element.  Correct results come from a reference collective run
 * here over the buffers the checker prepared for each simulated rank, so
 * the test depends on neither the library nor the checker's own formulas.
 * The tolerance of quantised all-reduce is checked against a model of the
 * two-shot algorithm built on the library's own codec (codec.h).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "perf.h"

/* ---- conversions -----------------------------------------------------------
 */

static bool f16_is_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}
static bool bf16_is_nan(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
}

static void test_f16_round_trip(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    uint16_t back = perf_f32_to_f16(perf_f16_to_f32((uint16_t)h));
    if (f16_is_nan((uint16_t)h))
      assert_true(f16_is_nan(back));
    else
      assert_int_equal(back, h);
  }
}

static void test_bf16_round_trip(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    uint16_t back = perf_f32_to_bf16(perf_bf16_to_f32((uint16_t)h));
    if (bf16_is_nan((uint16_t)h))
      assert_true(bf16_is_nan(back));
    else
      assert_int_equal(back, h);
  }
}

/* Between two neighbours lo=h and hi=h+1: the midpoint goes to the even
 * one, anything above it to hi, anything below to lo; both signs. */
static void check_ties(uint16_t (*to)(float), float (*from)(uint16_t),
                       uint32_t last) {
  for (uint32_t h = 0; h < last; h++) {
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
      uint16_t lo = (uint16_t)(h | sign), hi = (uint16_t)((h + 1) | sign);
      float flo = from(lo), fhi = from(hi);
      float mid =
          flo + (fhi - flo) / 2; /* exact (11 or 8 bits in 24), no overflow */
      assert_int_equal(to(mid), (h & 1) ? hi : lo);
      assert_int_equal(to(nextafterf(mid, fhi)), hi);
      assert_int_equal(to(nextafterf(mid, flo)), lo);
    }
  }
}

static void test_f16_ties_to_even(void **state) {
  (void)state;
  check_ties(perf_f32_to_f16, perf_f16_to_f32,
             0x7bfeu); /* up to the largest finite pair */
  /* Half way from the largest finite f16 to 2^16 rounds to even: infinity. */
  float top = perf_f16_to_f32(0x7bffu);
  assert_int_equal(perf_f32_to_f16((top + 65536.0f) / 2), 0x7c00u);
  assert_int_equal(perf_f32_to_f16(nextafterf((top + 65536.0f) / 2, 0)),
                   0x7bffu);
}

static void test_bf16_ties_to_even(void **state) {
  (void)state;
  check_ties(perf_f32_to_bf16, perf_bf16_to_f32, 0x7f7eu);
}

/* ---- a reference collective over simulated ranks
 * ----------------------------- */

#define NRANKS 3

static double load(qcoll_dtype_t dt, const void *p, size_t k) {
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
    default: return ((const double *)p)[k];
  }
}

static void store(qcoll_dtype_t dt, void *p, size_t k, double v) {
  switch (dt) {
    case QCOLL_I8:
    case QCOLL_U8: ((uint8_t *)p)[k] = (uint8_t)(int64_t)v; break;
    case QCOLL_I32:
    case QCOLL_U32: ((uint32_t *)p)[k] = (uint32_t)(int64_t)v; break;
    case QCOLL_I64:
    case QCOLL_U64: ((uint64_t *)p)[k] = (uint64_t)(int64_t)v; break;
    case QCOLL_F16: ((uint16_t *)p)[k] = perf_f32_to_f16((float)v); break;
    case QCOLL_BF16: ((uint16_t *)p)[k] = perf_f32_to_bf16((float)v); break;
    case QCOLL_F32: ((float *)p)[k] = (float)v; break;
    default: ((double *)p)[k] = v; break;
  }
}

static bool is_int(qcoll_dtype_t dt) {
  return dt <= QCOLL_U64;
}

/* op over the ranks' inputs (small integers: exact in double). */
static double reduce_ref(qcoll_dtype_t dt, qcoll_op_t op, const double *v) {
  double acc = v[0];
  for (int r = 1; r < NRANKS; r++) {
    if (op == QCOLL_PROD)
      acc *= v[r];
    else if (op == QCOLL_MIN)
      acc = fmin(acc, v[r]);
    else if (op == QCOLL_MAX)
      acc = fmax(acc, v[r]);
    else
      acc += v[r];
  }
  if (op != QCOLL_AVG) return acc;
  if (is_int(dt)) return (double)((int64_t)acc / NRANKS);
  if (dt == QCOLL_F64) return acc / NRANKS;
  return (double)((float)acc / (float)NRANKS);
}

typedef struct sim {
  perf_buf_t send[NRANKS], recv[NRANKS];
  perf_call_t call[NRANKS];
} sim_t;

static void sim_setup(sim_t *s, perf_coll_id_t id, qcoll_dtype_t dt,
                      qcoll_op_t op, size_t bytes, bool in_place) {
  const perf_coll_t *coll = perf_coll_by_id(id);
  perf_shape_t shape =
      perf_coll_shape(coll, bytes, qcoll_dtype_size(dt), NRANKS);
  for (int r = 0; r < NRANKS; r++) {
    assert_int_equal(perf_buf_alloc(&s->send[r], PERF_MEM_HOST, shape.bytes),
                     0);
    assert_int_equal(perf_buf_alloc(&s->recv[r], PERF_MEM_HOST, shape.bytes),
                     0);
    s->call[r] = (perf_call_t){.coll = coll,
                               .rank = r,
                               .nranks = NRANKS,
                               .shape = shape,
                               .dtype = dt,
                               .op = op,
                               .root = coll->has_root ? 1 : -1,
                               .in_place = in_place,
                               .send = &s->send[r],
                               .recv = &s->recv[r]};
    assert_int_equal(perf_check_prepare(&s->call[r]), 0);
  }
}

static void sim_free(sim_t *s) {
  for (int r = 0; r < NRANKS; r++) {
    perf_buf_free(&s->send[r]);
    perf_buf_free(&s->recv[r]);
  }
}

/* The reference collective: reads what prepare() wrote where the call
 * would read it and writes where the call would write. */
static void sim_run(sim_t *s) {
  const perf_call_t *c0 = &s->call[0];
  qcoll_dtype_t dt = c0->dtype;
  size_t cnt = c0->shape.count;
  void *in[NRANKS], *out[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    size_t so, ro;
    perf_call_pointers(&s->call[r], &in[r], &out[r], &so, &ro);
  }
  /* Inputs are read in full before any output is written (in place). */
  size_t n_in = c0->shape.send_elems;
  double *v = calloc(NRANKS * (n_in ? n_in : 1), sizeof *v);
  for (int r = 0; r < NRANKS; r++)
    for (size_t j = 0; j < n_in; j++) v[r * n_in + j] = load(dt, in[r], j);
  for (int me = 0; me < NRANKS; me++) {
    for (size_t k = 0; k < c0->shape.recv_elems; k++) {
      double col[NRANKS] = {0}, res; /* col: the reductions only */
      size_t j = c0->coll->id == PERF_REDUCE_SCATTER ? (size_t)me * cnt + k : k;
      if (c0->coll->has_op)
        for (int r = 0; r < NRANKS; r++) col[r] = v[r * n_in + j];
      switch (c0->coll->id) {
        case PERF_ALL_GATHER: res = v[(k / cnt) * n_in + k % cnt]; break;
        case PERF_ALL_TO_ALL:
          res = v[(k / cnt) * n_in + (size_t)me * cnt + k % cnt];
          break;
        case PERF_BROADCAST: res = v[(size_t)c0->root * n_in + k]; break;
        case PERF_SENDRECV:
          res = v[(size_t)((me + NRANKS - 1) % NRANKS) * n_in + k];
          break;
        default: res = reduce_ref(dt, c0->op, col); break;
      }
      store(dt, out[me], k, res);
    }
  }
  free(v);
}

static int64_t sim_wrong(sim_t *s) {
  int64_t total = 0;
  for (int r = 0; r < NRANKS; r++) {
    int64_t w = -1;
    assert_int_equal(
        perf_check_count_wrong(&s->call[r], (perf_tolerance_t){0}, &w), 0);
    total += w;
  }
  return total;
}

/* Correct results pass; one changed element is one wrong; a call that
 * wrote nothing leaves every output element wrong. */
static void check_collective(perf_coll_id_t id, qcoll_dtype_t dt, qcoll_op_t op,
                             bool in_place) {
  const size_t bytes = 96 * 8 * NRANKS; /* whole elements of every dtype */
  sim_t s;
  sim_setup(&s, id, dt, op, bytes, in_place);
  /* Nothing ran yet: every output element still holds the poison, except
   * where in place the output region is the input. */
  bool poisoned = !in_place || id == PERF_BROADCAST;
  if (poisoned) {
    int64_t want = 0;
    for (int r = 0; r < NRANKS; r++) {
      if (id == PERF_REDUCE && r != s.call[r].root) continue; /* not checked */
      if (id == PERF_BROADCAST && in_place && r == s.call[r].root)
        continue; /* its input */
      want += (int64_t)s.call[r].shape.recv_elems;
    }
    assert_int_equal(sim_wrong(&s), want);
  }
  sim_run(&s);
  assert_int_equal(sim_wrong(&s), 0);
  /* Corrupt one element of the last checked rank's output. */
  int r = id == PERF_REDUCE ? s.call[0].root : NRANKS - 1;
  void *send, *recv;
  size_t so, ro;
  perf_call_pointers(&s.call[r], &send, &recv, &so, &ro);
  size_t k = s.call[r].shape.recv_elems / 2;
  store(dt, recv, k, load(dt, recv, k) + 1);
  assert_int_equal(sim_wrong(&s), 1);
  sim_free(&s);
}

static void test_all_reduce_every_dtype_and_op(void **state) {
  (void)state;
  for (int d = 0; d < QCOLL_DTYPE_COUNT; d++)
    for (int o = 0; o < QCOLL_OP_COUNT; o++) {
      check_collective(PERF_ALL_REDUCE, (qcoll_dtype_t)d, (qcoll_op_t)o, false);
      check_collective(PERF_ALL_REDUCE, (qcoll_dtype_t)d, (qcoll_op_t)o, true);
    }
}

static void test_layouts(void **state) {
  (void)state;
  for (int in_place = 0; in_place <= 1; in_place++) {
    check_collective(PERF_REDUCE, QCOLL_BF16, QCOLL_SUM, in_place);
    check_collective(PERF_BROADCAST, QCOLL_I32, QCOLL_SUM, in_place);
    check_collective(PERF_ALL_GATHER, QCOLL_F16, QCOLL_SUM, in_place);
    check_collective(PERF_REDUCE_SCATTER, QCOLL_U8, QCOLL_MAX, in_place);
  }
  check_collective(PERF_ALL_TO_ALL, QCOLL_F64, QCOLL_SUM, false);
  check_collective(PERF_SENDRECV, QCOLL_I64, QCOLL_SUM, false);
}

/* Inputs must differ between ranks and between nearby indices, or a
 * collective that mixes them up would still pass. */
static void test_inputs_distinguish_ranks_and_indices(void **state) {
  (void)state;
  sim_t s;
  sim_setup(&s, PERF_ALL_GATHER, QCOLL_I32, QCOLL_SUM, 64 * 4 * NRANKS, false);
  size_t n = s.call[0].shape.send_elems;
  for (int r = 1; r < NRANKS; r++)
    assert_memory_not_equal(s.send[0].host, s.send[r].host, n * 4);
  const int32_t *v = s.send[0].host;
  int differ = 0;
  for (size_t j = 1; j < n; j++) differ += v[j] != v[j - 1];
  assert_true(differ > (int)n / 2);
  sim_free(&s);
}

/* The sum, min and max over the ranks of element j change with j at every
 * world size, so a reduced element written to the wrong index is caught.
 * With the rank's input the index's hash shifted by the rank, 8 ranks (the
 * span) summed all 8 residues to one constant. */
static void test_reductions_vary_with_the_index(void **state) {
  (void)state;
  static const perf_red_t reds[] = {PERF_RED_SUM, PERF_RED_MIN, PERF_RED_MAX};
  for (int n = 2; n <= 16; n++)
    for (size_t k = 0; k < sizeof reds / sizeof reds[0]; k++) {
      perf_pattern_t p = {.nranks = n, .span = 8, .centred = true};
      int64_t first = perf_pattern_reduce(&p, reds[k], 0);
      int differ = 0;
      for (size_t j = 1; j < 256; j++)
        differ += perf_pattern_reduce(&p, reds[k], j) != first;
      /* min/max of 16 ranks' values in -3..4 are mostly the bounds */
      assert_true(differ > (reds[k] == PERF_RED_SUM ? 128 : 8));
    }
}

/* ---- the tolerance of quantised all-reduce ----------------------------------
 */

#define QMAX_RANKS 8
#define QCOUNT (32 * 40 + 7) /* whole groups and a partial one */

/* Quantise and dequantise n values with the library's codec. */
static void round_trip(qcoll_quant_t q, float *v, size_t n) {
  uint8_t *enc = malloc(qcoll__codec_encoded_bytes(q, n));
  assert_non_null(enc);
  qcoll__codec_encode(q, v, n, enc);
  qcoll__codec_decode(q, enc, n, v);
  free(enc);
}

/* Two-shot with quantised transfer, the worst case the design allows:
 * every input is rounded once, the reduction runs in f32 in rank order,
 * its result is rounded once more and then to the dtype. */
static void quantised_all_reduce(qcoll_quant_t q, perf_call_t *calls, int n) {
  qcoll_dtype_t dt = calls[0].dtype;
  qcoll_op_t op = calls[0].op;
  float *in = calloc((size_t)n * QCOUNT, sizeof *in),
        *acc = calloc(QCOUNT, sizeof *acc);
  assert_non_null(in);
  assert_non_null(acc);
  for (int r = 0; r < n; r++) {
    for (size_t j = 0; j < QCOUNT; j++)
      in[r * QCOUNT + j] = (float)load(dt, calls[r].send->host, j);
    round_trip(q, in + (size_t)r * QCOUNT, QCOUNT);
  }
  for (size_t j = 0; j < QCOUNT; j++) {
    float a = in[j];
    for (int r = 1; r < n; r++) {
      float v = in[r * QCOUNT + j];
      if (op == QCOLL_PROD)
        a *= v;
      else if (op == QCOLL_MIN)
        a = v < a ? v : a;
      else if (op == QCOLL_MAX)
        a = v > a ? v : a;
      else
        a += v;
    }
    acc[j] = op == QCOLL_AVG ? a / (float)n : a;
  }
  round_trip(q, acc, QCOUNT);
  for (int r = 0; r < n; r++)
    for (size_t j = 0; j < QCOUNT; j++)
      store(dt, calls[r].recv->host, j, acc[j]);
  free(in);
  free(acc);
}

static void check_quant_tolerance(qcoll_quant_t q, qcoll_dtype_t dt,
                                  qcoll_op_t op, int n, double *worst_ratio) {
  perf_buf_t send[QMAX_RANKS], recv[QMAX_RANKS];
  perf_call_t calls[QMAX_RANKS];
  const perf_coll_t *coll = perf_coll_by_id(PERF_ALL_REDUCE);
  perf_shape_t shape = perf_coll_shape(coll, QCOUNT * qcoll_dtype_size(dt),
                                       qcoll_dtype_size(dt), n);
  for (int r = 0; r < n; r++) {
    assert_int_equal(perf_buf_alloc(&send[r], PERF_MEM_HOST, shape.bytes), 0);
    assert_int_equal(perf_buf_alloc(&recv[r], PERF_MEM_HOST, shape.bytes), 0);
    calls[r] = (perf_call_t){.coll = coll,
                             .rank = r,
                             .nranks = n,
                             .shape = shape,
                             .dtype = dt,
                             .op = op,
                             .root = -1,
                             .send = &send[r],
                             .recv = &recv[r]};
    assert_int_equal(perf_check_prepare(&calls[r]), 0);
  }
  quantised_all_reduce(q, calls, n);
  perf_tolerance_t tol = perf_quant_tolerance(q, dt, op, n);
  assert_true(tol.abs > 0);
  for (int r = 0; r < n; r++) {
    int64_t wrong = -1;
    double err = -1;
    assert_int_equal(perf_check_compare(&calls[r], tol, &wrong, &err), 0);
    if (wrong != 0)
      print_error("%s %s %s n=%d: %lld wrong, max error %g, tolerance %g\n",
                  qcoll_quant_name(q), qcoll_dtype_name(dt), qcoll_op_name(op),
                  n, (long long)wrong, err, tol.abs);
    assert_int_equal(wrong, 0);
    assert_true(err <= tol.abs);
    if (err / tol.abs > *worst_ratio) *worst_ratio = err / tol.abs;
  }
  /* An element off by more than the tolerance is one wrong, and the error
   * reported is that element's: moved by 3 tol + 1 from a value within tol
   * of the expected one (and rounded to the dtype by under 0.5 here), it is
   * more than 2 tol off, where every other element is at most tol off. */
  double v = load(dt, recv[0].host, 5);
  store(dt, recv[0].host, 5, v + 3 * tol.abs + 1);
  int64_t wrong = -1;
  double err = -1;
  assert_int_equal(perf_check_compare(&calls[0], tol, &wrong, &err), 0);
  assert_int_equal(wrong, 1);
  assert_true(err > 2 * tol.abs);
  for (int r = 0; r < n; r++) {
    perf_buf_free(&send[r]);
    perf_buf_free(&recv[r]);
  }
}

static void test_quant_tolerance_bounds_two_shot(void **state) {
  (void)state;
  static const qcoll_quant_t quants[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                         QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                         QCOLL_QUANT_FP8};
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const int ranks[] = {2, 3, 4, 8};
  for (size_t qi = 0; qi < sizeof quants / sizeof quants[0]; qi++) {
    double worst = 0;
    for (size_t d = 0; d < 3; d++)
      for (int op = 0; op < QCOLL_OP_COUNT; op++)
        for (size_t k = 0; k < 4; k++)
          check_quant_tolerance(quants[qi], dtypes[d], (qcoll_op_t)op, ranks[k],
                                &worst);
    /* The rounding is real (the model is not exact) and the bound is not
     * vacuous: the worst case uses a fair part of it. */
    print_message("%s: worst error / tolerance = %.3f\n",
                  qcoll_quant_name(quants[qi]), worst);
    assert_true(worst > 0.05);
  }
}

/* Exact transfers and integer dtypes are compared bit for bit. */
static void test_quant_tolerance_exact_cases(void **state) {
  (void)state;
  assert_true(
      perf_quant_tolerance(QCOLL_QUANT_NONE, QCOLL_F32, QCOLL_SUM, 4).abs == 0);
  assert_true(
      perf_quant_tolerance(QCOLL_QUANT_DEFAULT, QCOLL_BF16, QCOLL_SUM, 4).abs ==
      0);
  assert_true(
      perf_quant_tolerance(QCOLL_QUANT_INT8, QCOLL_I32, QCOLL_SUM, 4).abs == 0);
  /* Coarser formats allow more. */
  double i8 =
      perf_quant_tolerance(QCOLL_QUANT_INT8, QCOLL_F32, QCOLL_SUM, 4).abs;
  double i4 =
      perf_quant_tolerance(QCOLL_QUANT_INT4, QCOLL_F32, QCOLL_SUM, 4).abs;
  assert_true(i8 > 0 && i4 > i8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_round_trip),
      cmocka_unit_test(test_bf16_round_trip),
      cmocka_unit_test(test_f16_ties_to_even),
      cmocka_unit_test(test_bf16_ties_to_even),
      cmocka_unit_test(test_all_reduce_every_dtype_and_op),
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_inputs_distinguish_ranks_and_indices),
      cmocka_unit_test(test_reductions_vary_with_the_index),
      cmocka_unit_test(test_quant_tolerance_bounds_two_shot),
      cmocka_unit_test(test_quant_tolerance_exact_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
