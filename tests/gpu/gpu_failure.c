/*
 * No silent hang: the last rank never joins an all-reduce.  The kernels of
 * the other ranks must give up within the deadline (QCOLL_TIMEOUT, set
 * short for this test), qcoll_comm_get_async_error must report a timeout or
 * a peer failure whose message names the missing rank, the next all-reduce
 * must fail at once instead of enqueueing work that would wait again, and
 * destroy must return.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test.h"

int main(void) {
  gt_skip_without_gpu("gpu_failure");
  qcoll_comm_t comm = gt_init();
  const char *t = getenv("QCOLL_TIMEOUT");
  const double timeout = t ? atof(t) : 300;
  if (timeout > 20) {
    gt_fail(
        "QCOLL_TIMEOUT=%g: this test needs a short deadline (the CTest entry "
        "sets 3)",
        timeout);
    return 1;
  }
  const int missing = gt_nranks - 1;
  const size_t n = 10000;
  float *buf;
  cudaStream_t stream;
  GT_CUDA(cudaMalloc((void **)&buf, n * sizeof(float)));
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  /* One good call first: the failure below is not an init problem. */
  GT_QCOLL(comm,
           qcoll_all_reduce(buf, buf, n, QCOLL_F32, QCOLL_SUM, comm, stream));
  gt_wait_stream(stream, timeout + 30, "the first all-reduce");

  if (gt_rank == missing) {
    gt_note("staying away from the second all-reduce for %.0f s", timeout + 2);
    usleep((useconds_t)((timeout + 2) * 1e6));
  } else {
    double t0 = gt_now();
    GT_QCOLL(comm,
             qcoll_all_reduce(buf, buf, n, QCOLL_F32, QCOLL_SUM, comm, stream));
    gt_wait_stream(stream, timeout + 30,
                   "the all-reduce without the last rank");
    double waited = gt_now() - t0;
    if (waited > timeout + 5)
      gt_fail("the kernel gave up after %.1f s, the deadline is %.1f s", waited,
              timeout);
    qcoll_status_t async = QCOLL_OK;
    qcoll_status_t st = qcoll_comm_get_async_error(comm, &async);
    const char *msg = gt_last_error(comm);
    char who[16];
    snprintf(who, sizeof who, "%d", missing);
    if (async != QCOLL_ERR_TIMEOUT && async != QCOLL_ERR_PEER_FAILURE)
      gt_fail(
          "async error is %s (call returned %s), expected a timeout or a peer "
          "failure",
          qcoll_status_string(async), qcoll_status_string(st));
    else if (async == QCOLL_ERR_TIMEOUT && !strstr(msg, who))
      gt_fail("the timeout message should name rank %d: \"%s\"", missing, msg);
    else
      gt_note("gave up after %.1f s (deadline %.1f s): %s: %s", waited, timeout,
              qcoll_status_string(async), msg);
    /* The communicator is broken now: the next call fails fast. */
    double t1 = gt_now();
    st = qcoll_all_reduce(buf, buf, n, QCOLL_F32, QCOLL_SUM, comm, stream);
    if (st == QCOLL_OK)
      gt_fail("an all-reduce after the failure was accepted");
    else
      gt_note("the next all-reduce is refused: %s: %s", qcoll_status_string(st),
              gt_last_error(comm));
    gt_wait_stream(stream, 10, "after the refused call");
    if (gt_now() - t1 > 5)
      gt_fail("the refused call took %.1f s", gt_now() - t1);
  }
  double t2 = gt_now();
  qcoll_status_t st = qcoll_comm_destroy(comm);
  double took = gt_now() - t2;
  gt_note("qcoll_comm_destroy returned %s after %.1f s",
          qcoll_status_string(st), took);
  if (took > 2 * timeout + 10) gt_fail("qcoll_comm_destroy took %.1f s", took);
  GT_CUDA(cudaFree(buf));
  return gt_failures() ? 1 : 0;
}
