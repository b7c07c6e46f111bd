/* The ipc backend: the CUDA IPC kernels (transport/cuda_ipc.c sets up and
 * maps the buffers and launches them): one-shot and two-shot all-reduce,
 * quantised or not, and every collective, send/recv and the stream barrier
 * of collectives.cu.  Builds without CUDA get a backend that reports itself
 * unusable, so core needs no #ifdef. */
#include "backend.h"

#include <string.h>

#include "../runtime/runtime.h"
#include "../transport/cuda_ipc.h"
#include "../transport/cuda_reg.h"
#include "cuda_ipc_launch.h"

#ifdef QCOLL_HAVE_CUDA

static bool ipc_usable(qcoll__ctx_t *ctx) {
  return ctx->cuda && qcoll__cuda_ipc_usable(ctx);
}

static qcoll_status_t ipc_init(qcoll__ctx_t *ctx) {
  if (ctx->device < 0) return QCOLL_OK;
  qcoll__device_guard_t guard;
  qcoll_status_t st = qcoll__device_guard_enter(ctx, &guard);
  if (st != QCOLL_OK) return st;
  st = qcoll__cuda_comm_init(ctx);
  qcoll__device_guard_exit(ctx, &guard);
  return st;
}

static void ipc_capabilities(qcoll__ctx_t *ctx, qcoll__caps_t *caps) {
  caps->usable = ipc_usable(ctx);
  caps->ready = caps->usable;
  caps->ranks_per_gpu = ctx->cuda ? qcoll__cuda_ipc_most_ranks_per_gpu(ctx) : 0;
}

/* One-shot or two-shot all-reduce, quantised as the call says. */
static qcoll_status_t run_all_reduce(qcoll__ctx_t *ctx,
                                     const qcoll__call_t *c) {
  /* Only all-reduces get here: check_enums refuses one-shot/two-shot for
   * the others, QCOLL_ALGO's are ignored for them, and the table's rows
   * give them to all-reduces alone. */
  const char *why = NULL;
  if (!ipc_usable(ctx))
    why = "CUDA IPC is not usable on this communicator (see the init log)";
  else if (!qcoll__ipc_kernel_supports(c->dtype, c->op))
    why = "the IPC kernels serve f16/bf16/f32 with sum/min/max only";
  if (why)
    return qcoll__error(ctx, QCOLL_ERR_UNSUPPORTED,
                        "%s: %s cannot serve %s/%s: %s",
                        qcoll__coll_fn(c->coll), qcoll__path_name(c->path),
                        qcoll_dtype_name(c->dtype), qcoll_op_name(c->op), why);
  return qcoll__cuda_all_reduce(
      ctx, c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->stream,
      c->path == QCOLL__PATH_ONESHOT ? QCOLL_ALGO_ONESHOT : QCOLL_ALGO_TWOSHOT,
      c->quant, c->quant_rotate);
}

/* Every collective, dtype and op on the IPC kernels of collectives.cu. */
static qcoll_status_t run_collective(qcoll__ctx_t *ctx,
                                     const qcoll__call_t *c) {
  if (!ipc_usable(ctx))
    return qcoll__error(ctx, QCOLL_ERR_UNSUPPORTED,
                        "%s: ipc cannot serve: CUDA IPC is not usable on this "
                        "communicator (see the init log)",
                        qcoll__coll_fn(c->coll));
  switch (c->coll) {
    case QCOLL__COLL_SEND:
      return qcoll__cuda_send(ctx, c->sendbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_RECV:
      return qcoll__cuda_recv(ctx, c->recvbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_BARRIER: return qcoll__stream_barrier(ctx, c, true);
    default:
      return qcoll__cuda_collective(ctx, c->coll, c->sendbuf, c->recvbuf,
                                    c->count, c->dtype, c->op, c->root,
                                    c->stream);
  }
}

static qcoll_status_t ipc_run(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  if (c->path == QCOLL__PATH_IPC) return run_collective(ctx, c);
  return run_all_reduce(ctx, c);
}

/* Registration where the IPC kernels serve; elsewhere nothing to do (the
 * ranks agree on whether IPC is usable, so all skip the exchange alike). */
static qcoll_status_t ipc_register(qcoll__ctx_t *ctx, const void *buf,
                                   size_t bytes, qcoll__reg_result_t *out) {
  memset(out, 0, sizeof *out);
  if (!ipc_usable(ctx)) return QCOLL_OK;
  qcoll__device_guard_t guard;
  qcoll_status_t st = qcoll__device_guard_enter(ctx, &guard);
  if (st != QCOLL_OK) return st;
  st = qcoll__cuda_reg_register(ctx, &buf, &bytes, 1, false, out);
  qcoll__device_guard_exit(ctx, &guard);
  return st;
}

static qcoll_status_t ipc_deregister(qcoll__ctx_t *ctx,
                                     const qcoll__reg_result_t *reg) {
  if (!ipc_usable(ctx)) return QCOLL_OK;
  qcoll__device_guard_t guard;
  qcoll_status_t st = qcoll__device_guard_enter(ctx, &guard);
  if (st != QCOLL_OK) return st;
  st = qcoll__cuda_reg_deregister(
      ctx, reg && reg->status != QCOLL_REG_NONE ? reg : NULL);
  qcoll__device_guard_exit(ctx, &guard);
  return st;
}

static void ipc_signal_abort(qcoll__ctx_t *ctx) {
  /* A store to host-mapped memory: kernels waiting on peers stop. */
  if (ctx->cuda) qcoll__cuda_signal_abort(ctx);
}

static qcoll_status_t ipc_poll_async_error(qcoll__ctx_t *ctx) {
  return ctx->cuda ? qcoll__cuda_poll_async_error(ctx) : QCOLL_OK;
}

static void ipc_destroy(qcoll__ctx_t *ctx) {
  if (ctx->device < 0 || !ctx->cuda) return;
  qcoll__device_guard_t guard;
  if (qcoll__device_guard_enter(ctx, &guard) != QCOLL_OK) return;
  qcoll__cuda_comm_destroy(ctx);
  qcoll__device_guard_exit(ctx, &guard);
}

#else /* no CUDA: never usable */

static void ipc_capabilities(qcoll__ctx_t *ctx, qcoll__caps_t *caps) {
  caps->usable = false;
  caps->ready = false;
  caps->ranks_per_gpu = 0;
}

static qcoll_status_t ipc_run(qcoll__ctx_t *ctx, const qcoll__call_t *c) {
  return qcoll__error(ctx, QCOLL_ERR_UNSUPPORTED,
                      "%s: %s cannot serve: this qcoll was built without CUDA",
                      qcoll__coll_fn(c->coll), qcoll__path_name(c->path));
}

#define ipc_init NULL
#define ipc_register NULL
#define ipc_deregister NULL
#define ipc_signal_abort NULL
#define ipc_poll_async_error NULL
#define ipc_destroy NULL

#endif

const qcoll__backend_t qcoll__backend_ipc = {
    .name = "ipc",
    .init = ipc_init,
    .capabilities = ipc_capabilities,
    .prepare = NULL,
    .run = ipc_run,
    .signal_abort = ipc_signal_abort,
    .poll_async_error = ipc_poll_async_error,
    .destroy = ipc_destroy,
    .register_buffer = ipc_register,
    .deregister_buffer = ipc_deregister,
    .describe = NULL,
};
