#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common.h"

double qcoll__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

qcoll_status_t qcoll__random_bytes(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return qcoll__error(NULL, QCOLL_ERR_SYSTEM, "getrandom failed: %s",
                          strerror(errno));
    }
    p += got;
    n -= (size_t)got;
  }
  return QCOLL_OK;
}

qcoll_status_t qcoll__format_result(const char *fn, char *buf, size_t len,
                                    size_t used, size_t *needed) {
  if (needed) *needed = used + 1;
  if (!buf || len == 0) {
    if (needed) return QCOLL_OK;
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: buf is %s and needed is NULL: nothing to do", fn,
                        buf ? "of 0 bytes" : "NULL");
  }
  if (used >= len)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: buffer of %zu bytes is too small, %zu needed", fn,
                        len, used + 1);
  return QCOLL_OK;
}
