/*
 * Shapes that change on every call must neither hang nor mix data: 20 000
 * all-reduces alternating 1 MiB and 2 MiB of f32 (the algorithm also cycles
 * through automatic, one-shot and two-shot), each filled with a new value
 * and checked on the device for world_size * value exactly.  The whole run
 * must finish within 60 s.
 *
 *   gpu_stress [calls]     (default 20000)
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_test.h"

int main(int argc, char **argv) {
  gt_skip_without_gpu("gpu_stress");
  const int calls = argc > 1 ? atoi(argv[1]) : 20000;
  const double limit_s = 60;
  qcoll_comm_t comm = gt_init();
  cudaStream_t stream;
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t small = (1u << 20) / sizeof(float),
               large = (2u << 20) / sizeof(float);
  float *send, *recv;
  gt_check_state_t *state;
  GT_CUDA(cudaMalloc((void **)&send, large * sizeof(float)));
  GT_CUDA(cudaMalloc((void **)&recv, large * sizeof(float)));
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  GT_CUDA(cudaDeviceSynchronize());

  static const qcoll_algo_t algos[] = {QCOLL_ALGO_AUTO, QCOLL_ALGO_ONESHOT,
                                       QCOLL_ALGO_TWOSHOT};
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  double t0 = gt_now();
  for (int k = 0; k < calls; k++) {
    size_t count = k % 2 ? large : small;
    float v = (float)(k % 97 + 1);
    opts.algo = algos[(k / 2) % 3];
    GT_CUDA(gt_fill_launch(send, count, QCOLL_F32, v, NULL, stream));
    qcoll_status_t st = qcoll_all_reduce_ex(send, recv, count, QCOLL_F32,
                                            QCOLL_SUM, comm, stream, &opts);
    if (st != QCOLL_OK) {
      gt_fail("call %d (%zu bytes, %s): qcoll_all_reduce_ex returned %s: %s", k,
              count * sizeof(float), qcoll_algo_name(opts.algo),
              qcoll_status_string(st), gt_last_error(comm));
      return 1;
    }
    GT_CUDA(gt_check_launch(recv, count, QCOLL_F32, (float)gt_nranks, v, NULL,
                            state, stream));
    /* Bound the work in flight and notice a hang early. */
    if (k % 1000 == 999) {
      char what[64];
      snprintf(what, sizeof what, "calls up to %d", k);
      double left = limit_s - (gt_now() - t0);
      gt_wait_stream(stream, left > 1 ? left : 1, what);
    }
  }
  gt_wait_stream(stream, limit_s, "the last calls");
  double dt = gt_now() - t0;
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  char what[128];
  snprintf(what, sizeof what, "%d calls alternating 1 MiB and 2 MiB", calls);
  if (host.checks != (unsigned long long)calls)
    gt_fail("%s: %llu checks ran, expected %d", what, host.checks, calls);
  gt_report_check(&host, what);
  if (dt > limit_s)
    gt_fail("%s took %.1f s, more than %.0f s", what, dt, limit_s);
  qcoll_status_t async = QCOLL_OK;
  GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
  if (async != QCOLL_OK)
    gt_fail("asynchronous error: %s: %s", qcoll_status_string(async),
            gt_last_error(comm));
  if (!gt_failures())
    gt_note("%s: ok in %.1f s (%.1f us per call)", what, dt, dt * 1e6 / calls);
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(state));
  return gt_failures() ? 1 : 0;
}
