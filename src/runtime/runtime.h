/*
 * Device runtime: a small vtable with a host implementation (no devices)
 * and a CUDA one (the CUDA runtime, linked statically so the library loads
 * on machines without a driver).  Core asks it which device owns a buffer
 * or a stream, and every CUDA call made for a communicator runs between
 * qcoll__device_guard_enter() and qcoll__device_guard_exit().
 *
 * The library never caches "the current device": the guard asks the driver
 * each time, switches to the communicator's device only when needed, and
 * restores the caller's device on exit.
 */
#ifndef QCOLL_RUNTIME_H
#define QCOLL_RUNTIME_H

#include <stdbool.h>

#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qcoll__runtime {
  const char *name; /* "host" or "cuda" */
  /* Number of usable devices (0 for host, or when no driver/GPU). */
  int (*device_count)(void);
  qcoll_status_t (*get_device)(int *dev);
  qcoll_status_t (*set_device)(int dev);
  /* Device that owns ptr, or -1 for host (pageable or pinned) memory. */
  qcoll_status_t (*pointer_device)(const void *ptr, int *dev);
  /* Device a stream belongs to; NULL (legacy default stream) gives -1,
   * meaning "the current device's". */
  qcoll_status_t (*stream_device)(void *stream, int *dev);
  /* Copies between device and host memory ordered on `stream`; they return
   * once the copy is complete (the stream is synchronised).  Used by the
   * host-staged fallback path. */
  qcoll_status_t (*memcpy_d2h)(void *dst, const void *src, size_t bytes,
                               void *stream);
  qcoll_status_t (*memcpy_h2d)(void *dst, const void *src, size_t bytes,
                               void *stream);
  /* Whether `stream` is being captured into a CUDA graph. */
  qcoll_status_t (*stream_is_capturing)(void *stream, bool *capturing);
  /* A window in which this thread's CUDA calls run in relaxed capture mode,
   * so that a capture in progress (on the caller's stream or in another
   * thread) neither breaks them nor is invalidated by them: the queries
   * above open one each, and a caller making several calls (a call's
   * placement, the IPC set-up and registration) opens one around them all,
   * paying one switch of the mode and back.  Windows nest; every begin has
   * its end. */
  void (*relaxed_begin)(void);
  void (*relaxed_end)(void);
  /* A marker of the work enqueued on `stream` so far, for a watchdog to
   * ask later whether it finished: *event is made on first use (NULL
   * before) and reused after.  UNSUPPORTED on the host runtime. */
  qcoll_status_t (*event_record)(void **event, void *stream);
  /* *done: the work before the last record of event has finished. */
  qcoll_status_t (*event_query)(void *event, bool *done);
  void (*event_destroy)(void *event);
} qcoll__runtime_t;

/* The host runtime: no devices, every pointer is host memory. */
const qcoll__runtime_t *qcoll__runtime_host(void);
/* The CUDA runtime when this build has CUDA, QCOLL_DISABLE_CUDA is not set
 * and at least one device is visible; else the host runtime.  Decided once
 * per process (loading the driver is costly), thread-safe. */
const qcoll__runtime_t *qcoll__runtime(void);

typedef struct qcoll__device_guard {
  int saved;     /* caller's current device, -1 when none was asked */
  bool switched; /* whether we changed it */
} qcoll__device_guard_t;

/* Save the caller's current device (asked of the driver) and make
 * comm->device current.  No-op for host-only communicators. */
qcoll_status_t qcoll__device_guard_enter(qcoll__ctx_t *comm,
                                         qcoll__device_guard_t *g);
/* Restore the caller's device. */
void qcoll__device_guard_exit(qcoll__ctx_t *comm, qcoll__device_guard_t *g);

/* CUDA builds only (runtime/cuda.c): a driver entry point of at least
 * `version` through the runtime (no link against the driver library), or
 * NULL when this driver lacks it. */
void *qcoll__cuda_driver_entry(const char *symbol, unsigned version);

#ifdef __cplusplus
}
#endif

#endif
