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

#include "../backend/backend.h"
#include "../base/config.h"
#include "../bootstrap/bootstrap.h"
#include "../runtime/runtime.h"
#include "comm.h"
#include "select.h"

/* The collectives, as the selection table names them. */
typedef qcoll__coll_t coll_kind_t;

typedef struct call {
  qcoll__call_t call; /* what a backend runs (path and transfer: final_call) */
  const qcoll_options_t *opts; /* the caller's, or NULL */
  qcoll_algo_t algo;
  qcoll_quant_t quant; /* asked for (resolved with the environment's) */
  bool quant_per_call; /* asked for in the call's options, not the env */
  int quant_rotate;    /* rotated groups: the options', else the env's */
  int device;          /* filled by validation: -1 host, else the buffers' */
} call_t;

static bool is_reduction(coll_kind_t k) {
  return qcoll__coll_reduces(k);
}
static bool has_root(coll_kind_t k) {
  return qcoll__coll_rooted(k);
}
static bool is_p2p(coll_kind_t k) {
  return qcoll__coll_p2p(k);
}

/* Bytes read from sendbuf and written to recvbuf by this rank. */
static qcoll_status_t compute_sizes(qcoll_comm_t comm, call_t *c) {
  const char *fn = qcoll__coll_fn(c->call.coll);
  size_t elem = qcoll_dtype_size(c->call.dtype), bytes, wide;
  if (!qcoll__mul_size(c->call.count, elem, &bytes) ||
      !qcoll__mul_size(bytes, (size_t)comm->ctx.nranks, &wide) ||
      wide > (SIZE_MAX >> 1))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: count %zu of %s overflows the byte size with %d "
                        "ranks",
                        fn, c->call.count, qcoll_dtype_name(c->call.dtype),
                        comm->ctx.nranks);
  bool root = c->call.root == comm->ctx.rank;
  switch (c->call.coll) {
    case QCOLL__COLL_ALL_GATHER:
      c->call.send_bytes = bytes;
      c->call.recv_bytes = wide;
      break;
    case QCOLL__COLL_REDUCE_SCATTER:
      c->call.send_bytes = wide;
      c->call.recv_bytes = bytes;
      break;
    case QCOLL__COLL_ALL_TO_ALL:
      c->call.send_bytes = wide;
      c->call.recv_bytes = wide;
      break;
    case QCOLL__COLL_REDUCE:
      c->call.send_bytes = bytes;
      c->call.recv_bytes = root ? bytes : 0;
      break;
    case QCOLL__COLL_BROADCAST:
      c->call.send_bytes = root ? bytes : 0;
      c->call.recv_bytes = bytes;
      break;
    case QCOLL__COLL_SEND:
      c->call.send_bytes = bytes;
      c->call.recv_bytes = 0;
      break;
    case QCOLL__COLL_RECV:
      c->call.send_bytes = 0;
      c->call.recv_bytes = bytes;
      break;
    case QCOLL__COLL_BARRIER:
      c->call.send_bytes = c->call.recv_bytes = 0;
      break;
    default: c->call.send_bytes = c->call.recv_bytes = bytes; break;
  }
  return QCOLL_OK;
}

static qcoll_status_t check_enums(qcoll_comm_t comm, const call_t *c) {
  const char *fn = qcoll__coll_fn(c->call.coll);
  if (c->call.coll == QCOLL__COLL_BARRIER) return QCOLL_OK;
  if ((unsigned)c->call.dtype >= QCOLL_DTYPE_COUNT)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: dtype %d is not a qcoll_dtype_t (0..%d)", fn,
                        (int)c->call.dtype, QCOLL_DTYPE_COUNT - 1);
  if (is_reduction(c->call.coll) && (unsigned)c->call.op >= QCOLL_OP_COUNT)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: op %d is not a qcoll_op_t (0..%d)", fn,
                        (int)c->call.op, QCOLL_OP_COUNT - 1);
  if ((has_root(c->call.coll) || is_p2p(c->call.coll)) &&
      (c->call.root < 0 || c->call.root >= comm->ctx.nranks))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: %s %d is out of range [0, %d)", fn,
                        is_p2p(c->call.coll) ? "peer" : "root", c->call.root,
                        comm->ctx.nranks);
  if (is_p2p(c->call.coll) && c->call.root == comm->ctx.rank)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: peer %d is this rank itself (a send or recv to "
                        "oneself is refused: copy the buffer instead)",
                        fn, c->call.root);
  if ((unsigned)c->algo >= QCOLL_ALGO_COUNT)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: algo %d is not a qcoll_algo_t", fn, (int)c->algo);
  if ((unsigned)c->quant >= QCOLL_QUANT_COUNT)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: quant %d is not a qcoll_quant_t", fn,
                        (int)c->quant);
  if (c->call.coll != QCOLL__COLL_ALL_REDUCE &&
      (c->algo == QCOLL_ALGO_ONESHOT || c->algo == QCOLL_ALGO_TWOSHOT))
    return qcoll__error(&comm->ctx, QCOLL_ERR_UNSUPPORTED,
                        "%s_ex: %s is an all_reduce algorithm (use auto, host, "
                        "nccl or ipc)",
                        fn, qcoll_algo_name(c->algo));
  if (c->call.coll != QCOLL__COLL_ALL_REDUCE &&
      c->quant != QCOLL_QUANT_DEFAULT && c->quant != QCOLL_QUANT_NONE)
    return qcoll__error(&comm->ctx, QCOLL_ERR_UNSUPPORTED,
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
  const char *fn = qcoll__coll_fn(c->call.coll);
  if (c->call.send_bytes && !c->call.sendbuf)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf is NULL but %zu bytes are to be sent", fn,
                        c->call.send_bytes);
  if (c->call.recv_bytes && !c->call.recvbuf)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: recvbuf is NULL but %zu bytes are to be received",
                        fn, c->call.recv_bytes);
  if (c->call.coll == QCOLL__COLL_ALL_TO_ALL &&
      ranges_overlap(c->call.sendbuf, c->call.send_bytes, c->call.recvbuf,
                     c->call.recv_bytes))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf and recvbuf overlap (all-to-all cannot "
                        "run in place)",
                        fn);
  size_t elem = qcoll_dtype_size(c->call.dtype);
  size_t block = c->call.recv_bytes < c->call.send_bytes ? c->call.recv_bytes
                                                         : c->call.send_bytes;
  /* Partial overlaps other than the documented in-place layouts would
   * read data already overwritten. */
  if (c->call.coll == QCOLL__COLL_ALL_GATHER &&
      c->call.sendbuf != c->call.recvbuf &&
      (const char *)c->call.sendbuf !=
          (char *)c->call.recvbuf + (size_t)comm->ctx.rank * block &&
      ranges_overlap(c->call.sendbuf, c->call.send_bytes, c->call.recvbuf,
                     c->call.recv_bytes))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf overlaps recvbuf but is not the in-place "
                        "slot recvbuf + rank*sendcount",
                        fn);
  if (c->call.coll == QCOLL__COLL_REDUCE_SCATTER &&
      (const char *)c->call.recvbuf !=
          (const char *)c->call.sendbuf + (size_t)comm->ctx.rank * block &&
      ranges_overlap(c->call.sendbuf, c->call.send_bytes, c->call.recvbuf,
                     c->call.recv_bytes))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: recvbuf overlaps sendbuf but is not the in-place "
                        "slot sendbuf + rank*recvcount",
                        fn);
  if ((c->call.coll == QCOLL__COLL_ALL_REDUCE ||
       c->call.coll == QCOLL__COLL_REDUCE ||
       c->call.coll == QCOLL__COLL_BROADCAST) &&
      c->call.sendbuf != c->call.recvbuf &&
      ranges_overlap(c->call.sendbuf, c->call.send_bytes, c->call.recvbuf,
                     c->call.recv_bytes))
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf and recvbuf overlap without being equal",
                        fn);
  (void)elem;
  return QCOLL_OK;
}

/* Decide host or GPU from where the buffers live, and check that GPU
 * buffers and the stream belong to the communicator's device. */
/* Which device the call's buffers live on: every pointer query asked of
 * the driver each call (nothing remembered), in-place buffers asked once. */
static qcoll_status_t buffer_devices(call_t *c, int *send_dev, int *recv_dev) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  qcoll_status_t st;
  *send_dev = *recv_dev = -1;
  if (c->call.send_bytes &&
      (st = rt->pointer_device(c->call.sendbuf, send_dev)))
    return st;
  if (c->call.recv_bytes && c->call.send_bytes &&
      c->call.recvbuf == c->call.sendbuf) {
    *recv_dev = *send_dev;
    return QCOLL_OK;
  }
  if (c->call.recv_bytes &&
      (st = rt->pointer_device(c->call.recvbuf, recv_dev)))
    return st;
  return QCOLL_OK;
}

static qcoll_status_t place_on_devices(qcoll_comm_t comm, call_t *c) {
  const char *fn = qcoll__coll_fn(c->call.coll);
  const qcoll__runtime_t *rt = qcoll__runtime();
  int send_dev, recv_dev;
  qcoll_status_t st = buffer_devices(c, &send_dev, &recv_dev);
  if (st != QCOLL_OK) return st;
  if (c->call.send_bytes && c->call.recv_bytes && send_dev != recv_dev)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: sendbuf is on %s %d but recvbuf is on %s %d", fn,
                        send_dev < 0 ? "host" : "device", send_dev,
                        recv_dev < 0 ? "host" : "device", recv_dev);
  c->device = c->call.send_bytes ? send_dev : recv_dev;
  /* A barrier with a stream on a GPU communicator is ordered on the stream:
   * it runs where GPU calls run. */
  if (c->call.coll == QCOLL__COLL_BARRIER && c->call.stream &&
      comm->ctx.device >= 0)
    c->device = comm->ctx.device;
  if (c->device < 0) {
    if (comm->ctx.nhosts > 1)
      return qcoll__error(&comm->ctx, QCOLL_ERR_UNSUPPORTED,
                          "%s: host buffers need every rank on one host, but "
                          "this communicator spans %d hosts",
                          fn, comm->ctx.nhosts);
    return QCOLL_OK;
  }
  if (c->device != comm->ctx.device)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: %s is on device %d but the communicator's device "
                        "is %d",
                        fn, c->call.send_bytes ? "sendbuf" : "recvbuf",
                        c->device, comm->ctx.device);
  if (c->call.stream) {
    int stream_dev = -1;
    if ((st = rt->stream_device(c->call.stream, &stream_dev))) return st;
    if (stream_dev >= 0 && stream_dev != comm->ctx.device)
      return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                          "%s: stream belongs to device %d but the "
                          "communicator's device is %d",
                          fn, stream_dev, comm->ctx.device);
  }
  return QCOLL_OK;
}

/* The placement's driver queries share one capture-mode window. */
static qcoll_status_t place_call(qcoll_comm_t comm, call_t *c) {
  const qcoll__runtime_t *rt = qcoll__runtime();
  rt->relaxed_begin();
  qcoll_status_t st = place_on_devices(comm, c);
  rt->relaxed_end();
  return st;
}

/* With QCOLL_CHECK=1, every rank compares the call's signature before it
 * runs, so a mismatched call fails with a name instead of corrupting data
 * or hanging. */
typedef struct signature {
  /* algo: the forced algorithm of a GPU call (-1 on host buffers, where
   * auto and host take the same path); opt_algo, opt_quant and rotate: the
   * per-call options as the caller passed them (defaults without opts),
   * which must be the same on every rank even where they take the same
   * path.  Ten int32 (the last always 0) keep the struct free of padding,
   * so memcmp never compares indeterminate bytes. */
  int32_t kind, dtype, op, root, placement, algo, opt_algo, opt_quant, rotate,
      zero;
  uint64_t count;
} signature_t;

static const char *signature_algo(const signature_t *s) {
  return s->algo < 0 ? "host" : qcoll_algo_name((qcoll_algo_t)s->algo);
}

/* "count=8, dtype=f32, op=sum, root=-1, algo=host, options auto/default"
 * ("auto/int8+rot" with rotated groups) */
static void format_signature(const signature_t *s, char *buf, size_t size) {
  snprintf(buf, size,
           "%s(count=%llu, dtype=%s, op=%s, root=%d, algo=%s, options "
           "%s/%s%s)",
           (unsigned)s->kind <= QCOLL__COLL_BARRIER ? qcoll__coll_fn(s->kind) : "?",
           (unsigned long long)s->count,
           qcoll_dtype_name((qcoll_dtype_t)s->dtype),
           s->op < 0 ? "-" : qcoll_op_name((qcoll_op_t)s->op), s->root,
           signature_algo(s), qcoll_algo_name((qcoll_algo_t)s->opt_algo),
           qcoll_quant_name((qcoll_quant_t)s->opt_quant),
           s->rotate ? "+rot" : "");
}

static qcoll_status_t check_signature(qcoll_comm_t comm, const call_t *c) {
  if (!comm->check_calls || is_p2p(c->call.coll)) return QCOLL_OK;
  size_t n = (size_t)comm->ctx.nranks;
  signature_t *all = calloc(n, sizeof *all);
  if (!all)
    return qcoll__error(&comm->ctx, QCOLL_ERR_OUT_OF_MEMORY,
                        "QCOLL_CHECK: cannot allocate %zu signatures", n);
  signature_t mine = {(int32_t)c->call.coll,
                      (int32_t)c->call.dtype,
                      is_reduction(c->call.coll) ? (int32_t)c->call.op : -1,
                      has_root(c->call.coll) ? c->call.root : -1,
                      c->device < 0 ? 0 : 1,
                      c->device < 0 ? -1 : (int32_t)c->algo,
                      c->opts ? (int32_t)c->opts->algo : QCOLL_ALGO_AUTO,
                      c->opts ? (int32_t)c->opts->quant : QCOLL_QUANT_DEFAULT,
                      c->opts && c->opts->size == sizeof *c->opts
                          ? (int32_t)(c->opts->quant_rotate != 0)
                          : 0,
                      0,
                      c->call.count};
  all[comm->ctx.rank] = mine;
  qcoll_status_t st =
      qcoll__bootstrap_allgather(comm->ctx.bootstrap, all, sizeof *all);
  for (size_t r = 0; st == QCOLL_OK && r < n; r++) {
    const signature_t *s = &all[r];
    if (!memcmp(s, &mine, sizeof mine)) continue;
    char ours[192], theirs[192];
    format_signature(&mine, ours, sizeof ours);
    format_signature(s, theirs, sizeof theirs);
    st = qcoll__error(&comm->ctx, QCOLL_ERR_MISMATCH,
                      "QCOLL_CHECK: rank %d called %s but rank %zu called %s",
                      comm->ctx.rank, ours, r, theirs);
  }
  free(all);
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
  return all_reduce_only && c->call.coll != QCOLL__COLL_ALL_REDUCE
             ? QCOLL_ALGO_AUTO
             : env;
}

/* What the table sees.  Every input is the same on every rank (the NCCL
 * state changes only inside collective calls), so all ranks pick alike. */
static qcoll__select_in_t selection_input(qcoll_comm_t comm, const call_t *c,
                                          bool nccl_ok) {
  qcoll__caps_t ipc, nccl;
  qcoll__backend_ipc.capabilities(&comm->ctx, &ipc);
  qcoll__backend_nccl.capabilities(&comm->ctx, &nccl);
  qcoll__select_in_t in = {
      .coll = c->call.coll,
      .bytes = c->call.count * qcoll_dtype_size(c->call.dtype),
      .nranks = comm->ctx.nranks,
      .dtype = c->call.dtype,
      .op = c->call.op,
      .quant = c->quant,
      .gpu = true,
      .ipc = ipc.usable,
      .ranks_per_gpu = ipc.ranks_per_gpu,
      .nccl = nccl_ok,
      .config = &comm->ctx.config,
  };
  /* send/recv cannot create NCCL's communicator (only one pair calls them):
   * they use it only once a collective has made it. */
  if (is_p2p(c->call.coll)) in.nccl = nccl_ok && nccl.ready;
  return in;
}

/* NCCL forced where the table knows it stalls: said once per process (the
 * watchdog aborts NCCL if the call then does not finish). */
static void warn_forced_nccl(qcoll_comm_t comm, const call_t *c, bool nccl_ok) {
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  qcoll__select_in_t in = selection_input(comm, c, nccl_ok);
  if (!qcoll__select_nccl_stalls(&in) || atomic_flag_test_and_set(&warned))
    return;
  QLOG_WARN(&comm->ctx, COLL,
            "%s: NCCL is forced with %d ranks on one GPU, more than "
            "QCOLL_SHARED_GPU_NCCL_MAX_RANKS (%lld), where NCCL was seen to "
            "stall; the NCCL watchdog aborts it after QCOLL_TIMEOUT (%.1f s)",
            qcoll__coll_fn(c->call.coll), in.ranks_per_gpu,
            comm->ctx.config.shared_gpu_nccl_max_ranks, comm->ctx.timeout_s);
}

/* The forced path, or the table's. */
static qcoll__path_t choose_path(qcoll_comm_t comm, const call_t *c,
                                 bool nccl_ok) {
  /* A forced algorithm names a way to move data; a barrier has none. */
  qcoll_algo_t forced =
      c->call.coll == QCOLL__COLL_BARRIER ? QCOLL_ALGO_AUTO : c->algo;
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
  QLOG_TRACE(&comm->ctx, COLL, "%s %zu bytes %s/%s: row %d -> %s",
             qcoll__coll_fn(c->call.coll), in.bytes,
             qcoll_dtype_name(c->call.dtype), qcoll_op_name(c->call.op), row,
             qcoll__path_name(path));
  return path;
}

/* The call as the backend of path runs it, its transfer final.
 * Quantisation is a transfer hint of the IPC all-reduce: off below its size
 * floor (the table's, qcoll__select_quant_floor), and for anything but sums
 * when it came from the environment rather than the call (a per-call
 * request for min/max is refused by the kernels' entry with a reason). */
static qcoll__call_t final_call(qcoll_comm_t comm, const call_t *c,
                                qcoll__path_t path) {
  bool ipc_all_reduce =
      path == QCOLL__PATH_ONESHOT || path == QCOLL__PATH_TWOSHOT;
  qcoll_quant_t quant = ipc_all_reduce ? c->quant : QCOLL_QUANT_NONE;
  if (quant != QCOLL_QUANT_NONE) {
    qcoll__select_in_t in = selection_input(comm, c, false);
    if (in.bytes < qcoll__select_quant_floor(&in) ||
        (c->call.op != QCOLL_SUM && !c->quant_per_call))
      quant = QCOLL_QUANT_NONE;
  }
  qcoll__call_t call = c->call;
  call.path = path;
  call.quant = quant;
  call.quant_rotate = quant != QCOLL_QUANT_NONE && c->quant_rotate;
  return call;
}

/* GPU buffers: the selected path; when NCCL turns out to refuse the ranks
 * (decided collectively, so on every rank alike), select again without it.
 * A forced path that cannot serve is an error, never a silent detour. */
static qcoll_status_t run_gpu(qcoll_comm_t comm, const call_t *c) {
  qcoll__device_guard_t guard;
  qcoll_status_t st = qcoll__device_guard_enter(&comm->ctx, &guard);
  if (st != QCOLL_OK) return st;
  bool forced =
      c->algo != QCOLL_ALGO_AUTO && c->call.coll != QCOLL__COLL_BARRIER;
  qcoll__caps_t nccl;
  qcoll__backend_nccl.capabilities(&comm->ctx, &nccl);
  qcoll__path_t path = choose_path(comm, c, nccl.usable);
  qcoll__call_t call = final_call(comm, c, path);
  const qcoll__backend_t *backend = qcoll__backend_for(path);
  if (backend->prepare) {
    st = backend->prepare(&comm->ctx, &call);
    if (st == QCOLL_ERR_UNSUPPORTED && !forced) {
      path = choose_path(comm, c, false);
      call = final_call(comm, c, path);
      backend = qcoll__backend_for(path);
    } else if (st != QCOLL_OK) {
      goto out;
    }
  }
  st = backend->run(&comm->ctx, &call);
out:
  qcoll__device_guard_exit(&comm->ctx, &guard);
  return st;
}

/* Copy the caller's options into the call (after the communicator is known
 * to be valid, so a bad size is reported on it). */
static qcoll_status_t take_options(qcoll_comm_t comm, call_t *c) {
  const qcoll_options_t *o = c->opts;
  if (!o) return QCOLL_OK;
  /* The struct before quant_rotate is accepted too (rotation off). */
  const size_t before_rotate = offsetof(qcoll_options_t, quant_rotate);
  if (o->size != sizeof *o && o->size != before_rotate)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s_ex: opts->size is %zu, expected %zu (fill opts "
                        "with qcoll_options_init first)",
                        qcoll__coll_fn(c->call.coll), o->size, sizeof *o);
  c->algo = o->algo;
  c->quant = o->quant;
  c->quant_per_call = o->quant != QCOLL_QUANT_DEFAULT;
  c->quant_rotate = o->size == sizeof *o ? o->quant_rotate : 0;
  if (c->quant_rotate != 0 && c->quant_rotate != 1)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s_ex: opts->quant_rotate is %d, expected 0 or 1",
                        qcoll__coll_fn(c->call.coll), c->quant_rotate);
  return QCOLL_OK;
}

static qcoll_status_t run_call(qcoll_comm_t comm, call_t *c) {
  qcoll_status_t st =
      qcoll__comm_check_usable(comm, qcoll__coll_fn(c->call.coll));
  if (st != QCOLL_OK) return st;
  if ((st = take_options(comm, c)) || (st = check_enums(comm, c)) ||
      (st = compute_sizes(comm, c)) || (st = check_pointers(comm, c)) ||
      (st = place_call(comm, c)))
    return st;
  /* QCOLL_ALGO forces the path of GPU collectives; a per-call choice that
   * cannot serve the buffers is refused below with the reason. */
  if (c->device >= 0) c->algo = resolve_algo(comm, c);
  if (!c->quant_per_call) c->quant_rotate = comm->env_quant_rotate;
  c->quant = resolve_quant(comm, c->quant);
  /* A call that moves no bytes has no buffers to place and does nothing,
   * whatever algorithm it names. */
  bool moves_bytes = c->call.send_bytes || c->call.recv_bytes;
  if (c->device < 0 && moves_bytes && c->algo != QCOLL_ALGO_AUTO &&
      c->algo != QCOLL_ALGO_HOST)
    return qcoll__error(&comm->ctx, QCOLL_ERR_UNSUPPORTED,
                        "%s: algorithm %s needs GPU buffers, these are host "
                        "memory",
                        qcoll__coll_fn(c->call.coll), qcoll_algo_name(c->algo));
  if ((st = check_signature(comm, c))) return st;
  if (c->device >= 0) return run_gpu(comm, c);
  qcoll__call_t call = final_call(comm, c, QCOLL__PATH_HOST);
  return qcoll__backend_host.run(&comm->ctx, &call);
}

static call_t make_call(coll_kind_t kind, const void *sendbuf, void *recvbuf,
                        size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
                        int root, void *stream, const qcoll_options_t *opts) {
  call_t c = {.call = {.coll = kind,
                       .sendbuf = sendbuf,
                       .recvbuf = recvbuf,
                       .count = count,
                       .dtype = dtype,
                       .op = op,
                       .root = root,
                       .stream = stream},
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
