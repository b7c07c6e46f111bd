/* See ipc_world.h. */
#include "ipc_world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void world_reset(world_t *w) {
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaMemset(w->buffers[r], 0, QCOLL_IPC_HEADER_BYTES));
    w->words[r][0] = 0;
    w->words[r][1] = 0;
  }
  GT_CUDA(cudaDeviceSynchronize());
}

void world_set_timeout(world_t *w, double timeout_s) {
  for (int r = 0; r < w->n; r++)
    w->views[r].timeout_ns = (unsigned long long)(timeout_s * 1e9);
}

void world_set_grid_limit(world_t *w, int limit) {
  for (int r = 0; r < w->n; r++) w->views[r].max_grid = limit;
}

void world_set_quant_pipeline(world_t *w, int mode) {
  for (int r = 0; r < w->n; r++) w->views[r].quant_pipeline = mode;
}

void world_init(world_t *w, int n, size_t ipc_bytes, double timeout_s) {
  memset(w, 0, sizeof *w);
  w->n = n;
  int resident = 0;
  GT_CUDA(qcoll__cuda_all_reduce_resident_blocks(&resident));
  w->full_grid = resident / n;
  if (w->full_grid > QCOLL_IPC_MAX_BLOCKS) w->full_grid = QCOLL_IPC_MAX_BLOCKS;
  for (int r = 0; r < n; r++) {
    GT_CUDA(cudaMalloc((void **)&w->buffers[r],
                       qcoll__ipc_layout_bytes(ipc_bytes)));
    GT_CUDA(cudaHostAlloc((void **)&w->words[r], 2 * sizeof(unsigned long long),
                          cudaHostAllocMapped));
    GT_CUDA(cudaStreamCreateWithFlags(&w->streams[r], cudaStreamNonBlocking));
  }
  for (int r = 0; r < n; r++) {
    qcoll__ipc_view_t *v = &w->views[r];
    for (int p = 0; p < n; p++) v->bases[p] = w->buffers[p];
    unsigned long long *dev_words = NULL;
    GT_CUDA(cudaHostGetDevicePointer((void **)&dev_words, w->words[r], 0));
    v->error_word = dev_words;
    v->host_abort = dev_words + 1;
    qcoll__ipc_view_set_layout(v, ipc_bytes);
    v->rank = r;
    v->nranks = n;
  }
  world_set_grid_limit(w, w->full_grid);
  world_set_quant_pipeline(w, 1);
  world_set_timeout(w, timeout_s);
  world_reset(w);
}

void world_free(world_t *w) {
  GT_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < w->n; r++) {
    GT_CUDA(cudaFree(w->buffers[r]));
    GT_CUDA(cudaFreeHost(w->words[r]));
    GT_CUDA(cudaStreamDestroy(w->streams[r]));
  }
}

bool world_report_error_words(const world_t *w, const char *what) {
  bool any = false;
  for (int r = 0; r < w->n; r++)
    if (w->words[r][0]) {
      gt_fail("%s: rank %d raised error word 0x%016llx", what, r,
              w->words[r][0]);
      any = true;
    }
  return any;
}

void world_expect_missing_peer(const world_t *w, const char *what,
                               double waited, double timeout) {
  const int missing = w->n - 1;
  int timeouts_naming_missing = 0;
  for (int r = 0; r < missing; r++) {
    unsigned long long e = w->words[r][0];
    unsigned kind = qcoll__ipc_err_kind(e);
    if (kind == QCOLL_IPC_ERR_TIMEOUT && qcoll__ipc_err_peer(e) == missing)
      timeouts_naming_missing++;
    if (kind != QCOLL_IPC_ERR_TIMEOUT && kind != QCOLL_IPC_ERR_PEER_ABORTED)
      gt_fail(
          "%s: rank %d's error word is 0x%016llx, expected a timeout or a "
          "peer abort",
          what, r, e);
  }
  if (timeouts_naming_missing == 0)
    gt_fail("%s: no rank reported a timeout waiting for rank %d", what,
            missing);
  if (waited > timeout + 3.0)
    gt_fail("%s: the kernels gave up after %.2f s, deadline %.2f s", what,
            waited, timeout);
  else
    gt_note("%s: every waiting rank gave up after %.2f s (deadline %.2f s)",
            what, waited, timeout);
}

int world_sizes(int argc, char **argv, int min_n, int *sizes, int max) {
  int count = 0;
  for (int i = 1; i < argc && count < max; i++) {
    int n = atoi(argv[i]);
    if (n < min_n || n > QCOLL_IPC_MAX_RANKS)
      gt_fail("world size %d is outside %d..%d", n, min_n, QCOLL_IPC_MAX_RANKS);
    else
      sizes[count++] = n;
  }
  if (argc <= 1) {
    static const int def[] = {2, 3, 4, 8};
    for (int i = 0; i < 4 && count < max; i++) sizes[count++] = def[i];
  }
  return count;
}
