/*
 * In place and out of place give the same bytes, for every host collective
 * that has an in-place form, started by qcoll-run:
 *
 *   qcoll-run -n N host_inplace_test [--large]
 *
 * all-reduce, reduce (every root), reduce-scatter, all-gather and
 * broadcast; every dtype, every op; counts from 1 element to several
 * chunks of the staging layout (read from the communicator, so they follow
 * QCOLL_SHM_BYTES), including counts whose last chunk leaves some ranks'
 * sub-ranges empty; buffers at their allocation's start and one element
 * further in (so copies meet unaligned destinations).  Inputs carry
 * rounding (random floats, random integer bits), so a different order of
 * reduction or a missed or doubled copy changes bits.  Each result is also
 * compared with qcoll__reduce_ranks over every rank's input, regenerated
 * here, and the bytes around the output must be left alone.
 *
 * --large: instead, all-reduce and reduce of 24 MiB of f32 and bf16 (large
 * enough for the paths taken only by messages bigger than the caches).
 * Exits 0 when every check passed; rank 0 prints a summary.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/host/host_coll.h"
#include "core/comm.h"
#include "base/dtype.h"
#include "qcoll.h"
#include "transport/shm.h"

#define GUARD 64 /* bytes checked on each side of an output */
#define GUARD_BYTE 0xc3

static struct {
  qcoll_comm_t comm;
  int rank, n;
  size_t slot, oneshot;
  long checks, failures;
} T;

#define OK(call)                                                      \
  do {                                                                \
    qcoll_status_t st_ = (call);                                      \
    if (st_ != QCOLL_OK) {                                            \
      fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\n", T.rank, \
              __FILE__, __LINE__, #call, qcoll_status_string(st_),    \
              qcoll_comm_last_error(T.comm));                         \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", T.rank, n);
    exit(1);
  }
  return p;
}

/* ---- inputs ---------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

/* Element i of rank r's input for call number `salt`: floats in
 * (-1.5, 1.5) with full mantissas (no NaN, so every result has one
 * right bit pattern), integers with random bits (sums and products wrap). */
static void fill(qcoll_dtype_t t, void *p, size_t count, int r, int salt,
                 size_t first) {
  size_t esz = qcoll_dtype_size(t);
  for (size_t i = 0; i < count; i++) {
    uint64_t x =
        mix(((uint64_t)salt << 40) ^ ((uint64_t)r << 32) ^ (first + i));
    double v = ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 3.0;
    switch (t) {
      case QCOLL_F16: ((uint16_t *)p)[i] = qcoll__f32_to_f16((float)v); break;
      case QCOLL_BF16: ((uint16_t *)p)[i] = qcoll__f32_to_bf16((float)v); break;
      case QCOLL_F32: ((float *)p)[i] = (float)v; break;
      case QCOLL_F64: ((double *)p)[i] = v; break;
      default: memcpy((char *)p + i * esz, &x, esz);
    }
  }
}

/* ---- buffers with guards --------------------------------------------- */

/* `bytes` of room at offset `shift` bytes into an allocation, with GUARD
 * bytes of GUARD_BYTE before and after. */
typedef struct buf {
  uint8_t *base, *p;
  size_t bytes;
} buf_t;

static buf_t buf_new(size_t bytes, size_t shift) {
  buf_t b;
  b.base = xmalloc(bytes + shift + 2 * GUARD);
  memset(b.base, GUARD_BYTE, bytes + shift + 2 * GUARD);
  b.p = b.base + GUARD + shift;
  b.bytes = bytes;
  return b;
}

static bool guards_intact(const buf_t *b) {
  for (size_t i = 0; i < GUARD; i++)
    if (b->p[-(ptrdiff_t)i - 1] != GUARD_BYTE ||
        b->p[b->bytes + i] != GUARD_BYTE)
      return false;
  return true;
}

static void check(bool ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...) {
  T.checks++;
  if (ok) return;
  if (++T.failures <= 20) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: FAIL ", T.rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
}

/* The first differing element, or -1. */
static long first_difference(const void *a, const void *b, size_t count,
                             size_t esz) {
  if (!memcmp(a, b, count * esz)) return -1;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)a + i * esz, (const char *)b + i * esz, esz))
      return (long)i;
  return -1;
}

static void compare(const char *what, qcoll_dtype_t t, qcoll_op_t op,
                    size_t count, size_t shift, const void *in_place,
                    const void *out_of_place, const void *want) {
  size_t esz = qcoll_dtype_size(t);
  long d = first_difference(in_place, out_of_place, count, esz);
  check(d < 0,
        "%s %s/%s count %zu shift %zu: in place differs from out of "
        "place at element %ld",
        what, qcoll_dtype_name(t), qcoll_op_name(op), count, shift, d);
  if (!want) return;
  d = first_difference(out_of_place, want, count, esz);
  check(d < 0,
        "%s %s/%s count %zu shift %zu: differs from the reference at "
        "element %ld",
        what, qcoll_dtype_name(t), qcoll_op_name(op), count, shift, d);
}

/* Every rank's input of `count` elements starting at element `first`, and
 * their reduction (rank order, as the library promises). */
static void reference(qcoll_dtype_t t, qcoll_op_t op, void *want, size_t count,
                      size_t first, int salt) {
  size_t esz = qcoll_dtype_size(t);
  void **all = xmalloc((size_t)T.n * sizeof *all);
  for (int r = 0; r < T.n; r++) {
    all[r] = xmalloc(count * esz);
    fill(t, all[r], count, r, salt, first);
  }
  qcoll__reduce_ranks(want, (const void *const *)all, T.n, count, t, op, T.n);
  for (int r = 0; r < T.n; r++) free(all[r]);
  free(all);
}

/* ---- one collective, both placements --------------------------------- */

static void all_reduce_or_reduce(qcoll_dtype_t t, qcoll_op_t op, size_t count,
                                 size_t shift, int root, int salt) {
  size_t esz = qcoll_dtype_size(t), bytes = count * esz;
  const char *what = root < 0 ? "all_reduce" : "reduce";
  bool wants = root < 0 || root == T.rank;
  buf_t send = buf_new(bytes, shift), recv = buf_new(bytes, shift),
        inpl = buf_new(bytes, shift);
  fill(t, send.p, count, T.rank, salt, 0);
  fill(t, inpl.p, count, T.rank, salt, 0);
  if (root < 0) {
    OK(qcoll_all_reduce(send.p, recv.p, count, t, op, T.comm, NULL));
    OK(qcoll_all_reduce(inpl.p, inpl.p, count, t, op, T.comm, NULL));
  } else {
    OK(qcoll_reduce(send.p, recv.p, count, t, op, root, T.comm, NULL));
    OK(qcoll_reduce(inpl.p, inpl.p, count, t, op, root, T.comm, NULL));
  }
  check(guards_intact(&recv) && guards_intact(&inpl) && guards_intact(&send),
        "%s %s count %zu: bytes around a buffer changed", what,
        qcoll_dtype_name(t), count);
  if (wants) {
    void *want = xmalloc(bytes);
    reference(t, op, want, count, 0, salt);
    compare(what, t, op, count, shift, inpl.p, recv.p, want);
    free(want);
  } else {
    /* A non-root's input stays as it was, in place too. */
    fill(t, recv.p, count, T.rank, salt, 0);
    compare("reduce (non-root input kept)", t, op, count, shift, inpl.p, recv.p,
            NULL);
  }
  free(send.base);
  free(recv.base);
  free(inpl.base);
}

static void reduce_scatter(qcoll_dtype_t t, qcoll_op_t op, size_t rc,
                           size_t shift, int salt) {
  size_t esz = qcoll_dtype_size(t), total = rc * (size_t)T.n;
  buf_t send = buf_new(total * esz, shift), recv = buf_new(rc * esz, shift),
        inpl = buf_new(total * esz, shift);
  fill(t, send.p, total, T.rank, salt, 0);
  fill(t, inpl.p, total, T.rank, salt, 0);
  uint8_t *mine = inpl.p + (size_t)T.rank * rc * esz;
  OK(qcoll_reduce_scatter(send.p, recv.p, rc, t, op, T.comm, NULL));
  OK(qcoll_reduce_scatter(inpl.p, mine, rc, t, op, T.comm, NULL));
  check(guards_intact(&recv) && guards_intact(&inpl),
        "reduce_scatter %s count %zu: bytes around a buffer changed",
        qcoll_dtype_name(t), rc);
  void *want = xmalloc(rc * esz);
  reference(t, op, want, rc, (size_t)T.rank * rc, salt);
  compare("reduce_scatter", t, op, rc, shift, mine, recv.p, want);
  free(want);
  free(send.base);
  free(recv.base);
  free(inpl.base);
}

static void all_gather(qcoll_dtype_t t, size_t count, size_t shift, int salt) {
  size_t esz = qcoll_dtype_size(t), total = count * (size_t)T.n;
  buf_t send = buf_new(count * esz, shift), recv = buf_new(total * esz, shift),
        inpl = buf_new(total * esz, shift), want = buf_new(total * esz, 0);
  fill(t, send.p, count, T.rank, salt, 0);
  uint8_t *mine = inpl.p + (size_t)T.rank * count * esz;
  fill(t, mine, count, T.rank, salt, 0);
  for (int r = 0; r < T.n; r++)
    fill(t, want.p + (size_t)r * count * esz, count, r, salt, 0);
  OK(qcoll_all_gather(send.p, recv.p, count, t, T.comm, NULL));
  OK(qcoll_all_gather(mine, inpl.p, count, t, T.comm, NULL));
  check(guards_intact(&recv) && guards_intact(&inpl),
        "all_gather %s count %zu: bytes around a buffer changed",
        qcoll_dtype_name(t), count);
  compare("all_gather", t, QCOLL_SUM, total, shift, inpl.p, recv.p, want.p);
  free(send.base);
  free(recv.base);
  free(inpl.base);
  free(want.base);
}

static void broadcast(qcoll_dtype_t t, size_t count, size_t shift, int root,
                      int salt) {
  size_t esz = qcoll_dtype_size(t), bytes = count * esz;
  buf_t send = buf_new(bytes, shift), recv = buf_new(bytes, shift),
        inpl = buf_new(bytes, shift), want = buf_new(bytes, 0);
  fill(t, want.p, count, root, salt, 0);
  fill(t, send.p, count, T.rank, salt, 0);
  memset(inpl.p, 0x5a, bytes);
  if (T.rank == root) fill(t, inpl.p, count, T.rank, salt, 0);
  OK(qcoll_broadcast(send.p, recv.p, count, t, root, T.comm, NULL));
  OK(qcoll_broadcast(inpl.p, inpl.p, count, t, root, T.comm, NULL));
  check(guards_intact(&recv) && guards_intact(&inpl),
        "broadcast %s count %zu: bytes around a buffer changed",
        qcoll_dtype_name(t), count);
  compare("broadcast", t, QCOLL_SUM, count, shift, inpl.p, recv.p, want.p);
  free(send.base);
  free(recv.base);
  free(inpl.base);
  free(want.base);
}

/* ---- driver ------------------------------------------------------------ */

static size_t elems(size_t bytes, qcoll_dtype_t t) {
  return bytes / qcoll_dtype_size(t);
}

static void run_all(void) {
  int salt = 0;
  for (int ti = 0; ti < QCOLL_DTYPE_COUNT; ti++) {
    qcoll_dtype_t t = (qcoll_dtype_t)ti;
    size_t esz = qcoll_dtype_size(t);
    /* One element; not a multiple of N; just past one-shot; several chunks
     * with a short last one; a last chunk smaller than one rank's share. */
    size_t counts[] = {1, (size_t)T.n * 13 + 5, elems(T.oneshot, t) + 3,
                       elems(T.slot, t) * 5 / 2 + 1,
                       elems(T.slot, t) * 2 + 64 / esz + 1};
    size_t nc = sizeof counts / sizeof counts[0];
    for (size_t c = 0; c < nc; c++) {
      size_t shift = (c % 2) * esz; /* one element further in */
      for (int op = 0; op < QCOLL_OP_COUNT; op++) {
        salt++;
        all_reduce_or_reduce(t, (qcoll_op_t)op, counts[c], shift, -1, salt);
        salt++;
        all_reduce_or_reduce(t, (qcoll_op_t)op, counts[c], shift, salt % T.n,
                             salt);
      }
    }
    /* Reduce-scatter and all-gather: per-rank counts. */
    size_t sub = T.slot / (size_t)T.n / 64 * 64;
    size_t rcounts[] = {1, 13, elems(sub, t) * 2 + 3, elems(T.slot, t) + 5};
    for (size_t c = 0; c < sizeof rcounts / sizeof rcounts[0]; c++) {
      size_t shift = (c % 2) * esz;
      for (int op = 0; op < QCOLL_OP_COUNT; op++)
        reduce_scatter(t, (qcoll_op_t)op, rcounts[c], shift, ++salt);
      all_gather(t, rcounts[c], shift, ++salt);
    }
    size_t bcounts[] = {1, (size_t)T.n * 3 + 2,
                        elems(T.slot * (size_t)T.n, t) * 3 / 2 + 1};
    for (size_t c = 0; c < sizeof bcounts / sizeof bcounts[0]; c++)
      broadcast(t, bcounts[c], (c % 2) * esz, (int)(c % (size_t)T.n), ++salt);
  }
}

static void run_large(void) {
  static const qcoll_dtype_t types[] = {QCOLL_F32, QCOLL_BF16};
  for (size_t k = 0; k < 2; k++) {
    size_t count = elems((size_t)24 << 20, types[k]) + 7;
    all_reduce_or_reduce(types[k], QCOLL_SUM, count, 0, -1, 1000 + (int)k);
    all_reduce_or_reduce(types[k], QCOLL_AVG, count, qcoll_dtype_size(types[k]),
                         -1, 1010 + (int)k);
    all_reduce_or_reduce(types[k], QCOLL_SUM, count, 0, T.n - 1, 1020 + (int)k);
  }
}

int main(int argc, char **argv) {
  bool large = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--large"))
      large = true;
    else {
      fprintf(stderr, "usage: %s [--large]\n", argv[0]);
      return 2;
    }
  }
  qcoll_status_t st = qcoll_comm_init_env(&T.comm, NULL);
  if (st != QCOLL_OK) {
    fprintf(stderr, "qcoll_comm_init_env: %s (%s)\n", qcoll_status_string(st),
            qcoll_last_error());
    return 1;
  }
  OK(qcoll_comm_rank(T.comm, &T.rank));
  OK(qcoll_comm_size(T.comm, &T.n));
  const qcoll__shm_layout_t *lay = qcoll__shm_layout(&T.comm->ctx);
  T.slot = lay->slot_bytes;
  T.oneshot = lay->oneshot_bytes;
  if (large)
    run_large();
  else
    run_all();
  long mine[2] = {T.checks, T.failures}, sums[2];
  OK(qcoll_all_reduce(mine, sums, 2, QCOLL_I64, QCOLL_SUM, T.comm, NULL));
  if (T.rank == 0)
    printf(
        "host_inplace_test: %d ranks%s: %ld checks, %ld failures, slot %zu "
        "B, one-shot %zu B\n",
        T.n, large ? " (large messages)" : "", sums[0], sums[1], T.slot,
        T.oneshot);
  OK(qcoll_comm_destroy(T.comm));
  return sums[1] ? 1 : 0;
}
