/*
 * Internal helpers shared by every module: error recording, logging,
 * deadlines.  Not part of the public API.
 */
#ifndef QCOLL_BASE_COMMON_H
#define QCOLL_BASE_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qcoll__ctx; /* context.h */

/* ---- logging ------------------------------------------------------ */

typedef enum qcoll__log_level {
  QCOLL_LOG_NONE = 0,
  QCOLL_LOG_WARN = 1,
  QCOLL_LOG_INFO = 2,
  QCOLL_LOG_TRACE = 3
} qcoll__log_level_t;

/* Subsystems, selectable with QCOLL_DEBUG_SUBSYS=INIT,BOOT,SHM,COLL,CUDA,NCCL
 * (or ALL, the default). */
#define QCOLL_SUBSYS_INIT 0x01u
#define QCOLL_SUBSYS_BOOT 0x02u
#define QCOLL_SUBSYS_SHM 0x04u
#define QCOLL_SUBSYS_COLL 0x08u
#define QCOLL_SUBSYS_CUDA 0x10u
#define QCOLL_SUBSYS_NCCL 0x20u
#define QCOLL_SUBSYS_ALL 0xffu

/* Print one log line "host:pid:rank [dev] qcoll LEVEL SUBSYS message" to
 * stderr when level and subsystem are enabled.  ctx may be NULL. */
void qcoll__log(const struct qcoll__ctx *ctx, qcoll__log_level_t level,
                unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool qcoll__log_enabled(qcoll__log_level_t level, unsigned subsys);

#define QLOG_WARN(ctx, sub, ...) \
  qcoll__log(ctx, QCOLL_LOG_WARN, QCOLL_SUBSYS_##sub, __VA_ARGS__)
#define QLOG_INFO(ctx, sub, ...) \
  qcoll__log(ctx, QCOLL_LOG_INFO, QCOLL_SUBSYS_##sub, __VA_ARGS__)
#define QLOG_TRACE(ctx, sub, ...) \
  qcoll__log(ctx, QCOLL_LOG_TRACE, QCOLL_SUBSYS_##sub, __VA_ARGS__)

/* ---- errors ------------------------------------------------------- */

/* Record an error: formats the message into the calling thread's last-error
 * buffer and, when ctx is not NULL, into ctx's; logs it at INFO level
 * (WARN for timeouts, peer failures and internal errors).  Returns status so
 * callers can `return qcoll__error(...)`. */
qcoll_status_t qcoll__error(struct qcoll__ctx *ctx, qcoll_status_t status,
                            const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Check macro: evaluate a status expression; on failure keep the first error
 * in `st` and jump to the cleanup label `out`.  The called function has
 * already recorded the message. */
#define QCHECK(expr)                       \
  do {                                     \
    qcoll_status_t qcheck_st_ = (expr);    \
    if (qcheck_st_ != QCOLL_OK) {          \
      if (st == QCOLL_OK) st = qcheck_st_; \
      goto out;                            \
    }                                      \
  } while (0)

/* ---- time and deadlines ------------------------------------------- */

/* Monotonic seconds. */
double qcoll__now(void);

/* A deadline is an absolute qcoll__now() value. */
typedef struct qcoll__deadline {
  double at;
} qcoll__deadline_t;

static inline qcoll__deadline_t qcoll__deadline_in(double seconds) {
  qcoll__deadline_t d = {qcoll__now() + seconds};
  return d;
}
static inline bool qcoll__deadline_passed(qcoll__deadline_t d) {
  return qcoll__now() >= d.at;
}
static inline double qcoll__deadline_left(qcoll__deadline_t d) {
  double left = d.at - qcoll__now();
  return left > 0 ? left : 0;
}

/* ---- misc --------------------------------------------------------- */

/* Fill buf with n cryptographically random bytes (getrandom). */
qcoll_status_t qcoll__random_bytes(void *buf, size_t n);

/* The end of a public formatting function that wrote `used` characters
 * (without the NUL) into buf of len bytes: sets *needed, and treats a NULL
 * buf or a len of 0 as a size query (QCOLL_OK, nothing written; refused
 * when needed is NULL too, since nothing would come back); a buffer too
 * small is QCOLL_ERR_INVALID_ARGUMENT naming fn. */
qcoll_status_t qcoll__format_result(const char *fn, char *buf, size_t len,
                                    size_t used, size_t *needed);

/* a*b without overflow; false when it would overflow. */
static inline bool qcoll__mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

#define QCOLL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QCOLL_MAX(a, b) ((a) > (b) ? (a) : (b))

#ifdef __cplusplus
}
#endif

#endif
