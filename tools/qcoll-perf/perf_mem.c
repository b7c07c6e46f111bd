/*
 * Benchmark buffers.
 *
 * Host memory is plain malloc: the collectives and the checker use the same
 * pointer.  GPU memory is not wired up yet: every function below has a
 * marked GPU hook where cudaMalloc / cudaMemcpy / cudaStreamSynchronize go,
 * with the host view kept as a separate staging allocation so the checker
 * never has to know where the buffer lives.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "perf.h"

bool perf_gpu_available(void) {
  /* GPU HOOK: return true when the CUDA runtime reports a device (and this
   * build of qcoll-perf can allocate GPU buffers).  Until then every run
   * uses host memory and -m gpu is refused. */
  return false;
}

int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why) {
  if (kind == PERF_MEM_HOST) return 0;
  /* GPU HOOK: cudaSetDevice(local_rank % device_count) here, before the
   * communicator is created, so the communicator picks that device. */
  *why = "GPU buffers are not supported by this build of qcoll-perf yet (use -m host)";
  return -1;
}

int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->bytes = bytes;
  /* Never a zero-byte malloc: a valid pointer even for empty rows. */
  size_t n = bytes ? bytes : 1;
  if (kind == PERF_MEM_GPU) {
    /* GPU HOOK: b->ptr = cudaMalloc(n); b->host = malloc(n) (staging). */
    return -1;
  }
  b->ptr = malloc(n);
  if (!b->ptr) return -1;
  /* Touch every page now, so first-touch faults are not timed. */
  memset(b->ptr, 0, n);
  b->host = b->ptr;
  return 0;
}

void perf_buf_free(perf_buf_t *b) {
  if (b->kind == PERF_MEM_GPU) {
    /* GPU HOOK: cudaFree(b->ptr); free(b->host). */
  } else {
    free(b->ptr);
  }
  memset(b, 0, sizeof *b);
}

int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes) {
  if (b->kind == PERF_MEM_HOST) return 0;
  /* GPU HOOK: cudaMemcpy(ptr + offset, host + offset, bytes, H2D). */
  (void)offset;
  (void)bytes;
  return -1;
}

int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes) {
  if (b->kind == PERF_MEM_HOST) return 0;
  /* GPU HOOK: cudaMemcpy(host + offset, ptr + offset, bytes, D2H). */
  (void)offset;
  (void)bytes;
  return -1;
}

int perf_stream_sync(perf_mem_kind_t kind, void *stream) {
  /* Host collectives are synchronous: the result is there on return. */
  if (kind == PERF_MEM_HOST) return 0;
  /* GPU HOOK: cudaStreamSynchronize((cudaStream_t)stream). */
  (void)stream;
  return -1;
}
