/*
 * The one-shot all-reduce on its push kernel (allreduce_push.cu) through
 * the public API, every rank a process of qcoll-run:
 *  - inputs holding signed zeros (all ranks -0: the sum is -0; mixed: +0),
 *    infinities and NaNs of both signs and every payload, the push
 *    sentinel's own pattern (all bits set) among them;
 *  - f16, bf16, f32 x sum, min, max; counts from 1 to two slots and more
 *    (those run on the flag-barrier one-shot: the push kernel serves what
 *    fits one slot);
 *  - eager calls, and one capture replayed 200 times with new inputs
 *    (specials included) uploaded before each replay.
 * Sums must equal the fp32 rank-order sum rounded once, bit for bit (a NaN
 * result: any NaN); min/max must agree with it wherever it is not a zero
 * (the sign of a zero min/max is the GPU's choice).  Every rank's result
 * must hash the same.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "push_values.h"

static qcoll_comm_t comm;
static cudaStream_t stream;

static void put(void *p, size_t i, uint32_t b, qcoll_dtype_t d) {
  if (d == QCOLL_F32)
    ((uint32_t *)p)[i] = b;
  else
    ((uint16_t *)p)[i] = (uint16_t)b;
}
static uint32_t get(const void *p, size_t i, qcoll_dtype_t d) {
  return d == QCOLL_F32 ? ((const uint32_t *)p)[i] : ((const uint16_t *)p)[i];
}
static size_t check(const void *got, size_t count, qcoll_dtype_t d,
                    qcoll_op_t op, uint32_t seed, const char *what) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float acc = push_reference(gt_nranks, i, d, op, seed, true);
    uint32_t g = get(got, i, d);
    bool ok = isnan(acc)                         ? isnan(push_value_of(g, d))
              : (op != QCOLL_SUM && acc == 0.0f) ? push_value_of(g, d) == 0.0f
                                                 : g == push_bits_of(acc, d);
    if (!ok && wrong++ < 4)
      gt_fail("%s: element %zu is 0x%x, expected 0x%x", what, i, g,
              push_bits_of(acc, d));
  }
  return wrong;
}

static void upload_inputs(void *dev, void *host, size_t count, qcoll_dtype_t d,
                          uint32_t seed) {
  for (size_t i = 0; i < count; i++)
    put(host, i, push_input_bits(gt_rank, i, d, seed, true), d);
  gt_upload(dev, host, count * gt_dtype_size(d));
}

static void one_shot(const void *send, void *recv, size_t count,
                     qcoll_dtype_t d, qcoll_op_t op) {
  qcoll_options_t o;
  GT_QCOLL(comm, qcoll_options_init(&o));
  o.algo = QCOLL_ALGO_ONESHOT;
  GT_QCOLL(comm,
           qcoll_all_reduce_ex(send, recv, count, d, op, comm, stream, &o));
}

static void finish(void *host_out, const void *recv, size_t count,
                   qcoll_dtype_t d, qcoll_op_t op, uint32_t seed,
                   const char *what) {
  gt_wait_stream(stream, 30, what);
  GT_CUDA(cudaMemcpy(host_out, recv, count * gt_dtype_size(d),
                     cudaMemcpyDeviceToHost));
  check(host_out, count, d, op, seed, what);
  gt_check_same_on_all_ranks(comm, host_out, count * gt_dtype_size(d), what);
}

static void eager_cases(void) {
  static const qcoll_dtype_t dts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  const size_t slot = gt_env_bytes("QCOLL_IPC_PUSH_BYTES", 256u << 10);
  for (int di = 0; di < 3; di++) {
    const size_t per_slot = slot / gt_dtype_size(dts[di]);
    const size_t counts[] = {1, 7, 1000, 65536 + 3, 2 * per_slot + 5};
    for (int oi = 0; oi < 3; oi++)
      for (int ci = 0; ci < 5; ci++) {
        size_t n = counts[ci];
        qcoll_dtype_t d = dts[di];
        uint32_t seed = (uint32_t)(di * 100 + oi * 10 + ci);
        char what[160];
        snprintf(what, sizeof what, "eager %s %s count=%zu", gt_dtype_name(d),
                 gt_op_name(ops[oi]), n);
        void *host = malloc(n * 4), *send, *recv;
        GT_CUDA(cudaMalloc(&send, n * 4));
        GT_CUDA(cudaMalloc(&recv, n * 4));
        upload_inputs(send, host, n, d, seed);
        one_shot(send, ci % 2 ? send : recv, n, d, ops[oi]); /* odd: in place */
        finish(host, ci % 2 ? send : recv, n, d, ops[oi], seed, what);
        GT_CUDA(cudaFree(send));
        GT_CUDA(cudaFree(recv));
        free(host);
      }
  }
  gt_note("eager push one-shot cases done");
}

static void graph_replays(qcoll_dtype_t d, size_t n, int replays) {
  char what[160];
  void *host = malloc(n * 4), *send, *recv;
  GT_CUDA(cudaMalloc(&send, n * 4));
  GT_CUDA(cudaMalloc(&recv, n * 4));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  one_shot(send, recv, n, d, QCOLL_SUM);
  GT_CUDA(cudaStreamEndCapture(stream, &g));
  GT_CUDA(cudaGraphInstantiate(&exec, g, 0));
  size_t bad = 0;
  for (int k = 0; k < replays && bad == 0; k++) {
    snprintf(what, sizeof what, "graph %s count=%zu replay %d",
             gt_dtype_name(d), n, k);
    upload_inputs(send, host, n, d, 5000u + (uint32_t)k);
    GT_CUDA(cudaGraphLaunch(exec, stream));
    int before = gt_failures();
    finish(host, recv, n, d, QCOLL_SUM, 5000u + (uint32_t)k, what);
    bad = (size_t)(gt_failures() - before);
  }
  gt_note("graph %s count=%zu: %d replays with new inputs %s", gt_dtype_name(d),
          n, replays, bad ? "FAILED" : "ok");
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(g));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  free(host);
}

int main(void) {
  gt_skip_without_gpu("gpu_push");
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  eager_cases();
  graph_replays(QCOLL_BF16, 4096, 200);
  graph_replays(QCOLL_F32, 777, 200);
  GT_CUDA(cudaStreamDestroy(stream));
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  if (gt_failures()) {
    printf("[rank %d] FAILED (%d failure(s))\n", gt_rank, gt_failures());
    return 1;
  }
  printf("[rank %d] all passed\n", gt_rank);
  return 0;
}
