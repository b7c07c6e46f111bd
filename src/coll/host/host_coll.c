/*
 * Collectives on host buffers over the shared-memory transport (every rank
 * on this host: comm->nhosts == 1, so local and global ranks coincide).
 *
 * Everything is built from phases of the staging area (see shm.h): write
 * this rank's slot of the current half, qcoll__shm_phase_sync (a barrier
 * that also flips the half), read what the phase needs.  One barrier per
 * phase, none at the end of a collective.
 *
 *  all-reduce, small (<= oneshot_bytes): one phase.  Every rank copies its
 *      input into its slot, then reduces all slots in rank order.
 *  all-reduce, large: per chunk of slot_bytes two phases, so it streams.
 *      Phase 1: copy the chunk, less this rank's own sub-range, into the
 *      slot; rank r reduces sub-range r of the chunk in rank order, its own
 *      input from sendbuf and the others' from their slots, into its slot
 *      of the next half.  Phase 2: everyone copies the sub-ranges out.
 *      (Reduce-scatter then all-gather: each element is reduced once, by
 *      one rank.)  Per byte and rank: (n-1)/n staged, one read by the
 *      reduction, one copied out.
 *  reduce: as all-reduce, only root copies out.
 *  reduce-scatter: per phase every rank copies, for each other rank d, a
 *      piece of its d-th block into sub-slot d of its slot; rank r reduces
 *      its own block (from sendbuf) and sub-slot r of every other slot into
 *      its output.
 *  broadcast: root fills a whole half (local_size slots) per phase.
 *  all-gather: each rank copies a chunk into its slot, everyone copies all.
 *  all-to-all: like reduce-scatter's exchange, with copies.
 *  send/recv: the ordered pair's buffer (qcoll__shm_send/recv).
 *
 * Reductions go through qcoll__reduce_ranks(2) with sources in rank order, on
 * one rank per element, so every rank holds the same bits, equal to
 * qcoll__reduce_ranks over all inputs.
 */
#include <stdlib.h>
#include <string.h>

#include "../../transport/shm.h"
#include "host_coll.h"

/* Sub-ranges and sub-slots start on 64-byte boundaries. */
#define ALIGN_BYTES 64

typedef struct ctx {
  qcoll__ctx_t *comm;
  int me, n;
  size_t esz, slot;
  const void **srcs; /* n source pointers for qcoll__reduce_ranks */
  const void *srcs_small[64];
} ctx_t;

static qcoll_status_t begin(ctx_t *c, qcoll__ctx_t *comm, qcoll_dtype_t dtype,
                            const char *fn) {
  c->comm = comm;
  c->me = comm->local_rank;
  c->n = comm->local_size;
  c->esz = qcoll_dtype_size(dtype);
  c->srcs = c->srcs_small;
  if (!comm->shm || comm->nhosts != 1 || comm->local_size != comm->nranks)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: the host back end needs every rank on one host "
                        "(%d ranks on %d hosts)",
                        fn, comm->nranks, comm->nhosts);
  c->slot = qcoll__shm_layout(comm)->slot_bytes;
  if ((size_t)c->n > sizeof c->srcs_small / sizeof c->srcs_small[0]) {
    c->srcs = malloc((size_t)c->n * sizeof *c->srcs);
    if (!c->srcs)
      return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                          "%s: cannot allocate %d source pointers", fn, c->n);
  }
  qcoll__shm_set_activity(comm, fn);
  return QCOLL_OK;
}

static qcoll_status_t end(ctx_t *c, qcoll_status_t st) {
  if (c->srcs != c->srcs_small) free(c->srcs);
  if (c->comm->shm) qcoll__shm_set_activity(c->comm, NULL);
  return st;
}

/* Index of global rank `rank` among this host's ranks (the same number when
 * every rank is on this host). */
static int local_index(qcoll__ctx_t *comm, int rank) {
  for (int l = 0; l < comm->local_size; l++)
    if (comm->local_ranks[l] == rank) return l;
  return -1;
}

/* Elements of sub-range r when `count` elements are split over n ranks in
 * pieces that start on ALIGN_BYTES boundaries: [*lo, *hi). */
static void sub_range(const ctx_t *c, size_t count, int r, size_t *lo,
                      size_t *hi) {
  size_t align = ALIGN_BYTES / c->esz;
  size_t per = (count + (size_t)c->n - 1) / (size_t)c->n;
  per = (per + align - 1) / align * align;
  *lo = QCOLL_MIN(count, (size_t)r * per);
  *hi = QCOLL_MIN(count, *lo + per);
}

/* Bytes of one of the n sub-slots a slot splits into (a multiple of
 * ALIGN_BYTES, at least ALIGN_BYTES by the layout's guarantee). */
static size_t sub_slot_bytes(const ctx_t *c) {
  return c->slot / (size_t)c->n / ALIGN_BYTES * ALIGN_BYTES;
}

/* ---- reductions ---------------------------------------------------- */

/* One phase: everyone reduces everything.  Only ranks with out != NULL
 * compute. */
static qcoll_status_t reduce_oneshot(ctx_t *c, const void *send, void *out,
                                     size_t count, qcoll_dtype_t dtype,
                                     qcoll_op_t op) {
  size_t bytes = count * c->esz;
  uint8_t *stage = qcoll__shm_stage(c->comm);
  memcpy(stage + (size_t)c->me * c->slot, send, bytes);
  qcoll_status_t st = qcoll__shm_phase_sync(c->comm);
  if (st != QCOLL_OK || !out) return st;
  for (int r = 0; r < c->n; r++) c->srcs[r] = stage + (size_t)r * c->slot;
  qcoll__reduce_ranks(out, c->srcs, c->n, count, dtype, op, c->comm->nranks);
  return QCOLL_OK;
}

/* Two phases per chunk: reduce-scatter into the next half, then gather.
 * Rank r reduces sub-range r of the chunk, and reads its own input for it
 * straight from sendbuf, so it stages only the other ranks' sub-ranges.
 * In place, the reduction also stores rank r's result straight into
 * recvbuf, whose lines it has just read; out of place that store would
 * first fetch every cold line of recvbuf, which memcpy avoids, so the
 * result is copied out of the slot with the other ranks' sub-ranges.
 * Ranks with out == NULL take part but copy nothing out. */
static qcoll_status_t reduce_chunked(ctx_t *c, const void *send, void *out,
                                     size_t count, qcoll_dtype_t dtype,
                                     qcoll_op_t op) {
  const uint8_t *in = send;
  uint8_t *res = out;
  bool in_place = res && (const void *)res == send;
  size_t esz = c->esz, chunk = c->slot / esz;
  for (size_t off = 0; off < count; off += chunk) {
    size_t m = QCOLL_MIN(chunk, count - off), lo, hi;
    uint8_t *in_stage = qcoll__shm_stage(c->comm);
    uint8_t *mine = in_stage + (size_t)c->me * c->slot;
    for (int r = 0; r < c->n; r++) {
      sub_range(c, m, r, &lo, &hi);
      if (r != c->me && lo < hi)
        memcpy(mine + lo * esz, in + (off + lo) * esz, (hi - lo) * esz);
    }
    qcoll_status_t st = qcoll__shm_phase_sync(c->comm);
    if (st != QCOLL_OK) return st;

    uint8_t *out_stage = qcoll__shm_stage(c->comm);
    sub_range(c, m, c->me, &lo, &hi);
    if (lo < hi) {
      for (int r = 0; r < c->n; r++)
        c->srcs[r] = r == c->me ? in + (off + lo) * esz
                                : in_stage + (size_t)r * c->slot + lo * esz;
      qcoll__reduce_ranks2(out_stage + (size_t)c->me * c->slot + lo * esz,
                           in_place ? res + (off + lo) * esz : NULL, c->srcs,
                           c->n, hi - lo, dtype, op, c->comm->nranks);
    }
    st = qcoll__shm_phase_sync(c->comm);
    if (st != QCOLL_OK) return st;

    if (!res) continue;
    for (int r = 0; r < c->n; r++) {
      sub_range(c, m, r, &lo, &hi);
      if (lo < hi && !(in_place && r == c->me))
        memcpy(res + (off + lo) * esz,
               out_stage + (size_t)r * c->slot + lo * esz, (hi - lo) * esz);
    }
  }
  return QCOLL_OK;
}

/* Reduction of `count` elements to `out` (NULL on ranks that do not want
 * the result). */
static qcoll_status_t reduce_to(ctx_t *c, const void *send, void *out,
                                size_t count, qcoll_dtype_t dtype,
                                qcoll_op_t op) {
  if (count == 0) return QCOLL_OK;
  if (c->n == 1) {
    if (out)
      qcoll__reduce_ranks(out, &send, 1, count, dtype, op, c->comm->nranks);
    return QCOLL_OK;
  }
  if (count * c->esz <= qcoll__shm_layout(c->comm)->oneshot_bytes)
    return reduce_oneshot(c, send, out, count, dtype, op);
  return reduce_chunked(c, send, out, count, dtype, op);
}

qcoll_status_t qcoll__host_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_all_reduce");
  if (st == QCOLL_OK) st = reduce_to(&c, sendbuf, recvbuf, count, dtype, op);
  return end(&c, st);
}

qcoll_status_t qcoll__host_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  qcoll_dtype_t dtype, qcoll_op_t op,
                                  int root) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_reduce");
  if (st == QCOLL_OK) {
    bool is_root = local_index(comm, root) == c.me;
    st = reduce_to(&c, sendbuf, is_root ? recvbuf : NULL, count, dtype, op);
  }
  return end(&c, st);
}

qcoll_status_t qcoll__host_reduce_scatter(qcoll__ctx_t *comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t recvcount, qcoll_dtype_t dtype,
                                          qcoll_op_t op) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_reduce_scatter");
  if (st != QCOLL_OK || recvcount == 0) return end(&c, st);
  const uint8_t *send = sendbuf;
  uint8_t *recv = recvbuf;
  if (c.n == 1) {
    qcoll__reduce_ranks(recv, (const void *const *)&sendbuf, 1, recvcount,
                        dtype, op, comm->nranks);
    return end(&c, QCOLL_OK);
  }
  size_t sub = sub_slot_bytes(&c);
  size_t piece = sub / c.esz;
  for (size_t off = 0; off < recvcount && st == QCOLL_OK; off += piece) {
    size_t m = QCOLL_MIN(piece, recvcount - off);
    uint8_t *stage = qcoll__shm_stage(comm);
    uint8_t *mine = stage + (size_t)c.me * c.slot;
    for (int d = 0; d < c.n; d++)
      if (d != c.me)
        memcpy(mine + (size_t)d * sub,
               send + ((size_t)d * recvcount + off) * c.esz, m * c.esz);
    st = qcoll__shm_phase_sync(comm);
    if (st != QCOLL_OK) break;
    /* This rank's own block is read from sendbuf, not staged.  In place,
     * recv is that block, at the same offset: the reduction reads each
     * element before it writes it. */
    for (int r = 0; r < c.n; r++)
      c.srcs[r] = r == c.me ? send + ((size_t)c.me * recvcount + off) * c.esz
                            : stage + (size_t)r * c.slot + (size_t)c.me * sub;
    qcoll__reduce_ranks(recv + off * c.esz, c.srcs, c.n, m, dtype, op,
                        comm->nranks);
  }
  return end(&c, st);
}

/* ---- data movement ------------------------------------------------- */

qcoll_status_t qcoll__host_broadcast(qcoll__ctx_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     qcoll_dtype_t dtype, int root) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_broadcast");
  if (st != QCOLL_OK || count == 0) return end(&c, st);
  size_t bytes = count * c.esz;
  bool is_root = local_index(comm, root) == c.me;
  if (is_root && sendbuf != recvbuf) memcpy(recvbuf, sendbuf, bytes);
  if (c.n == 1) return end(&c, QCOLL_OK);
  /* The root owns the whole half during a phase. */
  size_t region = (size_t)c.n * c.slot;
  for (size_t off = 0; off < bytes && st == QCOLL_OK; off += region) {
    size_t m = QCOLL_MIN(region, bytes - off);
    uint8_t *stage = qcoll__shm_stage(comm);
    if (is_root) memcpy(stage, (const uint8_t *)sendbuf + off, m);
    st = qcoll__shm_phase_sync(comm);
    if (st == QCOLL_OK && !is_root) memcpy((uint8_t *)recvbuf + off, stage, m);
  }
  return end(&c, st);
}

qcoll_status_t qcoll__host_all_gather(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t sendcount,
                                      qcoll_dtype_t dtype) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_all_gather");
  if (st != QCOLL_OK || sendcount == 0) return end(&c, st);
  size_t bytes = sendcount * c.esz;
  const uint8_t *send = sendbuf;
  uint8_t *recv = recvbuf;
  /* In place, send already is this rank's block of recv, and no phase
   * writes that block. */
  if (send != recv + (size_t)c.me * bytes)
    memcpy(recv + (size_t)c.me * bytes, send, bytes);
  for (size_t off = 0; off < bytes && c.n > 1 && st == QCOLL_OK;
       off += c.slot) {
    size_t m = QCOLL_MIN(c.slot, bytes - off);
    uint8_t *stage = qcoll__shm_stage(comm);
    memcpy(stage + (size_t)c.me * c.slot, send + off, m);
    st = qcoll__shm_phase_sync(comm);
    if (st != QCOLL_OK) break;
    for (int r = 0; r < c.n; r++)
      if (r != c.me)
        memcpy(recv + (size_t)r * bytes + off, stage + (size_t)r * c.slot, m);
  }
  return end(&c, st);
}

qcoll_status_t qcoll__host_all_to_all(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, dtype, "qcoll_all_to_all");
  if (st != QCOLL_OK || count == 0) return end(&c, st);
  size_t bytes = count * c.esz;
  const uint8_t *send = sendbuf;
  uint8_t *recv = recvbuf;
  memcpy(recv + (size_t)c.me * bytes, send + (size_t)c.me * bytes, bytes);
  size_t sub = sub_slot_bytes(&c);
  for (size_t off = 0; off < bytes && c.n > 1 && st == QCOLL_OK; off += sub) {
    size_t m = QCOLL_MIN(sub, bytes - off);
    uint8_t *stage = qcoll__shm_stage(comm);
    uint8_t *mine = stage + (size_t)c.me * c.slot;
    for (int d = 0; d < c.n; d++)
      if (d != c.me)
        memcpy(mine + (size_t)d * sub, send + (size_t)d * bytes + off, m);
    st = qcoll__shm_phase_sync(comm);
    if (st != QCOLL_OK) break;
    for (int s = 0; s < c.n; s++)
      if (s != c.me)
        memcpy(recv + (size_t)s * bytes + off,
               stage + (size_t)s * c.slot + (size_t)c.me * sub, m);
  }
  return end(&c, st);
}

/* ---- point to point and barrier ------------------------------------ */

static qcoll_status_t p2p(qcoll__ctx_t *comm, bool sending, void *buf,
                          size_t count, qcoll_dtype_t dtype, int peer) {
  ctx_t c;
  const char *fn = sending ? "qcoll_send" : "qcoll_recv";
  qcoll_status_t st = begin(&c, comm, dtype, fn);
  if (st != QCOLL_OK || count == 0) return end(&c, st);
  int l = local_index(comm, peer);
  if (l < 0)
    return end(
        &c, qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                         "%s: peer %d is not a rank of this host", fn, peer));
  size_t bytes = count * c.esz;
  st = sending ? qcoll__shm_send(comm, l, buf, bytes)
               : qcoll__shm_recv(comm, l, buf, bytes);
  return end(&c, st);
}

qcoll_status_t qcoll__host_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer) {
  return p2p(comm, true, (void *)sendbuf, count, dtype, peer);
}

qcoll_status_t qcoll__host_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer) {
  return p2p(comm, false, recvbuf, count, dtype, peer);
}

qcoll_status_t qcoll__host_barrier(qcoll__ctx_t *comm) {
  ctx_t c;
  qcoll_status_t st = begin(&c, comm, QCOLL_U8, "qcoll_barrier");
  if (st == QCOLL_OK) st = qcoll__shm_barrier(comm);
  return end(&c, st);
}
