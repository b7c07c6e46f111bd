/*
 * The operand decides the device, and the library never leaves the
 * caller's current device changed.  Every rank is a process of qcoll-run.
 *
 *  - Before every API call the test makes another device current (when
 *    there is one) and checks afterwards that it is still current; the
 *    communicator is created with an explicit device while another is
 *    current.
 *  - With two or more GPUs: a buffer or a stream on the wrong device is
 *    refused with an error naming both devices, nothing is enqueued, and
 *    the communicator stays usable.
 *  - Results with order-sensitive data are bitwise identical on all ranks
 *    and equal to the rank-order reference; the legacy default stream works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

static int dev, other, ndev;
static qcoll_comm_t comm;

/* Run an API call with `other` current; it must still be current after. */
#define ON_OTHER_DEVICE(call)                                              \
  do {                                                                     \
    GT_CUDA(cudaSetDevice(other));                                         \
    qcoll_status_t od_st_ = (call);                                        \
    int od_now_ = -1;                                                      \
    GT_CUDA(cudaGetDevice(&od_now_));                                      \
    if (od_now_ != other)                                                  \
      gt_fail("%s changed the current device from %d to %d", #call, other, \
              od_now_);                                                    \
    if (od_st_ != QCOLL_OK) gt_qcoll_die(comm, #call, od_st_, __LINE__);   \
  } while (0)

static void expect_error(qcoll_status_t st, const char *what, int dev_a,
                         int dev_b) {
  char a[16], b[16];
  snprintf(a, sizeof a, "%d", dev_a);
  snprintf(b, sizeof b, "%d", dev_b);
  const char *msg = gt_last_error(comm);
  if (st == QCOLL_OK) {
    gt_fail("%s: accepted, expected an error", what);
    exit(1);
  }
  if (!strstr(msg, a) || !strstr(msg, b))
    gt_fail("%s: the message should name devices %d and %d: \"%s\"", what,
            dev_a, dev_b, msg);
  else
    gt_note("%s refused (%s): %s", what, qcoll_status_string(st), msg);
}

static void test_wrong_device(cudaStream_t stream, float *send, float *recv,
                              size_t n) {
  if (ndev < 2) {
    gt_note("one GPU: wrong-device checks need two, not run");
    return;
  }
  float *wrong = NULL;
  cudaStream_t wrong_stream;
  GT_CUDA(cudaSetDevice(other));
  GT_CUDA(cudaMalloc((void **)&wrong, n * sizeof(float)));
  GT_CUDA(cudaStreamCreateWithFlags(&wrong_stream, cudaStreamNonBlocking));
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(gt_fill_launch(recv, n, QCOLL_F32, -1.0f, NULL, stream));
  GT_CUDA(cudaStreamSynchronize(stream));

  expect_error(
      qcoll_all_reduce(wrong, recv, n, QCOLL_F32, QCOLL_SUM, comm, stream),
      "sendbuf on another device", other, dev);
  expect_error(
      qcoll_all_reduce(send, wrong, n, QCOLL_F32, QCOLL_SUM, comm, stream),
      "recvbuf on another device", other, dev);
  expect_error(
      qcoll_all_reduce(send, recv, n, QCOLL_F32, QCOLL_SUM, comm, wrong_stream),
      "stream on another device", other, dev);
  /* Nothing was enqueued: recv still holds the fill. */
  gt_check_state_t *state;
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  GT_CUDA(
      gt_check_launch(recv, n, QCOLL_F32, 1.0f, -1.0f, NULL, state, stream));
  gt_wait_stream(stream, 60, "wrong device");
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  gt_report_check(&host, "recvbuf after refused calls (must be untouched)");
  GT_CUDA(cudaFree(state));
  GT_CUDA(cudaSetDevice(other));
  GT_CUDA(cudaFree(wrong));
  GT_CUDA(cudaStreamDestroy(wrong_stream));
  GT_CUDA(cudaSetDevice(dev));
}

/* Order-sensitive data: identical bits on all ranks, equal to the
 * reference. */
static void test_identical(cudaStream_t stream, qcoll_dtype_t dtype,
                           qcoll_algo_t algo) {
  const size_t n = 100003;
  size_t es = qcoll_dtype_size(dtype);
  char what[96];
  snprintf(what, sizeof what, "%s sum %s, %zu mixed-magnitude values",
           qcoll_dtype_name(dtype), qcoll_algo_name(algo), n);
  void *host = malloc(n * es), *expected = malloc(n * es);
  void *send, *recv;
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(cudaMalloc(&send, n * es));
  GT_CUDA(cudaMalloc(&recv, n * es));
  gt_fill_inputs(host, n, GT_MIXED, gt_rank, 99, dtype);
  gt_upload(send, host, n * es);
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = algo;
  ON_OTHER_DEVICE(qcoll_all_reduce_ex(send, recv, n, dtype, QCOLL_SUM, comm,
                                      stream, &opts));
  GT_CUDA(cudaSetDevice(dev));
  gt_wait_stream(stream, 60, what);
  GT_CUDA(cudaMemcpy(host, recv, n * es, cudaMemcpyDeviceToHost));
  gt_reference(expected, n, GT_MIXED, gt_nranks, 99, dtype, QCOLL_SUM);
  size_t bad = gt_compare(expected, host, n, dtype, what);
  uint64_t mine = gt_hash(host, n * es);
  uint64_t *all = calloc((size_t)gt_nranks, sizeof *all);
  ON_OTHER_DEVICE(qcoll_all_gather(&mine, all, 1, QCOLL_U64, comm, NULL));
  for (int r = 0; r < gt_nranks; r++)
    if (all[r] != mine) {
      gt_fail("%s: rank %d's result hashes to %016llx, this rank's to %016llx",
              what, r, (unsigned long long)all[r], (unsigned long long)mine);
      bad++;
    }
  if (!bad)
    gt_note("%s: identical on all ranks and equal to the reference", what);
  free(all);
  free(host);
  free(expected);
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
}

int main(void) {
  gt_skip_without_gpu("gpu_device");
  GT_CUDA(cudaGetDeviceCount(&ndev));
  const char *lr = getenv("QCOLL_LOCAL_RANK");
  int local = lr ? atoi(lr) : 0;
  dev = local % ndev;
  other = (dev + 1) % ndev;
  if (ndev < 2)
    gt_note(
        "one GPU: the current device cannot differ from the communicator's, so "
        "the "
        "checks below only show it is left as it was");

  /* Explicit device while another one is current. */
  qcoll_config_t config;
  GT_QCOLL(NULL, qcoll_config_init(&config));
  config.device = dev;
  ON_OTHER_DEVICE(qcoll_comm_init_env(&comm, &config));
  GT_QCOLL(comm, qcoll_comm_rank(comm, &gt_rank));
  GT_QCOLL(comm, qcoll_comm_size(comm, &gt_nranks));
  int comm_dev = -99;
  ON_OTHER_DEVICE(qcoll_comm_device(comm, &comm_dev));
  if (comm_dev != dev)
    gt_fail("the communicator's device is %d, expected %d", comm_dev, dev);

  GT_CUDA(cudaSetDevice(dev));
  cudaStream_t stream;
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t n = 4096;
  float *send, *recv;
  GT_CUDA(cudaMalloc((void **)&send, n * sizeof(float)));
  GT_CUDA(cudaMalloc((void **)&recv, n * sizeof(float)));
  GT_CUDA(gt_fill_launch(send, n, QCOLL_F32, 3.0f, NULL, stream));
  GT_CUDA(cudaStreamSynchronize(stream));

  gt_check_state_t *state;
  GT_CUDA(cudaMalloc((void **)&state, sizeof *state));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  static const qcoll_algo_t algos[] = {QCOLL_ALGO_AUTO, QCOLL_ALGO_ONESHOT,
                                       QCOLL_ALGO_TWOSHOT};
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  for (int a = 0; a < 3; a++) {
    opts.algo = algos[a];
    ON_OTHER_DEVICE(qcoll_all_reduce_ex(send, recv, n, QCOLL_F32, QCOLL_SUM,
                                        comm, stream, &opts));
    GT_CUDA(cudaSetDevice(dev));
    GT_CUDA(gt_check_launch(recv, n, QCOLL_F32, (float)gt_nranks, 3.0f, NULL,
                            state, stream));
  }
  ON_OTHER_DEVICE(
      qcoll_all_reduce(send, recv, n, QCOLL_F32, QCOLL_MAX, comm, stream));
  ON_OTHER_DEVICE(qcoll_barrier(comm, stream));
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(gt_check_launch(recv, n, QCOLL_F32, 1.0f, 3.0f, NULL, state, stream));
  /* Host buffers on a GPU communicator. */
  float h_in = (float)(gt_rank + 1), h_out = 0;
  ON_OTHER_DEVICE(
      qcoll_all_reduce(&h_in, &h_out, 1, QCOLL_F32, QCOLL_SUM, comm, NULL));
  if (h_out != (float)(gt_nranks * (gt_nranks + 1) / 2))
    gt_fail("host-buffer all-reduce: expected %d got %g",
            gt_nranks * (gt_nranks + 1) / 2, h_out);
  gt_wait_stream(stream, 60, "calls with another device current");
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  if (host.checks != 4) gt_fail("%llu checks ran, expected 4", host.checks);
  if (!gt_report_check(&host, "all-reduce results with another device current"))
    gt_note("all-reduce results with another device current: ok");

  /* The legacy default stream, with the communicator's device current. */
  GT_CUDA(cudaSetDevice(dev));
  GT_QCOLL(comm,
           qcoll_all_reduce(send, recv, n, QCOLL_F32, QCOLL_SUM, comm, NULL));
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  GT_CUDA(gt_check_launch(recv, n, QCOLL_F32, (float)gt_nranks, 3.0f, NULL,
                          state, NULL));
  GT_CUDA(cudaDeviceSynchronize());
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  if (!gt_report_check(&host, "all-reduce on the legacy default stream"))
    gt_note("all-reduce on the legacy default stream: ok");

  test_wrong_device(stream, send, recv, n);
  test_identical(stream, QCOLL_F32, QCOLL_ALGO_ONESHOT);
  test_identical(stream, QCOLL_F32, QCOLL_ALGO_TWOSHOT);
  test_identical(stream, QCOLL_F16, QCOLL_ALGO_TWOSHOT);
  test_identical(stream, QCOLL_BF16, QCOLL_ALGO_ONESHOT);

  qcoll_status_t async = QCOLL_OK;
  ON_OTHER_DEVICE(qcoll_comm_get_async_error(comm, &async));
  if (async != QCOLL_OK)
    gt_fail("asynchronous error: %s: %s", qcoll_status_string(async),
            gt_last_error(comm));
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(state));
  ON_OTHER_DEVICE(qcoll_comm_destroy(comm));
  gt_note(gt_failures() ? "FAILED" : "all passed");
  return gt_failures() ? 1 : 0;
}
