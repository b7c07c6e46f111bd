/*
 * NCCL as an inner engine, loaded at run time with dlopen so that the
 * library builds without NCCL's header and runs its host back end on
 * machines without NCCL or a GPU.
 *
 * Loading (once per process, thread-safe): QCOLL_NCCL_LIB when set, and
 * then nothing else: an explicit path is the user's choice, and quietly
 * loading some other copy could give the ranks of one job different NCCL
 * versions.  Otherwise "libnccl.so.2" through the dynamic linker's search
 * (which also finds a copy a Python framework has already loaded), then
 * the CUDA toolkit's lib64, then NCCL's Python wheel
 * (site-packages/nvidia/nccl/lib) under PYTHONPATH, VIRTUAL_ENV,
 * CONDA_PREFIX and the usual system and user prefixes.  A library that is
 * missing, older than 2.18 or lacks a symbol makes NCCL "unavailable" with
 * one reason, logged once at INFO.
 *
 * Communicator (lazy, collective): qcoll__nccl_comm_get() builds the NCCL
 * communicator the first time it is called, on every rank at the same
 * point.  The ranks agree on the outcome through the bootstrap: either
 * every rank holds a working NCCL communicator, or every rank records the
 * same reason why NCCL cannot serve this communicator (library missing on
 * some rank, two ranks on one GPU, NCCL's init failed or passed its
 * deadline on some rank).  The outcome is then remembered, so later calls
 * answer at once, identically on every rank, and core may use it to pick
 * another path without the ranks diverging.  Ranks of one host on one GPU
 * (same PCI bus id) are refused before NCCL is asked, unless every rank
 * sets NCCL's own opt-in NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL then decides).
 * The first NCCL collective must not be captured into a CUDA graph (NCCL's
 * init allocates device memory): such a call is declined without changing
 * the state, so a later uncaptured one creates the communicator.
 *
 * NCCL runs in non-blocking mode so that nothing it does can outlive the
 * communicator's deadline: init and every call that returns "in progress"
 * are polled until done, until qcoll_comm_abort() or until the deadline,
 * after which the NCCL communicator is aborted.
 *
 * Everything here runs NCCL under the device guard, on comm->device.
 */
#ifndef QCOLL_TRANSPORT_NCCL_H
#define QCOLL_TRANSPORT_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the part of NCCL's stable ABI qcoll uses ---------------------------
 * Declared here, not taken from nccl.h, so the library builds without it.
 * tests/nccl checks every value and layout against nccl.h when present. */

/* Oldest NCCL accepted: 2.18.0 (non-blocking init with a config struct,
 * ncclAvg for every type, ncclGetLastError, ncclCommFinalize). */
#define QCOLL__NCCL_MIN_VERSION 21800
#define QCOLL__NCCL_UNIQUE_ID_BYTES 128
#define QCOLL__NCCL_CONFIG_MAGIC 0xcafebeefu
#define QCOLL__NCCL_CONFIG_UNDEF_INT (-2147483647 - 1) /* INT_MIN */

typedef struct qcoll__nccl_unique_id {
  char internal[QCOLL__NCCL_UNIQUE_ID_BYTES];
} qcoll__nccl_unique_id_t;

/* ncclResult_t */
enum {
  QCOLL__NCCL_SUCCESS = 0,
  QCOLL__NCCL_UNHANDLED_CUDA_ERROR = 1,
  QCOLL__NCCL_SYSTEM_ERROR = 2,
  QCOLL__NCCL_INTERNAL_ERROR = 3,
  QCOLL__NCCL_INVALID_ARGUMENT = 4,
  QCOLL__NCCL_INVALID_USAGE = 5,
  QCOLL__NCCL_REMOTE_ERROR = 6,
  QCOLL__NCCL_IN_PROGRESS = 7,
};

/* ncclDataType_t */
enum {
  QCOLL__NCCL_INT8 = 0,
  QCOLL__NCCL_UINT8 = 1,
  QCOLL__NCCL_INT32 = 2,
  QCOLL__NCCL_UINT32 = 3,
  QCOLL__NCCL_INT64 = 4,
  QCOLL__NCCL_UINT64 = 5,
  QCOLL__NCCL_FLOAT16 = 6,
  QCOLL__NCCL_FLOAT32 = 7,
  QCOLL__NCCL_FLOAT64 = 8,
  QCOLL__NCCL_BFLOAT16 = 9,
};

/* ncclRedOp_t (note: max before min, unlike qcoll_op_t) */
enum {
  QCOLL__NCCL_SUM = 0,
  QCOLL__NCCL_PROD = 1,
  QCOLL__NCCL_MAX = 2,
  QCOLL__NCCL_MIN = 3,
  QCOLL__NCCL_AVG = 4,
};

/* The ncclConfig_t prefix of NCCL 2.18 (ncclConfig_v21700 plus splitShare).
 * NCCL copies `size` bytes of it and gives every later field its default,
 * so newer libraries accept it. */
typedef struct qcoll__nccl_config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cga_cluster_size;
  int min_ctas;
  int max_ctas;
  const char *net_name;
  int split_share;
} qcoll__nccl_config_t;

/* ---- the library ---------------------------------------------------- */

/* Load NCCL once per process (later calls return the first answer).
 * True when a usable library is loaded. */
bool qcoll__nccl_load(void);
/* Same as qcoll__nccl_load(); when NCCL is unavailable and why is not
 * NULL, copies the reason (NUL-terminated, truncated to n bytes). */
bool qcoll__nccl_available(char *why, size_t n);
/* NCCL_VERSION_CODE of the loaded library (e.g. 22809), 0 when none. */
int qcoll__nccl_version(void);
/* File the library was loaded from, "" when none. */
const char *qcoll__nccl_library_path(void);

/* NCCL's ncclDataType_t / ncclRedOp_t value for a qcoll one, or -1 when
 * there is none (invalid input).  AVG maps to ncclAvg for every type:
 * integers sum (wrapping) then divide, truncating toward zero, as qcoll's
 * AVG does; floats are pre-multiplied by 1/nranks in the element type
 * before the sum, so they may round differently from qcoll's host AVG
 * (which divides once, after the sum, in f32/f64). */
int qcoll__nccl_dtype(qcoll_dtype_t dtype);
int qcoll__nccl_op(qcoll_op_t op);

/* ---- the communicator ----------------------------------------------- */

/* The NCCL communicator of comm (an ncclComm_t), created on first use.
 * Collective: every rank of comm must call it at the same point (core calls
 * it only from collectives, which all ranks call in the same order).
 * Returns QCOLL_OK with *nccl_comm set, or QCOLL_ERR_UNSUPPORTED with the
 * reason (identical on every rank) when NCCL cannot serve comm: the caller
 * may then pick another path.  Bootstrap failures (timeout, peer died,
 * abort) return their own status and mark comm broken. */
qcoll_status_t qcoll__nccl_comm_get(qcoll__ctx_t *comm, void **nccl_comm);
/* qcoll__nccl_comm_get() for a call on `stream`: while the NCCL
 * communicator does not exist yet and stream is being captured into a CUDA
 * graph, returns QCOLL_ERR_UNSUPPORTED without changing anything (NCCL's
 * init cannot run inside a capture), so the caller serves this call another
 * way and a later uncaptured call creates the communicator.  Collective
 * like qcoll__nccl_comm_get(); this is the one core should call. */
qcoll_status_t qcoll__nccl_comm_prepare(qcoll__ctx_t *comm, void *stream,
                                        void **nccl_comm);
typedef enum qcoll__nccl_state {
  QCOLL__NCCL_UNTRIED = 0, /* qcoll__nccl_comm_get() not called yet */
  QCOLL__NCCL_READY = 1,   /* a working NCCL communicator */
  QCOLL__NCCL_REFUSED = 2  /* NCCL cannot serve comm (see the reason) */
} qcoll__nccl_state_t;
/* Where comm stands with NCCL.  Not collective, and the same on every rank
 * (it changes only inside qcoll__nccl_comm_get, which all ranks call
 * together), so selection and point-to-point calls may branch on it:
 * e.g. skip NCCL without calling anything once it was refused. */
qcoll__nccl_state_t qcoll__nccl_comm_state(qcoll__ctx_t *comm);
/* Why NCCL was refused on comm ("" unless REFUSED). */
const char *qcoll__nccl_comm_refusal(qcoll__ctx_t *comm);
/* Free comm's NCCL state.  A healthy communicator is finalised (flushing
 * its work, within the deadline) and destroyed; a broken or aborted one,
 * or one whose finalise passes the deadline, is aborted, which never
 * hangs.  Safe when NCCL was never used (comm->nccl NULL). */
void qcoll__nccl_comm_destroy(qcoll__ctx_t *comm);
/* QCOLL_OK, or QCOLL_ERR_NCCL with NCCL's message when NCCL reported an
 * asynchronous error on comm (also marks comm broken). */
qcoll_status_t qcoll__nccl_poll_async_error(qcoll__ctx_t *comm);

/* ---- collectives -----------------------------------------------------
 * Same arguments and meaning as core's host functions (validated by core:
 * buffers and stream on comm->device), plus the stream.  Enqueued on
 * stream; return once NCCL has accepted the work.  Every one except send
 * and recv calls qcoll__nccl_comm_get() and is therefore collective;
 * send and recv need the NCCL communicator to exist already
 * (QCOLL_ERR_UNSUPPORTED otherwise, on both peers alike).  NCCL errors
 * give QCOLL_ERR_NCCL with NCCL's own message; errors other than a bad
 * argument also mark comm broken. */
qcoll_status_t qcoll__nccl_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream);
qcoll_status_t qcoll__nccl_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  qcoll_dtype_t dtype, qcoll_op_t op, int root,
                                  void *stream);
qcoll_status_t qcoll__nccl_broadcast(qcoll__ctx_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     qcoll_dtype_t dtype, int root,
                                     void *stream);
qcoll_status_t qcoll__nccl_all_gather(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t sendcount,
                                      qcoll_dtype_t dtype, void *stream);
qcoll_status_t qcoll__nccl_reduce_scatter(qcoll__ctx_t *comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t recvcount, qcoll_dtype_t dtype,
                                          qcoll_op_t op, void *stream);
/* As one NCCL group of nranks sends and nranks receives. */
qcoll_status_t qcoll__nccl_all_to_all(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, void *stream);
qcoll_status_t qcoll__nccl_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer,
                                void *stream);
qcoll_status_t qcoll__nccl_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer, void *stream);

#ifdef __cplusplus
}
#endif

#endif
