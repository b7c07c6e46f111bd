/*
 * The communicator: the context the lower layers see (base/context.h),
 * embedded, plus what only core uses.  Nothing below src/core includes
 * this header (tests/unit/layering.cmake checks it).
 */
#ifndef QCOLL_CORE_COMM_H
#define QCOLL_CORE_COMM_H

#include <stdbool.h>

#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QCOLL_COMM_MAGIC 0x71636f6c6cu /* "qcoll" */

struct qcoll_comm {
  uint64_t magic; /* QCOLL_COMM_MAGIC while alive; catches destroyed handles */
  qcoll__ctx_t ctx;
  bool check_calls;        /* QCOLL_CHECK */
  qcoll_algo_t env_algo;   /* QCOLL_ALGO, read at init */
  qcoll_quant_t env_quant; /* QCOLL_QUANT, read at init (never DEFAULT) */
  bool env_quant_rotate;   /* QCOLL_QUANT's "+rot" suffix */
};

/* True while comm is a communicator this process made and has not
 * destroyed (never reads *comm, which may be freed memory). */
bool qcoll__comm_is_live_handle(qcoll_comm_t comm);
/* QCOLL_OK for such a handle; INVALID_ARGUMENT for NULL, INVALID_USAGE for
 * a destroyed (or never made) one, recorded as the thread's last error. */
qcoll_status_t qcoll__comm_check_handle(qcoll_comm_t comm, const char *fn);

/* QCOLL_OK while comm may run collectives; otherwise records and returns the
 * reason (destroyed, aborted, broken).  Every public entry point calls it. */
qcoll_status_t qcoll__comm_check_usable(qcoll_comm_t comm, const char *fn);

#ifdef __cplusplus
}
#endif

#endif
