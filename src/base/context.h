/*
 * The context: what the layers below the communicator (bootstrap, runtime,
 * transports, host collectives) need of it.  The communicator embeds one;
 * the lower layers are handed a pointer to it and never see the
 * communicator, so they depend only on src/base and on each other.
 *
 * The context holds the identity of this rank (rank, world, device, its
 * host and the ranks sharing it), the deadline of every wait, the typed
 * configuration read at init, the state
 * (live, broken, aborted, destroyed) that waits poll and failures set, the
 * last error under its lock, and the connection objects of the lower
 * layers, each opaque to the others.
 */
#ifndef QCOLL_BASE_CONTEXT_H
#define QCOLL_BASE_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qcoll__bootstrap;
struct qcoll__shm;
struct qcoll__cuda_comm;
struct qcoll__nccl_comm;

#define QCOLL_HOST_ID_MAX 64
#define QCOLL_ERRMSG_MAX 1024

typedef enum qcoll__comm_state {
  QCOLL_COMM_LIVE = 0,
  QCOLL_COMM_BROKEN = 1, /* a peer failed or a wait timed out: re-init */
  QCOLL_COMM_ABORTED = 2,
  QCOLL_COMM_DESTROYED = 3
} qcoll__comm_state_t;

typedef struct qcoll__ctx {
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
  qcoll__config_t config; /* the QCOLL_* variables, read once at init */
  _Atomic int state; /* qcoll__comm_state_t; abort() sets it from any thread */

  struct qcoll__bootstrap *bootstrap;
  struct qcoll__shm *shm;        /* host back end (ranks of this host) */
  struct qcoll__cuda_comm *cuda; /* NULL on host-only communicators */
  struct qcoll__nccl_comm *nccl; /* NULL until NCCL is first asked for */

  pthread_mutex_t error_lock;
  char last_error[QCOLL_ERRMSG_MAX];
  qcoll_status_t async_error;
} qcoll__ctx_t;

/* The deadline of a wait starting now. */
static inline qcoll__deadline_t qcoll__ctx_deadline(const qcoll__ctx_t *ctx) {
  return qcoll__deadline_in(ctx->timeout_s);
}

/* True once the communicator was aborted (any thread).  Waits poll it. */
static inline bool qcoll__ctx_aborted(qcoll__ctx_t *ctx) {
  return atomic_load_explicit(&ctx->state, memory_order_acquire) ==
         QCOLL_COMM_ABORTED;
}

/* Mark the context broken after a timeout or peer failure, so later calls
 * fail fast with a clear message instead of waiting on a half-finished
 * protocol.  An aborted or destroyed context stays so. */
void qcoll__ctx_mark_broken(qcoll__ctx_t *ctx);

#ifdef __cplusplus
}
#endif

#endif
