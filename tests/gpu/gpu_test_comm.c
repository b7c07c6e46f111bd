/* The helpers that call the library (gpu_test.c needs only CUDA). */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_test.h"

static int device = -1;

const char *gt_last_error(qcoll_comm_t comm) {
  const char *m = comm ? qcoll_comm_last_error(comm) : "";
  return m && *m ? m : qcoll_last_error();
}

void gt_qcoll_die(qcoll_comm_t comm, const char *what, qcoll_status_t st,
                  int line) {
  gt_fail("line %d: %s returned %d (%s): %s", line, what, (int)st,
          qcoll_status_string(st), gt_last_error(comm));
  exit(1);
}

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

qcoll_comm_t gt_init(void) {
  int count = 0;
  GT_CUDA(cudaGetDeviceCount(&count));
  int local = env_int("QCOLL_LOCAL_RANK", env_int("QCOLL_RANK", 0));
  device = local % count;
  GT_CUDA(cudaSetDevice(device));
  qcoll_comm_t comm = NULL;
  GT_QCOLL(NULL, qcoll_comm_init_env(&comm, NULL));
  GT_QCOLL(comm, qcoll_comm_rank(comm, &gt_rank));
  GT_QCOLL(comm, qcoll_comm_size(comm, &gt_nranks));
  int comm_dev = -99;
  GT_QCOLL(comm, qcoll_comm_device(comm, &comm_dev));
  if (comm_dev != device) {
    gt_fail("the communicator's device is %d, expected %d (current at init)",
            comm_dev, device);
    exit(1);
  }
  return comm;
}

int gt_device(void) {
  return device;
}

size_t gt_check_same_on_all_ranks(qcoll_comm_t comm, const void *result,
                                  size_t bytes, const char *what) {
  uint64_t mine = gt_hash(result, bytes);
  uint64_t *all = calloc((size_t)gt_nranks, sizeof *all);
  if (!all) exit(1);
  GT_QCOLL(comm, qcoll_all_gather(&mine, all, 1, QCOLL_U64, comm, NULL));
  size_t differ = 0;
  for (int r = 0; r < gt_nranks; r++)
    if (all[r] != mine) {
      gt_fail("%s: rank %d's result hashes to %016llx, this rank's to %016llx",
              what, r, (unsigned long long)all[r], (unsigned long long)mine);
      differ++;
    }
  free(all);
  return differ;
}

void gt_all_reduce_algo(qcoll_comm_t comm, cudaStream_t stream,
                        const void *send, void *recv, size_t count,
                        qcoll_dtype_t dtype, qcoll_algo_t algo,
                        const char *what) {
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = algo;
  qcoll_status_t st = qcoll_all_reduce_ex(send, recv, count, dtype, QCOLL_SUM,
                                          comm, stream, &opts);
  if (st != QCOLL_OK) {
    gt_fail("%s: qcoll_all_reduce_ex returned %s: %s", what,
            qcoll_status_string(st), gt_last_error(comm));
    exit(1);
  }
}

cudaGraphExec_t gt_capture_counted_all_reduce(
    qcoll_comm_t comm, cudaStream_t stream, gt_check_state_t *state,
    void *send, void *recv, size_t count, qcoll_dtype_t dtype,
    qcoll_algo_t algo, unsigned *counter, const char *what) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_CUDA(gt_fill_launch(send, count, dtype, 0, counter, stream));
  gt_all_reduce_algo(comm, stream, send, recv, count, dtype, algo, what);
  GT_CUDA(gt_check_launch(recv, count, dtype, (float)gt_nranks, 0, counter,
                          state, stream));
  GT_CUDA(gt_bump_launch(counter, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  GT_CUDA(cudaGraphDestroy(graph));
  return exec;
}

void gt_check_async_and_destroy(qcoll_comm_t comm) {
  qcoll_status_t async = QCOLL_OK;
  GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
  if (async != QCOLL_OK)
    gt_fail("asynchronous error after the run: %s: %s",
            qcoll_status_string(async), gt_last_error(comm));
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
}
