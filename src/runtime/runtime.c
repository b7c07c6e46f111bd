/*
 * Runtime selection and the device guard.  The host runtime lives here; the
 * CUDA one in cuda.c (only in CUDA builds).
 */
#include "runtime.h"

#include <pthread.h>

#include "../base/config.h"

static int host_device_count(void) {
  return 0;
}
static qcoll_status_t host_get_device(int *dev) {
  *dev = -1;
  return QCOLL_OK;
}
static qcoll_status_t host_set_device(int dev) {
  return qcoll__error(NULL, QCOLL_ERR_UNSUPPORTED,
                      "cannot select device %d: this process has no usable GPU",
                      dev);
}
static qcoll_status_t host_pointer_device(const void *ptr, int *dev) {
  *dev = -1;
  return QCOLL_OK;
}
static qcoll_status_t host_stream_device(void *stream, int *dev) {
  *dev = -1;
  return QCOLL_OK;
}

static qcoll_status_t host_memcpy(void *dst, const void *src, size_t bytes,
                                  void *stream) {
  return qcoll__error(NULL, QCOLL_ERR_UNSUPPORTED,
                      "device copy requested but this process has no GPU");
}
static qcoll_status_t host_is_capturing(void *stream, bool *capturing) {
  *capturing = false;
  return QCOLL_OK;
}

static qcoll_status_t host_event_record(void **event, void *stream) {
  (void)event;
  (void)stream;
  return qcoll__error(NULL, QCOLL_ERR_UNSUPPORTED,
                      "no device events: this process has no GPU");
}
static qcoll_status_t host_event_query(void *event, bool *done) {
  (void)event;
  *done = true;
  return QCOLL_OK;
}
static void host_event_destroy(void *event) {
  (void)event;
}
static void host_relaxed_window(void) {}

static const qcoll__runtime_t host_runtime = {
    .name = "host",
    .device_count = host_device_count,
    .get_device = host_get_device,
    .set_device = host_set_device,
    .pointer_device = host_pointer_device,
    .stream_device = host_stream_device,
    .memcpy_d2h = host_memcpy,
    .memcpy_h2d = host_memcpy,
    .stream_is_capturing = host_is_capturing,
    .relaxed_begin = host_relaxed_window,
    .relaxed_end = host_relaxed_window,
    .event_record = host_event_record,
    .event_query = host_event_query,
    .event_destroy = host_event_destroy,
};

const qcoll__runtime_t *qcoll__runtime_host(void) {
  return &host_runtime;
}

#ifdef QCOLL_HAVE_CUDA
/* cuda.c: the CUDA runtime when a driver and at least one device are usable,
 * else NULL (with the reason logged at INFO). */
const qcoll__runtime_t *qcoll__runtime_cuda_probe(void);
#endif

static const qcoll__runtime_t *selected;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static void select_runtime(void) {
  selected = &host_runtime;
#ifdef QCOLL_HAVE_CUDA
  if (qcoll__env_bool("QCOLL_DISABLE_CUDA")) {
    QLOG_INFO(NULL, CUDA, "QCOLL_DISABLE_CUDA is set: host back end only");
    return;
  }
  const qcoll__runtime_t *cuda = qcoll__runtime_cuda_probe();
  if (cuda) selected = cuda;
#endif
}

const qcoll__runtime_t *qcoll__runtime(void) {
  pthread_once(&select_once, select_runtime);
  return selected;
}

qcoll_status_t qcoll__device_guard_enter(qcoll__ctx_t *comm,
                                         qcoll__device_guard_t *g) {
  g->saved = -1;
  g->switched = false;
  if (comm->device < 0) return QCOLL_OK;
  const qcoll__runtime_t *rt = qcoll__runtime();
  qcoll_status_t st = rt->get_device(&g->saved);
  if (st != QCOLL_OK) return st;
  if (g->saved == comm->device) return QCOLL_OK;
  st = rt->set_device(comm->device);
  if (st != QCOLL_OK) return st;
  g->switched = true;
  return QCOLL_OK;
}

void qcoll__device_guard_exit(qcoll__ctx_t *comm, qcoll__device_guard_t *g) {
  if (!g->switched) return;
  if (qcoll__runtime()->set_device(g->saved) != QCOLL_OK)
    QLOG_WARN(comm, CUDA, "could not restore the caller's device %d", g->saved);
  g->switched = false;
}
