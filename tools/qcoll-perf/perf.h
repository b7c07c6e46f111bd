/*
 * qcoll-perf: shared declarations of the benchmark's parts.
 *
 *   qcoll-perf.c  options, timing and the report
 *   perf_common.c what bench/mpi-perf.c shares (perf_common.h): the common
 *                 options, the size sweep, shapes, bus-bandwidth factors,
 *                 the input pattern, where expected values come from, the
 *                 table's lines
 *   perf_colls.c  the collectives: in-place layouts, the calls
 *   perf_check.c  inputs and exact expected results per dtype, comparison
 *   perf_mem.c    buffers, the device, streams, timers and CUDA graphs
 *                 (host-only builds compile it without CUDA: GPU calls fail)
 *   perf_nccl.c   NCCL on the same buffers, loaded at run time
 */
#ifndef QCOLL_PERF_H
#define QCOLL_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf_common.h"
#include "qcoll.h"

/* ---- memory ---------------------------------------------------------- */

typedef enum perf_mem_kind {
  PERF_MEM_HOST = 0,
  PERF_MEM_GPU = 1
} perf_mem_kind_t;

/* One benchmark buffer.  `ptr` is what the collectives get; `host` is where
 * the checker reads and writes (the same pointer for host memory, a
 * staging copy for GPU memory). */
typedef struct perf_buf {
  perf_mem_kind_t kind;
  void *ptr;
  void *host;
  size_t bytes;
} perf_buf_t;

/* True when this qcoll-perf was built with CUDA (GPU buffers possible). */
bool perf_cuda_built(void);
/* True when GPU buffers can be used here (default memory is then gpu);
 * otherwise *why (if not NULL) says why not. */
bool perf_gpu_available(const char **why);
/* Prepare this rank's device (GPU memory only): select device
 * local_rank % device count, so that the communicator, created next, takes
 * it.  0, or -1 with *why set. */
int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why);
/* The current device (GPU memory), else -1. */
int perf_current_device(void);
/* "NVIDIA H200 [0000:18:00.0]" for the current device, or "". */
void perf_gpu_describe(char *buf, size_t len);
/* The last CUDA failure of this thread, in words ("" if none). */
const char *perf_gpu_error(void);

/* 0, or -1 when the memory cannot be had. */
int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes);
void perf_buf_free(perf_buf_t *b);
/* Move [offset, offset+bytes) between host view and buffer, ordered on
 * stream and finished on return (no-op on host memory). */
int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes, void *stream);
int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes, void *stream);

/* The stream the collectives are enqueued on: a non-blocking stream of the
 * current device for GPU memory, NULL for host memory. */
int perf_stream_create(perf_mem_kind_t kind, void **stream);
void perf_stream_destroy(perf_mem_kind_t kind, void *stream);
/* Wait until the work enqueued on stream has finished, at most the wait
 * deadline (perf_set_wait_deadline; past it perf_gpu_error() says so). */
int perf_stream_sync(perf_mem_kind_t kind, void *stream);
/* The deadline of every GPU wait of the tool, in seconds (default 300). */
void perf_set_wait_deadline(double seconds);

/* Time of the work enqueued on a stream between start and stop: CUDA
 * events on GPU streams, the wall clock for host memory (host collectives
 * are synchronous). */
typedef struct perf_timer {
  perf_mem_kind_t kind;
  void *start, *stop; /* cudaEvent_t */
  double t0;
} perf_timer_t;

int perf_timer_init(perf_timer_t *t, perf_mem_kind_t kind);
int perf_timer_start(perf_timer_t *t, void *stream);
/* Waits for the stream; *seconds since start. */
int perf_timer_stop(perf_timer_t *t, void *stream, double *seconds);
void perf_timer_destroy(perf_timer_t *t);

/* A CUDA graph captured from a stream, ready to launch. */
typedef struct perf_graph {
  void *exec; /* cudaGraphExec_t; NULL when there is none */
} perf_graph_t;

/* Start capturing stream (thread-local mode: other threads' CUDA calls,
 * the library's included, neither break the capture nor are refused). */
int perf_capture_begin(void *stream);
/* End the capture.  keep: instantiate the graph into *g and upload it;
 * otherwise discard what was captured.  0, or -1 (perf_gpu_error says why;
 * *g stays empty). */
int perf_capture_end(void *stream, bool keep, perf_graph_t *g);
int perf_graph_launch(const perf_graph_t *g, void *stream);
void perf_graph_destroy(perf_graph_t *g);

/* ---- collectives --------------------------------------------------- */

/* Everything one call needs. */
typedef struct perf_call {
  const perf_coll_t *coll;
  qcoll_comm_t comm;
  int rank, nranks;
  perf_shape_t shape;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  int root;
  bool in_place;
  perf_buf_t *send, *recv;
  void *stream;
  /* per-call options given with -a/-q (the _ex forms take NULL for none) */
  const qcoll_options_t *opts;
} perf_call_t;

/* Pointers the call passes (in-place layouts resolved). */
void perf_call_pointers(const perf_call_t *call, void **send, void **recv,
                        size_t *send_off_bytes, size_t *recv_off_bytes);
/* One call of the collective; the status of the qcoll call. */
qcoll_status_t perf_call_run(const perf_call_t *call);
/* Name of the qcoll function a collective calls, for messages. */
const char *perf_call_fn(const perf_call_t *call);

/* ---- checking ------------------------------------------------------- */

/* Allowed absolute difference per element; 0 = bit-exact. */
typedef struct perf_tolerance {
  double abs;
} perf_tolerance_t;

/* Fill the call's inputs (on the host view) with the rank's pattern and
 * poison the rest of the outputs, then upload. */
int perf_check_prepare(const perf_call_t *call);
/* Download the result and count the elements that differ from the exact
 * expectation (beyond tol); *max_err (may be NULL) gets the largest
 * absolute difference of a finite result (0 for bit-exact ones). */
int perf_check_compare(const perf_call_t *call, perf_tolerance_t tol,
                       int64_t *wrong, double *max_err);
int perf_check_count_wrong(const perf_call_t *call, perf_tolerance_t tol,
                           int64_t *wrong);
/* Largest magnitude of an input value, for tolerance bounds. */
double perf_check_max_input(qcoll_dtype_t dtype, qcoll_op_t op, int nranks);
/* Allowed error of an all-reduce whose transfer is quantised with quant
 * (QCOLL_QUANT_NONE: 0, bit-exact), on this checker's inputs. */
perf_tolerance_t perf_quant_tolerance(qcoll_quant_t quant, qcoll_dtype_t dtype,
                                      qcoll_op_t op, int nranks);

/* ---- NCCL side by side ---------------------------------------------- */

typedef struct perf_nccl perf_nccl_t;

/* Load NCCL (QCOLL_NCCL_LIB, else libnccl.so.2, else
 * /usr/local/cuda/lib64/libnccl.so.2) and create its communicator over the
 * same ranks, on the current device, with NCCL's unique id broadcast from
 * rank 0 through comm.  Collective over comm; every rank gets the same
 * outcome: the context, or NULL with a one-line reason in why (on rank 0,
 * the reason of the first rank that failed). */
perf_nccl_t *perf_nccl_start(qcoll_comm_t comm, int rank, int nranks, char *why,
                             size_t len);
/* "2.28.3 (libnccl.so.2)" */
const char *perf_nccl_describe(const perf_nccl_t *n);
/* Whether NCCL has this collective (barrier: no). */
bool perf_nccl_supports(const perf_call_t *call);
/* Enqueue one out-of-place call of the collective with NCCL on the call's
 * buffers and stream.  0, or -1 with the reason in why. */
int perf_nccl_run(perf_nccl_t *n, const perf_call_t *call, char *why,
                  size_t len);
/* Collective: every rank calls it at the end. */
void perf_nccl_stop(perf_nccl_t *n);

/* ---- conversions shared by the checker and its tests ---------------- */

uint16_t perf_f32_to_f16(float f);
float perf_f16_to_f32(uint16_t h);
uint16_t perf_f32_to_bf16(float f);
float perf_bf16_to_f32(uint16_t h);

#endif
