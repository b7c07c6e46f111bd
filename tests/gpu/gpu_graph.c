/*
 * Graph replay is a first-class call.  Every rank is a process of qcoll-run.
 *
 *  (a) one all-reduce captured in a CUDA graph and replayed 1000 times with
 *      a new input value before each replay, one-shot and two-shot:
 *      - the fill, the all-reduce, a check and a counter bump inside the
 *        graph (value = counter % 32 + 1, read on the device);
 *      - only the all-reduce in the graph, the fill (value k + 1) and the
 *        check enqueued eagerly around each replay;
 *      every rank's result must be world_size * value exactly, every time.
 *  (c) eager calls and replays of two captured graphs (different sizes and
 *      algorithms) interleaved on one communicator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

static qcoll_comm_t comm;
static cudaStream_t stream;
static gt_check_state_t *state; /* device */

static void reset_check(void) {
  gt_check_reset(state);
}

static bool finish_check(const char *what, unsigned long long expected_checks) {
  return gt_check_finish(state, what, expected_checks);
}

static void all_reduce(const void *send, void *recv, size_t count,
                       qcoll_dtype_t dtype, qcoll_algo_t algo,
                       const char *what) {
  gt_all_reduce_algo(comm, stream, send, recv, count, dtype, algo, what);
}

/* fill(counter) -> all-reduce -> check(counter) -> bump, all captured. */
static void replay_with_device_values(qcoll_algo_t algo, qcoll_dtype_t dtype,
                                      size_t count) {
  const int replays = 1000;
  char what[160];
  snprintf(what, sizeof what,
           "graph with fill inside, %s %s count=%zu x%d replays",
           qcoll_algo_name(algo), qcoll_dtype_name(dtype), count, replays);
  size_t bytes = count * qcoll_dtype_size(dtype);
  void *send, *recv;
  unsigned *counter;
  GT_CUDA(cudaMalloc(&send, bytes));
  GT_CUDA(cudaMalloc(&recv, bytes));
  GT_CUDA(cudaMalloc((void **)&counter, sizeof *counter));
  GT_CUDA(cudaMemset(counter, 0, sizeof *counter));
  reset_check();

  cudaGraphExec_t exec = gt_capture_counted_all_reduce(
      comm, stream, state, send, recv, count, dtype, algo, counter, what);

  double t0 = gt_now();
  for (int k = 0; k < replays; k++) GT_CUDA(cudaGraphLaunch(exec, stream));
  gt_wait_stream(stream, 120, what);
  double dt = gt_now() - t0;

  bool ok = finish_check(what, replays);
  unsigned c = 0;
  GT_CUDA(cudaMemcpy(&c, counter, sizeof c, cudaMemcpyDeviceToHost));
  if (c != (unsigned)replays) {
    gt_fail("%s: the counter is %u after the replays, expected %d", what, c,
            replays);
    ok = false;
  }
  /* The last replay's result, read back on the host as well. */
  float want = (float)gt_nranks * (float)((replays - 1) % 32 + 1);
  void *host = malloc(bytes);
  GT_CUDA(cudaMemcpy(host, recv, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++)
    if (gt_load(host, i, dtype) != want) {
      gt_fail("%s: after the last replay element %zu is %g, expected %g", what,
              i, gt_load(host, i, dtype), want);
      ok = false;
      break;
    }
  free(host);
  if (ok) gt_note("%s: ok (%.1f us per replay)", what, dt * 1e6 / replays);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(counter));
}

/* Only the all-reduce captured; fill and check enqueued around each replay
 * with the value k + 1 chosen on the host. */
static void replay_with_host_values(qcoll_algo_t algo, size_t count) {
  const int replays = 1000;
  char what[160];
  snprintf(what, sizeof what,
           "graph of the all-reduce alone, %s f32 count=%zu x%d replays",
           qcoll_algo_name(algo), count, replays);
  float *send, *recv;
  GT_CUDA(cudaMalloc((void **)&send, count * sizeof(float)));
  GT_CUDA(cudaMalloc((void **)&recv, count * sizeof(float)));
  reset_check();

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  all_reduce(send, recv, count, QCOLL_F32, algo, what);
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (int k = 0; k < replays; k++) {
    float v = (float)(k + 1);
    GT_CUDA(gt_fill_launch(send, count, QCOLL_F32, v, NULL, stream));
    GT_CUDA(cudaGraphLaunch(exec, stream));
    GT_CUDA(gt_check_launch(recv, count, QCOLL_F32, (float)gt_nranks, v, NULL,
                            state, stream));
  }
  gt_wait_stream(stream, 120, what);
  if (finish_check(what, replays)) gt_note("%s: ok", what);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
}

/* (c) eager calls and two captured graphs, interleaved. */
static void interleave_eager_and_captured(void) {
  const int rounds = 200;
  const char *what = "eager and captured calls interleaved";
  const size_t n1 = 1000, n2 = 300000, n3 = 50000, n4 = (size_t)1 << 20;
  float *s1, *r1, *s2, *r2, *s3, *r3, *s4;
  unsigned *counter;
  GT_CUDA(cudaMalloc((void **)&s1, n1 * 4));
  GT_CUDA(cudaMalloc((void **)&r1, n1 * 4));
  GT_CUDA(cudaMalloc((void **)&s2, n2 * 4));
  GT_CUDA(cudaMalloc((void **)&r2, n2 * 4));
  GT_CUDA(cudaMalloc((void **)&s3, n3 * 4));
  GT_CUDA(cudaMalloc((void **)&r3, n3 * 4));
  GT_CUDA(cudaMalloc((void **)&s4, n4 * 4));
  GT_CUDA(cudaMalloc((void **)&counter, sizeof *counter));
  GT_CUDA(cudaMemset(counter, 0, sizeof *counter));
  reset_check();

  /* Graph 1: one-shot, small, values from the counter.  Graph 2: two-shot,
   * larger, values from the same counter (bumped once per round, by graph 2).
   */
  cudaGraph_t g1, g2;
  cudaGraphExec_t e1, e2;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_CUDA(gt_fill_launch(s1, n1, QCOLL_F32, 0, counter, stream));
  all_reduce(s1, r1, n1, QCOLL_F32, QCOLL_ALGO_ONESHOT, what);
  GT_CUDA(gt_check_launch(r1, n1, QCOLL_F32, (float)gt_nranks, 0, counter,
                          state, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &g1));
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_CUDA(gt_fill_launch(s2, n2, QCOLL_F32, 0, counter, stream));
  all_reduce(s2, r2, n2, QCOLL_F32, QCOLL_ALGO_TWOSHOT, what);
  GT_CUDA(gt_check_launch(r2, n2, QCOLL_F32, (float)gt_nranks, 0, counter,
                          state, stream));
  GT_CUDA(gt_bump_launch(counter, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &g2));
  GT_CUDA(cudaGraphInstantiate(&e1, g1, 0));
  GT_CUDA(cudaGraphInstantiate(&e2, g2, 0));

  for (int k = 0; k < rounds; k++) {
    float v = (float)(k % 50 + 1);
    /* eager, automatic choice, small */
    GT_CUDA(gt_fill_launch(s3, n3, QCOLL_F32, v, NULL, stream));
    all_reduce(s3, r3, n3, QCOLL_F32, QCOLL_ALGO_AUTO, what);
    GT_CUDA(gt_check_launch(r3, n3, QCOLL_F32, (float)gt_nranks, v, NULL, state,
                            stream));
    GT_CUDA(cudaGraphLaunch(e1, stream));
    /* eager, in place, large */
    GT_CUDA(gt_fill_launch(s4, n4, QCOLL_F32, v + 1, NULL, stream));
    all_reduce(s4, s4, n4, QCOLL_F32,
               k % 2 ? QCOLL_ALGO_ONESHOT : QCOLL_ALGO_TWOSHOT, what);
    GT_CUDA(gt_check_launch(s4, n4, QCOLL_F32, (float)gt_nranks, v + 1, NULL,
                            state, stream));
    GT_CUDA(cudaGraphLaunch(e2, stream));
  }
  gt_wait_stream(stream, 120, what);
  if (finish_check(what, 4ull * rounds))
    gt_note("%s: ok (%d rounds of 4 calls)", what, rounds);
  GT_CUDA(cudaGraphExecDestroy(e1));
  GT_CUDA(cudaGraphExecDestroy(e2));
  GT_CUDA(cudaGraphDestroy(g1));
  GT_CUDA(cudaGraphDestroy(g2));
  float *bufs[] = {s1, r1, s2, r2, s3, r3, s4};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    GT_CUDA(cudaFree(bufs[i]));
  GT_CUDA(cudaFree(counter));
}

int main(void) {
  gt_skip_without_gpu("gpu_graph");
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));

  replay_with_device_values(QCOLL_ALGO_ONESHOT, QCOLL_F32, 1000);
  replay_with_device_values(QCOLL_ALGO_TWOSHOT, QCOLL_F32, 262144);
  replay_with_device_values(QCOLL_ALGO_ONESHOT, QCOLL_BF16, 4097);
  replay_with_device_values(QCOLL_ALGO_TWOSHOT, QCOLL_F16, 100003);
  replay_with_host_values(QCOLL_ALGO_ONESHOT, 5000);
  replay_with_host_values(QCOLL_ALGO_TWOSHOT, 500000);
  interleave_eager_and_captured();

  qcoll_status_t async = QCOLL_OK;
  GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
  if (async != QCOLL_OK)
    gt_fail("asynchronous error after the run: %s: %s",
            qcoll_status_string(async), gt_last_error(comm));
  /* Destroy after capture must not hang (a deadline guards it). */
  double t0 = gt_now();
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  if (gt_now() - t0 > 30)
    gt_fail("qcoll_comm_destroy took %.1f s", gt_now() - t0);
  GT_CUDA(cudaFree(state));
  gt_note(gt_failures() ? "FAILED" : "all passed");
  return gt_failures() ? 1 : 0;
}
