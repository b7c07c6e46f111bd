/*
 * Status strings and error recording.  The reason of a failure is kept per
 * thread (qcoll_last_error) and per context (the communicator's
 * qcoll_comm_last_error), so callers can read it after init failures too.
 */
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "status.h"

static _Thread_local char thread_last_error[QCOLL_ERRMSG_MAX];

/* A status of the public enum without a row in the list is an error. */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
const char *qcoll_status_string(qcoll_status_t status) {
  switch (status) {
#define STATUS_CASE(status, description) \
  case status: return description;
    QCOLL__STATUSES(STATUS_CASE)
#undef STATUS_CASE
  }
  return "unknown status";
}
#pragma GCC diagnostic pop

const char *qcoll_last_error(void) {
  return thread_last_error;
}

qcoll_status_t qcoll__error(qcoll__ctx_t *ctx, qcoll_status_t status,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(thread_last_error, sizeof thread_last_error, fmt, ap);
  va_end(ap);
  if (ctx) {
    pthread_mutex_lock(&ctx->error_lock);
    memcpy(ctx->last_error, thread_last_error, sizeof ctx->last_error);
    pthread_mutex_unlock(&ctx->error_lock);
  }
  bool serious = status == QCOLL_ERR_TIMEOUT ||
                 status == QCOLL_ERR_PEER_FAILURE ||
                 status == QCOLL_ERR_INTERNAL;
  qcoll__log(ctx, serious ? QCOLL_LOG_WARN : QCOLL_LOG_INFO, QCOLL_SUBSYS_ALL,
             "%s: %s", qcoll_status_string(status), thread_last_error);
  return status;
}

void qcoll__ctx_mark_broken(qcoll__ctx_t *ctx) {
  int live = QCOLL_COMM_LIVE;
  atomic_compare_exchange_strong(&ctx->state, &live, QCOLL_COMM_BROKEN);
}
