/*
 * The watchdog of work delegated to NCCL; nccl_watch.h has the contract.
 *
 * Records live in a fixed ring of WATCH_SLOTS, each with a device event
 * made once and re-recorded, so watching allocates nothing per call.  A
 * stream runs its work in order, so when every slot is still pending the
 * oldest calls (the ones that can stall the rest) stay watched and the new
 * call goes unrecorded.  The thread sleeps on a condition variable, so stop
 * is prompt.  After firing it never calls NCCL again (ncclCommAbort frees
 * the communicator).
 */
#include "nccl_watch.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/config.h"

#define WATCH_SLOTS 64
/* How often the thread looks: at most this, and at least 20 times per
 * deadline, so short deadlines (tests) are kept to within 5 %. */
#define WATCH_TICK_S 0.1
#define WATCH_FN_BYTES 64
#define WATCH_WHY_BYTES 512
/* ncclResult_t values the watchdog needs. */
#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

typedef struct watch_slot {
  void *event; /* made on first use, NULL without device events */
  bool has_event;
  bool pending;
  double at; /* when it was enqueued */
  char fn[WATCH_FN_BYTES];
} watch_slot_t;

struct qcoll__nccl_watch {
  qcoll__ctx_t *comm;
  void *handle;
  qcoll__nccl_watch_api_t api;
  const qcoll__runtime_t *rt;
  double timeout_s, tick_s;
  bool stall_exit;

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stop; /* under lock */

  /* Under lock. */
  watch_slot_t slots[WATCH_SLOTS];
  int next;
  qcoll_status_t status;
  char why[WATCH_WHY_BYTES];
  double fired_at;
  char stalled_fn[WATCH_FN_BYTES]; /* the timed-out call, for the exit */
  bool stall_reported;

  atomic_bool fired;
};

static void watch_fire(qcoll__nccl_watch_t *w, qcoll_status_t status,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Keep the error, abort NCCL, break the communicator.  Under w->lock. */
static void watch_fire(qcoll__nccl_watch_t *w, qcoll_status_t status,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->why, sizeof w->why, fmt, ap);
  va_end(ap);
  w->status = status;
  w->fired_at = qcoll__now();
  int r = w->api.abort(w->handle);
  if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS)
    QLOG_INFO(w->comm, NCCL, "watchdog: ncclCommAbort returned %d", r);
  qcoll__ctx_mark_broken(w->comm);
  atomic_store(&w->fired, true);
  QLOG_WARN(w->comm, NCCL, "%s", w->why);
}

static const char *nccl_text(const qcoll__nccl_watch_t *w, int result) {
  const char *s = w->api.error_string ? w->api.error_string(result) : NULL;
  return s ? s : "unknown NCCL error";
}

/* Has slot's work finished?  Without an event: when NCCL no longer says
 * "in progress". */
static bool slot_done(qcoll__nccl_watch_t *w, watch_slot_t *s, int async) {
  if (!s->has_event) return async != NCCL_IN_PROGRESS;
  bool done = true;
  if (w->rt->event_query(s->event, &done) != QCOLL_OK) return true;
  return done;
}

/* One look before firing.  Under w->lock. */
static void watch_check(qcoll__nccl_watch_t *w) {
  int async = NCCL_SUCCESS;
  int r = w->api.get_async_error(w->handle, &async);
  int bad = r != NCCL_SUCCESS                                    ? r
            : async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS ? async
                                                                 : 0;
  if (bad) {
    watch_fire(w, QCOLL_ERR_NCCL,
               "NCCL asynchronous error: %s (NCCL result %d); the watchdog "
               "aborted the NCCL communicator",
               nccl_text(w, bad), bad);
    return;
  }
  double now = qcoll__now();
  for (int i = 0; i < WATCH_SLOTS; i++) {
    watch_slot_t *s = &w->slots[i];
    if (!s->pending) continue;
    if (slot_done(w, s, async)) {
      s->pending = false;
      continue;
    }
    if (now - s->at < w->timeout_s) continue;
    snprintf(w->stalled_fn, sizeof w->stalled_fn, "%s", s->fn);
    watch_fire(w, QCOLL_ERR_TIMEOUT,
               "%s: the work it enqueued was still running %.1f s later "
               "(QCOLL_TIMEOUT %.1f s); the watchdog aborted the NCCL "
               "communicator",
               s->fn, now - s->at, w->timeout_s);
    return;
  }
}

/* After firing: work that outlives the abort by a whole deadline cannot be
 * ended from the host.  Under w->lock. */
static void watch_stall(qcoll__nccl_watch_t *w) {
  if (w->stall_reported || qcoll__now() - w->fired_at < w->timeout_s) return;
  bool running = false;
  for (int i = 0; i < WATCH_SLOTS && !running; i++) {
    watch_slot_t *s = &w->slots[i];
    running = s->pending && s->has_event && !slot_done(w, s, NCCL_SUCCESS);
  }
  if (!running) return;
  w->stall_reported = true;
  QLOG_WARN(w->comm, NCCL,
            "%s: its GPU work is still running %.1f s after the NCCL "
            "communicator was aborted; a kernel cannot be stopped from the "
            "host%s",
            w->stalled_fn[0] ? w->stalled_fn : "NCCL", w->timeout_s,
            w->stall_exit ? ": ending the process (QCOLL_STALL_EXIT=1)"
                          : " (QCOLL_STALL_EXIT=0: the process stays)");
  if (w->stall_exit) _exit(QCOLL__STALL_EXIT_CODE);
}

static void *watch_main(void *arg) {
  qcoll__nccl_watch_t *w = arg;
  /* Events belong to comm's device: ask about them from there, and never
   * make a context on another device. */
  if (w->comm->device >= 0) (void)w->rt->set_device(w->comm->device);
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(w->tick_s * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&w->wake, &w->lock, &ts);
    if (w->stop) break;
    if (atomic_load(&w->fired))
      watch_stall(w);
    else
      watch_check(w);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

qcoll__nccl_watch_t *qcoll__nccl_watch_start(qcoll__ctx_t *comm, void *handle,
                                             const qcoll__nccl_watch_api_t *api,
                                             const qcoll__runtime_t *rt) {
  if (!comm->config.nccl_watchdog) return NULL;
  qcoll__nccl_watch_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->comm = comm;
  w->handle = handle;
  w->api = *api;
  w->rt = rt;
  w->timeout_s = comm->timeout_s;
  w->tick_s = QCOLL_MIN(WATCH_TICK_S, comm->timeout_s / 20);
  w->stall_exit = comm->config.stall_exit;
  atomic_init(&w->fired, false);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    QLOG_WARN(comm, NCCL, "cannot start the NCCL watchdog thread");
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return NULL;
  }
  return w;
}

void qcoll__nccl_watch_enqueued(qcoll__nccl_watch_t *w, const char *fn,
                                const char *nccl_fn, void *stream) {
  if (!w) return;
  bool capturing = false;
  if (w->rt->stream_is_capturing(stream, &capturing) != QCOLL_OK || capturing)
    return;
  pthread_mutex_lock(&w->lock);
  watch_slot_t *s = &w->slots[w->next];
  /* Calls faster than the ticks would fill the ring with finished work and
   * leave the next (maybe the stalling) call unwatched: a slot whose event
   * says done is free at once. */
  if (s->pending && s->has_event && slot_done(w, s, NCCL_SUCCESS))
    s->pending = false;
  if (!s->pending && !atomic_load(&w->fired)) {
    s->has_event = w->rt->event_record(&s->event, stream) == QCOLL_OK;
    s->pending = true;
    s->at = qcoll__now();
    snprintf(s->fn, sizeof s->fn, "%s (%s)", fn, nccl_fn);
    w->next = (w->next + 1) % WATCH_SLOTS;
  }
  pthread_mutex_unlock(&w->lock);
}

bool qcoll__nccl_watch_fired(qcoll__nccl_watch_t *w, qcoll_status_t *status,
                             char *why, size_t n) {
  if (!w || !atomic_load(&w->fired)) return false;
  if (status) {
    pthread_mutex_lock(&w->lock);
    *status = w->status;
    snprintf(why, n, "%s", w->why);
    pthread_mutex_unlock(&w->lock);
  }
  return true;
}

void qcoll__nccl_watch_stop(qcoll__nccl_watch_t *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = true;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  for (int i = 0; i < WATCH_SLOTS; i++)
    if (w->slots[i].event) w->rt->event_destroy(w->slots[i].event);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
