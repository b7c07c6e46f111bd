/*
 * A stand-in for libnccl.so.2 that is broken in one chosen way, built in
 * several variants so the loader's refusals can be tested without NCCL:
 *   FAKE_VERSION=<code>   what ncclGetVersion reports
 *   FAKE_NO_VERSION       no ncclGetVersion at all (some other library)
 *   FAKE_VERSION_FAILS    ncclGetVersion returns an error
 *   FAKE_NO_P2P           no ncclSend / ncclRecv (a library missing symbols)
 * Only ncclGetVersion is ever called; every other entry point fails loudly
 * if a bug in the loader calls it anyway.
 */
#include <stdio.h>
#include <stdlib.h>

#define FAKE_INTERNAL_ERROR 3

static int must_not_be_called(const char *name) {
  fprintf(stderr, "fake NCCL: %s called on a library the loader refused\n",
          name);
  abort();
  return FAKE_INTERNAL_ERROR;
}

#define STUB(name)                    \
  int name(void) {                    \
    return must_not_be_called(#name); \
  }

#ifndef FAKE_NO_VERSION
int ncclGetVersion(int *version) {
#ifdef FAKE_VERSION_FAILS
  (void)version;
  return FAKE_INTERNAL_ERROR;
#else
  *version = FAKE_VERSION;
  return 0;
#endif
}
#endif

STUB(ncclGetUniqueId)
STUB(ncclCommInitRank)
STUB(ncclCommInitRankConfig)
STUB(ncclCommFinalize)
STUB(ncclCommDestroy)
STUB(ncclCommAbort)
STUB(ncclCommGetAsyncError)
STUB(ncclGetErrorString)
STUB(ncclGetLastError)
STUB(ncclAllReduce)
STUB(ncclReduce)
STUB(ncclBroadcast)
STUB(ncclAllGather)
STUB(ncclReduceScatter)
STUB(ncclGroupStart)
STUB(ncclGroupEnd)
#ifndef FAKE_NO_P2P
STUB(ncclSend)
STUB(ncclRecv)
#endif
