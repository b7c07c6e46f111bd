/* What this process can use: devices, NCCL.  For qcoll-info and logs. */
#include <stdio.h>

#include "../runtime/runtime.h"
#include "../transport/nccl.h"
#include "common.h"

qcoll_status_t qcoll_backends_describe(char *buf, size_t len, size_t *needed) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  char nccl_why[256] = "";
  bool nccl = qcoll__nccl_available(nccl_why, sizeof nccl_why);
  int n;
  if (nccl) {
    int v = qcoll__nccl_version();
    n = snprintf(len ? buf : NULL, buf ? len : 0,
                 "runtime: %s, %d CUDA device(s) visible\n"
                 "NCCL: %d.%d.%d from %s\n",
                 rt->name, rt->device_count(), v / 10000, (v / 100) % 100,
                 v % 100, qcoll__nccl_library_path());
  } else {
    n = snprintf(len ? buf : NULL, buf ? len : 0,
                 "runtime: %s, %d CUDA device(s) visible\n"
                 "NCCL: unavailable: %s\n",
                 rt->name, rt->device_count(), nccl_why);
  }
  return qcoll__format_result("qcoll_backends_describe", buf, len,
                              n > 0 ? (size_t)n : 0, needed);
}
