/* The host backend: host buffers, the collectives of src/coll/host over the
 * shared-memory transport of the ranks of this host. */
#include "backend.h"

#include "../coll/host/host_coll.h"
#include "../transport/shm.h"

static qcoll_status_t host_init(qcoll__ctx_t *ctx) {
  return qcoll__shm_init(ctx);
}

static void host_capabilities(qcoll__ctx_t *ctx, qcoll__caps_t *caps) {
  caps->usable = ctx->shm != NULL;
  caps->ready = caps->usable;
  caps->ranks_per_gpu = 0;
}

static qcoll_status_t host_run(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  const void *send = c->sendbuf;
  void *recv = c->recvbuf;
  switch (c->coll) {
    case QCOLL__COLL_ALL_REDUCE:
      return qcoll__host_all_reduce(ctx, send, recv, c->count, c->dtype, c->op);
    case QCOLL__COLL_REDUCE:
      return qcoll__host_reduce(ctx, send, recv, c->count, c->dtype, c->op,
                                c->root);
    case QCOLL__COLL_BROADCAST:
      return qcoll__host_broadcast(ctx, send, recv, c->count, c->dtype,
                                   c->root);
    case QCOLL__COLL_ALL_GATHER:
      return qcoll__host_all_gather(ctx, send, recv, c->count, c->dtype);
    case QCOLL__COLL_REDUCE_SCATTER:
      return qcoll__host_reduce_scatter(ctx, send, recv, c->count, c->dtype,
                                        c->op);
    case QCOLL__COLL_ALL_TO_ALL:
      return qcoll__host_all_to_all(ctx, send, recv, c->count, c->dtype);
    case QCOLL__COLL_SEND:
      return qcoll__host_send(ctx, send, c->count, c->dtype, c->root);
    case QCOLL__COLL_RECV:
      return qcoll__host_recv(ctx, recv, c->count, c->dtype, c->root);
    case QCOLL__COLL_BARRIER: return qcoll__host_barrier(ctx);
    case QCOLL__COLL_COUNT: break;
  }
  return qcoll__error(ctx, QCOLL_ERR_INTERNAL, "unknown collective %d",
                      (int)c->coll);
}

static void host_signal_abort(qcoll__ctx_t *ctx) {
  if (ctx->shm) qcoll__shm_signal_abort(ctx);
}

static void host_destroy(qcoll__ctx_t *ctx) {
  if (ctx->shm) qcoll__shm_destroy(ctx);
}

const qcoll__backend_t qcoll__backend_host = {
    .name = "host",
    .init = host_init,
    .capabilities = host_capabilities,
    .prepare = NULL,
    .run = host_run,
    .signal_abort = host_signal_abort,
    .poll_async_error = NULL,
    .destroy = host_destroy,
    .describe = NULL,
};
