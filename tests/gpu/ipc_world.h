/*
 * N ranks of the IPC kernels as streams of one process on one GPU, for the
 * tests that call the kernel launchers directly (gpu_kernels.c,
 * gpu_quant_kernels.c): each rank has its own IPC-layout buffer, its
 * host-mapped error and abort words and a non-blocking stream, and views
 * that map every rank's buffer.
 *
 * Enqueue work for all ranks launch by launch (every rank's first launch,
 * then every rank's second, ...): the streams of one process may share a
 * hardware queue (fewer of them under MPS), and a rank's second launch
 * queued ahead of another rank's first would wait for it forever.
 */
#ifndef QCOLL_TESTS_GPU_IPC_WORLD_H
#define QCOLL_TESTS_GPU_IPC_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include "coll/cuda/launch.h"
#include "gpu_test.h"

typedef struct world {
  int n;
  int full_grid; /* the residency limit: the GPU's resident blocks / n */
  char *buffers[QCOLL_IPC_MAX_RANKS];
  unsigned long long
      *words[QCOLL_IPC_MAX_RANKS]; /* host-mapped: error, abort */
  cudaStream_t streams[QCOLL_IPC_MAX_RANKS];
  qcoll__ipc_view_t views[QCOLL_IPC_MAX_RANKS];
} world_t;

/* Buffers of ipc_bytes, grid limit full_grid, deadline timeout_s; state
 * zeroed. */
void world_init(world_t *w, int n, size_t ipc_bytes, double timeout_s);
/* Zero every header (flags, epochs, abort words) and the host words. */
void world_reset(world_t *w);
void world_set_timeout(world_t *w, double timeout_s);
void world_set_grid_limit(world_t *w, int limit);
/* Whether quantised launches of several rounds pipeline them (the view's
 * quant_pipeline, QCOLL_QUANT_PIPELINE's values; 1 by default). */
void world_set_quant_pipeline(world_t *w, int mode);
void world_free(world_t *w);
/* Report every rank's non-zero error word as a failure; true if any. */
bool world_report_error_words(const world_t *w, const char *what);
/* After every rank but the last launched a kernel that waits for it and
 * all of them stopped `waited` seconds later: each waiting rank's error
 * word must be a timeout or a peer abort, at least one a timeout naming the
 * last rank, and the wait no longer than the deadline plus 3 s.  `what`
 * starts every message. */
void world_expect_missing_peer(const world_t *w, const char *what,
                               double waited, double timeout);
/* World sizes from the command line (default 2 3 4 8), each checked
 * against [min_n, QCOLL_IPC_MAX_RANKS]; returns how many. */
int world_sizes(int argc, char **argv, int min_n, int *sizes, int max);

#endif
