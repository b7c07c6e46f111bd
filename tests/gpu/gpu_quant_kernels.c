/*
 * The quantised two-shot kernel (src/coll/cuda/allreduce_quant.cu) on its
 * own, without the library: one process plays N ranks on one GPU, each with
 * its own IPC-layout buffer and stream, and calls the launchers directly,
 * one launch per all-reduce as the transport does (the kernel takes a
 * message larger than the regions chunk by chunk).  If gpu_quant (through the
 * library) fails and this passes, look at the transport; if both fail, at the
 * kernel.
 *
 *  - every format x f16/bf16/f32 x counts (1 value, 1 group, tails, several
 *    chunks) x grid limits (1, 3, the GPU's): every rank's output equals the
 *    CPU reference of qcoll's scheme bit for bit, within the error bound,
 *    nothing written outside the output, in place and out of place; the
 *    messages of several chunks with their rounds pipelined and one after
 *    the other;
 *  - rotated groups (rotate = 1): every format and type against the
 *    rotated CPU model bit for bit, tails and several chunks;
 *  - quantised, one-shot and two-shot launches interleaved on the streams;
 *  - a graph per rank of fill -> quantised all-reduce -> save -> bump,
 *    replayed 100 times with new inputs: every replay bit for bit;
 *  - the last rank never arrives: the others give up within the deadline.
 *
 *   gpu_quant_kernels [N...]      (default: 2 3 4 8)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/codec.h"
#include "coll/cuda/launch.h"
#include "gpu_test.h"
#include "ipc_world.h"
#include "quant_check.h"

/* Small buffers: messages of a few hundred thousand elements need several
 * launches. */
#define IPC_BYTES (512u << 10)
#define REPLAYS 100

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                        QCOLL_QUANT_FP8};
#define NFORMATS (sizeof FORMATS / sizeof FORMATS[0])
static const qcoll_dtype_t DTYPES[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};

/* Deadline of a waiting kernel: QCOLL_TEST_KERNEL_TIMEOUT seconds, default
 * 10 (every case finishes in well under a second when nothing is wrong). */
static double kernel_timeout_s(void) {
  const char *v = getenv("QCOLL_TEST_KERNEL_TIMEOUT");
  double s = v && *v ? atof(v) : 10.0;
  return s > 0 ? s : 10.0;
}

/* After a failed launch: every rank's epoch counters and phase-0/1 flags of
 * the first blocks, to tell a lost flag from ranks that disagree on the
 * epoch. */
static void dump_sync_state(world_t *w) {
  enum { BLOCKS = 4 };
  for (int r = 0; r < w->n; r++) {
    uint32_t epochs[BLOCKS],
        flags[BLOCKS * QCOLL_IPC_MAX_RANKS * QCOLL_IPC_PHASES];
    GT_CUDA(cudaMemcpy(epochs, w->buffers[r] + QCOLL_IPC_EPOCHS_OFFSET,
                       sizeof epochs, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(flags, w->buffers[r] + QCOLL_IPC_FLAGS_OFFSET,
                       sizeof flags, cudaMemcpyDeviceToHost));
    for (int b = 0; b < BLOCKS; b++) {
      char line[512];
      int len = snprintf(line, sizeof line, "rank %d block %d epoch %u flags",
                         r, b, epochs[b]);
      for (int p = 0; p < w->n && len < (int)sizeof line - 32; p++)
        len += snprintf(line + len, sizeof line - (size_t)len, " [w%d %u %u]",
                        p, flags[qcoll__ipc_flag_index(b, p, 0)],
                        flags[qcoll__ipc_flag_index(b, p, 1)]);
      gt_note("%s", line);
    }
  }
}

static void sync_all(world_t *w, const char *what) {
  for (int r = 0; r < w->n; r++) gt_wait_stream(w->streams[r], 120, what);
  if (world_report_error_words(w, what)) {
    dump_sync_state(w);
    world_reset(w); /* the next case starts clean */
  }
}

/* One quantised all-reduce on every rank: one launch each, the kernel
 * streaming a message larger than the regions through them chunk by
 * chunk. */
static void quant_all(world_t *w, char *const *send, size_t send_lead,
                      char *const *recv, size_t recv_lead, size_t count,
                      qcoll_dtype_t dtype, qcoll_quant_t fmt, int rotate) {
  for (int r = 0; r < w->n; r++)
    GT_CUDA(qcoll__cuda_all_reduce_quant_launch(
        &w->views[r], send[r] + send_lead, recv[r] + recv_lead, count, dtype,
        fmt, rotate, w->streams[r]));
}

/* Every rank's output against the reference, the bound and the guards. */
static void check_outputs(world_t *w, const qt_inputs_t *in, qcoll_quant_t fmt,
                          char *const *recv_base, size_t lead, bool guards,
                          const char *what) {
  size_t es = gt_dtype_size(in->dtype);
  size_t bytes = (in->count + 2 * GT_GUARD_ELEMS) * es;
  char *host = malloc(bytes), *expected = malloc(in->count * es + 4);
  if (!host || !expected || qt_expected(in, fmt, expected)) exit(1);
  for (int r = 0; r < w->n; r++) {
    char label[320];
    snprintf(label, sizeof label, "%s rank %d", what, r);
    GT_CUDA(cudaMemcpy(host, recv_base[r], bytes, cudaMemcpyDeviceToHost));
    if (gt_compare(expected, host + lead, in->count, in->dtype, label))
      continue;
    if (r == 0) {
      double worst, rms;
      qt_check_bound(in, fmt, host + lead, label, &worst, &rms);
    }
    if (!guards) continue;
    for (size_t b = 0; b < bytes; b++) {
      if (b >= lead && b < lead + in->count * es) continue;
      if ((unsigned char)host[b] != GT_GUARD_BYTE) {
        gt_fail("%s: byte %lld relative to recvbuf changed to 0x%02x", label,
                (long long)b - (long long)lead, (unsigned char)host[b]);
        break;
      }
    }
  }
  free(host);
  free(expected);
}

/* ---- exact results ------------------------------------------------------ */

static void run_case(world_t *w, qcoll_quant_t fmt, int rotate,
                     qcoll_dtype_t dtype, size_t count, bool in_place,
                     size_t offset, qt_data_t kind, uint32_t seed) {
  char what[256];
  snprintf(what, sizeof what, "N=%d %s%s %s count=%zu grid<=%d %s+%zu %s",
           w->n, qt_quant_name(fmt), rotate ? "+rot" : "",
           gt_dtype_name(dtype), count,
           w->views[0].max_grid, in_place ? "in-place" : "out-of-place", offset,
           kind == QT_DATA_SPECIAL ? "specials" : "generated");
  size_t es = gt_dtype_size(dtype);
  size_t bytes = (count + 2 * GT_GUARD_ELEMS) * es;
  size_t lead = (GT_GUARD_ELEMS + offset) * es;
  qt_inputs_t in;
  if (qt_inputs_make(&in, w->n, count, dtype, seed, kind)) exit(1);
  in.rotate = rotate;
  char *host = malloc(bytes), *send[QCOLL_IPC_MAX_RANKS],
       *recv[QCOLL_IPC_MAX_RANKS];
  if (!host) exit(1);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc((void **)&send[r], bytes));
    recv[r] = send[r];
    if (!in_place) GT_CUDA(cudaMalloc((void **)&recv[r], bytes));
    memset(host, GT_GUARD_BYTE, bytes);
    gt_upload(recv[r], host, bytes);
    qt_inputs_store(&in, r, host + lead);
    gt_upload(send[r], host, bytes);
  }
  quant_all(w, send, lead, recv, lead, count, dtype, fmt, rotate);
  sync_all(w, what);
  check_outputs(w, &in, fmt, recv, lead, !in_place, what);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaFree(send[r]));
    if (!in_place) GT_CUDA(cudaFree(recv[r]));
  }
  free(host);
  qt_inputs_free(&in);
}

static void test_exact(world_t *w) {
  int before = gt_failures(), cases = 0;
  uint32_t seed = 100;
  const size_t n = (size_t)w->n;
  const int limits[] = {w->full_grid, 1, 3};
  for (size_t f = 0; f < NFORMATS; f++) {
    const size_t chunk =
        qcoll__cuda_all_reduce_quant_chunk_elems(&w->views[0], FORMATS[f]);
    for (size_t d = 0; d < 3; d++) {
      const size_t counts[] = {1,    32,         33,           32 * n + 5,
                               5000, chunk + 45, 2 * chunk + 3};
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int limit = limits[(f + d + c) % 3];
        world_set_grid_limit(w, limit);
        /* Several chunks: rounds pipelined (QCOLL_QUANT_PIPELINE=2; the
         * default pipelines limited rounds only, which these are not) and
         * not. */
        for (int pipe = counts[c] > chunk ? 0 : 1; pipe <= 1; pipe++) {
          world_set_quant_pipeline(w, pipe ? 2 : 0);
          run_case(w, FORMATS[f], 0, DTYPES[d], counts[c], (c + d) % 2 == 1,
                   (c + f) % 3 == 2 ? 1 : 0,
                   counts[c] >= 160 && c % 2 ? QT_DATA_SPECIAL : QT_DATA_GEN,
                   seed++);
          cases++;
        }
      }
    }
  }
  world_set_grid_limit(w, w->full_grid);
  world_set_quant_pipeline(w, 1);
  gt_note("N=%d exact: %d cases %s", w->n, cases,
          gt_failures() == before ? "ok" : "FAILED");
}

/* Rotated groups: every format and type against ref_scheme_qcoll_rot, a
 * tail group, an odd count and several chunks, both placements. */
static void test_exact_rotated(world_t *w) {
  int before = gt_failures(), cases = 0;
  uint32_t seed = 500;
  for (size_t f = 0; f < NFORMATS; f++) {
    const size_t chunk =
        qcoll__cuda_all_reduce_quant_chunk_elems(&w->views[0], FORMATS[f]);
    for (size_t d = 0; d < 3; d++) {
      const size_t counts[] = {33, 5000, chunk + 45};
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        world_set_grid_limit(w, c == 1 ? 3 : w->full_grid);
        run_case(w, FORMATS[f], 1, DTYPES[d], counts[c], (c + d) % 2 == 1, 0,
                 c == 1 ? QT_DATA_SPECIAL : QT_DATA_GEN, seed++);
        cases++;
      }
    }
  }
  world_set_grid_limit(w, w->full_grid);
  gt_note("N=%d exact, rotated groups: %d cases %s", w->n, cases,
          gt_failures() == before ? "ok" : "FAILED");
}

/* ---- quantised and unquantised launches interleaved --------------------- */

static void test_mixed(world_t *w) {
  int before = gt_failures();
  const size_t qn = 150001, un = 200000;
  float *qsend[QCOLL_IPC_MAX_RANKS], *qrecv[QCOLL_IPC_MAX_RANKS];
  float *usend[QCOLL_IPC_MAX_RANKS], *urecv[QCOLL_IPC_MAX_RANKS];
  qt_inputs_t in;
  if (qt_inputs_make(&in, w->n, qn, QCOLL_F32, 77, QT_DATA_GEN)) exit(1);
  float *host = malloc(un * sizeof(float)),
        *expected = malloc(un * sizeof(float));
  if (!host || !expected) exit(1);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc((void **)&qsend[r], qn * 4));
    GT_CUDA(cudaMalloc((void **)&qrecv[r], (qn + 2 * GT_GUARD_ELEMS) * 4));
    GT_CUDA(cudaMalloc((void **)&usend[r], un * 4));
    GT_CUDA(cudaMalloc((void **)&urecv[r], un * 4));
    qt_inputs_store(&in, r, host);
    gt_upload(qsend[r], host, qn * 4);
    gt_fill_inputs(host, un, GT_SMALL_INTS, r, 9, QCOLL_F32);
    gt_upload(usend[r], host, un * 4);
  }
  gt_reference(expected, un, GT_SMALL_INTS, w->n, 9, QCOLL_F32, QCOLL_SUM);
  /* Rounds of: quantised, two-shot, quantised (other format), one-shot. */
  const int rounds = 20;
  /* The smaller chunk (one-shot's) serves both algorithms. */
  const size_t chunk = qcoll__cuda_all_reduce_chunk_elems(
      &w->views[0], QCOLL_IPC_ONESHOT, QCOLL_F32);
  char *const *qs = (char *const *)qsend, *const *qr = (char *const *)qrecv;
  for (int k = 0; k < rounds; k++) {
    quant_all(w, qs, 0, qr, GT_GUARD_ELEMS * 4, qn, QCOLL_F32,
              QCOLL_QUANT_INT6, 0);
    for (size_t off = 0; off < un; off += chunk)
      for (int r = 0; r < w->n; r++)
        GT_CUDA(qcoll__cuda_all_reduce_launch(
            &w->views[r], k % 2 ? QCOLL_IPC_TWOSHOT : QCOLL_IPC_ONESHOT,
            usend[r] + off, urecv[r] + off, un - off < chunk ? un - off : chunk,
            QCOLL_F32, QCOLL_SUM, w->streams[r]));
    quant_all(w, qs, 0, qr, GT_GUARD_ELEMS * 4, qn, QCOLL_F32,
              QCOLL_QUANT_INT6, 0);
  }
  sync_all(w, "mixed launches");
  char what[128];
  snprintf(what, sizeof what, "N=%d mixed launches, quantised int6 f32", w->n);
  check_outputs(w, &in, QCOLL_QUANT_INT6, (char *const *)qrecv,
                GT_GUARD_ELEMS * 4, false, what);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMemcpy(host, urecv[r], un * 4, cudaMemcpyDeviceToHost));
    snprintf(what, sizeof what, "N=%d mixed launches, unquantised rank %d",
             w->n, r);
    gt_compare(expected, host, un, QCOLL_F32, what);
  }
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaFree(qsend[r]));
    GT_CUDA(cudaFree(qrecv[r]));
    GT_CUDA(cudaFree(usend[r]));
    GT_CUDA(cudaFree(urecv[r]));
  }
  free(host);
  free(expected);
  qt_inputs_free(&in);
  gt_note("N=%d mixed quantised/unquantised launches (%d rounds): %s", w->n,
          rounds, gt_failures() == before ? "ok" : "FAILED");
}

/* ---- graph replay -------------------------------------------------------- */

static void test_graph(world_t *w, qcoll_quant_t fmt, qcoll_dtype_t dtype,
                       size_t count, uint32_t seed) {
  int before = gt_failures();
  const size_t bytes = count * gt_dtype_size(dtype);
  void *send[QCOLL_IPC_MAX_RANKS], *recv[QCOLL_IPC_MAX_RANKS],
      *history[QCOLL_IPC_MAX_RANKS];
  unsigned *counter[QCOLL_IPC_MAX_RANKS];
  cudaGraphExec_t exec[QCOLL_IPC_MAX_RANKS];
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc(&send[r], bytes));
    GT_CUDA(cudaMalloc(&recv[r], bytes));
    GT_CUDA(cudaMalloc(&history[r], bytes * REPLAYS));
    GT_CUDA(cudaMalloc((void **)&counter[r], sizeof(unsigned)));
    GT_CUDA(cudaMemset(counter[r], 0, sizeof(unsigned)));
  }
  GT_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; r++) {
    cudaStream_t s = w->streams[r];
    cudaGraph_t graph;
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    GT_CUDA(qt_fill_launch(send[r], count, dtype, r, seed, counter[r], s));
    GT_CUDA(qcoll__cuda_all_reduce_quant_launch(&w->views[r], send[r], recv[r],
                                                count, dtype, fmt, 0, s));
    GT_CUDA(qt_save_launch(history[r], recv[r], bytes, counter[r], REPLAYS, s));
    GT_CUDA(gt_bump_launch(counter[r], s));
    GT_CUDA(cudaStreamEndCapture(s, &graph));
    GT_CUDA(cudaGraphInstantiate(&exec[r], graph, 0));
    GT_CUDA(cudaGraphDestroy(graph));
  }
  double t0 = gt_now();
  for (int k = 0; k < REPLAYS; k++)
    for (int r = 0; r < w->n; r++)
      GT_CUDA(cudaGraphLaunch(exec[r], w->streams[r]));
  char what[200];
  snprintf(what, sizeof what, "N=%d graph x%d, %s %s count=%zu", w->n, REPLAYS,
           qt_quant_name(fmt), gt_dtype_name(dtype), count);
  sync_all(w, what);
  double dt = gt_now() - t0;
  char *host = malloc(bytes + 4), *expected = malloc(bytes + 4);
  if (!host || !expected) exit(1);
  for (int k = 0; k < REPLAYS && gt_failures() - before <= 10; k++) {
    qt_inputs_t in;
    if (qt_inputs_make(&in, w->n, count, dtype, seed + (uint32_t)k,
                       QT_DATA_GEN) ||
        qt_expected(&in, fmt, expected))
      exit(1);
    qt_inputs_free(&in);
    for (int r = 0; r < w->n; r++) {
      char label[260];
      snprintf(label, sizeof label, "%s, rank %d replay %d", what, r, k);
      GT_CUDA(cudaMemcpy(host, (char *)history[r] + (size_t)k * bytes, bytes,
                         cudaMemcpyDeviceToHost));
      gt_compare(expected, host, count, dtype, label);
    }
  }
  if (gt_failures() == before)
    gt_note(
        "%s: ok, every replay bit-exact on every rank (%.1f us per replay "
        "of all ranks)",
        what, dt * 1e6 / REPLAYS);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaGraphExecDestroy(exec[r]));
    GT_CUDA(cudaFree(send[r]));
    GT_CUDA(cudaFree(recv[r]));
    GT_CUDA(cudaFree(history[r]));
    GT_CUDA(cudaFree(counter[r]));
  }
  free(host);
  free(expected);
}

/* ---- deadline ----------------------------------------------------------- */

static void test_missing_peer(world_t *w) {
  const double timeout = 0.25;
  const size_t count = 40000;
  float *buf[QCOLL_IPC_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    GT_CUDA(cudaMalloc((void **)&buf[r], count * sizeof(float)));
  GT_CUDA(cudaDeviceSynchronize());
  world_set_timeout(w, timeout);
  double t0 = gt_now();
  for (int r = 0; r < w->n - 1; r++)
    GT_CUDA(qcoll__cuda_all_reduce_quant_launch(
        &w->views[r], buf[r], buf[r], count, QCOLL_F32, QCOLL_QUANT_INT8, 0,
        w->streams[r]));
  for (int r = 0; r < w->n - 1; r++)
    gt_wait_stream(w->streams[r], 10, "missing peer");
  double dt = gt_now() - t0;
  char what[64];
  snprintf(what, sizeof what, "N=%d quantised, missing peer", w->n);
  world_expect_missing_peer(w, what, dt, timeout);
  for (int r = 0; r < w->n; r++) GT_CUDA(cudaFree(buf[r]));
  world_set_timeout(w, kernel_timeout_s());
  world_reset(w);
}

int main(int argc, char **argv) {
  gt_skip_without_gpu("gpu_quant_kernels");
  GT_CUDA(cudaSetDevice(0));
  int sizes[16];
  int nsizes = world_sizes(argc, argv, 1, sizes, 16);
  for (int i = 0; i < nsizes; i++) {
    int n = sizes[i];
    world_t w;
    world_init(&w, n, IPC_BYTES, kernel_timeout_s());
    gt_note(
        "N=%d: grid limit %d blocks per rank, regions of %zu bytes, int8 "
        "chunks of %zu elements",
        n, w.full_grid, w.views[0].region_bytes,
        qcoll__cuda_all_reduce_quant_chunk_elems(&w.views[0],
                                                 QCOLL_QUANT_INT8));
    test_exact(&w);
    test_exact_rotated(&w);
    test_mixed(&w);
    test_graph(&w, QCOLL_QUANT_INT8, QCOLL_BF16, 250001, 300); /* 2 chunks */
    test_graph(&w, QCOLL_QUANT_FP8, QCOLL_F16, 3333, 400);
    if (n > 1) test_missing_peer(&w); /* one rank has no peer to miss */
    world_free(&w);
  }
  if (gt_failures()) {
    gt_note("%d failure(s)", gt_failures());
    return 1;
  }
  gt_note("all passed");
  return 0;
}
