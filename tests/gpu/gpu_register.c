/*
 * Registered buffers through the public API (qcoll_comm_register,
 * qcoll_comm_deregister, registration under graph capture), every rank a
 * process of qcoll-run.  Results exact, bit for bit against the CPU
 * reference (fp32 in rank order, one rounding):
 *  (a) eager all-reduces on registered buffers, one-shot and two-shot, in
 *      and out of place, and with only rank 0 registered (the others stage);
 *  (b) captured all-reduces replayed 1000 times with a new input value each
 *      time (fill, all-reduce, check and counter bump in the graph), on
 *      registered buffers and on buffers only capture registers (run again
 *      with QCOLL_GRAPH_REGISTER=0: unregistered, staged);
 *  (c) a buffer freed and another allocated (at the same address, as the
 *      allocator usually gives) between two captures;
 *  (d) deregistration while every rank still holds a graph using the
 *      buffers: later replays stage it (or keep the registration capture
 *      made) and stay exact;
 *  (e) bad input (NULL, host memory, managed memory): a clear error naming
 *      what was wrong on every rank, and the communicator still works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

static qcoll_comm_t comm;
static cudaStream_t stream;
static gt_check_state_t *state; /* device */

static void all_reduce(const void *send, void *recv, size_t count,
                       qcoll_dtype_t dtype, qcoll_algo_t algo,
                       const char *what) {
  gt_all_reduce_algo(comm, stream, send, recv, count, dtype, algo, what);
}

/* (a) one eager call, checked bit for bit. */
static void eager_case(qcoll_algo_t algo, qcoll_dtype_t dtype, size_t count,
                       bool in_place, bool registered) {
  char what[200];
  snprintf(what, sizeof what, "eager %s %s count=%zu %s, %s", qcoll_algo_name(algo),
           qcoll_dtype_name(dtype), count, in_place ? "in place" : "out of place",
           registered ? "every rank registered" : "rank 0 registered only");
  const size_t bytes = count * qcoll_dtype_size(dtype);
  void *send, *recv;
  GT_CUDA(cudaMalloc(&send, bytes));
  GT_CUDA(cudaMalloc(&recv, bytes));
  if (in_place) recv = send;
  const bool mine = registered || gt_rank == 0;
  qcoll_reg_t rs = NULL, rr = NULL;
  qcoll_status_t st = qcoll_comm_register(comm, mine ? send : NULL,
                                          mine ? bytes : 0, &rs);
  if (st != (mine ? QCOLL_OK : QCOLL_ERR_INVALID_ARGUMENT))
    gt_fail("%s: registering the input returned %s: %s", what,
            qcoll_status_string(st), gt_last_error(comm));
  if (!in_place) {
    st = qcoll_comm_register(comm, mine ? recv : NULL, mine ? bytes : 0, &rr);
    if (st != (mine ? QCOLL_OK : QCOLL_ERR_INVALID_ARGUMENT))
      gt_fail("%s: registering the output returned %s", what,
              qcoll_status_string(st));
  }
  void *host = malloc(bytes), *expected = malloc(bytes);
  for (int k = 0; k < 3; k++) {
    gt_fill_inputs(host, count, GT_MIXED, gt_rank, 77u + (uint32_t)k, dtype);
    gt_upload(send, host, bytes);
    all_reduce(send, recv, count, dtype, algo, what);
    gt_wait_stream(stream, 120, what);
    GT_CUDA(cudaMemcpy(host, recv, bytes, cudaMemcpyDeviceToHost));
    gt_reference(expected, count, GT_MIXED, gt_nranks, 77u + (uint32_t)k,
                 dtype, QCOLL_SUM);
    if (gt_compare(expected, host, count, dtype, what)) break;
  }
  GT_QCOLL(comm, qcoll_comm_deregister(comm, rs));
  GT_QCOLL(comm, qcoll_comm_deregister(comm, rr));
  gt_note("%s: done", what);
  free(host);
  free(expected);
  GT_CUDA(cudaFree(send));
  if (!in_place) GT_CUDA(cudaFree(recv));
}

/* A graph of fill(counter) -> all-reduce -> check(counter) -> bump. */
static cudaGraphExec_t capture(void *send, void *recv, size_t count,
                               qcoll_dtype_t dtype, qcoll_algo_t algo,
                               unsigned *counter, const char *what) {
  return gt_capture_counted_all_reduce(comm, stream, state, send, recv, count,
                                       dtype, algo, counter, what);
}

static void replay(cudaGraphExec_t exec, int times, const char *what) {
  gt_check_reset(state);
  double t0 = gt_now();
  for (int k = 0; k < times; k++) GT_CUDA(cudaGraphLaunch(exec, stream));
  gt_wait_stream(stream, 120, what);
  double dt = gt_now() - t0;
  if (gt_check_finish(state, what, (unsigned long long)times))
    gt_note("%s: %d replays exact (%.1f us per replay)", what, times,
            dt * 1e6 / times);
}

/* (b), (d): captured on explicitly registered buffers or on plain ones,
 * replayed 1000 times; then deregistered and replayed again. */
static void captured_case(qcoll_algo_t algo, qcoll_dtype_t dtype, size_t count,
                          bool in_place, bool explicit_reg) {
  char what[200];
  snprintf(what, sizeof what, "graph %s %s count=%zu %s, %s",
           qcoll_algo_name(algo), qcoll_dtype_name(dtype), count,
           in_place ? "in place" : "out of place",
           explicit_reg ? "registered" : "not registered before capture");
  const size_t bytes = count * qcoll_dtype_size(dtype);
  void *send, *recv;
  unsigned *counter;
  GT_CUDA(cudaMalloc(&send, bytes));
  GT_CUDA(cudaMalloc(&recv, bytes));
  if (in_place) recv = send;
  GT_CUDA(cudaMalloc((void **)&counter, sizeof *counter));
  GT_CUDA(cudaMemset(counter, 0, sizeof *counter));
  qcoll_reg_t rs = NULL, rr = NULL;
  if (explicit_reg) {
    GT_QCOLL(comm, qcoll_comm_register(comm, send, bytes, &rs));
    if (!in_place) GT_QCOLL(comm, qcoll_comm_register(comm, recv, bytes, &rr));
  }
  cudaGraphExec_t exec = capture(send, recv, count, dtype, algo, counter, what);
  replay(exec, 1000, what);
  if (explicit_reg) {
    /* (d) every rank still holds the graph: its replays must stay exact */
    GT_QCOLL(comm, qcoll_comm_deregister(comm, rs));
    GT_QCOLL(comm, qcoll_comm_deregister(comm, rr));
    char after[240];
    snprintf(after, sizeof after, "%s, after deregistration", what);
    replay(exec, 100, after);
  }
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaFree(send));
  if (!in_place) GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(counter));
}

/* (c) buffers freed and reallocated between two captures. */
static void realloc_between_captures(qcoll_algo_t algo, size_t count) {
  char what[160];
  snprintf(what, sizeof what, "graph %s bf16 count=%zu, buffers reallocated",
           qcoll_algo_name(algo), count);
  const size_t bytes = count * 2;
  unsigned *counter;
  GT_CUDA(cudaMalloc((void **)&counter, sizeof *counter));
  GT_CUDA(cudaMemset(counter, 0, sizeof *counter));
  void *send = NULL, *recv = NULL, *old_send = NULL;
  for (int round = 0; round < 3; round++) {
    /* another size in round 2: the new allocation overlaps the old one */
    size_t b = round == 2 ? bytes * 2 : bytes;
    GT_CUDA(cudaMalloc(&send, b));
    GT_CUDA(cudaMalloc(&recv, b));
    if (round > 0)
      gt_note("%s: round %d input %s the freed one", what, round,
              send == old_send ? "at the address of" : "away from");
    cudaGraphExec_t exec =
        capture(send, recv, count, QCOLL_BF16, algo, counter, what);
    replay(exec, 200, what);
    GT_CUDA(cudaGraphExecDestroy(exec));
    old_send = send;
    GT_CUDA(cudaFree(send));
    GT_CUDA(cudaFree(recv));
  }
  GT_CUDA(cudaFree(counter));
}

/* (e) bad input: the same refusal on every rank, nothing enqueued. */
static void expect_refusal(void *buf, size_t bytes, qcoll_status_t want,
                           const char *words, const char *what) {
  qcoll_reg_t h = (qcoll_reg_t)0x1;
  qcoll_status_t st = qcoll_comm_register(comm, buf, bytes, &h);
  const char *msg = gt_last_error(comm);
  if (st != want || h != NULL || !strstr(msg, words))
    gt_fail("%s: returned %s (handle %p), message \"%s\"; expected %s naming "
            "\"%s\"",
            what, qcoll_status_string(st), (void *)h, msg,
            qcoll_status_string(want), words);
  else
    gt_note("%s: refused: %s", what, msg);
}

static void bad_input(void) {
  expect_refusal(NULL, 64, QCOLL_ERR_INVALID_ARGUMENT, "buf is NULL",
                 "NULL buffer");
  void *host = malloc(4096);
  expect_refusal(host, 4096, QCOLL_ERR_INVALID_ARGUMENT, "host memory",
                 "host memory");
  free(host);
  void *managed = NULL;
  GT_CUDA(cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal));
  expect_refusal(managed, 4096, QCOLL_ERR_UNSUPPORTED, "managed memory",
                 "managed memory");
  GT_CUDA(cudaFree(managed));
  void *dev = NULL;
  GT_CUDA(cudaMalloc(&dev, 4096));
  expect_refusal(dev, 8192, QCOLL_ERR_INVALID_ARGUMENT, "runs past",
                 "past its allocation");
  GT_CUDA(cudaFree(dev));
  /* still usable */
  eager_case(QCOLL_ALGO_TWOSHOT, QCOLL_F32, 100000, false, true);
}

int main(void) {
  gt_skip_without_gpu("gpu_register");
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));

  /* sizes above the push one-shot's slot (256 KiB), so the flag-barrier
   * kernels of allreduce.cu serve */
  for (int in_place = 0; in_place < 2; in_place++) {
    eager_case(QCOLL_ALGO_ONESHOT, QCOLL_BF16, 300001, in_place, true);
    eager_case(QCOLL_ALGO_TWOSHOT, QCOLL_F16, 1000003, in_place, true);
    eager_case(QCOLL_ALGO_ONESHOT, QCOLL_F32, 200000, in_place, false);
    eager_case(QCOLL_ALGO_TWOSHOT, QCOLL_BF16, 2u << 20, in_place, false);
  }
  for (int explicit_reg = 0; explicit_reg < 2; explicit_reg++)
    for (int in_place = 0; in_place < 2; in_place++) {
      captured_case(QCOLL_ALGO_ONESHOT, QCOLL_BF16, 524288, in_place,
                    explicit_reg);
      captured_case(QCOLL_ALGO_TWOSHOT, QCOLL_BF16, 2097152, in_place,
                    explicit_reg);
      captured_case(QCOLL_ALGO_TWOSHOT, QCOLL_F32, 100003, in_place,
                    explicit_reg);
    }
  realloc_between_captures(QCOLL_ALGO_ONESHOT, 400000);
  realloc_between_captures(QCOLL_ALGO_TWOSHOT, 1000000);
  bad_input();

  gt_check_async_and_destroy(comm);
  GT_CUDA(cudaFree(state));
  gt_note(gt_failures() ? "FAILED" : "all passed");
  return gt_failures() ? 1 : 0;
}
