/*
 * A stand-in for libnccl.so.2 that is broken in one chosen way, built in
 * several variants so the loader's refusals can be tested without NCCL:
 *   FAKE_VERSION=<code>   what ncclGetVersion reports
 *   FAKE_NO_VERSION       no ncclGetVersion at all (some other library)
 *   FAKE_VERSION_FAILS    ncclGetVersion returns an error
 *   FAKE_NO_P2P           no ncclSend / ncclRecv (a library missing symbols)
 *   FAKE_WATCHED          for the watchdog's test: ncclCommGetAsyncError
 *                         answers what fake_nccl_set_async() chose (success,
 *                         "in progress" forever, an error), ncclCommAbort
 *                         counts its calls (fake_nccl_aborts()), and
 *                         ncclGetErrorString answers
 * Otherwise only ncclGetVersion is ever called; every other entry point
 * fails loudly if a bug in the loader calls it anyway.
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
#ifdef FAKE_WATCHED
#include <stdatomic.h>
static atomic_int fake_async, fake_aborts;
void fake_nccl_set_async(int result) {
  atomic_store(&fake_async, result);
}
int fake_nccl_aborts(void) {
  return atomic_load(&fake_aborts);
}
int ncclCommGetAsyncError(void *comm, int *async_error) {
  if (!comm || atomic_load(&fake_aborts) > 0)
    return must_not_be_called(
        "ncclCommGetAsyncError on a NULL or aborted communicator");
  *async_error = atomic_load(&fake_async);
  return 0;
}
int ncclCommAbort(void *comm) {
  (void)comm;
  atomic_fetch_add(&fake_aborts, 1);
  return 0;
}
const char *ncclGetErrorString(int result) {
  return result == 6 ? "remote process exited or there was a network error"
                     : "fake NCCL error";
}
#else
STUB(ncclCommAbort)
STUB(ncclCommGetAsyncError)
STUB(ncclGetErrorString)
#endif
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
