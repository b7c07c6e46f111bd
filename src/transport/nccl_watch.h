/*
 * The watchdog of work delegated to NCCL.
 *
 * A blocking NCCL call returns once its work is enqueued; if that work
 * never finishes (NCCL stalled where several ranks share one GPU, a peer
 * hung inside a kernel), the caller's stream waits forever and no qcoll
 * wait is involved to notice.  So each NCCL communicator in use gets one
 * thread that, every WATCH_TICK, asks NCCL for its asynchronous error and
 * the runtime whether the work of each call qcoll enqueued (marked with a
 * device event right after the call) has finished.  It fires when
 *
 *   - NCCL reports an asynchronous error: QCOLL_ERR_NCCL with its text;
 *   - a call's work is still running timeout_s after it was enqueued (where
 *     the runtime has no events, "still running" is NCCL's asynchronous
 *     state staying "in progress"): QCOLL_ERR_TIMEOUT naming the call.
 *
 * Firing aborts the NCCL communicator (ncclCommAbort makes NCCL's kernels
 * leave their waits), marks the communicator broken and keeps the error,
 * which qcoll_comm_get_async_error() and the next NCCL call return; no
 * NCCL call is made on the handle after that.  An NCCL call the user's
 * thread is inside at the very moment of the abort is interrupted by it,
 * as with any abort from another thread (the way out of a call that hangs);
 * in the usual stall the user's thread waits on its stream, not in NCCL.  If the
 * work still has not finished another timeout_s after the abort, no host
 * call can end it (a kernel cannot be stopped from outside; the CUDA
 * context can only go with the process): the watchdog logs that and, with
 * QCOLL_STALL_EXIT=1 (the default), ends the process with _exit(
 * QCOLL__STALL_EXIT_CODE), so a launcher sees a rank that failed rather
 * than one that hangs.
 *
 * Calls enqueued during CUDA graph capture are not watched (their work runs
 * at each replay, which the watchdog cannot see).  Recording an event costs
 * about a microsecond per call; QCOLL_NCCL_WATCHDOG=0 turns the watchdog
 * off.
 */
#ifndef QCOLL_TRANSPORT_NCCL_WATCH_H
#define QCOLL_TRANSPORT_NCCL_WATCH_H

#include <stdbool.h>

#include "../base/context.h"
#include "../runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QCOLL__STALL_EXIT_CODE 70

typedef struct qcoll__nccl_watch qcoll__nccl_watch_t;

/* The NCCL entry points the watchdog calls (ncclResult_t as int). */
typedef struct qcoll__nccl_watch_api {
  int (*get_async_error)(void *handle, int *async_error);
  int (*abort)(void *handle);
  const char *(*error_string)(int result); /* may be NULL */
} qcoll__nccl_watch_api_t;

/* Start watching `handle` (an ncclComm_t) of comm, with comm's deadline;
 * rt gives the device events.  NULL when the watchdog is off or could not
 * start (then nothing is watched; the caller goes on without it). */
qcoll__nccl_watch_t *qcoll__nccl_watch_start(qcoll__ctx_t *comm, void *handle,
                                             const qcoll__nccl_watch_api_t *api,
                                             const qcoll__runtime_t *rt);
/* The call fn (qcoll's name) was enqueued on stream as nccl_fn.  Never
 * blocks for long; safe with w NULL. */
void qcoll__nccl_watch_enqueued(qcoll__nccl_watch_t *w, const char *fn,
                                const char *nccl_fn, void *stream);
/* Whether the watchdog fired; if so, and status is not NULL, *status and
 * why (n bytes) get its error.  The handle is aborted then: do not use it. */
bool qcoll__nccl_watch_fired(qcoll__nccl_watch_t *w, qcoll_status_t *status,
                             char *why, size_t n);
/* Stop the thread and free everything (call before the handle is
 * finalised or destroyed).  Safe with NULL. */
void qcoll__nccl_watch_stop(qcoll__nccl_watch_t *w);

#ifdef __cplusplus
}
#endif

#endif
