/*
 * eager-call: the host time of one eager GPU collective call, the cost of
 * everything qcoll does on the CPU before and while it enqueues a kernel
 * (validation, placement, selection, device guard, launch).  One rank, a
 * tiny all-reduce (8 bytes of f32 by default) on an idle stream: the GPU
 * finishes each kernel long before the next launch, so the wall time of a
 * batch of calls is host time.  Batches of B calls (B well below the
 * launch queue's depth, so no call waits for the GPU), a stream
 * synchronisation between batches, untimed.  Prints the median and the
 * best batch, in microseconds per call.
 *
 * -r: the ranks of a launcher instead (qcoll_comm_init_env, e.g. under
 * qcoll-run -n 2): each rank's calls then launch the IPC kernels, which
 * wait for each other on the GPU while the host measures its own side.
 *
 * Uses the public API only, so the same binary measures any build of the
 * library (LD_LIBRARY_PATH picks it):
 *
 *   cc -O2 -Iinclude -I/usr/local/cuda/include bench/eager-call.c \
 *      -L"$BUILD" -lqcoll -L/usr/local/cuda/lib64 -lcudart -o eager-call
 *   LD_LIBRARY_PATH="$BUILD" ./eager-call [-n CALLS] [-b BATCH] [-c COUNT] [-r]
 *
 * Exit status 77 (skipped) without a usable GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "qcoll.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define OK(call)                                             \
  do {                                                       \
    qcoll_status_t st_ = (call);                             \
    if (st_ != QCOLL_OK) {                                   \
      fprintf(stderr, "eager-call: %s: %s (%s)\n", #call,    \
              qcoll_status_string(st_), qcoll_last_error()); \
      return 1;                                              \
    }                                                        \
  } while (0)

int main(int argc, char **argv) {
  int calls = 2000, batch = 100;
  size_t count = 2;
  int launched = 0;
  for (int opt; (opt = getopt(argc, argv, "n:b:c:r")) != -1;) {
    if (opt == 'n')
      calls = atoi(optarg);
    else if (opt == 'b')
      batch = atoi(optarg);
    else if (opt == 'c')
      count = (size_t)atoll(optarg);
    else if (opt == 'r')
      launched = 1;
    else {
      fprintf(stderr,
              "usage: eager-call [-n CALLS] [-b BATCH] [-c COUNT] [-r]\n");
      return 2;
    }
  }
  if (calls < batch || batch < 1 || count < 1) {
    fprintf(stderr, "eager-call: need CALLS >= BATCH >= 1 and COUNT >= 1\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    printf("SKIP: no usable CUDA device\n");
    return 77;
  }
  float *buf = NULL;
  cudaStream_t stream;
  if (cudaMalloc((void **)&buf, count * sizeof *buf) != cudaSuccess ||
      cudaMemset(buf, 0, count * sizeof *buf) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
          cudaSuccess) {
    fprintf(stderr, "eager-call: CUDA set-up failed\n");
    return 1;
  }
  qcoll_unique_id_t id;
  qcoll_comm_t comm;
  if (launched) {
    OK(qcoll_comm_init_env(&comm, NULL));
  } else {
    OK(qcoll_get_unique_id(&id));
    OK(qcoll_comm_init_rank(&comm, 1, &id, 0, NULL));
  }
  int rank = 0, nranks = 1;
  OK(qcoll_comm_rank(comm, &rank));
  OK(qcoll_comm_size(comm, &nranks));

  for (int i = 0; i < batch; i++) /* warm up: IPC set-up, first launches */
    OK(qcoll_all_reduce(buf, buf, count, QCOLL_F32, QCOLL_SUM, comm, stream));
  cudaStreamSynchronize(stream);

  int batches = calls / batch;
  double *per_call = malloc((size_t)batches * sizeof *per_call);
  for (int b = 0; b < batches; b++) {
    double t0 = now_us();
    for (int i = 0; i < batch; i++)
      OK(qcoll_all_reduce(buf, buf, count, QCOLL_F32, QCOLL_SUM, comm, stream));
    per_call[b] = (now_us() - t0) / batch;
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      fprintf(stderr, "eager-call: the stream failed\n");
      return 1;
    }
  }
  qcoll_status_t async = QCOLL_OK;
  OK(qcoll_comm_get_async_error(comm, &async));
  qsort(per_call, (size_t)batches, sizeof *per_call, compare);
  printf(
      "eager all_reduce %zu x f32, rank %d of %d, %d calls in batches of %d: "
      "host time per call median %.2f us, best batch %.2f us%s\n",
      count, rank, nranks, batches * batch, batch, per_call[batches / 2],
      per_call[0],
      async == QCOLL_OK ? "" : " (async error!)");
  free(per_call);
  OK(qcoll_comm_destroy(comm));
  cudaFree(buf);
  return async == QCOLL_OK ? 0 : 1;
}
