/*
 * The collectives qcoll-perf measures: how a size in bytes becomes counts,
 * where the in-place forms put their data, the bus-bandwidth factors, and
 * the call itself.
 */
#include <string.h>

#include "perf.h"

static const perf_coll_t colls[PERF_COLL_COUNT] = {
    {PERF_ALL_REDUCE, "all_reduce", true, false, true},
    {PERF_REDUCE, "reduce", true, true, true},
    {PERF_BROADCAST, "broadcast", false, true, true},
    {PERF_ALL_GATHER, "all_gather", false, false, true},
    {PERF_REDUCE_SCATTER, "reduce_scatter", true, false, true},
    /* The API requires distinct buffers for these two. */
    {PERF_ALL_TO_ALL, "all_to_all", false, false, false},
    {PERF_SENDRECV, "sendrecv", false, false, false},
    {PERF_BARRIER, "barrier", false, false, false},
};

const perf_coll_t *perf_coll_by_name(const char *name) {
  for (int i = 0; i < PERF_COLL_COUNT; i++)
    if (strcmp(colls[i].name, name) == 0) return &colls[i];
  /* Also the spellings without underscores (allreduce, alltoall...). */
  for (int i = 0; i < PERF_COLL_COUNT; i++) {
    char squeezed[32];
    size_t k = 0;
    for (const char *s = colls[i].name; *s && k + 1 < sizeof squeezed; s++)
      if (*s != '_') squeezed[k++] = *s;
    squeezed[k] = 0;
    if (strcmp(squeezed, name) == 0) return &colls[i];
  }
  return NULL;
}

const perf_coll_t *perf_coll_by_id(perf_coll_id_t id) {
  return (unsigned)id < PERF_COLL_COUNT ? &colls[id] : NULL;
}

perf_shape_t perf_coll_shape(const perf_coll_t *c, size_t bytes, size_t elem_size, int nranks) {
  perf_shape_t s = {0, 0, 0, 0};
  size_t elems = bytes / elem_size;
  size_t n = (size_t)nranks;
  switch (c->id) {
  case PERF_ALL_GATHER:
    s.count = elems / n;
    s.send_elems = s.count;
    s.recv_elems = s.count * n;
    break;
  case PERF_REDUCE_SCATTER:
    s.count = elems / n;
    s.send_elems = s.count * n;
    s.recv_elems = s.count;
    break;
  case PERF_ALL_TO_ALL:
    s.count = elems / n;
    s.send_elems = s.recv_elems = s.count * n;
    break;
  case PERF_BARRIER:
    break;
  default:
    s.count = s.send_elems = s.recv_elems = elems;
    break;
  }
  size_t most = s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems;
  s.bytes = most * elem_size;
  return s;
}

double perf_busbw_factor(const perf_coll_t *c, int nranks) {
  double n = nranks;
  switch (c->id) {
  case PERF_ALL_REDUCE:
    return 2.0 * (n - 1) / n;
  case PERF_ALL_GATHER:
  case PERF_REDUCE_SCATTER:
  case PERF_ALL_TO_ALL:
    return (n - 1) / n;
  case PERF_BARRIER:
    return 0;
  default: /* reduce, broadcast, sendrecv: every byte crosses one link */
    return 1;
  }
}

void perf_call_pointers(const perf_call_t *call, void **send, void **recv,
                        size_t *send_off_bytes, size_t *recv_off_bytes) {
  size_t es = qcoll_dtype_size(call->dtype);
  size_t own = (size_t)call->rank * call->shape.count * es; /* this rank's block */
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
    return call->use_ex ? "qcoll_all_reduce_ex" : "qcoll_all_reduce";
  case PERF_REDUCE:
    return "qcoll_reduce";
  case PERF_BROADCAST:
    return "qcoll_broadcast";
  case PERF_ALL_GATHER:
    return "qcoll_all_gather";
  case PERF_REDUCE_SCATTER:
    return "qcoll_reduce_scatter";
  case PERF_ALL_TO_ALL:
    return "qcoll_all_to_all";
  case PERF_SENDRECV:
    return "qcoll_send/qcoll_recv";
  case PERF_BARRIER:
    return "qcoll_barrier";
  default:
    return "?";
  }
}

/* Ring exchange: send to the next rank, receive from the previous one.
 * Even ranks send first and odd ranks receive first, so a send that waits
 * for its receiver (a message larger than the pair's buffer) always has
 * one. */
static qcoll_status_t sendrecv_ring(const perf_call_t *c, const void *send, void *recv) {
  int next = (c->rank + 1) % c->nranks;
  int prev = (c->rank + c->nranks - 1) % c->nranks;
  size_t n = c->shape.count;
  qcoll_status_t st;
  if (c->rank % 2 == 0) {
    st = qcoll_send(send, n, c->dtype, next, c->comm, c->stream);
    if (st == QCOLL_OK) st = qcoll_recv(recv, n, c->dtype, prev, c->comm, c->stream);
  } else {
    st = qcoll_recv(recv, n, c->dtype, prev, c->comm, c->stream);
    if (st == QCOLL_OK) st = qcoll_send(send, n, c->dtype, next, c->comm, c->stream);
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
    if (c->use_ex)
      return qcoll_all_reduce_ex(send, recv, n, c->dtype, c->op, c->comm, c->stream, &c->opts);
    return qcoll_all_reduce(send, recv, n, c->dtype, c->op, c->comm, c->stream);
  case PERF_REDUCE:
    return qcoll_reduce(send, recv, n, c->dtype, c->op, c->root, c->comm, c->stream);
  case PERF_BROADCAST:
    return qcoll_broadcast(send, recv, n, c->dtype, c->root, c->comm, c->stream);
  case PERF_ALL_GATHER:
    return qcoll_all_gather(send, recv, n, c->dtype, c->comm, c->stream);
  case PERF_REDUCE_SCATTER:
    return qcoll_reduce_scatter(send, recv, n, c->dtype, c->op, c->comm, c->stream);
  case PERF_ALL_TO_ALL:
    return qcoll_all_to_all(send, recv, n, c->dtype, c->comm, c->stream);
  case PERF_SENDRECV:
    return sendrecv_ring(c, send, recv);
  case PERF_BARRIER:
    return qcoll_barrier(c->comm, c->stream);
  default:
    return QCOLL_ERR_INVALID_ARGUMENT;
  }
}
