/*
 * Helpers shared by the GPU tests: skipping without a GPU, starting a rank
 * under qcoll-run, test data, a CPU reference in rank order, device-side
 * fill/check kernels (test_kernels.cu) and failure reports that say what
 * was expected and what came, per rank.
 */
#ifndef QCOLL_TESTS_GPU_TEST_H
#define QCOLL_TESTS_GPU_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_TEST_SKIP 77

/* Rank identity as seen before and after init. */
extern int gt_rank;
extern int gt_nranks;
extern const char *gt_prog;

/* Exit 77 with "SKIP: no CUDA device (...)" when no GPU can be used. */
void gt_skip_without_gpu(const char *prog);

/* ---- in gpu_test_comm.c: helpers that call the library ---------------- */

/* Pick this rank's device (local rank % device count), make it current and
 * create the communicator from the qcoll-run environment.  Exits with a
 * message on failure. */
qcoll_comm_t gt_init(void);
/* The device gt_init made current. */
int gt_device(void);
/* Every rank's hash of its result must equal this rank's: a failure per
 * rank that differs, counted in the return value. */
size_t gt_check_same_on_all_ranks(qcoll_comm_t comm, const void *result,
                                  size_t bytes, const char *what);

/* qcoll_all_reduce_ex (sum) with a forced algorithm; on failure the reason
 * and exit (the other ranks would wait for this one). */
void gt_all_reduce_algo(qcoll_comm_t comm, cudaStream_t stream,
                        const void *send, void *recv, size_t count,
                        qcoll_dtype_t dtype, qcoll_algo_t algo,
                        const char *what);
/* The end of a test program: no asynchronous error left, comm destroyed. */
void gt_check_async_and_destroy(qcoll_comm_t comm);

/* ---- in gpu_test.c: CUDA only ---------------------------------------------
 */

/* Print "[rank r] FAIL ..." (and count it). */
void gt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int gt_failures(void);
/* Print "[rank r] ..." */
void gt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit with a message when a CUDA call fails. */
#define GT_CUDA(call)                                                  \
  do {                                                                 \
    cudaError_t gt_err_ = (call);                                      \
    if (gt_err_ != cudaSuccess) gt_cuda_die(#call, gt_err_, __LINE__); \
  } while (0)
void gt_cuda_die(const char *what, cudaError_t err, int line)
    __attribute__((noreturn));

/* Exit with the status and the communicator's message when a qcoll call
 * fails. */
#define GT_QCOLL(comm, call)                                             \
  do {                                                                   \
    qcoll_status_t gt_st_ = (call);                                      \
    if (gt_st_ != QCOLL_OK) gt_qcoll_die(comm, #call, gt_st_, __LINE__); \
  } while (0)
void gt_qcoll_die(qcoll_comm_t comm, const char *what, qcoll_status_t st,
                  int line) __attribute__((noreturn));
/* The reason of the last failure: the communicator's, else the thread's
 * (some errors are recorded before a communicator is known). */
const char *gt_last_error(qcoll_comm_t comm);

/* cudaMemcpy from pageable host memory may return before the data has
 * reached the device, and kernels on non-blocking streams do not wait for
 * it: copy, then wait for the whole device. */
void gt_upload(void *dst, const void *src, size_t bytes);

/* Wait for stream with a deadline: a hang becomes a failure with a message
 * (and exit), never a test that sits until CTest kills it. */
void gt_wait_stream(cudaStream_t stream, double seconds, const char *what);
double gt_now(void);
/* A byte size from the environment (K, M, G suffixes), or fallback. */
size_t gt_env_bytes(const char *name, size_t fallback);

/* Where the buffers of an all-reduce case lie: in or out of place, and how
 * many elements send and recv sit past a 16-byte boundary. */
typedef struct gt_placement {
  const char *name;
  bool in_place;
  size_t send_offset, recv_offset; /* elements */
} gt_placement_t;
extern const gt_placement_t gt_placements[];
extern const size_t gt_placement_count;
/* Elements of guard before and after an output, filled with this byte: a
 * kernel that writes outside its output changes them. */
#define GT_GUARD_ELEMS 64
#define GT_GUARD_BYTE 0x5a

/* ---- test data and the CPU reference --------------------------------- */

typedef enum gt_pattern {
  GT_SMALL_INTS = 0, /* integers in [-8, 8]: every sum is exact */
  GT_MIXED = 1, /* mixed magnitudes, full mantissas: sums depend on order */
} gt_pattern_t;

/* Element i of rank's input, as a float exactly representable in dtype. */
float gt_input_value(gt_pattern_t pattern, int rank, size_t i, uint32_t seed,
                     qcoll_dtype_t dtype);
/* Element size and names of the dtypes and ops the IPC kernels handle. */
size_t gt_dtype_size(qcoll_dtype_t dtype);
const char *gt_dtype_name(qcoll_dtype_t dtype);
const char *gt_op_name(qcoll_op_t op);
/* Store a float (already representable) as dtype at dst[i]. */
void gt_store(void *dst, size_t i, float v, qcoll_dtype_t dtype);
/* Load element i of dtype as a float. */
float gt_load(const void *src, size_t i, qcoll_dtype_t dtype);
/* The bits of element i (for reports). */
uint32_t gt_bits(const void *src, size_t i, qcoll_dtype_t dtype);

/* Fill host buffer `dst` with `count` inputs of rank. */
void gt_fill_inputs(void *dst, size_t count, gt_pattern_t pattern, int rank,
                    uint32_t seed, qcoll_dtype_t dtype);
/* expected[i] = op over ranks 0..nranks-1 (in order, fp32 accumulation,
 * one rounding), what every rank must hold bit for bit. */
void gt_reference(void *expected, size_t count, gt_pattern_t pattern,
                  int nranks, uint32_t seed, qcoll_dtype_t dtype,
                  qcoll_op_t op);

/* Compare count elements bit for bit; report up to 5 differences as
 * "<what>: element i expected X (0x..) got Y (0x..)".  Returns the number
 * of differing elements. */
size_t gt_compare(const void *expected, const void *got, size_t count,
                  qcoll_dtype_t dtype, const char *what);

/* 64-bit FNV-1a of bytes. */
uint64_t gt_hash(const void *data, size_t bytes);

/* ---- device-side helpers (test_kernels.cu) ----------------------------- */

/* What a device-side check found; lives in device memory. */
typedef struct gt_check_state {
  unsigned long long bad;      /* number of wrong elements, all checks */
  unsigned long long checks;   /* number of checks run */
  unsigned int first_iter;     /* iteration (counter) of the first failure */
  unsigned int first_index_lo; /* its element index (low 32 bits) */
  float first_expected;
  float first_got;
  unsigned int has_first;
} gt_check_state_t;

/* buf[i] = v for i < n, where v = value (when counter is NULL) or
 * (*counter % 32) + 1 (read on the device, so a graph replay sees each new
 * counter). */
cudaError_t gt_fill_launch(void *buf, size_t n, qcoll_dtype_t dtype,
                           float value, const unsigned *counter,
                           cudaStream_t stream);
/* Check buf[i] == scale * v (v as in gt_fill_launch) for i < n; record
 * failures in *state. */
cudaError_t gt_check_launch(const void *buf, size_t n, qcoll_dtype_t dtype,
                            float scale, float value, const unsigned *counter,
                            gt_check_state_t *state, cudaStream_t stream);
/* *counter += 1 on the device. */
cudaError_t gt_bump_launch(unsigned *counter, cudaStream_t stream);

/* Report a check state copied back to the host; returns its bad count. */
unsigned long long gt_report_check(const gt_check_state_t *s, const char *what);
/* Zero a device check state (and wait for the device). */
void gt_check_reset(gt_check_state_t *state);
/* The device check state: `expected` checks ran and none failed (each
 * failure reported); true when so. */
bool gt_check_finish(const gt_check_state_t *state, const char *what,
                     unsigned long long expected);

/* (gpu_test_comm.c) A graph, captured on stream and instantiated, of
 * fill(send, counter) -> all-reduce (gt_all_reduce_algo) -> check(recv,
 * gt_nranks x the fill, into *state) -> bump(counter): each replay reduces
 * a new input and checks it on the device. */
cudaGraphExec_t gt_capture_counted_all_reduce(
    qcoll_comm_t comm, cudaStream_t stream, gt_check_state_t *state,
    void *send, void *recv, size_t count, qcoll_dtype_t dtype,
    qcoll_algo_t algo, unsigned *counter, const char *what);

#ifdef __cplusplus
}
#endif

#endif
