/*
 * Device-index correctness with one rank per GPU (needs two or more GPUs;
 * exits 77 and says why with fewer).
 *
 *   gpu_multi_device            (a rank of qcoll-run -n W)
 *     Each rank binds only with cudaSetDevice(rank % GPUs) and never tells
 *     qcoll its device any other way: qcoll_comm_init_env(comm, NULL).
 *     all_reduce of rank+1 (f32, bf16; small and multi-MiB counts) must give
 *     1+2+...+W exactly; then a barrier; then the result must lie on the
 *     rank's device, the communicator must report that device, and it must
 *     still be current.
 *
 *   gpu_multi_device --one-process
 *     One process, two threads, a world of two communicators on devices 0
 *     and 1.  The thread of device d makes the other device current before
 *     every call (init included, which names d in its config): collectives
 *     on device-d buffers run while the other device is current, in both
 *     directions, with exact results, and the other device is still current
 *     after every call.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

#define SMALL_COUNT 1000
#define LARGE_COUNT (3u << 20) /* 12 MiB of f32: two-shot, several chunks */

/* Fill n elements of dtype with v (exact in both dtypes for small v). */
static void *device_filled(size_t n, qcoll_dtype_t dtype, float v) {
  size_t es = gt_dtype_size(dtype);
  char *host = malloc(n * es);
  if (!host) exit(1);
  for (size_t i = 0; i < n; i++) gt_store(host, i, v, dtype);
  void *dev = NULL;
  GT_CUDA(cudaMalloc(&dev, n * es));
  gt_upload(dev, host, n * es);
  free(host);
  return dev;
}

/* Every element of dev equals want exactly. */
static void check_all(const void *dev, size_t n, qcoll_dtype_t dtype,
                      float want, const char *what) {
  size_t es = gt_dtype_size(dtype);
  char *host = malloc(n * es), *expected = malloc(n * es);
  if (!host || !expected) exit(1);
  for (size_t i = 0; i < n; i++) gt_store(expected, i, want, dtype);
  GT_CUDA(cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost));
  gt_compare(expected, host, n, dtype, what);
  free(host);
  free(expected);
}

static void check_on_device(const void *ptr, int device, const char *what) {
  struct cudaPointerAttributes attr;
  GT_CUDA(cudaPointerGetAttributes(&attr, ptr));
  if (attr.type != cudaMemoryTypeDevice || attr.device != device)
    gt_fail(
        "%s: the result lies on device %d (memory type %d), expected "
        "device %d",
        what, attr.device, (int)attr.type, device);
}

static void check_current(int device, const char *what) {
  int now = -1;
  GT_CUDA(cudaGetDevice(&now));
  if (now != device)
    gt_fail("%s: the current device is %d, expected %d", what, now, device);
}

/* ---- one rank per process ------------------------------------------------ */

static int run_ranks(int ngpus) {
  int dev = -1;
  qcoll_comm_t comm = gt_init(); /* cudaSetDevice(local rank % GPUs) only */
  dev = gt_device();
  int comm_dev = -1;
  GT_QCOLL(comm, qcoll_comm_device(comm, &comm_dev));
  if (comm_dev != dev)
    gt_fail("the communicator took device %d, the rank bound device %d",
            comm_dev, dev);
  const float want = (float)gt_nranks * (float)(gt_nranks + 1) / 2.0f;
  const qcoll_dtype_t dtypes[] = {QCOLL_F32, QCOLL_BF16};
  const size_t counts[] = {SMALL_COUNT, LARGE_COUNT};
  for (size_t d = 0; d < 2; d++)
    for (size_t c = 0; c < 2; c++) {
      char what[160];
      snprintf(what, sizeof what, "all_reduce of rank+1, %s x %zu",
               gt_dtype_name(dtypes[d]), counts[c]);
      void *send = device_filled(counts[c], dtypes[d], (float)(gt_rank + 1));
      void *recv = NULL;
      GT_CUDA(cudaMalloc(&recv, counts[c] * gt_dtype_size(dtypes[d])));
      GT_QCOLL(comm, qcoll_all_reduce(send, recv, counts[c], dtypes[d],
                                      QCOLL_SUM, comm, NULL));
      GT_QCOLL(comm, qcoll_barrier(comm, NULL));
      GT_CUDA(cudaDeviceSynchronize());
      check_all(recv, counts[c], dtypes[d], want, what);
      check_on_device(recv, dev, what);
      check_current(dev, what);
      GT_CUDA(cudaFree(send));
      GT_CUDA(cudaFree(recv));
    }
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  check_current(dev, "after destroy");
  if (gt_failures()) return 1;
  gt_note(
      "%d ranks on %d GPUs, rank %d bound device %d by cudaSetDevice "
      "alone: sums exact (%g), results on device %d, device %d still "
      "current",
      gt_nranks, ngpus, gt_rank, dev, want, dev, dev);
  return 0;
}

/* ---- two communicators in one process ------------------------------------ */

typedef struct thread_arg {
  int rank; /* also its device */
  qcoll_unique_id_t id;
  int failures;
} thread_arg_t;

/* Run `call` with the other device current; it must still be current. */
#define WITH_OTHER_CURRENT(comm, other, what, call) \
  do {                                              \
    GT_CUDA(cudaSetDevice(other));                  \
    GT_QCOLL(comm, call);                           \
    check_current(other, what);                     \
  } while (0)

static void *one_rank(void *p) {
  thread_arg_t *a = p;
  const int dev = a->rank, other = 1 - a->rank;
  int before = gt_failures();
  GT_CUDA(cudaSetDevice(dev));
  cudaStream_t stream;
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *send = device_filled(LARGE_COUNT, QCOLL_F32, (float)(a->rank + 1));
  void *recv = NULL, *bsend = device_filled(SMALL_COUNT, QCOLL_BF16, 2.0f);
  GT_CUDA(cudaMalloc(&recv, LARGE_COUNT * sizeof(float)));

  qcoll_config_t cfg;
  GT_QCOLL(NULL, qcoll_config_init(&cfg));
  cfg.device = dev;
  qcoll_comm_t comm = NULL;
  WITH_OTHER_CURRENT(NULL, other, "init",
                     qcoll_comm_init_rank(&comm, 2, &a->id, a->rank, &cfg));
  int comm_dev = -1;
  GT_QCOLL(comm, qcoll_comm_device(comm, &comm_dev));
  if (comm_dev != dev)
    gt_fail("thread of device %d: the communicator reports device %d", dev,
            comm_dev);
  /* On the thread's own stream, then on the default stream (which must be
   * taken as the communicator's device's). */
  WITH_OTHER_CURRENT(comm, other, "all_reduce on a stream",
                     qcoll_all_reduce(send, recv, LARGE_COUNT, QCOLL_F32,
                                      QCOLL_SUM, comm, stream));
  GT_CUDA(cudaStreamSynchronize(stream));
  check_all(recv, LARGE_COUNT, QCOLL_F32, 3.0f, "all_reduce on a stream");
  WITH_OTHER_CURRENT(comm, other, "in-place bf16 all_reduce",
                     qcoll_all_reduce(bsend, bsend, SMALL_COUNT, QCOLL_BF16,
                                      QCOLL_SUM, comm, NULL));
  WITH_OTHER_CURRENT(
      comm, other, "broadcast",
      qcoll_broadcast(send, recv, LARGE_COUNT, QCOLL_F32, 1, comm, NULL));
  WITH_OTHER_CURRENT(comm, other, "barrier", qcoll_barrier(comm, NULL));
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(cudaDeviceSynchronize());
  check_all(bsend, SMALL_COUNT, QCOLL_BF16, 4.0f, "in-place bf16 all_reduce");
  check_all(recv, LARGE_COUNT, QCOLL_F32, 2.0f, "broadcast from rank 1");
  check_on_device(recv, dev, "broadcast");
  WITH_OTHER_CURRENT(comm, other, "destroy", qcoll_comm_destroy(comm));
  GT_CUDA(cudaSetDevice(dev));
  GT_CUDA(cudaFree(send));
  GT_CUDA(cudaFree(recv));
  GT_CUDA(cudaFree(bsend));
  GT_CUDA(cudaStreamDestroy(stream));
  a->failures = gt_failures() - before;
  return NULL;
}

static int run_one_process(void) {
  thread_arg_t args[2];
  qcoll_unique_id_t id;
  GT_QCOLL(NULL, qcoll_get_unique_id(&id));
  pthread_t threads[2];
  for (int r = 0; r < 2; r++) {
    args[r].rank = r;
    args[r].id = id;
    args[r].failures = 0;
    if (pthread_create(&threads[r], NULL, one_rank, &args[r]) != 0) {
      gt_fail("pthread_create failed");
      return 1;
    }
  }
  for (int r = 0; r < 2; r++) pthread_join(threads[r], NULL);
  if (gt_failures()) return 1;
  gt_note(
      "one process, communicators on devices 0 and 1, each called with "
      "the other device current: results exact, current device kept");
  return 0;
}

int main(int argc, char **argv) {
  gt_skip_without_gpu("gpu_multi_device");
  int ngpus = 0;
  GT_CUDA(cudaGetDeviceCount(&ngpus));
  if (ngpus < 2) {
    printf("SKIP: gpu_multi_device needs two GPUs, %d visible\n", ngpus);
    return 77;
  }
  if (argc > 1 && strcmp(argv[1], "--one-process") == 0)
    return run_one_process();
  return run_ranks(ngpus);
}
