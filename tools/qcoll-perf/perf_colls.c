/*
 * The collectives qcoll-perf measures: where the in-place forms put their
 * data, and the call itself (the table of collectives, their shapes and
 * bus-bandwidth factors are in perf_common.c).
 */
#include "perf.h"

void perf_call_pointers(const perf_call_t *call, void **send, void **recv,
                        size_t *send_off_bytes, size_t *recv_off_bytes) {
  size_t es = qcoll_dtype_size(call->dtype);
  size_t own =
      (size_t)call->rank * call->shape.count * es; /* this rank's block */
  *send_off_bytes = *recv_off_bytes = 0;
  if (!call->in_place) {
    *send = call->send->ptr;
    *recv = call->recv->ptr;
    return;
  }
  /* In place: everything lives in the receive buffer. */
  *send = *recv = call->recv->ptr;
  if (call->coll->id == PERF_ALL_GATHER) *send_off_bytes = own;
  if (call->coll->id == PERF_REDUCE_SCATTER) *recv_off_bytes = own;
  *send = (char *)*send + *send_off_bytes;
  *recv = (char *)*recv + *recv_off_bytes;
}

const char *perf_call_fn(const perf_call_t *call) {
  switch (call->coll->id) {
    case PERF_ALL_REDUCE:
      return call->opts ? "qcoll_all_reduce_ex" : "qcoll_all_reduce";
    case PERF_REDUCE: return call->opts ? "qcoll_reduce_ex" : "qcoll_reduce";
    case PERF_BROADCAST:
      return call->opts ? "qcoll_broadcast_ex" : "qcoll_broadcast";
    case PERF_ALL_GATHER:
      return call->opts ? "qcoll_all_gather_ex" : "qcoll_all_gather";
    case PERF_REDUCE_SCATTER:
      return call->opts ? "qcoll_reduce_scatter_ex" : "qcoll_reduce_scatter";
    case PERF_ALL_TO_ALL:
      return call->opts ? "qcoll_all_to_all_ex" : "qcoll_all_to_all";
    case PERF_SENDRECV:
      return call->opts ? "qcoll_send_ex/qcoll_recv_ex"
                        : "qcoll_send/qcoll_recv";
    case PERF_BARRIER: return "qcoll_barrier";
    default: return "?";
  }
}

/* Ring exchange: send to the next rank, receive from the previous one.
 * Even ranks send first and odd ranks receive first, so a send that waits
 * for its receiver (a message larger than the pair's buffer) always has
 * one. */
static qcoll_status_t sendrecv_ring(const perf_call_t *c, const void *send,
                                    void *recv) {
  int next = (c->rank + 1) % c->nranks;
  int prev = (c->rank + c->nranks - 1) % c->nranks;
  size_t n = c->shape.count;
  qcoll_status_t st;
  if (c->rank % 2 == 0) {
    st = qcoll_send_ex(send, n, c->dtype, next, c->comm, c->stream, c->opts);
    if (st == QCOLL_OK)
      st = qcoll_recv_ex(recv, n, c->dtype, prev, c->comm, c->stream, c->opts);
  } else {
    st = qcoll_recv_ex(recv, n, c->dtype, prev, c->comm, c->stream, c->opts);
    if (st == QCOLL_OK)
      st = qcoll_send_ex(send, n, c->dtype, next, c->comm, c->stream, c->opts);
  }
  return st;
}

qcoll_status_t perf_call_run(const perf_call_t *c) {
  void *send, *recv;
  size_t so, ro;
  perf_call_pointers(c, &send, &recv, &so, &ro);
  size_t n = c->shape.count;
  switch (c->coll->id) {
    case PERF_ALL_REDUCE:
      return qcoll_all_reduce_ex(send, recv, n, c->dtype, c->op, c->comm,
                                 c->stream, c->opts);
    case PERF_REDUCE:
      return qcoll_reduce_ex(send, recv, n, c->dtype, c->op, c->root, c->comm,
                             c->stream, c->opts);
    case PERF_BROADCAST:
      return qcoll_broadcast_ex(send, recv, n, c->dtype, c->root, c->comm,
                                c->stream, c->opts);
    case PERF_ALL_GATHER:
      return qcoll_all_gather_ex(send, recv, n, c->dtype, c->comm, c->stream,
                                 c->opts);
    case PERF_REDUCE_SCATTER:
      return qcoll_reduce_scatter_ex(send, recv, n, c->dtype, c->op, c->comm,
                                     c->stream, c->opts);
    case PERF_ALL_TO_ALL:
      return qcoll_all_to_all_ex(send, recv, n, c->dtype, c->comm, c->stream,
                                 c->opts);
    case PERF_SENDRECV: return sendrecv_ring(c, send, recv);
    case PERF_BARRIER: return qcoll_barrier(c->comm, c->stream);
    default: return QCOLL_ERR_INVALID_ARGUMENT;
  }
}
