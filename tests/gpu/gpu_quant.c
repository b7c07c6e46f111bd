/*
 * Quantised all-reduce (qcoll_all_reduce_ex with opts.quant = fp8, int8,
 * int6 or int4) on GPU buffers through the public API, every rank a process
 * started by qcoll-run, all on one GPU when only one is present.  On every
 * rank:
 *
 *  (a) exact: the result equals the CPU reference of qcoll's scheme
 *      (tests/codec/ref_scheme.c, its f32 result rounded to the element
 *      type) bit for bit, for every format x f16/bf16/f32 and counts from
 *      one value and one group through tails to several IPC chunks
 *      (QCOLL_IPC_BYTES=1M makes chunks small), in place and out of place,
 *      pointers offset by one element, with inf, NaN, f16 overflow, all-zero
 *      and subnormal groups; the same bits on every rank (hashes
 *      all-gathered); bytes around the output untouched; the error against
 *      the exact sum within the bound stated in quant_check.h;
 *      The same over rotated groups (opts.quant_rotate) against the
 *      rotated CPU model, bit for bit.
 *  (b) refused: min and max with quantisation, and quantisation with a
 *      forced one-shot, give QCOLL_ERR_UNSUPPORTED with a reason, and the
 *      communicator works afterwards;
 *  (c) mixed: quantised and unquantised calls (one-shot, two-shot) of
 *      different sizes enqueued back to back on one stream, then checked:
 *      the kernels share the IPC regions without a closing barrier;
 *  (d) graph: fill -> quantised all-reduce -> save captured once and
 *      replayed 100 times, each replay with new inputs (the seed comes from
 *      a device counter): every replay's output bit for bit and within the
 *      bound, then an eager call on the same communicator.
 *
 * Sets QCOLL_QUANT_MIN_BYTES=0 so that small messages are quantised too.
 * Every failure line names the case (format, dtype, count, placement) and
 * the first differing elements with their bits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/codec.h"
#include "coll/cuda/launch.h"
#include "gpu_test.h"
#include "quant_check.h"

/* Largest message of the exact cases: the reference runs on every rank. */
#define MAX_CASE_ELEMS ((size_t)2500000)
/* Largest message of the graph cases (100 references each). */
#define MAX_GRAPH_ELEMS ((size_t)600000)
#define REPLAYS 100

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                        QCOLL_QUANT_FP8};
#define NFORMATS (sizeof FORMATS / sizeof FORMATS[0])
static const qcoll_dtype_t DTYPES[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};

static qcoll_comm_t comm;
static cudaStream_t stream;
static char *dev_send, *dev_recv; /* capacity bytes each */
static char *host_buf, *host_expected;
static size_t capacity;
static size_t ipc_bytes;

/* Elements of one round of the quantised kernel for this world size
 * (quant_layout.h): a larger message is one launch of several rounds. */
static size_t chunk_elems(qcoll_quant_t fmt) {
  return qcoll__qlayout_chunk_elems(qcoll__ipc_region_bytes(ipc_bytes),
                                    gt_nranks, qcoll__codec_group_bytes(fmt));
}

/* Whether the calls of quant_call rotate their groups (opts.quant_rotate):
 * set around the rotated pass of (a). */
static int rotate_groups;

static qcoll_status_t quant_call(const void *send, void *recv, size_t count,
                                 qcoll_dtype_t dtype, qcoll_op_t op,
                                 qcoll_quant_t quant, qcoll_algo_t algo) {
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = algo;
  opts.quant = quant;
  opts.quant_rotate = rotate_groups;
  return qcoll_all_reduce_ex(send, recv, count, dtype, op, comm, stream, &opts);
}

/* Bit-for-bit against the reference, the bound, the same on all ranks.
 * Returns the number of failures. */
static int check_result(const qt_inputs_t *in, qcoll_quant_t fmt,
                        const void *got, const char *what, bool report) {
  int before = gt_failures();
  if (qt_expected(in, fmt, host_expected)) {
    gt_fail("%s: out of host memory for the reference", what);
    return 1;
  }
  gt_compare(host_expected, got, in->count, in->dtype, what);
  double worst = 0, rms = 0;
  qt_check_bound(in, fmt, got, what, &worst, &rms);
  gt_check_same_on_all_ranks(comm, got, in->count * qcoll_dtype_size(in->dtype),
                             what);
  if (report && gt_rank == 0 && gt_failures() == before)
    gt_note(
        "%s: ok (bit-exact, same on all ranks; rms error %.2e of the "
        "exact sum's rms, worst error %.2f of its bound)",
        what, rms, worst);
  return gt_failures() - before;
}

/* ---- (a) exact ----------------------------------------------------------- */

static void run_case(qcoll_quant_t fmt, qcoll_dtype_t dtype, size_t count,
                     const gt_placement_t *pl, qt_data_t kind, uint32_t seed,
                     qcoll_algo_t algo) {
  char what[256];
  snprintf(what, sizeof what, "%s%s %s count=%zu %s %s algo=%s",
           qt_quant_name(fmt), rotate_groups ? "+rot" : "",
           qcoll_dtype_name(dtype), count, pl->name,
           kind == QT_DATA_SPECIAL ? "specials" : "generated",
           qcoll_algo_name(algo));
  size_t es = qcoll_dtype_size(dtype);
  size_t bytes = (count + 2 * GT_GUARD_ELEMS) * es;
  if (bytes > capacity) {
    gt_fail("%s: needs %zu bytes, test buffers hold %zu", what, bytes,
            capacity);
    return;
  }
  qt_inputs_t in;
  if (qt_inputs_make(&in, gt_nranks, count, dtype, seed, kind)) {
    gt_fail("%s: out of host memory for the inputs", what);
    exit(1);
  }
  in.rotate = rotate_groups;
  char *send_base = dev_send, *recv_base = pl->in_place ? dev_send : dev_recv;
  memset(host_buf, GT_GUARD_BYTE, bytes);
  gt_upload(recv_base, host_buf, bytes);
  qt_inputs_store(&in, gt_rank,
                  host_buf + (GT_GUARD_ELEMS + pl->send_offset) * es);
  gt_upload(send_base, host_buf, bytes);
  size_t recv_lead =
      (GT_GUARD_ELEMS + (pl->in_place ? pl->send_offset : pl->recv_offset)) *
      es;
  const void *send = send_base + (GT_GUARD_ELEMS + pl->send_offset) * es;
  void *recv = recv_base + recv_lead;

  qcoll_status_t st =
      quant_call(send, recv, count, dtype, QCOLL_SUM, fmt, algo);
  if (st != QCOLL_OK) {
    gt_fail("%s: qcoll_all_reduce_ex returned %s: %s", what,
            qcoll_status_string(st), gt_last_error(comm));
    exit(1); /* the other ranks would wait for this one */
  }
  gt_wait_stream(stream, 120, what);
  GT_CUDA(cudaMemcpy(host_buf, recv_base, bytes, cudaMemcpyDeviceToHost));
  check_result(&in, fmt, host_buf + recv_lead, what, true);
  if (!pl->in_place) {
    for (size_t b = 0; b < bytes; b++) {
      if (b >= recv_lead && b < recv_lead + count * es) continue;
      if ((unsigned char)host_buf[b] != GT_GUARD_BYTE) {
        gt_fail(
            "%s: byte %lld relative to recvbuf changed to 0x%02x "
            "(outside the output)",
            what, (long long)b - (long long)recv_lead,
            (unsigned char)host_buf[b]);
        break;
      }
    }
  }
  qt_inputs_free(&in);
}

static void test_exact(void) {
  int cases = 0, before = gt_failures(), skipped_multi = 0;
  uint32_t seed = 11;
  const size_t n = (size_t)gt_nranks;
  for (size_t f = 0; f < NFORMATS; f++) {
    const size_t chunk = chunk_elems(FORMATS[f]);
    if (gt_rank == 0)
      gt_note(
          "%s: one launch holds up to %zu elements (QCOLL_IPC_BYTES %zu, "
          "%d ranks)",
          qt_quant_name(FORMATS[f]), chunk, ipc_bytes, gt_nranks);
    for (size_t d = 0; d < 3; d++) {
      const size_t counts[] = {1,
                               32,
                               33,
                               32 * n,
                               32 * n * 3 + 17,
                               100003,
                               chunk + 45,
                               2 * chunk + 32 * 7 + 3};
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        if (counts[c] > MAX_CASE_ELEMS) {
          skipped_multi++;
          continue;
        }
        qt_data_t kind =
            counts[c] >= 160 && c % 2 == 1 ? QT_DATA_SPECIAL : QT_DATA_GEN;
        if (counts[c] == 100003) kind = QT_DATA_SPECIAL;
        run_case(FORMATS[f], DTYPES[d], counts[c],
                 &gt_placements[(f + d + c) % gt_placement_count], kind, seed++,
                 c % 2 ? QCOLL_ALGO_AUTO : QCOLL_ALGO_TWOSHOT);
        cases++;
      }
    }
  }
  if (skipped_multi && gt_rank == 0)
    gt_note(
        "%d multi-chunk case(s) skipped: chunks of this QCOLL_IPC_BYTES "
        "exceed %zu elements (the QCOLL_IPC_BYTES=1M runs cover them)",
        skipped_multi, MAX_CASE_ELEMS);
  gt_note("(a) exact: %d cases, %d failure(s)", cases, gt_failures() - before);
}

/* (a) over rotated groups (opts.quant_rotate): every format and type against
 * the rotated CPU model, a tail, specials and, where the buffers hold them,
 * several IPC chunks. */
static void test_exact_rotated(void) {
  int cases = 0, before = gt_failures();
  uint32_t seed = 900;
  rotate_groups = 1;
  for (size_t f = 0; f < NFORMATS; f++) {
    const size_t counts[] = {33, 32 * (size_t)gt_nranks * 3 + 17, 100003,
                             chunk_elems(FORMATS[f]) + 45};
    for (size_t d = 0; d < 3; d++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        if (counts[c] > MAX_CASE_ELEMS) continue;
        run_case(FORMATS[f], DTYPES[d], counts[c],
                 &gt_placements[(f + d + c) % gt_placement_count],
                 c == 2 ? QT_DATA_SPECIAL : QT_DATA_GEN, seed++,
                 c % 2 ? QCOLL_ALGO_AUTO : QCOLL_ALGO_TWOSHOT);
        cases++;
      }
  }
  rotate_groups = 0;
  gt_note("(a) exact, rotated groups: %d cases, %d failure(s)", cases,
          gt_failures() - before);
}

/* ---- (b) refused ------------------------------------------------------- */

static void expect_unsupported(qcoll_status_t st, const char *what) {
  if (st != QCOLL_ERR_UNSUPPORTED)
    gt_fail("%s: expected %s, got %s (%s)", what,
            qcoll_status_string(QCOLL_ERR_UNSUPPORTED), qcoll_status_string(st),
            gt_last_error(comm));
  else if (gt_rank == 0)
    gt_note("%s refused as expected: %s", what, gt_last_error(comm));
}

static void test_refused(void) {
  int before = gt_failures();
  const size_t count = 4096;
  expect_unsupported(quant_call(dev_send, dev_recv, count, QCOLL_F16, QCOLL_MAX,
                                QCOLL_QUANT_INT8, QCOLL_ALGO_TWOSHOT),
                     "int8 max forced two-shot");
  expect_unsupported(quant_call(dev_send, dev_recv, count, QCOLL_BF16,
                                QCOLL_MIN, QCOLL_QUANT_FP8, QCOLL_ALGO_TWOSHOT),
                     "fp8 min forced two-shot");
  expect_unsupported(quant_call(dev_send, dev_recv, count, QCOLL_F32, QCOLL_SUM,
                                QCOLL_QUANT_INT4, QCOLL_ALGO_ONESHOT),
                     "int4 sum forced one-shot");
  /* Nothing was enqueued, and the communicator still works. */
  run_case(QCOLL_QUANT_INT4, QCOLL_F16, 1000, &gt_placements[0], QT_DATA_GEN, 5,
           QCOLL_ALGO_TWOSHOT);
  gt_note("(b) refused: %d failure(s)", gt_failures() - before);
}

/* ---- (c) mixed ----------------------------------------------------------- */

typedef struct mixed_call {
  qcoll_quant_t quant; /* QCOLL_QUANT_NONE: unquantised, exact check */
  qcoll_dtype_t dtype;
  size_t count;
  qcoll_algo_t algo;
  bool in_place;
  gt_pattern_t pattern; /* unquantised inputs */
} mixed_call_t;

static void test_mixed(void) {
  int before = gt_failures();
  const size_t big = chunk_elems(QCOLL_QUANT_FP8) + 5 <= MAX_CASE_ELEMS
                         ? chunk_elems(QCOLL_QUANT_FP8) + 5
                         : 300001;
  const mixed_call_t calls[] = {
      {QCOLL_QUANT_INT4, QCOLL_F16, 50000, QCOLL_ALGO_AUTO, false, GT_MIXED},
      {QCOLL_QUANT_NONE, QCOLL_F32, 1000, QCOLL_ALGO_ONESHOT, false,
       GT_SMALL_INTS},
      {QCOLL_QUANT_FP8, QCOLL_BF16, big, QCOLL_ALGO_TWOSHOT, false, GT_MIXED},
      {QCOLL_QUANT_NONE, QCOLL_F16, 300000, QCOLL_ALGO_TWOSHOT, true,
       GT_SMALL_INTS},
      {QCOLL_QUANT_INT8, QCOLL_F32, 77777, QCOLL_ALGO_AUTO, false, GT_MIXED},
      {QCOLL_QUANT_INT6, QCOLL_BF16, 4097, QCOLL_ALGO_TWOSHOT, true, GT_MIXED},
      {QCOLL_QUANT_NONE, QCOLL_BF16, 12345, QCOLL_ALGO_TWOSHOT, false,
       GT_MIXED},
      {QCOLL_QUANT_INT8, QCOLL_F16, 65536, QCOLL_ALGO_TWOSHOT, true, GT_MIXED},
      {QCOLL_QUANT_NONE, QCOLL_F32, 70000, QCOLL_ALGO_ONESHOT, true, GT_MIXED},
  };
  enum { CALLS = sizeof calls / sizeof calls[0] };
  for (int round = 0; round < 2; round++) {
    void *send[CALLS], *recv[CALLS];
    qt_inputs_t in[CALLS];
    uint32_t seed = 500 + 50 * (uint32_t)round;
    for (int k = 0; k < CALLS; k++) {
      const mixed_call_t *c = &calls[k];
      size_t bytes = c->count * qcoll_dtype_size(c->dtype);
      GT_CUDA(cudaMalloc(&send[k], bytes));
      recv[k] = send[k];
      if (!c->in_place) GT_CUDA(cudaMalloc(&recv[k], bytes));
      char *host = malloc(bytes);
      if (!host) exit(1);
      if (c->quant == QCOLL_QUANT_NONE) {
        gt_fill_inputs(host, c->count, c->pattern, gt_rank, seed + k, c->dtype);
      } else {
        if (qt_inputs_make(&in[k], gt_nranks, c->count, c->dtype, seed + k,
                           QT_DATA_GEN))
          exit(1);
        qt_inputs_store(&in[k], gt_rank, host);
      }
      gt_upload(send[k], host, bytes);
      free(host);
    }
    /* Back to back, no synchronisation in between. */
    for (int k = 0; k < CALLS; k++) {
      const mixed_call_t *c = &calls[k];
      qcoll_status_t st = quant_call(send[k], recv[k], c->count, c->dtype,
                                     QCOLL_SUM, c->quant, c->algo);
      if (st != QCOLL_OK) {
        gt_fail("mixed round %d call %d: %s", round, k, gt_last_error(comm));
        exit(1);
      }
    }
    gt_wait_stream(stream, 120, "mixed calls");
    for (int k = 0; k < CALLS; k++) {
      const mixed_call_t *c = &calls[k];
      char what[200];
      snprintf(what, sizeof what,
               "mixed round %d call %d: %s %s count=%zu %s%s", round, k,
               c->quant == QCOLL_QUANT_NONE ? "unquantised"
                                            : qt_quant_name(c->quant),
               qcoll_dtype_name(c->dtype), c->count, qcoll_algo_name(c->algo),
               c->in_place ? " in place" : "");
      size_t bytes = c->count * qcoll_dtype_size(c->dtype);
      GT_CUDA(cudaMemcpy(host_buf, recv[k], bytes, cudaMemcpyDeviceToHost));
      if (c->quant == QCOLL_QUANT_NONE) {
        gt_reference(host_expected, c->count, c->pattern, gt_nranks, seed + k,
                     c->dtype, QCOLL_SUM);
        gt_compare(host_expected, host_buf, c->count, c->dtype, what);
      } else {
        check_result(&in[k], c->quant, host_buf, what, false);
        qt_inputs_free(&in[k]);
      }
      GT_CUDA(cudaFree(send[k]));
      if (!c->in_place) GT_CUDA(cudaFree(recv[k]));
    }
  }
  gt_note(
      "(c) mixed quantised and unquantised calls, 2 rounds of %d: %d "
      "failure(s)",
      (int)CALLS, gt_failures() - before);
}

/* ---- (d) graph ----------------------------------------------------------- */

static void graph_case(qcoll_quant_t fmt, qcoll_dtype_t dtype, size_t count,
                       uint32_t seed) {
  char what[200];
  snprintf(what, sizeof what, "graph x%d: %s %s count=%zu (one launch of %s)",
           REPLAYS, qt_quant_name(fmt), qcoll_dtype_name(dtype), count,
           count > chunk_elems(fmt) ? "several rounds" : "one round");
  const size_t bytes = count * qcoll_dtype_size(dtype);
  void *send, *recv, *history;
  unsigned *counter;
  GT_CUDA(cudaMalloc(&send, bytes));
  GT_CUDA(cudaMalloc(&recv, bytes));
  GT_CUDA(cudaMalloc(&history, bytes * REPLAYS));
  GT_CUDA(cudaMalloc((void **)&counter, sizeof *counter));
  GT_CUDA(cudaMemset(counter, 0, sizeof *counter));
  GT_CUDA(cudaDeviceSynchronize());

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_CUDA(qt_fill_launch(send, count, dtype, gt_rank, seed, counter, stream));
  qcoll_status_t st =
      quant_call(send, recv, count, dtype, QCOLL_SUM, fmt, QCOLL_ALGO_AUTO);
  if (st != QCOLL_OK) {
    gt_fail("%s: qcoll_all_reduce_ex during capture returned %s: %s", what,
            qcoll_status_string(st), gt_last_error(comm));
    exit(1);
  }
  GT_CUDA(qt_save_launch(history, recv, bytes, counter, REPLAYS, stream));
  GT_CUDA(gt_bump_launch(counter, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  double t0 = gt_now();
  for (int k = 0; k < REPLAYS; k++) GT_CUDA(cudaGraphLaunch(exec, stream));
  gt_wait_stream(stream, 300, what);
  double dt = gt_now() - t0;

  int before = gt_failures();
  unsigned c = 0;
  GT_CUDA(cudaMemcpy(&c, counter, sizeof c, cudaMemcpyDeviceToHost));
  if (c != REPLAYS)
    gt_fail("%s: the counter is %u after the replays, expected %d", what, c,
            REPLAYS);
  char *host = malloc(bytes * REPLAYS);
  if (!host) exit(1);
  GT_CUDA(cudaMemcpy(host, history, bytes * REPLAYS, cudaMemcpyDeviceToHost));
  gt_check_same_on_all_ranks(comm, host, bytes * REPLAYS, what);
  double worst_all = 0;
  for (int k = 0; k < REPLAYS && gt_failures() - before < 10; k++) {
    char label[240];
    snprintf(label, sizeof label, "%s, replay %d (seed %u)", what, k,
             seed + (unsigned)k);
    qt_inputs_t in;
    if (qt_inputs_make(&in, gt_nranks, count, dtype, seed + (uint32_t)k,
                       QT_DATA_GEN))
      exit(1);
    if (qt_expected(&in, fmt, host_expected)) exit(1);
    gt_compare(host_expected, host + (size_t)k * bytes, count, dtype, label);
    double worst = 0, rms = 0;
    qt_check_bound(&in, fmt, host + (size_t)k * bytes, label, &worst, &rms);
    if (worst > worst_all) worst_all = worst;
    qt_inputs_free(&in);
  }
  free(host);

  /* The epochs the replays advanced still agree with an eager call. */
  {
    char label[240];
    snprintf(label, sizeof label, "%s, eager call after the replays", what);
    qt_inputs_t in;
    if (qt_inputs_make(&in, gt_nranks, count, dtype, seed + 7777u, QT_DATA_GEN))
      exit(1);
    qt_inputs_store(&in, gt_rank, host_buf);
    gt_upload(send, host_buf, bytes);
    if (quant_call(send, recv, count, dtype, QCOLL_SUM, fmt,
                   QCOLL_ALGO_TWOSHOT) != QCOLL_OK) {
      gt_fail("%s: %s", label, gt_last_error(comm));
      exit(1);
    }
    gt_wait_stream(stream, 60, label);
    GT_CUDA(cudaMemcpy(host_buf, recv, bytes, cudaMemcpyDeviceToHost));
    check_result(&in, fmt, host_buf, label, false);
    qt_inputs_free(&in);
  }
  if (gt_failures() == before)
    gt_note(
        "%s: ok, every replay bit-exact and within its bound (worst "
        "%.2f of the bound), %.1f us per replay",
        what, worst_all, dt * 1e6 / REPLAYS);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(history));
  GT_CUDA(cudaFree(counter));
}

static void test_graph(void) {
  int before = gt_failures();
  /* Two launches per replay where QCOLL_IPC_BYTES is small (1M). */
  size_t multi = chunk_elems(QCOLL_QUANT_INT8) + 4097;
  if (multi > MAX_GRAPH_ELEMS) multi = MAX_GRAPH_ELEMS;
  graph_case(QCOLL_QUANT_INT4, QCOLL_BF16, 70001, 1000);
  graph_case(QCOLL_QUANT_INT6, QCOLL_F16, 33333, 2000);
  graph_case(QCOLL_QUANT_INT8, QCOLL_BF16, multi, 3000);
  graph_case(QCOLL_QUANT_FP8, QCOLL_F16, 50000, 4000);
  graph_case(QCOLL_QUANT_INT8, QCOLL_F32, 20000, 5000);
  gt_note("(d) graph replay: %d failure(s)", gt_failures() - before);
}

int main(void) {
  gt_skip_without_gpu("gpu_quant");
  /* Quantise every size, so one group and tails are exercised, also where
   * the ranks share a GPU (whose floors would run most of them exact). */
  setenv("QCOLL_QUANT_MIN_BYTES", "0", 1);
  setenv("QCOLL_QUANT_SHARED_GPU_FLOORS", "0", 1);
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ipc_bytes = gt_env_bytes("QCOLL_IPC_BYTES", (size_t)64 << 20);
  capacity = (MAX_CASE_ELEMS + 2 * GT_GUARD_ELEMS) * 4;
  GT_CUDA(cudaMalloc((void **)&dev_send, capacity));
  GT_CUDA(cudaMalloc((void **)&dev_recv, capacity));
  host_buf = malloc(capacity);
  host_expected = malloc(capacity);
  if (!host_buf || !host_expected) {
    gt_fail("out of host memory (%zu bytes)", capacity);
    return 1;
  }
  gt_note(
      "device %d, QCOLL_IPC_BYTES %zu, QCOLL_QUANT_MIN_BYTES 0, "
      "QCOLL_QUANT_SHARED_GPU_FLOORS 0",
      gt_device(), ipc_bytes);

  /* Forced two-shot first: if the IPC path cannot serve, this stops here
   * with the reason instead of every later case failing. */
  run_case(QCOLL_QUANT_INT8, QCOLL_F16, 4096, &gt_placements[0], QT_DATA_GEN, 1,
           QCOLL_ALGO_TWOSHOT);
  test_refused();
  test_exact();
  test_exact_rotated();
  test_mixed();
  test_graph();

  gt_check_async_and_destroy(comm);
  GT_CUDA(cudaFree(dev_send));
  GT_CUDA(cudaFree(dev_recv));
  gt_note(gt_failures() ? "FAILED: %d failure(s)" : "all passed (%d failures)",
          gt_failures());
  return gt_failures() ? 1 : 0;
}
