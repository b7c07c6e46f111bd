/*
 * The all-reduce kernels on their own, without the library around them:
 * one process plays N ranks on one GPU, each with its own IPC-layout buffer
 * and stream, and calls the launchers directly (ranks of one process reuse
 * each other's pointers, as the transport does).  Covers every dtype x op x
 * algorithm, tails and unaligned pointers, in place, messages spread over
 * several launches, grids that change from call to call, graph replay with a
 * new value every replay, and the device-side deadline and abort.
 *
 *   gpu_kernels [N...]      (default: 2 3 4 8)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/cuda/launch.h"
#include "gpu_test.h"
#include "ipc_world.h"

#define IPC_BYTES \
  (2u << 20) /* small, so large messages need several launches */

/* Enqueue one all-reduce on every rank, in launches of at most one region
 * (as the transport does). */
static void all_reduce(world_t *w, qcoll__ipc_algo_t algo, void *const *send,
                       void *const *recv, size_t count, qcoll_dtype_t dtype,
                       qcoll_op_t op, cudaStream_t *streams) {
  size_t es = gt_dtype_size(dtype);
  size_t chunk = qcoll__cuda_all_reduce_chunk_elems(&w->views[0], algo, dtype);
  for (size_t off = 0; off < count; off += chunk) {
    size_t m = count - off < chunk ? count - off : chunk;
    for (int r = 0; r < w->n; r++)
      GT_CUDA(qcoll__cuda_all_reduce_launch(
          &w->views[r], algo, (const char *)send[r] + off * es,
          (char *)recv[r] + off * es, m, dtype, op,
          streams ? streams[r] : w->streams[r]));
  }
}

static void sync_all(world_t *w, const char *what) {
  for (int r = 0; r < w->n; r++) gt_wait_stream(w->streams[r], 60, what);
}

/* ---- exact results ---------------------------------------------------- */

static const char *algo_name(qcoll__ipc_algo_t a) {
  return a == QCOLL_IPC_ONESHOT ? "one-shot" : "two-shot";
}

/* One case: inputs from the pattern, results compared bit for bit with the
 * reference on every rank, and the bytes around each output untouched. */
static void run_case(world_t *w, qcoll__ipc_algo_t algo, qcoll_dtype_t dtype,
                     qcoll_op_t op, size_t count, const gt_placement_t *pl,
                     gt_pattern_t pattern, uint32_t seed) {
  char what[256];
  snprintf(what, sizeof what, "N=%d %s %s/%s count=%zu %s %s", w->n,
           algo_name(algo), gt_dtype_name(dtype), gt_op_name(op), count,
           pl->name,
           pattern == GT_SMALL_INTS ? "small-ints" : "mixed-magnitudes");
  size_t es = gt_dtype_size(dtype);
  size_t total = count + 2 * GT_GUARD_ELEMS;
  size_t bytes = total * es;
  char *host = malloc(bytes), *expected = malloc(count * es),
       *guard = malloc(bytes);
  char *dev_send[QCOLL_IPC_MAX_RANKS], *dev_recv[QCOLL_IPC_MAX_RANKS];
  void *send[QCOLL_IPC_MAX_RANKS], *recv[QCOLL_IPC_MAX_RANKS];
  memset(guard, GT_GUARD_BYTE, bytes);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc((void **)&dev_send[r], bytes));
    dev_recv[r] = dev_send[r];
    if (!pl->in_place) GT_CUDA(cudaMalloc((void **)&dev_recv[r], bytes));
    gt_upload(dev_recv[r], guard, bytes);
    memcpy(host, guard, bytes);
    gt_fill_inputs(host + (GT_GUARD_ELEMS + pl->send_offset) * es, count,
                   pattern, r, seed, dtype);
    gt_upload(dev_send[r], host, bytes);
    send[r] = dev_send[r] + (GT_GUARD_ELEMS + pl->send_offset) * es;
    recv[r] =
        dev_recv[r] +
        (GT_GUARD_ELEMS + (pl->in_place ? pl->send_offset : pl->recv_offset)) *
            es;
  }
  gt_reference(expected, count, pattern, w->n, seed, dtype, op);
  all_reduce(w, algo, send, recv, count, dtype, op, NULL);
  sync_all(w, what);
  world_report_error_words(w, what);
  for (int r = 0; r < w->n; r++) {
    char label[320];
    snprintf(label, sizeof label, "%s rank %d result", what, r);
    GT_CUDA(cudaMemcpy(host, dev_recv[r], bytes, cudaMemcpyDeviceToHost));
    size_t lead = (size_t)((char *)recv[r] - dev_recv[r]);
    gt_compare(expected, host + lead, count, dtype, label);
    if (!pl->in_place) {
      /* Nothing written outside [recv, recv + count). */
      for (size_t b = 0; b < bytes; b++) {
        if (b >= lead && b < lead + count * es) continue;
        if ((unsigned char)host[b] != GT_GUARD_BYTE) {
          gt_fail(
              "%s rank %d: byte %zd relative to recvbuf changed to 0x%02x "
              "(outside the output)",
              what, r, (ssize_t)b - (ssize_t)lead, (unsigned char)host[b]);
          break;
        }
      }
    }
  }
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaFree(dev_send[r]));
    if (!pl->in_place) GT_CUDA(cudaFree(dev_recv[r]));
  }
  free(host);
  free(expected);
  free(guard);
}

static void test_exact(world_t *w) {
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  size_t chunk_f32 = qcoll__cuda_all_reduce_chunk_elems(
      &w->views[0], QCOLL_IPC_TWOSHOT, QCOLL_F32);
  const size_t counts[] = {
      1, 7, 1000, 4099, (size_t)1 << 20, 3 * chunk_f32 + 7};
  int before = gt_failures();
  uint32_t seed = 1;
  for (size_t d = 0; d < 3; d++)
    for (size_t o = 0; o < 3; o++)
      for (int a = 0; a < 2; a++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
          for (size_t p = 0; p < gt_placement_count; p++) {
            bool big = counts[c] >= ((size_t)1 << 20);
            if (big && p != 0 && p != 4) continue; /* keep the run short */
            gt_pattern_t pattern = (c + p) % 2 ? GT_SMALL_INTS : GT_MIXED;
            run_case(w, (qcoll__ipc_algo_t)a, dtypes[d], ops[o], counts[c],
                     &gt_placements[p], pattern, seed++);
          }
  gt_note("N=%d exact results: %s", w->n,
          gt_failures() == before ? "ok" : "FAILED");
}

/* ---- grids and sizes that change from call to call --------------------- */

static void test_changing_shapes(world_t *w) {
  const size_t max_count = 600000;
  float *send[QCOLL_IPC_MAX_RANKS], *recv[QCOLL_IPC_MAX_RANKS];
  gt_check_state_t *state;
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc((void **)&send[r], max_count * sizeof(float)));
    GT_CUDA(cudaMalloc((void **)&recv[r], max_count * sizeof(float)));
  }
  uint32_t x = 12345;
  const int calls = 400;
  for (int k = 0; k < calls; k++) {
    x = x * 1664525u + 1013904223u;
    size_t count = 1 + (x >> 8) % max_count;
    if (k % 3 == 0) count = 1 + (x >> 8) % 3000; /* small ones: few blocks */
    qcoll__ipc_algo_t algo =
        (x >> 4) & 1 ? QCOLL_IPC_TWOSHOT : QCOLL_IPC_ONESHOT;
    float v = (float)(k % 32 + 1);
    for (int r = 0; r < w->n; r++)
      GT_CUDA(
          gt_fill_launch(send[r], count, QCOLL_F32, v, NULL, w->streams[r]));
    all_reduce(w, algo, (void *const *)send, (void *const *)recv, count,
               QCOLL_F32, QCOLL_SUM, NULL);
    for (int r = 0; r < w->n; r++)
      GT_CUDA(gt_check_launch(recv[r], count, QCOLL_F32, (float)w->n, v, NULL,
                              state, w->streams[r]));
  }
  sync_all(w, "changing shapes");
  world_report_error_words(w, "changing shapes");
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  char what[128];
  snprintf(what, sizeof what,
           "N=%d %d calls of changing size, grid and algorithm", w->n, calls);
  if (host.checks != (unsigned long long)calls * (unsigned long long)w->n)
    gt_fail("%s: %llu checks ran, expected %llu", what, host.checks,
            (unsigned long long)calls * (unsigned long long)w->n);
  if (!gt_report_check(&host, what)) gt_note("%s: ok", what);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaFree(send[r]));
    GT_CUDA(cudaFree(recv[r]));
  }
  GT_CUDA(cudaFree(state));
}

/* ---- graph replay ------------------------------------------------------ */

/* Each rank captures fill(counter) -> all-reduce -> check -> bump into its
 * own graph; 1000 replays must each see the new value. */
static void test_graph_replay(world_t *w, qcoll__ipc_algo_t algo, size_t count,
                              qcoll_dtype_t dtype) {
  const int replays = 1000;
  void *send[QCOLL_IPC_MAX_RANKS], *recv[QCOLL_IPC_MAX_RANKS];
  unsigned *counter[QCOLL_IPC_MAX_RANKS];
  gt_check_state_t *state;
  cudaGraphExec_t exec[QCOLL_IPC_MAX_RANKS];
  size_t bytes = count * gt_dtype_size(dtype);
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMalloc(&send[r], bytes));
    GT_CUDA(cudaMalloc(&recv[r], bytes));
    GT_CUDA(cudaMalloc((void **)&counter[r], sizeof(unsigned)));
    GT_CUDA(cudaMemset(counter[r], 0, sizeof(unsigned)));
  }
  GT_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; r++) {
    cudaStream_t s = w->streams[r];
    cudaGraph_t graph;
    GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    GT_CUDA(gt_fill_launch(send[r], count, dtype, 0, counter[r], s));
    size_t chunk =
        qcoll__cuda_all_reduce_chunk_elems(&w->views[r], algo, dtype);
    size_t es = gt_dtype_size(dtype);
    for (size_t off = 0; off < count; off += chunk)
      GT_CUDA(qcoll__cuda_all_reduce_launch(
          &w->views[r], algo, (char *)send[r] + off * es,
          (char *)recv[r] + off * es, count - off < chunk ? count - off : chunk,
          dtype, QCOLL_SUM, s));
    GT_CUDA(gt_check_launch(recv[r], count, dtype, (float)w->n, 0, counter[r],
                            state, s));
    GT_CUDA(gt_bump_launch(counter[r], s));
    GT_CUDA(cudaStreamEndCapture(s, &graph));
    GT_CUDA(cudaGraphInstantiate(&exec[r], graph, 0));
    GT_CUDA(cudaGraphDestroy(graph));
  }
  double t0 = gt_now();
  for (int k = 0; k < replays; k++)
    for (int r = 0; r < w->n; r++)
      GT_CUDA(cudaGraphLaunch(exec[r], w->streams[r]));
  char what[160];
  snprintf(what, sizeof what, "N=%d graph replay x%d, %s %s count=%zu", w->n,
           replays, algo_name(algo), gt_dtype_name(dtype), count);
  sync_all(w, what);
  double dt = gt_now() - t0;
  world_report_error_words(w, what);
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  if (host.checks != (unsigned long long)replays * (unsigned long long)w->n)
    gt_fail("%s: %llu checks ran, expected %llu", what, host.checks,
            (unsigned long long)replays * (unsigned long long)w->n);
  for (int r = 0; r < w->n; r++) {
    unsigned c = 0;
    GT_CUDA(cudaMemcpy(&c, counter[r], sizeof c, cudaMemcpyDeviceToHost));
    if (c != (unsigned)replays)
      gt_fail("%s: rank %d's counter is %u after the replays, expected %d",
              what, r, c, replays);
  }
  if (!gt_report_check(&host, what))
    gt_note("%s: ok (%.1f us per replay)", what, dt * 1e6 / replays);
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaGraphExecDestroy(exec[r]));
    GT_CUDA(cudaFree(send[r]));
    GT_CUDA(cudaFree(recv[r]));
    GT_CUDA(cudaFree(counter[r]));
  }
  GT_CUDA(cudaFree(state));
}

/* ---- deadlines and abort ------------------------------------------------ */

/* The last rank never arrives: every other rank must give up within about
 * the deadline, at least one naming the missing rank as a timeout. */
static void test_missing_peer(world_t *w) {
  const double timeout = 0.25;
  const size_t count = 4096;
  float *buf[QCOLL_IPC_MAX_RANKS];
  for (int r = 0; r < w->n; r++)
    GT_CUDA(cudaMalloc((void **)&buf[r], count * sizeof(float)));
  world_set_timeout(w, timeout);
  double t0 = gt_now();
  for (int r = 0; r < w->n - 1; r++)
    GT_CUDA(qcoll__cuda_all_reduce_launch(&w->views[r], QCOLL_IPC_ONESHOT,
                                          buf[r], buf[r], count, QCOLL_F32,
                                          QCOLL_SUM, w->streams[r]));
  for (int r = 0; r < w->n - 1; r++)
    gt_wait_stream(w->streams[r], 10, "missing peer");
  double dt = gt_now() - t0;
  char what[64];
  snprintf(what, sizeof what, "N=%d missing peer", w->n);
  world_expect_missing_peer(w, what, dt, timeout);
  /* Host abort: rank 0 is told to stop while all but the last rank wait. */
  world_reset(w);
  world_set_timeout(w, 60);
  t0 = gt_now();
  for (int r = 0; r < w->n - 1; r++)
    GT_CUDA(qcoll__cuda_all_reduce_launch(&w->views[r], QCOLL_IPC_TWOSHOT,
                                          buf[r], buf[r], count, QCOLL_F32,
                                          QCOLL_SUM, w->streams[r]));
  usleep(100 * 1000);
  w->words[0][1] = 1;
  for (int r = 0; r < w->n - 1; r++) gt_wait_stream(w->streams[r], 10, "abort");
  dt = gt_now() - t0;
  if (qcoll__ipc_err_kind(w->words[0][0]) != QCOLL_IPC_ERR_ABORTED)
    gt_fail(
        "N=%d abort: rank 0's error word is 0x%016llx, expected kind %u "
        "(aborted)",
        w->n, w->words[0][0], QCOLL_IPC_ERR_ABORTED);
  for (int r = 1; r < w->n - 1; r++)
    if (qcoll__ipc_err_kind(w->words[r][0]) != QCOLL_IPC_ERR_PEER_ABORTED ||
        qcoll__ipc_err_peer(w->words[r][0]) != 0)
      gt_fail(
          "N=%d abort: rank %d's error word is 0x%016llx, expected a peer "
          "abort by "
          "rank 0",
          w->n, r, w->words[r][0]);
  if (dt > 5.0)
    gt_fail("N=%d abort: kernels stopped only after %.2f s", w->n, dt);
  else
    gt_note("N=%d abort: kernels stopped %.2f s after launch (abort at 0.10 s)",
            w->n, dt);
  for (int r = 0; r < w->n; r++) GT_CUDA(cudaFree(buf[r]));
  world_reset(w);
  world_set_timeout(w, 60);
}

/* ---- the init-time mapping check kernel ---------------------------------- */

static void test_probe(world_t *w) {
  unsigned *mismatches;
  GT_CUDA(cudaMalloc((void **)&mismatches, sizeof *mismatches));
  GT_CUDA(cudaMemset(mismatches, 0, sizeof *mismatches));
  uint32_t *slot = (uint32_t *)(w->buffers[1] + QCOLL_IPC_PROBE_OFFSET);
  GT_CUDA(
      qcoll__cuda_ipc_probe_launch(slot, 0xabcdef, mismatches, w->streams[0]));
  GT_CUDA(cudaStreamSynchronize(w->streams[0]));
  unsigned m = 1;
  uint32_t got[QCOLL_IPC_PROBE_WORDS];
  GT_CUDA(cudaMemcpy(&m, mismatches, sizeof m, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(got, slot, sizeof got, cudaMemcpyDeviceToHost));
  if (m != 0) gt_fail("probe: %u words read back differently", m);
  for (uint32_t i = 0; i < QCOLL_IPC_PROBE_WORDS; i++)
    if (got[i] != qcoll__ipc_probe_word(0xabcdef, i)) {
      gt_fail("probe: word %u is 0x%08x, expected 0x%08x", i, got[i],
              qcoll__ipc_probe_word(0xabcdef, i));
      break;
    }
  GT_CUDA(cudaFree(mismatches));
  world_reset(w);
}

int main(int argc, char **argv) {
  gt_skip_without_gpu("gpu_kernels");
  GT_CUDA(cudaSetDevice(0));
  int sizes[16];
  int nsizes = world_sizes(argc, argv, 2, sizes, 16);
  for (int i = 0; i < nsizes; i++) {
    int n = sizes[i];
    world_t w;
    world_init(&w, n, IPC_BYTES, 60);
    gt_note("N=%d: grid limit %d blocks per rank, regions of %zu bytes", n,
            w.views[0].max_grid, w.views[0].region_bytes);
    test_probe(&w);
    test_exact(&w);
    test_changing_shapes(&w);
    test_graph_replay(&w, QCOLL_IPC_ONESHOT, 1000, QCOLL_F32);
    test_graph_replay(&w, QCOLL_IPC_TWOSHOT, 300000, QCOLL_F32);
    test_graph_replay(&w, QCOLL_IPC_TWOSHOT, 777, QCOLL_BF16);
    test_missing_peer(&w);
    world_free(&w);
  }
  if (gt_failures()) {
    gt_note("%d failure(s)", gt_failures());
    return 1;
  }
  gt_note("all passed");
  return 0;
}
