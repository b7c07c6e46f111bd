/* The nccl backend: NCCL (transport/nccl.c loads it and makes its
 * communicator lazily, agreed by every rank) for every collective but the
 * barrier. */
#include "backend.h"

#include <stdio.h>

#include "../runtime/runtime.h"
#include "../transport/nccl.h"

static void nccl_capabilities(qcoll__ctx_t *ctx, qcoll__caps_t *caps) {
  qcoll__nccl_state_t state = qcoll__nccl_comm_state(ctx);
  caps->usable = state != QCOLL__NCCL_REFUSED;
  caps->ready = state == QCOLL__NCCL_READY;
  caps->ranks_per_gpu = 0;
}

/* The communicator, made on the first collective call that needs it (all
 * ranks take that call); send/recv cannot make it (only one pair calls
 * them), they use it once a collective has. */
static qcoll_status_t nccl_prepare(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  if (qcoll__coll_p2p(c->coll)) return QCOLL_OK;
  void *nccl_comm = NULL;
  return qcoll__nccl_comm_prepare(ctx, c->stream, &nccl_comm);
}

static qcoll_status_t nccl_run(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  switch (c->coll) {
    case QCOLL__COLL_ALL_REDUCE:
      return qcoll__nccl_all_reduce(ctx, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->op, c->stream);
    case QCOLL__COLL_REDUCE:
      return qcoll__nccl_reduce(ctx, c->sendbuf, c->recvbuf, c->count, c->dtype,
                                c->op, c->root, c->stream);
    case QCOLL__COLL_BROADCAST:
      return qcoll__nccl_broadcast(ctx, c->sendbuf, c->recvbuf, c->count,
                                   c->dtype, c->root, c->stream);
    case QCOLL__COLL_ALL_GATHER:
      return qcoll__nccl_all_gather(ctx, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->stream);
    case QCOLL__COLL_REDUCE_SCATTER:
      return qcoll__nccl_reduce_scatter(ctx, c->sendbuf, c->recvbuf, c->count,
                                        c->dtype, c->op, c->stream);
    case QCOLL__COLL_ALL_TO_ALL:
      return qcoll__nccl_all_to_all(ctx, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->stream);
    case QCOLL__COLL_SEND:
      return qcoll__nccl_send(ctx, c->sendbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_RECV:
      return qcoll__nccl_recv(ctx, c->recvbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_BARRIER:
    case QCOLL__COLL_COUNT: break;
  }
  return qcoll__error(ctx, QCOLL_ERR_INTERNAL, "no NCCL path for %s",
                      qcoll__coll_fn(c->coll));
}

static qcoll_status_t nccl_poll_async_error(qcoll__ctx_t *ctx) {
  return ctx->nccl ? qcoll__nccl_poll_async_error(ctx) : QCOLL_OK;
}

static void nccl_destroy(qcoll__ctx_t *ctx) {
  if (ctx->device < 0) return;
  qcoll__device_guard_t guard;
  if (qcoll__device_guard_enter(ctx, &guard) != QCOLL_OK) return;
  qcoll__nccl_comm_destroy(ctx);
  qcoll__device_guard_exit(ctx, &guard);
}

static int nccl_describe(char *buf, size_t len) {
  char why[256] = "";
  if (!qcoll__nccl_available(why, sizeof why))
    return snprintf(buf, len, "NCCL: unavailable: %s\n", why);
  int v = qcoll__nccl_version();
  return snprintf(buf, len, "NCCL: %d.%d.%d from %s\n", v / 10000,
                  (v / 100) % 100, v % 100, qcoll__nccl_library_path());
}

const qcoll__backend_t qcoll__backend_nccl = {
    .name = "nccl",
    .init = NULL,
    .capabilities = nccl_capabilities,
    .prepare = nccl_prepare,
    .run = nccl_run,
    .signal_abort = NULL,
    .poll_async_error = nccl_poll_async_error,
    .destroy = nccl_destroy,
    .describe = nccl_describe,
};
