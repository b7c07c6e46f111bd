/*
 * The communicator as every module sees it.  Each module owns the opaque
 * state behind its pointer; core owns the rest.
 */
#ifndef QCOLL_CORE_COMM_H
#define QCOLL_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qcoll__bootstrap;
struct qcoll__shm;
struct qcoll__cuda_comm;
struct qcoll__nccl_comm;

#define QCOLL_HOST_ID_MAX 64
#define QCOLL_ERRMSG_MAX 1024
#define QCOLL_COMM_MAGIC 0x71636f6c6cu /* "qcoll" */

typedef enum qcoll__comm_state {
  QCOLL_COMM_LIVE = 0,
  QCOLL_COMM_BROKEN = 1, /* a peer failed or a wait timed out: re-init */
  QCOLL_COMM_ABORTED = 2,
  QCOLL_COMM_DESTROYED = 3
} qcoll__comm_state_t;

struct qcoll_comm {
  uint64_t magic; /* QCOLL_COMM_MAGIC while alive; catches destroyed handles */
  int rank;
  int nranks;
  int local_rank; /* index among the ranks with the same host id */
  int local_size;
  int *local_ranks; /* local_size global ranks of this host, ascending */
  int host_index;   /* index of this host among distinct hosts */
  int nhosts;
  char host_id[QCOLL_HOST_ID_MAX];
  int device; /* CUDA device or QCOLL_DEVICE_NONE */
  double timeout_s;
  bool check_calls;        /* QCOLL_CHECK */
  qcoll_algo_t env_algo;   /* QCOLL_ALGO, read at init */
  qcoll_quant_t env_quant; /* QCOLL_QUANT, read at init (never DEFAULT) */
  _Atomic int state; /* qcoll__comm_state_t; abort() sets it from any thread */

  struct qcoll__bootstrap *bootstrap;
  struct qcoll__shm *shm;        /* host back end (ranks of this host) */
  struct qcoll__cuda_comm *cuda; /* NULL on host-only communicators */
  struct qcoll__nccl_comm *nccl; /* NULL until NCCL is first asked for */

  pthread_mutex_t error_lock;
  char last_error[QCOLL_ERRMSG_MAX];
  qcoll_status_t async_error;
};

/* The communicator's deadline for a wait starting now. */
static inline qcoll__deadline_t qcoll__comm_deadline(qcoll_comm_t comm) {
  return qcoll__deadline_in(comm->timeout_s);
}

/* True while comm is a communicator this process made and has not
 * destroyed (never reads *comm, which may be freed memory). */
bool qcoll__comm_is_live_handle(qcoll_comm_t comm);
/* QCOLL_OK for such a handle; INVALID_ARGUMENT for NULL, INVALID_USAGE for
 * a destroyed (or never made) one, recorded as the thread's last error. */
qcoll_status_t qcoll__comm_check_handle(qcoll_comm_t comm, const char *fn);

/* QCOLL_OK while comm may run collectives; otherwise records and returns the
 * reason (destroyed, aborted, broken).  Every public entry point calls it. */
qcoll_status_t qcoll__comm_check_usable(qcoll_comm_t comm, const char *fn);

/* True once qcoll_comm_abort() was called (any thread).  Waits poll it. */
static inline bool qcoll__comm_aborted(qcoll_comm_t comm) {
  return atomic_load_explicit(&comm->state, memory_order_acquire) ==
         QCOLL_COMM_ABORTED;
}

/* Mark comm broken after a timeout or peer failure, so later calls fail fast
 * with a clear message instead of waiting on a half-finished protocol. */
void qcoll__comm_mark_broken(qcoll_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif
