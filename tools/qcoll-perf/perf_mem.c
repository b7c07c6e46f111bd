/*
 * Benchmark buffers, the device, streams, timers and CUDA graphs.
 *
 * Host memory is plain malloc: the collectives and the checker use the same
 * pointer, host collectives are synchronous and the wall clock times them.
 * GPU memory is cudaMalloc on the current device with a separate host
 * staging copy, so the checker never has to know where a buffer lives;
 * GPU work is timed with CUDA events on the tool's own non-blocking stream.
 *
 * Built without CUDA (QCOLL_PERF_CUDA undefined) every GPU function fails
 * and perf_gpu_error() says that the build has no CUDA.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

#ifdef QCOLL_PERF_CUDA
#include <cuda_runtime_api.h>
#endif

static _Thread_local char gpu_error[256];

const char *perf_gpu_error(void) {
  return gpu_error;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Write every page now: first-touch faults are then not timed, and no
 * buffer is left as untouched pages that all map the kernel's shared zero
 * page (malloc + memset 0 may be folded into calloc, whose fresh pages are
 * never written; reading them is faster than reading real memory and
 * flattered out-of-place timings).  0x3c bytes are normal numbers in every
 * float type, so no timed loop reduces denormals. */
static void touch_pages(void *p, size_t n) {
  memset(p, 0x3c, n);
}

/* Every wait of the tool has a deadline, the communicator's (QCOLL_TIMEOUT):
 * GPU work that never finishes (a kernel stalled on the device, ours or
 * NCCL's) ends the run with a message instead of a silent hang. */
static double wait_deadline_s = 300;

void perf_set_wait_deadline(double seconds) {
  if (seconds > 0) wait_deadline_s = seconds;
}

bool perf_cuda_built(void) {
#ifdef QCOLL_PERF_CUDA
  return true;
#else
  return false;
#endif
}

#ifdef QCOLL_PERF_CUDA

/* QCOLL_DISABLE_CUDA keeps the library off the GPU: GPU buffers would then
 * be refused by every collective, so the tool stays off it too. */
static bool cuda_disabled(void) {
  const char *v = getenv("QCOLL_DISABLE_CUDA");
  return v && *v && strcmp(v, "0") != 0;
}

/* Record a failed CUDA call (named up to its argument list); returns -1
 * so callers can `return failed(...)`. */
static int failed(const char *what, cudaError_t err) {
  int name_len = (int)strcspn(what, "(");
  snprintf(gpu_error, sizeof gpu_error, "%.*s: %s (%s)", name_len, what,
           cudaGetErrorString(err), cudaGetErrorName(err));
  return -1;
}

/* Poll until query says done.  Polling rather than cudaStreamSynchronize
 * or cudaEventSynchronize, which wait without a deadline; the times come
 * from CUDA events, so the polling itself is never timed. */
typedef cudaError_t (*gpu_query_t)(void *what);

static cudaError_t query_stream(void *stream) {
  return cudaStreamQuery((cudaStream_t)stream);
}
static cudaError_t query_event(void *event) {
  return cudaEventQuery((cudaEvent_t)event);
}

static int wait_gpu(gpu_query_t query, void *what, const char *waiting_for) {
  const struct timespec pause = {0, 20 * 1000};
  double start = now_s();
  for (unsigned polls = 0;; polls++) {
    cudaError_t err = query(what);
    if (err == cudaSuccess) return 0;
    if (err != cudaErrorNotReady) return failed(waiting_for, err);
    if (now_s() - start > wait_deadline_s) {
      snprintf(gpu_error, sizeof gpu_error,
               "%s: the GPU work had not finished after %g s (QCOLL_TIMEOUT): "
               "a kernel on the stream is stalled",
               waiting_for, wait_deadline_s);
      return -1;
    }
    if (polls > 1000) nanosleep(&pause, NULL);
  }
}

#define CUDA_TRY(call)                                   \
  do {                                                   \
    cudaError_t err_ = (call);                           \
    if (err_ != cudaSuccess) return failed(#call, err_); \
  } while (0)

static int device_count(int *n) {
  *n = 0;
  CUDA_TRY(cudaGetDeviceCount(n));
  if (*n < 1) {
    snprintf(gpu_error, sizeof gpu_error, "the CUDA driver reports no device");
    return -1;
  }
  return 0;
}

bool perf_gpu_available(const char **why) {
  static char msg[300];
  int n;
  if (cuda_disabled()) {
    if (why) *why = "QCOLL_DISABLE_CUDA is set";
    return false;
  }
  if (device_count(&n) == 0) return true;
  snprintf(msg, sizeof msg, "no GPU is visible (%s)", gpu_error);
  if (why) *why = msg;
  return false;
}

int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why) {
  static char msg[400];
  if (kind == PERF_MEM_HOST) return 0;
  if (cuda_disabled()) {
    *why =
        "--mem gpu: QCOLL_DISABLE_CUDA is set, so the library uses no GPU (use --mem "
        "host)";
    return -1;
  }
  int n, dev;
  if (device_count(&n) != 0) {
    snprintf(msg, sizeof msg, "--mem gpu: no usable CUDA device (%s)", gpu_error);
    *why = msg;
    return -1;
  }
  dev = (local_rank < 0 ? 0 : local_rank) % n;
  cudaError_t err = cudaSetDevice(dev);
  if (err == cudaSuccess)
    err = cudaFree(NULL); /* create the context now, not in a timed loop */
  if (err != cudaSuccess) {
    failed("cudaSetDevice", err);
    snprintf(msg, sizeof msg,
             "--mem gpu: cannot use device %d (local rank %d of %d devices): %s",
             dev, local_rank, n, gpu_error);
    *why = msg;
    return -1;
  }
  return 0;
}

int perf_current_device(void) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
}

void perf_gpu_describe(char *buf, size_t len) {
  struct cudaDeviceProp prop;
  char bus[32] = "";
  int dev = perf_current_device();
  buf[0] = 0;
  if (dev < 0 || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return;
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess)
    bus[0] = 0;
  snprintf(buf, len, "%s [%s]", prop.name, bus);
}

int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->bytes = bytes;
  /* Never a zero-byte allocation: a valid pointer even for empty rows. */
  size_t n = bytes ? bytes : 1;
  if (kind == PERF_MEM_GPU) {
    b->host = malloc(n);
    if (!b->host) return -1;
    memset(b->host, 0, n);
    cudaError_t err = cudaMalloc(&b->ptr, n);
    /* Zeros, so the timed loops never reduce uninitialised bit patterns. */
    if (err == cudaSuccess) err = cudaMemset(b->ptr, 0, n);
    int waited = err == cudaSuccess
                     ? wait_gpu(query_stream, NULL, "cudaMemset of a new buffer")
                     : failed("cudaMalloc", err);
    if (waited != 0) {
      if (b->ptr) cudaFree(b->ptr);
      free(b->host);
      memset(b, 0, sizeof *b);
      return -1;
    }
    return 0;
  }
  b->ptr = malloc(n);
  if (!b->ptr) return -1;
  touch_pages(b->ptr, n);
  b->host = b->ptr;
  return 0;
}

void perf_buf_free(perf_buf_t *b) {
  if (b->kind == PERF_MEM_GPU) {
    if (b->ptr) cudaFree(b->ptr);
    free(b->host);
  } else {
    free(b->ptr);
  }
  memset(b, 0, sizeof *b);
}

/* Copies go on the collectives' stream: it does not synchronise with the
 * legacy default stream, so a plain cudaMemcpy would not be ordered with
 * the calls around it. */
static int copy(void *dst, const void *src, size_t bytes,
                enum cudaMemcpyKind kind, void *stream) {
  if (bytes == 0) return 0;
  CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream));
  return wait_gpu(query_stream, stream, "a buffer copy");
}

int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes, void *stream) {
  if (b->kind == PERF_MEM_HOST) return 0;
  return copy((char *)b->ptr + offset, (char *)b->host + offset, bytes,
              cudaMemcpyHostToDevice, stream);
}

int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes,
                      void *stream) {
  if (b->kind == PERF_MEM_HOST) return 0;
  return copy((char *)b->host + offset, (char *)b->ptr + offset, bytes,
              cudaMemcpyDeviceToHost, stream);
}

int perf_stream_create(perf_mem_kind_t kind, void **stream) {
  *stream = NULL;
  if (kind == PERF_MEM_HOST) return 0;
  cudaStream_t s;
  CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *stream = s;
  return 0;
}

void perf_stream_destroy(perf_mem_kind_t kind, void *stream) {
  if (kind == PERF_MEM_GPU && stream) cudaStreamDestroy((cudaStream_t)stream);
}

int perf_stream_sync(perf_mem_kind_t kind, void *stream) {
  /* Host collectives are synchronous: the result is there on return. */
  if (kind == PERF_MEM_HOST) return 0;
  return wait_gpu(query_stream, stream, "the stream");
}

int perf_timer_init(perf_timer_t *t, perf_mem_kind_t kind) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  if (kind == PERF_MEM_HOST) return 0;
  cudaEvent_t a, b;
  CUDA_TRY(cudaEventCreate(&a));
  cudaError_t err = cudaEventCreate(&b);
  if (err != cudaSuccess) {
    cudaEventDestroy(a);
    return failed("cudaEventCreate", err);
  }
  t->start = a;
  t->stop = b;
  return 0;
}

int perf_timer_start(perf_timer_t *t, void *stream) {
  if (t->kind == PERF_MEM_HOST) {
    t->t0 = now_s();
    return 0;
  }
  CUDA_TRY(cudaEventRecord((cudaEvent_t)t->start, (cudaStream_t)stream));
  return 0;
}

int perf_timer_stop(perf_timer_t *t, void *stream, double *seconds) {
  if (t->kind == PERF_MEM_HOST) {
    *seconds = now_s() - t->t0;
    return 0;
  }
  float ms = 0;
  CUDA_TRY(cudaEventRecord((cudaEvent_t)t->stop, (cudaStream_t)stream));
  if (wait_gpu(query_event, t->stop, "the timed loop") != 0) return -1;
  CUDA_TRY(
      cudaEventElapsedTime(&ms, (cudaEvent_t)t->start, (cudaEvent_t)t->stop));
  *seconds = 1e-3 * (double)ms;
  return 0;
}

void perf_timer_destroy(perf_timer_t *t) {
  if (t->start) cudaEventDestroy((cudaEvent_t)t->start);
  if (t->stop) cudaEventDestroy((cudaEvent_t)t->stop);
  memset(t, 0, sizeof *t);
}

int perf_capture_begin(void *stream) {
  CUDA_TRY(cudaStreamBeginCapture((cudaStream_t)stream,
                                  cudaStreamCaptureModeThreadLocal));
  return 0;
}

int perf_capture_end(void *stream, bool keep, perf_graph_t *g) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  g->exec = NULL;
  /* Always end the capture, even one that a failed call invalidated: the
   * stream stays in capture mode until its owner ends it. */
  cudaError_t err = cudaStreamEndCapture((cudaStream_t)stream, &graph);
  if (err != cudaSuccess || !keep) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError(); /* an invalidated capture is not a sticky error */
    return err != cudaSuccess ? failed("cudaStreamEndCapture", err) : 0;
  }
  err = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) return failed("cudaGraphInstantiate", err);
  /* Upload now, so the first timed launch does not pay for it. */
  err = cudaGraphUpload(exec, (cudaStream_t)stream);
  if (err != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    return failed("cudaGraphUpload", err);
  }
  if (wait_gpu(query_stream, stream, "the CUDA graph upload") != 0) {
    cudaGraphExecDestroy(exec);
    return -1;
  }
  g->exec = exec;
  return 0;
}

int perf_graph_launch(const perf_graph_t *g, void *stream) {
  CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)g->exec, (cudaStream_t)stream));
  return 0;
}

void perf_graph_destroy(perf_graph_t *g) {
  if (g->exec) cudaGraphExecDestroy((cudaGraphExec_t)g->exec);
  g->exec = NULL;
}

#else /* no CUDA in this build */

static int no_cuda(void) {
  snprintf(gpu_error, sizeof gpu_error,
           "this qcoll-perf was built without CUDA");
  return -1;
}

bool perf_gpu_available(const char **why) {
  if (why) *why = "this qcoll-perf was built without CUDA";
  return false;
}

int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why) {
  (void)local_rank;
  if (kind == PERF_MEM_HOST) return 0;
  *why =
      "--mem gpu: this qcoll-perf was built without CUDA, so it has no GPU "
      "buffers "
      "(build qcoll with CUDA, or use --mem host)";
  return -1;
}

int perf_current_device(void) {
  return -1;
}

void perf_gpu_describe(char *buf, size_t len) {
  if (len) buf[0] = 0;
}

int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->bytes = bytes;
  if (kind == PERF_MEM_GPU) return no_cuda();
  size_t n = bytes ? bytes : 1; /* never a zero-byte malloc */
  b->ptr = malloc(n);
  if (!b->ptr) return -1;
  touch_pages(b->ptr, n);
  b->host = b->ptr;
  return 0;
}

void perf_buf_free(perf_buf_t *b) {
  if (b->kind == PERF_MEM_HOST) free(b->ptr);
  memset(b, 0, sizeof *b);
}

int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes, void *stream) {
  (void)offset, (void)bytes, (void)stream;
  return b->kind == PERF_MEM_HOST ? 0 : no_cuda();
}

int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes,
                      void *stream) {
  (void)offset, (void)bytes, (void)stream;
  return b->kind == PERF_MEM_HOST ? 0 : no_cuda();
}

int perf_stream_create(perf_mem_kind_t kind, void **stream) {
  *stream = NULL;
  return kind == PERF_MEM_HOST ? 0 : no_cuda();
}

void perf_stream_destroy(perf_mem_kind_t kind, void *stream) {
  (void)kind, (void)stream;
}

int perf_stream_sync(perf_mem_kind_t kind, void *stream) {
  (void)stream;
  return kind == PERF_MEM_HOST ? 0 : no_cuda();
}

int perf_timer_init(perf_timer_t *t, perf_mem_kind_t kind) {
  memset(t, 0, sizeof *t);
  t->kind = kind;
  return kind == PERF_MEM_HOST ? 0 : no_cuda();
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
  return no_cuda();
}

int perf_capture_end(void *stream, bool keep, perf_graph_t *g) {
  (void)stream, (void)keep;
  g->exec = NULL;
  return no_cuda();
}

int perf_graph_launch(const perf_graph_t *g, void *stream) {
  (void)g, (void)stream;
  return no_cuda();
}

void perf_graph_destroy(perf_graph_t *g) {
  g->exec = NULL;
}

#endif
