/*
 * One interface, four backends: host (host buffers over shared memory),
 * staged (GPU buffers copied through the host backend), ipc (the CUDA IPC
 * kernels) and nccl.  Each is a static table of function pointers; the
 * communicator's init, abort, async-error poll and destroy loop over
 * qcoll__backends, and a call goes to the backend of the path the
 * selection table chose (core/select.c), with that path and its transfer
 * final: no backend decides them again.
 *
 * Backends sit below the communicator: they see the context, never the
 * communicator (tests/unit/layering.cmake).
 */
#ifndef QCOLL_BACKEND_H
#define QCOLL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/colls.h"
#include "../base/context.h"
#include "../transport/reg_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qcoll__path {
  QCOLL__PATH_HOST = 0,    /* host back end (host buffers) */
  QCOLL__PATH_ONESHOT = 1, /* CUDA IPC one-shot all-reduce */
  QCOLL__PATH_TWOSHOT = 2, /* CUDA IPC two-shot all-reduce */
  QCOLL__PATH_NCCL = 3,    /* NCCL */
  QCOLL__PATH_STAGED = 4,  /* GPU buffers staged through the host back end */
  QCOLL__PATH_IPC = 5,     /* CUDA IPC kernels of every collective, dtype, op */
  QCOLL__PATH_COUNT = 6
} qcoll__path_t;

const char *qcoll__path_name(qcoll__path_t path);

/* Whether the IPC one-shot/two-shot all-reduce kernels handle dtype/op. */
bool qcoll__ipc_kernel_supports(qcoll_dtype_t dtype, qcoll_op_t op);

/* A validated call whose path is final. */
typedef struct qcoll__call {
  qcoll__coll_t coll;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  int root; /* root, or peer for send/recv */
  void *stream;
  size_t send_bytes, recv_bytes; /* bytes this rank reads / writes */
  qcoll__path_t path;
  qcoll_quant_t quant; /* the transfer of the IPC all-reduce (NONE: exact) */
  bool quant_rotate;   /* with quant: rotated groups (codec.h) */
} qcoll__call_t;

/* What a backend can do on this communicator, for the selection table. */
typedef struct qcoll__caps {
  bool usable;       /* it can serve GPU calls (nccl: not known to refuse) */
  bool ready;        /* nccl: its communicator exists (send/recv need it) */
  int ranks_per_gpu; /* ipc: the most ranks any one GPU holds; 0 unusable */
} qcoll__caps_t;

typedef struct qcoll__backend {
  const char *name;
  /* Collective set-up at communicator init (every rank calls it); NULL:
   * nothing to set up. */
  qcoll_status_t (*init)(qcoll__ctx_t *ctx);
  void (*capabilities)(qcoll__ctx_t *ctx, qcoll__caps_t *caps);
  /* Before the first call of a path: NCCL makes its communicator lazily.
   * QCOLL_ERR_UNSUPPORTED: it refuses these ranks (agreed by all), so the
   * caller may choose again without it.  NULL: always ready. */
  qcoll_status_t (*prepare)(qcoll__ctx_t *ctx, const qcoll__call_t *call);
  qcoll_status_t (*run)(qcoll__ctx_t *ctx, const qcoll__call_t *call);
  /* Make waits of this backend stop; never blocks.  NULL: nothing. */
  void (*signal_abort)(qcoll__ctx_t *ctx);
  /* An error of work already enqueued, or QCOLL_OK.  NULL: none. */
  qcoll_status_t (*poll_async_error)(qcoll__ctx_t *ctx);
  void (*destroy)(qcoll__ctx_t *ctx);
  /* Collective registration of the allocation holding a user buffer
   * (qcoll_comm_register), and its removal; every rank calls them in the
   * same order, buf NULL on a rank that registers nothing.  NULL: the
   * backend has nothing to register (the call succeeds, out NONE). */
  qcoll_status_t (*register_buffer)(qcoll__ctx_t *ctx, const void *buf,
                                    size_t bytes, qcoll__reg_result_t *out);
  qcoll_status_t (*deregister_buffer)(qcoll__ctx_t *ctx,
                                      const qcoll__reg_result_t *reg);
  /* One line for qcoll-info about what this process can use of it, as
   * snprintf writes (returns the length it needed); NULL: nothing to say. */
  int (*describe)(char *buf, size_t len);
} qcoll__backend_t;

extern const qcoll__backend_t qcoll__backend_host;
extern const qcoll__backend_t qcoll__backend_staged;
extern const qcoll__backend_t qcoll__backend_ipc;
extern const qcoll__backend_t qcoll__backend_nccl;

#define QCOLL__BACKEND_COUNT 4
/* In init order (host first: staging and the stream barrier use it);
 * destroy and abort walk it backwards. */
extern const qcoll__backend_t *const qcoll__backends[QCOLL__BACKEND_COUNT];

/* The backend that runs path. */
const qcoll__backend_t *qcoll__backend_for(qcoll__path_t path);

/* A barrier on a stream, shared by the ipc and staged backends: with the
 * IPC kernels a kernel barrier (capturable), otherwise the stream is
 * drained first (not capturable); outside a capture the host also waits
 * for every rank. */
qcoll_status_t qcoll__stream_barrier(qcoll__ctx_t *ctx,
                                     const qcoll__call_t *call, bool on_ipc);

#ifdef __cplusplus
}
#endif

#endif
