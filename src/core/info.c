/* What this process can use: devices, and what each backend says.  For
 * qcoll-info and logs. */
#include <stdio.h>

#include "../backend/backend.h"
#include "../base/common.h"
#include "../runtime/runtime.h"

qcoll_status_t qcoll_backends_describe(char *buf, size_t len, size_t *needed) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  size_t n = (size_t)snprintf(len ? buf : NULL, buf ? len : 0,
                              "runtime: %s, %d CUDA device(s) visible\n",
                              rt->name, rt->device_count());
  for (int i = 0; i < QCOLL__BACKEND_COUNT; i++) {
    if (!qcoll__backends[i]->describe) continue;
    bool room = buf && n < len;
    n += (size_t)qcoll__backends[i]->describe(room ? buf + n : NULL,
                                              room ? len - n : 0);
  }
  return qcoll__format_result("qcoll_backends_describe", buf, len, n, needed);
}
