/* The staged backend: GPU buffers copied to host memory, the host backend's
 * collective, and the result copied back.  Correct for every collective,
 * dtype and op, but synchronous, so it cannot be captured into a CUDA
 * graph.  Its barrier drains the stream, then waits for every rank. */
#include <stdlib.h>

#include "../runtime/runtime.h"
#include "backend.h"
#include "staging.h"

static void staged_capabilities(qcoll__ctx_t *ctx, qcoll__caps_t *caps) {
  caps->usable = ctx->shm != NULL;
  caps->ready = caps->usable;
  caps->ranks_per_gpu = 0;
}

static qcoll_status_t run_staged(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  bool capturing = false;
  qcoll_status_t st = rt->stream_is_capturing(c->stream, &capturing);
  if (st != QCOLL_OK) return st;
  if (capturing)
    return qcoll__error(
        ctx, QCOLL_ERR_UNSUPPORTED,
        "%s of %s/%s on GPU buffers runs through host memory "
        "and cannot be captured into a CUDA graph",
        qcoll__coll_fn(c->coll), qcoll_dtype_name(c->dtype),
        qcoll__coll_reduces(c->coll) ? qcoll_op_name(c->op) : "-");
  /* In-place layouts share one host block (staging.h). */
  const qcoll__staging_t l = qcoll__staging_layout(c->sendbuf, c->send_bytes,
                                                   c->recvbuf, c->recv_bytes);
  char *staging[2] = {NULL, NULL}, *send = NULL, *recv = NULL;
  qcoll__call_t on_host = *c;
  for (int b = 0; b < 2; b++)
    if (l.block_bytes[b]) staging[b] = malloc(l.block_bytes[b]);
  if (l.send_block >= 0 && staging[l.send_block])
    send = staging[l.send_block] + l.send_offset;
  if (l.recv_block >= 0 && staging[l.recv_block])
    recv = staging[l.recv_block] + l.recv_offset;
  size_t staged_bytes = l.block_bytes[0] + l.block_bytes[1];
  if ((c->send_bytes && !send) || (c->recv_bytes && !recv)) {
    st = qcoll__error(ctx, QCOLL_ERR_OUT_OF_MEMORY,
                      "%s: cannot allocate %zu bytes of host staging",
                      qcoll__coll_fn(c->coll), staged_bytes);
    goto out;
  }
  if (c->send_bytes)
    QCHECK(rt->memcpy_d2h(send, c->sendbuf, c->send_bytes, c->stream));
  on_host.sendbuf = send;
  on_host.recvbuf = recv;
  on_host.path = QCOLL__PATH_HOST;
  QCHECK(qcoll__backend_host.run(ctx, &on_host));
  if (c->recv_bytes)
    QCHECK(rt->memcpy_h2d(c->recvbuf, recv, c->recv_bytes, c->stream));
out:
  free(staging[0]);
  free(staging[1]);
  return st;
}

static qcoll_status_t staged_run(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  if (c->coll == QCOLL__COLL_BARRIER)
    return qcoll__stream_barrier(ctx, c, false);
  return run_staged(ctx, c);
}

const qcoll__backend_t qcoll__backend_staged = {
    .name = "staged",
    .init = NULL,
    .capabilities = staged_capabilities,
    .prepare = NULL,
    .run = staged_run,
    .signal_abort = NULL,
    .poll_async_error = NULL,
    .destroy = NULL,
    .describe = NULL,
};
