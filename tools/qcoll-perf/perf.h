/*
 * qcoll-perf: shared declarations of the benchmark's parts.
 *
 *   qcoll-perf.c  options, the size sweep, timing and the report
 *   perf_colls.c  the collectives: buffer layouts, bus-bandwidth factors
 *   perf_check.c  input patterns, the exact expected results, comparison
 *   perf_mem.c    buffer allocation (host now; the GPU hook is marked there)
 */
#ifndef QCOLL_PERF_H
#define QCOLL_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qcoll.h"

/* ---- memory ---------------------------------------------------------- */

typedef enum perf_mem_kind { PERF_MEM_HOST = 0, PERF_MEM_GPU = 1 } perf_mem_kind_t;

/* One benchmark buffer.  `ptr` is what the collectives get; `host` is where
 * the checker reads and writes (the same pointer for host memory, a
 * staging copy for GPU memory). */
typedef struct perf_buf {
  perf_mem_kind_t kind;
  void *ptr;
  void *host;
  size_t bytes;
} perf_buf_t;

/* True when GPU buffers can be used (default memory is then gpu). */
bool perf_gpu_available(void);
/* Prepare this rank's device (GPU memory only); 0 or -1 with *why set. */
int perf_mem_setup(perf_mem_kind_t kind, int local_rank, const char **why);
/* 0, or -1 when the memory cannot be had. */
int perf_buf_alloc(perf_buf_t *b, perf_mem_kind_t kind, size_t bytes);
void perf_buf_free(perf_buf_t *b);
/* Move [offset, offset+bytes) between host view and buffer (no-op on host). */
int perf_buf_upload(perf_buf_t *b, size_t offset, size_t bytes);
int perf_buf_download(perf_buf_t *b, size_t offset, size_t bytes);
/* Wait until the collectives enqueued on stream have finished. */
int perf_stream_sync(perf_mem_kind_t kind, void *stream);

/* ---- collectives --------------------------------------------------- */

typedef enum perf_coll_id {
  PERF_ALL_REDUCE,
  PERF_REDUCE,
  PERF_BROADCAST,
  PERF_ALL_GATHER,
  PERF_REDUCE_SCATTER,
  PERF_ALL_TO_ALL,
  PERF_SENDRECV,
  PERF_BARRIER,
  PERF_COLL_COUNT
} perf_coll_id_t;

typedef struct perf_coll {
  perf_coll_id_t id;
  const char *name;
  bool has_op;       /* a reduction: the op column and -o apply */
  bool has_root;     /* the root column and -r apply */
  bool has_in_place; /* the API allows an in-place form */
} perf_coll_t;

const perf_coll_t *perf_coll_by_name(const char *name);
const perf_coll_t *perf_coll_by_id(perf_coll_id_t id);

/* Element counts of one row, derived from its size in bytes the way the
 * usual performance tests do: `size` is the largest buffer (the whole
 * gathered or scattered array), `count` the count argument of the call. */
typedef struct perf_shape {
  size_t count;      /* the call's count argument */
  size_t send_elems; /* elements in sendbuf */
  size_t recv_elems; /* elements in recvbuf */
  size_t bytes;      /* the size column: max(send, recv) bytes */
} perf_shape_t;

perf_shape_t perf_coll_shape(const perf_coll_t *c, size_t bytes, size_t elem_size, int nranks);

/* algbw x factor = busbw, so bus bandwidths compare with the hardware's. */
double perf_busbw_factor(const perf_coll_t *c, int nranks);

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
  bool use_ex; /* all-reduce through qcoll_all_reduce_ex with opts */
  qcoll_all_reduce_options_t opts;
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
 * expectation (beyond tol). */
int perf_check_count_wrong(const perf_call_t *call, perf_tolerance_t tol, int64_t *wrong);
/* Largest magnitude of an input value, for tolerance bounds. */
double perf_check_max_input(qcoll_dtype_t dtype, qcoll_op_t op, int nranks);

/* ---- conversions shared by the checker and its tests ---------------- */

uint16_t perf_f32_to_f16(float f);
float perf_f16_to_f32(uint16_t h);
uint16_t perf_f32_to_bf16(float f);
float perf_bf16_to_f32(uint16_t h);

#endif
