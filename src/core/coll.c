/*
 * Public collectives: argument validation, placement (host or GPU, and which
 * GPU), the optional cross-rank signature check, and dispatch to the host
 * back end or the GPU paths.  Everything is checked before anything is
 * enqueued, so a refused call leaves the communicator usable.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bootstrap/bootstrap.h"
#include "../coll/host/host_coll.h"
#include "../runtime/runtime.h"
#include "../transport/cuda_ipc.h"
#include "../transport/nccl.h"
#include "comm.h"
#include "config.h"
#include "select.h"
#include "staging.h"

/* The collectives, as the selection table names them. */
typedef qcoll__coll_t coll_kind_t;

static const char *const coll_fn[] = {
    "qcoll_all_reduce", "qcoll_reduce",         "qcoll_broadcast",
    "qcoll_all_gather", "qcoll_reduce_scatter", "qcoll_all_to_all",
    "qcoll_send",       "qcoll_recv",           "qcoll_barrier"};

typedef struct call {
  coll_kind_t kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  int root; /* root, or peer for send/recv */
  void *stream;
  const qcoll_options_t *opts; /* the caller's, or NULL */
  qcoll_algo_t algo;
  qcoll_quant_t quant;
  bool quant_per_call; /* asked for in the call's options, not the env */
  /* filled by validation */
  size_t send_bytes, recv_bytes; /* bytes this rank reads / writes */
  int device;                    /* -1 host, else the buffers' device */
} call_t;

static bool is_reduction(coll_kind_t k) {
  return k == QCOLL__COLL_ALL_REDUCE || k == QCOLL__COLL_REDUCE ||
         k == QCOLL__COLL_REDUCE_SCATTER;
}
static bool has_root(coll_kind_t k) {
  return k == QCOLL__COLL_REDUCE || k == QCOLL__COLL_BROADCAST;
}
static bool is_p2p(coll_kind_t k) {
  return k == QCOLL__COLL_SEND || k == QCOLL__COLL_RECV;
}

/* Bytes read from sendbuf and written to recvbuf by this rank. */
static qcoll_status_t compute_sizes(qcoll_comm_t comm, call_t *c) {
  const char *fn = coll_fn[c->kind];
  size_t elem = qcoll_dtype_size(c->dtype), bytes, wide;
  if (!qcoll__mul_size(c->count, elem, &bytes) ||
      !qcoll__mul_size(bytes, (size_t)comm->nranks, &wide) ||
      wide > (SIZE_MAX >> 1))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: count %zu of %s overflows the byte size with %d "
                        "ranks",
                        fn, c->count, qcoll_dtype_name(c->dtype), comm->nranks);
  bool root = c->root == comm->rank;
  switch (c->kind) {
    case QCOLL__COLL_ALL_GATHER:
      c->send_bytes = bytes;
      c->recv_bytes = wide;
      break;
    case QCOLL__COLL_REDUCE_SCATTER:
      c->send_bytes = wide;
      c->recv_bytes = bytes;
      break;
    case QCOLL__COLL_ALL_TO_ALL:
      c->send_bytes = wide;
      c->recv_bytes = wide;
      break;
    case QCOLL__COLL_REDUCE:
      c->send_bytes = bytes;
      c->recv_bytes = root ? bytes : 0;
      break;
    case QCOLL__COLL_BROADCAST:
      c->send_bytes = root ? bytes : 0;
      c->recv_bytes = bytes;
      break;
    case QCOLL__COLL_SEND:
      c->send_bytes = bytes;
      c->recv_bytes = 0;
      break;
    case QCOLL__COLL_RECV:
      c->send_bytes = 0;
      c->recv_bytes = bytes;
      break;
    case QCOLL__COLL_BARRIER: c->send_bytes = c->recv_bytes = 0; break;
    default: c->send_bytes = c->recv_bytes = bytes; break;
  }
  return QCOLL_OK;
}

static qcoll_status_t check_enums(qcoll_comm_t comm, const call_t *c) {
  const char *fn = coll_fn[c->kind];
  if (c->kind == QCOLL__COLL_BARRIER) return QCOLL_OK;
  if ((unsigned)c->dtype >= QCOLL_DTYPE_COUNT)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: dtype %d is not a qcoll_dtype_t (0..%d)", fn,
                        (int)c->dtype, QCOLL_DTYPE_COUNT - 1);
  if (is_reduction(c->kind) && (unsigned)c->op >= QCOLL_OP_COUNT)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: op %d is not a qcoll_op_t (0..%d)", fn, (int)c->op,
                        QCOLL_OP_COUNT - 1);
  if ((has_root(c->kind) || is_p2p(c->kind)) &&
      (c->root < 0 || c->root >= comm->nranks))
    return qcoll__error(
        comm, QCOLL_ERR_INVALID_ARGUMENT, "%s: %s %d is out of range [0, %d)",
        fn, is_p2p(c->kind) ? "peer" : "root", c->root, comm->nranks);
  if (is_p2p(c->kind) && c->root == comm->rank)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: peer %d is this rank itself (a send or recv to "
                        "oneself is refused: copy the buffer instead)",
                        fn, c->root);
  if ((unsigned)c->algo >= QCOLL_ALGO_COUNT)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: algo %d is not a qcoll_algo_t", fn, (int)c->algo);
  if ((unsigned)c->quant >= QCOLL_QUANT_COUNT)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: quant %d is not a qcoll_quant_t", fn,
                        (int)c->quant);
  if (c->kind != QCOLL__COLL_ALL_REDUCE &&
      (c->algo == QCOLL_ALGO_ONESHOT || c->algo == QCOLL_ALGO_TWOSHOT))
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s_ex: %s is an all_reduce algorithm (use auto, host, "
                        "nccl or ipc)",
                        fn, qcoll_algo_name(c->algo));
  if (c->kind != QCOLL__COLL_ALL_REDUCE && c->quant != QCOLL_QUANT_DEFAULT &&
      c->quant != QCOLL_QUANT_NONE)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s_ex: quantisation %s serves all_reduce only (use "
                        "QCOLL_QUANT_DEFAULT or NONE)",
                        fn, qcoll_quant_name(c->quant));
  return QCOLL_OK;
}

static bool ranges_overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}

static qcoll_status_t check_pointers(qcoll_comm_t comm, const call_t *c) {
  const char *fn = coll_fn[c->kind];
  if (c->send_bytes && !c->sendbuf)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf is NULL but %zu bytes are to be sent", fn,
                        c->send_bytes);
  if (c->recv_bytes && !c->recvbuf)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: recvbuf is NULL but %zu bytes are to be received",
                        fn, c->recv_bytes);
  if (c->kind == QCOLL__COLL_ALL_TO_ALL &&
      ranges_overlap(c->sendbuf, c->send_bytes, c->recvbuf, c->recv_bytes))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf and recvbuf overlap (all-to-all cannot "
                        "run in place)",
                        fn);
  size_t elem = qcoll_dtype_size(c->dtype);
  size_t block = c->recv_bytes < c->send_bytes ? c->recv_bytes : c->send_bytes;
  /* Partial overlaps other than the documented in-place layouts would
   * read data already overwritten. */
  if (c->kind == QCOLL__COLL_ALL_GATHER && c->sendbuf != c->recvbuf &&
      (const char *)c->sendbuf !=
          (char *)c->recvbuf + (size_t)comm->rank * block &&
      ranges_overlap(c->sendbuf, c->send_bytes, c->recvbuf, c->recv_bytes))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf overlaps recvbuf but is not the in-place "
                        "slot recvbuf + rank*sendcount",
                        fn);
  if (c->kind == QCOLL__COLL_REDUCE_SCATTER &&
      (const char *)c->recvbuf !=
          (const char *)c->sendbuf + (size_t)comm->rank * block &&
      ranges_overlap(c->sendbuf, c->send_bytes, c->recvbuf, c->recv_bytes))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: recvbuf overlaps sendbuf but is not the in-place "
                        "slot sendbuf + rank*recvcount",
                        fn);
  if ((c->kind == QCOLL__COLL_ALL_REDUCE || c->kind == QCOLL__COLL_REDUCE ||
       c->kind == QCOLL__COLL_BROADCAST) &&
      c->sendbuf != c->recvbuf &&
      ranges_overlap(c->sendbuf, c->send_bytes, c->recvbuf, c->recv_bytes))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf and recvbuf overlap without being equal",
                        fn);
  (void)elem;
  return QCOLL_OK;
}

/* Decide host or GPU from where the buffers live, and check that GPU
 * buffers and the stream belong to the communicator's device. */
static qcoll_status_t place_call(qcoll_comm_t comm, call_t *c) {
  const char *fn = coll_fn[c->kind];
  const qcoll__runtime_t *rt = qcoll__runtime();
  int send_dev = -1, recv_dev = -1;
  qcoll_status_t st;
  if (c->send_bytes && (st = rt->pointer_device(c->sendbuf, &send_dev)))
    return st;
  if (c->recv_bytes && (st = rt->pointer_device(c->recvbuf, &recv_dev)))
    return st;
  if (c->send_bytes && c->recv_bytes && send_dev != recv_dev)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf is on %s %d but recvbuf is on %s %d", fn,
                        send_dev < 0 ? "host" : "device", send_dev,
                        recv_dev < 0 ? "host" : "device", recv_dev);
  c->device = c->send_bytes ? send_dev : recv_dev;
  /* A barrier with a stream on a GPU communicator is ordered on the stream:
   * it runs where GPU calls run. */
  if (c->kind == QCOLL__COLL_BARRIER && c->stream && comm->device >= 0)
    c->device = comm->device;
  if (c->device < 0) {
    if (comm->nhosts > 1)
      return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                          "%s: host buffers need every rank on one host, but "
                          "this communicator spans %d hosts",
                          fn, comm->nhosts);
    return QCOLL_OK;
  }
  if (c->device != comm->device)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: %s is on device %d but the communicator's device "
                        "is %d",
                        fn, c->send_bytes ? "sendbuf" : "recvbuf", c->device,
                        comm->device);
  if (c->stream) {
    int stream_dev = -1;
    if ((st = rt->stream_device(c->stream, &stream_dev))) return st;
    if (stream_dev >= 0 && stream_dev != comm->device)
      return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                          "%s: stream belongs to device %d but the "
                          "communicator's device is %d",
                          fn, stream_dev, comm->device);
  }
  return QCOLL_OK;
}

/* With QCOLL_CHECK=1, every rank compares the call's signature before it
 * runs, so a mismatched call fails with a name instead of corrupting data
 * or hanging. */
typedef struct signature {
  /* algo: the forced algorithm of a GPU call (-1 on host buffers, where
   * auto and host take the same path); opt_algo and opt_quant: the per-call
   * options as the caller passed them (defaults without opts), which must
   * be the same on every rank even where they take the same path.  Eight
   * int32 keep the struct free of padding, so memcmp never compares
   * indeterminate bytes. */
  int32_t kind, dtype, op, root, placement, algo, opt_algo, opt_quant;
  uint64_t count;
} signature_t;

static const char *signature_algo(const signature_t *s) {
  return s->algo < 0 ? "host" : qcoll_algo_name((qcoll_algo_t)s->algo);
}

/* "count=8, dtype=f32, op=sum, root=-1, algo=host, options auto/default" */
static void format_signature(const signature_t *s, char *buf, size_t size) {
  snprintf(buf, size,
           "%s(count=%llu, dtype=%s, op=%s, root=%d, algo=%s, options "
           "%s/%s)",
           (unsigned)s->kind <= QCOLL__COLL_BARRIER ? coll_fn[s->kind] : "?",
           (unsigned long long)s->count,
           qcoll_dtype_name((qcoll_dtype_t)s->dtype),
           s->op < 0 ? "-" : qcoll_op_name((qcoll_op_t)s->op), s->root,
           signature_algo(s), qcoll_algo_name((qcoll_algo_t)s->opt_algo),
           qcoll_quant_name((qcoll_quant_t)s->opt_quant));
}

static qcoll_status_t check_signature(qcoll_comm_t comm, const call_t *c) {
  if (!comm->check_calls || is_p2p(c->kind)) return QCOLL_OK;
  size_t n = (size_t)comm->nranks;
  signature_t *all = calloc(n, sizeof *all);
  if (!all)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "QCOLL_CHECK: cannot allocate %zu signatures", n);
  signature_t mine = {(int32_t)c->kind,
                      (int32_t)c->dtype,
                      is_reduction(c->kind) ? (int32_t)c->op : -1,
                      has_root(c->kind) ? c->root : -1,
                      c->device < 0 ? 0 : 1,
                      c->device < 0 ? -1 : (int32_t)c->algo,
                      c->opts ? (int32_t)c->opts->algo : QCOLL_ALGO_AUTO,
                      c->opts ? (int32_t)c->opts->quant : QCOLL_QUANT_DEFAULT,
                      c->count};
  all[comm->rank] = mine;
  qcoll_status_t st =
      qcoll__bootstrap_allgather(comm->bootstrap, all, sizeof *all);
  for (size_t r = 0; st == QCOLL_OK && r < n; r++) {
    const signature_t *s = &all[r];
    if (!memcmp(s, &mine, sizeof mine)) continue;
    char ours[192], theirs[192];
    format_signature(&mine, ours, sizeof ours);
    format_signature(s, theirs, sizeof theirs);
    st = qcoll__error(comm, QCOLL_ERR_MISMATCH,
                      "QCOLL_CHECK: rank %d called %s but rank %zu called %s",
                      comm->rank, ours, r, theirs);
  }
  free(all);
  return st;
}

static qcoll_status_t run_host(qcoll_comm_t comm, const call_t *c,
                               const void *send, void *recv) {
  switch (c->kind) {
    case QCOLL__COLL_ALL_REDUCE:
      return qcoll__host_all_reduce(comm, send, recv, c->count, c->dtype,
                                    c->op);
    case QCOLL__COLL_REDUCE:
      return qcoll__host_reduce(comm, send, recv, c->count, c->dtype, c->op,
                                c->root);
    case QCOLL__COLL_BROADCAST:
      return qcoll__host_broadcast(comm, send, recv, c->count, c->dtype,
                                   c->root);
    case QCOLL__COLL_ALL_GATHER:
      return qcoll__host_all_gather(comm, send, recv, c->count, c->dtype);
    case QCOLL__COLL_REDUCE_SCATTER:
      return qcoll__host_reduce_scatter(comm, send, recv, c->count, c->dtype,
                                        c->op);
    case QCOLL__COLL_ALL_TO_ALL:
      return qcoll__host_all_to_all(comm, send, recv, c->count, c->dtype);
    case QCOLL__COLL_SEND:
      return qcoll__host_send(comm, send, c->count, c->dtype, c->root);
    case QCOLL__COLL_RECV:
      return qcoll__host_recv(comm, recv, c->count, c->dtype, c->root);
    case QCOLL__COLL_BARRIER: return qcoll__host_barrier(comm);
    case QCOLL__COLL_COUNT: break;
  }
  return qcoll__error(comm, QCOLL_ERR_INTERNAL, "unknown collective %d",
                      (int)c->kind);
}

/* GPU buffers through host memory: copy in, run the host collective, copy
 * out.  Correct for every collective, dtype and op, but synchronous, so it
 * cannot be captured into a CUDA graph. */
static qcoll_status_t run_staged(qcoll_comm_t comm, const call_t *c) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  bool capturing = false;
  qcoll_status_t st = rt->stream_is_capturing(c->stream, &capturing);
  if (st != QCOLL_OK) return st;
  if (capturing)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s of %s/%s on GPU buffers runs through host memory "
                        "and cannot be captured into a CUDA graph",
                        coll_fn[c->kind], qcoll_dtype_name(c->dtype),
                        is_reduction(c->kind) ? qcoll_op_name(c->op) : "-");
  /* In-place layouts share one host block (staging.h). */
  const qcoll__staging_t l = qcoll__staging_layout(
      c->sendbuf, c->send_bytes, c->recvbuf, c->recv_bytes);
  char *staging[2] = {NULL, NULL}, *send = NULL, *recv = NULL;
  for (int b = 0; b < 2; b++)
    if (l.block_bytes[b]) staging[b] = malloc(l.block_bytes[b]);
  if (l.send_block >= 0 && staging[l.send_block])
    send = staging[l.send_block] + l.send_offset;
  if (l.recv_block >= 0 && staging[l.recv_block])
    recv = staging[l.recv_block] + l.recv_offset;
  size_t staged_bytes = l.block_bytes[0] + l.block_bytes[1];
  if ((c->send_bytes && !send) || (c->recv_bytes && !recv)) {
    st = qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                      "%s: cannot allocate %zu bytes of host staging",
                      coll_fn[c->kind], staged_bytes);
    goto out;
  }
  if (c->send_bytes)
    QCHECK(rt->memcpy_d2h(send, c->sendbuf, c->send_bytes, c->stream));
  QCHECK(run_host(comm, c, send, recv));
  if (c->recv_bytes)
    QCHECK(rt->memcpy_h2d(c->recvbuf, recv, c->recv_bytes, c->stream));
out:
  free(staging[0]);
  free(staging[1]);
  return st;
}

/* A per-call choice wins; DEFAULT/AUTO means the environment's, which
 * the communicator read once at init. */
static qcoll_quant_t resolve_quant(qcoll_comm_t comm, qcoll_quant_t q) {
  return q != QCOLL_QUANT_DEFAULT ? q : comm->env_quant;
}

/* A per-call choice wins; else QCOLL_ALGO where it names a path for this
 * collective (one-shot and two-shot are all-reduce algorithms: a broadcast
 * under QCOLL_ALGO=twoshot keeps the table's choice). */
static qcoll_algo_t resolve_algo(qcoll_comm_t comm, const call_t *c) {
  if (c->algo != QCOLL_ALGO_AUTO) return c->algo;
  qcoll_algo_t env = comm->env_algo;
  bool all_reduce_only = env == QCOLL_ALGO_ONESHOT || env == QCOLL_ALGO_TWOSHOT;
  return all_reduce_only && c->kind != QCOLL__COLL_ALL_REDUCE ? QCOLL_ALGO_AUTO
                                                              : env;
}

static qcoll_status_t run_nccl(qcoll_comm_t comm, const call_t *c) {
  switch (c->kind) {
    case QCOLL__COLL_ALL_REDUCE:
      return qcoll__nccl_all_reduce(comm, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->op, c->stream);
    case QCOLL__COLL_REDUCE:
      return qcoll__nccl_reduce(comm, c->sendbuf, c->recvbuf, c->count,
                                c->dtype, c->op, c->root, c->stream);
    case QCOLL__COLL_BROADCAST:
      return qcoll__nccl_broadcast(comm, c->sendbuf, c->recvbuf, c->count,
                                   c->dtype, c->root, c->stream);
    case QCOLL__COLL_ALL_GATHER:
      return qcoll__nccl_all_gather(comm, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->stream);
    case QCOLL__COLL_REDUCE_SCATTER:
      return qcoll__nccl_reduce_scatter(comm, c->sendbuf, c->recvbuf, c->count,
                                        c->dtype, c->op, c->stream);
    case QCOLL__COLL_ALL_TO_ALL:
      return qcoll__nccl_all_to_all(comm, c->sendbuf, c->recvbuf, c->count,
                                    c->dtype, c->stream);
    case QCOLL__COLL_SEND:
      return qcoll__nccl_send(comm, c->sendbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_RECV:
      return qcoll__nccl_recv(comm, c->recvbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_BARRIER:
    case QCOLL__COLL_COUNT: break;
  }
  return qcoll__error(comm, QCOLL_ERR_INTERNAL, "no NCCL path for %s",
                      coll_fn[c->kind]);
}

static bool ipc_usable(qcoll_comm_t comm) {
#ifdef QCOLL_HAVE_CUDA
  return comm->cuda && qcoll__cuda_ipc_usable(comm);
#else
  return false;
#endif
}

static int ipc_most_ranks_per_gpu(qcoll_comm_t comm) {
#ifdef QCOLL_HAVE_CUDA
  return comm->cuda ? qcoll__cuda_ipc_most_ranks_per_gpu(comm) : 0;
#else
  return 0;
#endif
}

/* What the table sees.  Every input is the same on every rank (the NCCL
 * state changes only inside collective calls), so all ranks pick alike. */
static qcoll__select_in_t selection_input(qcoll_comm_t comm, const call_t *c,
                                          bool nccl_ok) {
  qcoll__select_in_t in = {
      .coll = c->kind,
      .bytes = c->count * qcoll_dtype_size(c->dtype),
      .nranks = comm->nranks,
      .dtype = c->dtype,
      .op = c->op,
      .quant = c->quant,
      .gpu = true,
      .ipc = ipc_usable(comm),
      .ranks_per_gpu = ipc_most_ranks_per_gpu(comm),
      .nccl = nccl_ok,
  };
  /* send/recv cannot create NCCL's communicator (only one pair calls them):
   * they use it only once a collective has made it. */
  if (is_p2p(c->kind))
    in.nccl = nccl_ok && qcoll__nccl_comm_state(comm) == QCOLL__NCCL_READY;
  return in;
}

/* NCCL forced where the table knows it stalls: said once per process (the
 * watchdog aborts NCCL if the call then does not finish). */
static void warn_forced_nccl(qcoll_comm_t comm, const call_t *c, bool nccl_ok) {
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  qcoll__select_in_t in = selection_input(comm, c, nccl_ok);
  if (!qcoll__select_nccl_stalls(&in) || atomic_flag_test_and_set(&warned))
    return;
  QLOG_WARN(comm, COLL,
            "%s: NCCL is forced with %d ranks on one GPU, more than "
            "QCOLL_SHARED_GPU_NCCL_MAX_RANKS (%lld), where NCCL was seen to "
            "stall; the NCCL watchdog aborts it after QCOLL_TIMEOUT (%.1f s)",
            coll_fn[c->kind], in.ranks_per_gpu,
            qcoll__env_int("QCOLL_SHARED_GPU_NCCL_MAX_RANKS"), comm->timeout_s);
}

/* The forced path, or the table's. */
static qcoll__path_t choose_path(qcoll_comm_t comm, const call_t *c,
                                 bool nccl_ok) {
  /* A forced algorithm names a way to move data; a barrier has none. */
  qcoll_algo_t forced =
      c->kind == QCOLL__COLL_BARRIER ? QCOLL_ALGO_AUTO : c->algo;
  switch (forced) {
    case QCOLL_ALGO_ONESHOT: return QCOLL__PATH_ONESHOT;
    case QCOLL_ALGO_TWOSHOT: return QCOLL__PATH_TWOSHOT;
    case QCOLL_ALGO_NCCL:
      warn_forced_nccl(comm, c, nccl_ok);
      return QCOLL__PATH_NCCL;
    case QCOLL_ALGO_HOST: return QCOLL__PATH_STAGED;
    case QCOLL_ALGO_IPC: return QCOLL__PATH_IPC;
    default: break;
  }
  qcoll__select_in_t in = selection_input(comm, c, nccl_ok);
  int row = 0;
  qcoll__path_t path = qcoll__select(&in, &row);
  QLOG_TRACE(comm, COLL, "%s %zu bytes %s/%s: row %d -> %s", coll_fn[c->kind],
             in.bytes, qcoll_dtype_name(c->dtype), qcoll_op_name(c->op), row,
             qcoll__path_name(path));
  return path;
}

static qcoll_status_t run_ipc(qcoll_comm_t comm, const call_t *c,
                              qcoll__path_t path) {
  /* Only all-reduces get here: check_enums refuses one-shot/two-shot for
   * the others, QCOLL_ALGO's are ignored for them, and the table's rows
   * give them to all-reduces alone. */
  const char *why = NULL;
  if (!ipc_usable(comm))
    why = "CUDA IPC is not usable on this communicator (see the init log)";
  else if (!qcoll__ipc_kernel_supports(c->dtype, c->op))
    why = "the IPC kernels serve f16/bf16/f32 with sum/min/max only";
  if (why)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: %s cannot serve %s/%s: %s", coll_fn[c->kind],
                        qcoll__path_name(path), qcoll_dtype_name(c->dtype),
                        qcoll_op_name(c->op), why);
#ifdef QCOLL_HAVE_CUDA
  /* Quantisation is a transfer hint: off below its size threshold, and for
   * anything but sums when it came from the environment rather than the
   * call (a per-call request for min/max is refused with a reason). */
  qcoll_quant_t quant = c->quant;
  if (c->count * qcoll_dtype_size(c->dtype) <
          qcoll__env_bytes("QCOLL_QUANT_MIN_BYTES") ||
      (c->op != QCOLL_SUM && !c->quant_per_call))
    quant = QCOLL_QUANT_NONE;
  return qcoll__cuda_all_reduce(
      comm, c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->stream,
      path == QCOLL__PATH_ONESHOT ? QCOLL_ALGO_ONESHOT : QCOLL_ALGO_TWOSHOT,
      quant);
#else
  return QCOLL_ERR_INTERNAL;
#endif
}

/* A barrier ordered on a stream.  With the IPC kernels it is a kernel
 * barrier on the stream (capturable); otherwise the stream is drained
 * first, which cannot be captured.  Outside a capture the host also waits
 * for every rank, as qcoll_barrier promises. */
static qcoll_status_t run_stream_barrier(qcoll_comm_t comm, const call_t *c,
                                         bool on_ipc) {
  bool capturing = false;
  qcoll_status_t st =
      qcoll__runtime()->stream_is_capturing(c->stream, &capturing);
  if (st != QCOLL_OK) return st;
#ifdef QCOLL_HAVE_CUDA
  if (on_ipc) {
    st = qcoll__cuda_collective(comm, QCOLL__COLL_BARRIER, NULL, NULL, 0,
                                QCOLL_U8, QCOLL_SUM, 0, c->stream);
  } else if (capturing) {
    st = qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                      "qcoll_barrier: without CUDA IPC a barrier on a stream "
                      "drains the stream on the host and cannot be captured "
                      "into a CUDA graph");
  } else {
    st = qcoll__cuda_stream_wait(comm, c->stream);
  }
#else
  (void)on_ipc;
#endif
  if (st != QCOLL_OK || capturing) return st;
  return qcoll__host_barrier(comm);
}

/* Every collective, dtype and op on the IPC kernels of collectives.cu. */
static qcoll_status_t run_ipc_coll(qcoll_comm_t comm, const call_t *c) {
  if (!ipc_usable(comm))
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: ipc cannot serve: CUDA IPC is not usable on this "
                        "communicator (see the init log)",
                        coll_fn[c->kind]);
#ifdef QCOLL_HAVE_CUDA
  switch (c->kind) {
    case QCOLL__COLL_SEND:
      return qcoll__cuda_send(comm, c->sendbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_RECV:
      return qcoll__cuda_recv(comm, c->recvbuf, c->count, c->dtype, c->root,
                              c->stream);
    case QCOLL__COLL_BARRIER: return run_stream_barrier(comm, c, true);
    default:
      return qcoll__cuda_collective(comm, c->kind, c->sendbuf, c->recvbuf,
                                    c->count, c->dtype, c->op, c->root,
                                    c->stream);
  }
#else
  return QCOLL_ERR_INTERNAL;
#endif
}

/* GPU buffers: the selected path; when NCCL turns out to refuse the ranks
 * (decided collectively, so on every rank alike), select again without it.
 * A forced path that cannot serve is an error, never a silent detour. */
static qcoll_status_t run_gpu(qcoll_comm_t comm, const call_t *c) {
  qcoll__device_guard_t guard;
  qcoll_status_t st = qcoll__device_guard_enter(comm, &guard);
  if (st != QCOLL_OK) return st;
  bool forced = c->algo != QCOLL_ALGO_AUTO && c->kind != QCOLL__COLL_BARRIER;
  bool nccl_ok = qcoll__nccl_comm_state(comm) != QCOLL__NCCL_REFUSED;
  qcoll__path_t path = choose_path(comm, c, nccl_ok);
  if (path == QCOLL__PATH_NCCL && !is_p2p(c->kind)) {
    void *nccl_comm = NULL;
    st = qcoll__nccl_comm_prepare(comm, c->stream, &nccl_comm);
    if (st == QCOLL_ERR_UNSUPPORTED && !forced)
      path = choose_path(comm, c, false);
    else if (st != QCOLL_OK)
      goto out;
  }
  switch (path) {
    case QCOLL__PATH_ONESHOT:
    case QCOLL__PATH_TWOSHOT: st = run_ipc(comm, c, path); break;
    case QCOLL__PATH_NCCL: st = run_nccl(comm, c); break;
    case QCOLL__PATH_IPC: st = run_ipc_coll(comm, c); break;
    default:
      st = c->kind == QCOLL__COLL_BARRIER ? run_stream_barrier(comm, c, false)
                                          : run_staged(comm, c);
      break;
  }
out:
  qcoll__device_guard_exit(comm, &guard);
  return st;
}

/* Copy the caller's options into the call (after the communicator is known
 * to be valid, so a bad size is reported on it). */
static qcoll_status_t take_options(qcoll_comm_t comm, call_t *c) {
  const qcoll_options_t *o = c->opts;
  if (!o) return QCOLL_OK;
  if (o->size != sizeof *o)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s_ex: opts->size is %zu, expected %zu (fill opts "
                        "with qcoll_options_init first)",
                        coll_fn[c->kind], o->size, sizeof *o);
  c->algo = o->algo;
  c->quant = o->quant;
  c->quant_per_call = o->quant != QCOLL_QUANT_DEFAULT;
  return QCOLL_OK;
}

static qcoll_status_t run_call(qcoll_comm_t comm, call_t *c) {
  qcoll_status_t st = qcoll__comm_check_usable(comm, coll_fn[c->kind]);
  if (st != QCOLL_OK) return st;
  if ((st = take_options(comm, c)) || (st = check_enums(comm, c)) ||
      (st = compute_sizes(comm, c)) || (st = check_pointers(comm, c)) ||
      (st = place_call(comm, c)))
    return st;
  /* QCOLL_ALGO forces the path of GPU collectives; a per-call choice that
   * cannot serve the buffers is refused below with the reason. */
  if (c->device >= 0) c->algo = resolve_algo(comm, c);
  c->quant = resolve_quant(comm, c->quant);
  /* A call that moves no bytes has no buffers to place and does nothing,
   * whatever algorithm it names. */
  bool moves_bytes = c->send_bytes || c->recv_bytes;
  if (c->device < 0 && moves_bytes && c->algo != QCOLL_ALGO_AUTO &&
      c->algo != QCOLL_ALGO_HOST)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: algorithm %s needs GPU buffers, these are host "
                        "memory",
                        coll_fn[c->kind], qcoll_algo_name(c->algo));
  if ((st = check_signature(comm, c))) return st;
  if (c->device < 0) return run_host(comm, c, c->sendbuf, c->recvbuf);
  return run_gpu(comm, c);
}

static call_t make_call(coll_kind_t kind, const void *sendbuf, void *recvbuf,
                        size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
                        int root, void *stream, const qcoll_options_t *opts) {
  call_t c = {.kind = kind,
              .sendbuf = sendbuf,
              .recvbuf = recvbuf,
              .count = count,
              .dtype = dtype,
              .op = op,
              .root = root,
              .stream = stream,
              .opts = opts,
              .algo = QCOLL_ALGO_AUTO,
              .quant = QCOLL_QUANT_DEFAULT,
              .device = -1};
  return c;
}

qcoll_status_t qcoll_options_init(qcoll_options_t *o) {
  if (!o)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll_options_init: opts is NULL");
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->algo = QCOLL_ALGO_AUTO;
  o->quant = QCOLL_QUANT_DEFAULT;
  return QCOLL_OK;
}

qcoll_status_t qcoll_all_reduce_options_init(qcoll_all_reduce_options_t *o) {
  return qcoll_options_init(o);
}

/* Each collective has a plain form and an _ex form with per-call options;
 * the plain form is the _ex form without options. */

qcoll_status_t qcoll_all_reduce_ex(const void *sendbuf, void *recvbuf,
                                   size_t count, qcoll_dtype_t dtype,
                                   qcoll_op_t op, qcoll_comm_t comm,
                                   void *stream, const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_ALL_REDUCE, sendbuf, recvbuf, count, dtype,
                       op, 0, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_all_reduce(const void *sendbuf, void *recvbuf,
                                size_t count, qcoll_dtype_t dtype,
                                qcoll_op_t op, qcoll_comm_t comm,
                                void *stream) {
  return qcoll_all_reduce_ex(sendbuf, recvbuf, count, dtype, op, comm, stream,
                             NULL);
}

qcoll_status_t qcoll_reduce_ex(const void *sendbuf, void *recvbuf,
                               size_t count, qcoll_dtype_t dtype,
                               qcoll_op_t op, int root, qcoll_comm_t comm,
                               void *stream, const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_REDUCE, sendbuf, recvbuf, count, dtype, op,
                       root, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                            qcoll_dtype_t dtype, qcoll_op_t op, int root,
                            qcoll_comm_t comm, void *stream) {
  return qcoll_reduce_ex(sendbuf, recvbuf, count, dtype, op, root, comm,
                         stream, NULL);
}

qcoll_status_t qcoll_broadcast_ex(const void *sendbuf, void *recvbuf,
                                  size_t count, qcoll_dtype_t dtype, int root,
                                  qcoll_comm_t comm, void *stream,
                                  const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_BROADCAST, sendbuf, recvbuf, count, dtype,
                       QCOLL_SUM, root, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                               qcoll_dtype_t dtype, int root, qcoll_comm_t comm,
                               void *stream) {
  return qcoll_broadcast_ex(sendbuf, recvbuf, count, dtype, root, comm, stream,
                            NULL);
}

qcoll_status_t qcoll_all_gather_ex(const void *sendbuf, void *recvbuf,
                                   size_t sendcount, qcoll_dtype_t dtype,
                                   qcoll_comm_t comm, void *stream,
                                   const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_ALL_GATHER, sendbuf, recvbuf, sendcount,
                       dtype, QCOLL_SUM, 0, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_all_gather(const void *sendbuf, void *recvbuf,
                                size_t sendcount, qcoll_dtype_t dtype,
                                qcoll_comm_t comm, void *stream) {
  return qcoll_all_gather_ex(sendbuf, recvbuf, sendcount, dtype, comm, stream,
                             NULL);
}

qcoll_status_t qcoll_reduce_scatter_ex(const void *sendbuf, void *recvbuf,
                                       size_t recvcount, qcoll_dtype_t dtype,
                                       qcoll_op_t op, qcoll_comm_t comm,
                                       void *stream,
                                       const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount,
                       dtype, op, 0, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_reduce_scatter(const void *sendbuf, void *recvbuf,
                                    size_t recvcount, qcoll_dtype_t dtype,
                                    qcoll_op_t op, qcoll_comm_t comm,
                                    void *stream) {
  return qcoll_reduce_scatter_ex(sendbuf, recvbuf, recvcount, dtype, op, comm,
                                 stream, NULL);
}

qcoll_status_t qcoll_all_to_all_ex(const void *sendbuf, void *recvbuf,
                                   size_t count, qcoll_dtype_t dtype,
                                   qcoll_comm_t comm, void *stream,
                                   const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_ALL_TO_ALL, sendbuf, recvbuf, count, dtype,
                       QCOLL_SUM, 0, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_all_to_all(const void *sendbuf, void *recvbuf,
                                size_t count, qcoll_dtype_t dtype,
                                qcoll_comm_t comm, void *stream) {
  return qcoll_all_to_all_ex(sendbuf, recvbuf, count, dtype, comm, stream,
                             NULL);
}

qcoll_status_t qcoll_send_ex(const void *sendbuf, size_t count,
                             qcoll_dtype_t dtype, int peer, qcoll_comm_t comm,
                             void *stream, const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_SEND, sendbuf, NULL, count, dtype, QCOLL_SUM,
                       peer, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_send(const void *sendbuf, size_t count,
                          qcoll_dtype_t dtype, int peer, qcoll_comm_t comm,
                          void *stream) {
  return qcoll_send_ex(sendbuf, count, dtype, peer, comm, stream, NULL);
}

qcoll_status_t qcoll_recv_ex(void *recvbuf, size_t count, qcoll_dtype_t dtype,
                             int peer, qcoll_comm_t comm, void *stream,
                             const qcoll_options_t *opts) {
  call_t c = make_call(QCOLL__COLL_RECV, NULL, recvbuf, count, dtype, QCOLL_SUM,
                       peer, stream, opts);
  return run_call(comm, &c);
}

qcoll_status_t qcoll_recv(void *recvbuf, size_t count, qcoll_dtype_t dtype,
                          int peer, qcoll_comm_t comm, void *stream) {
  return qcoll_recv_ex(recvbuf, count, dtype, peer, comm, stream, NULL);
}

qcoll_status_t qcoll_barrier(qcoll_comm_t comm, void *stream) {
  call_t c = make_call(QCOLL__COLL_BARRIER, NULL, NULL, 0, QCOLL_U8, QCOLL_SUM,
                       0, stream, NULL);
  return run_call(comm, &c);
}
