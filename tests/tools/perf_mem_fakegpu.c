/*
 * A stand-in for qcoll-perf's perf_mem.c that pretends to be a GPU, so that
 * the benchmark's GPU-only control flow (the NCCL columns and refusal, a
 * refused graph capture) runs on machines without one.  "GPU" buffers are
 * host memory (the library then runs its host back end, synchronously),
 * the stream is a dummy, timers read the wall clock, and a capture records
 * nothing:
 *
 *   FAKE_CAPTURE_FAIL=1   ending a capture fails, as when a call broke it
 *
 * Without FAKE_CAPTURE_FAIL a capture "succeeds" with a graph whose launch
 * does nothing; only the refused path is meaningful here.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

static char gpu_error[128];
static int dummy_stream, dummy_graph;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *perf_gpu_error(void) {
  return gpu_error;
}
bool perf_cuda_built(void) {
  return true;
}
bool perf_gpu_available(const char **why) {
  (void)why;
  return true;
}

int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why) {
  (void)kind, (void)local_rank, (void)why;
  return 0;
}

/* What a host communicator reports, so the device check agrees. */
int perf_current_device(void) {
  return QCOLL_DEVICE_NONE;
}

void perf_gpu_describe(char *buf, size_t len) {
  snprintf(buf, len, "fake GPU [0000:00:00.0]");
}

int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->bytes = bytes;
  b->ptr = calloc(1, bytes ? bytes : 1);
  b->host = b->ptr;
  return b->ptr ? 0 : -1;
}

void perf_buf_free(perf_buf_t *b) {
  free(b->ptr);
  memset(b, 0, sizeof *b);
}

int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes, void *stream) {
  (void)b, (void)offset, (void)bytes, (void)stream;
  return 0;
}

int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes,
                      void *stream) {
  (void)b, (void)offset, (void)bytes, (void)stream;
  return 0;
}

int perf_stream_create(perf_mem_kind_t kind, void **stream) {
  *stream = kind == PERF_MEM_GPU ? &dummy_stream : NULL;
  return 0;
}

void perf_stream_destroy(perf_mem_kind_t kind, void *stream) {
  (void)kind, (void)stream;
}

int perf_stream_sync(perf_mem_kind_t kind, void *stream) {
  (void)kind, (void)stream;
  return 0;
}

/* Nothing here waits: host memory is done when the call returns. */
void perf_set_wait_deadline(double seconds) {
  (void)seconds;
}

int perf_timer_init(perf_timer_t *t, perf_mem_kind_t kind) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  return 0;
}

int perf_timer_start(perf_timer_t *t, void *stream) {
  (void)stream;
  t->t0 = now_s();
  return 0;
}

int perf_timer_stop(perf_timer_t *t, void *stream, double *seconds) {
  (void)stream;
  *seconds = now_s() - t->t0;
  return 0;
}

void perf_timer_destroy(perf_timer_t *t) {
  memset(t, 0, sizeof *t);
}

int perf_capture_begin(void *stream) {
  (void)stream;
  return 0;
}

int perf_capture_end(void *stream, bool keep, perf_graph_t *g) {
  (void)stream;
  g->exec = NULL;
  const char *fail = getenv("FAKE_CAPTURE_FAIL");
  if (fail && strcmp(fail, "1") == 0) {
    snprintf(gpu_error, sizeof gpu_error,
             "cudaStreamEndCapture: operation failed due to a previous error "
             "during capture "
             "(fake)");
    return -1;
  }
  if (keep) g->exec = &dummy_graph;
  return 0;
}

int perf_graph_launch(const perf_graph_t *g, void *stream) {
  (void)g, (void)stream;
  return 0;
}

void perf_graph_destroy(perf_graph_t *g) {
  g->exec = NULL;
}
