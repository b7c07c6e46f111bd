/*
 * Status strings and error recording.  The reason of a failure is kept per
 * thread (qcoll_last_error) and per communicator (qcoll_comm_last_error), so
 * callers can read it after init failures too.
 */
#include <stdio.h>
#include <string.h>

#include "comm.h"

static _Thread_local char thread_last_error[QCOLL_ERRMSG_MAX];

const char *qcoll_status_string(qcoll_status_t status) {
  switch (status) {
    case QCOLL_OK: return "success";
    case QCOLL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case QCOLL_ERR_INVALID_USAGE: return "invalid usage";
    case QCOLL_ERR_SYSTEM: return "system error";
    case QCOLL_ERR_TIMEOUT: return "timeout";
    case QCOLL_ERR_PEER_FAILURE: return "peer failure";
    case QCOLL_ERR_ABORTED: return "aborted";
    case QCOLL_ERR_UNSUPPORTED: return "unsupported";
    case QCOLL_ERR_CUDA: return "CUDA error";
    case QCOLL_ERR_NCCL: return "NCCL error";
    case QCOLL_ERR_OUT_OF_MEMORY: return "out of memory";
    case QCOLL_ERR_MISMATCH: return "mismatch between ranks";
    case QCOLL_ERR_BOOTSTRAP: return "bootstrap error";
    case QCOLL_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char *qcoll_last_error(void) {
  return thread_last_error;
}

static bool is_comm_valid(qcoll_comm_t comm) {
  return comm && comm->magic == QCOLL_COMM_MAGIC;
}

qcoll_status_t qcoll__error(qcoll_comm_t comm, qcoll_status_t status,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(thread_last_error, sizeof thread_last_error, fmt, ap);
  va_end(ap);
  if (is_comm_valid(comm)) {
    pthread_mutex_lock(&comm->error_lock);
    memcpy(comm->last_error, thread_last_error, sizeof comm->last_error);
    pthread_mutex_unlock(&comm->error_lock);
  }
  bool serious = status == QCOLL_ERR_TIMEOUT ||
                 status == QCOLL_ERR_PEER_FAILURE ||
                 status == QCOLL_ERR_INTERNAL;
  qcoll__log(is_comm_valid(comm) ? comm : NULL,
             serious ? QCOLL_LOG_WARN : QCOLL_LOG_INFO, QCOLL_SUBSYS_ALL,
             "%s: %s", qcoll_status_string(status), thread_last_error);
  return status;
}

const char *qcoll_comm_last_error(qcoll_comm_t comm) {
  if (!comm) return "invalid communicator (NULL)";
  if (!qcoll__comm_is_live_handle(comm)) return "destroyed communicator";
  return comm->last_error;
}
