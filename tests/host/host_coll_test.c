/*
 * Multi-rank test of the host back end, started by qcoll-run:
 *
 *   qcoll-run -n N host_coll_test [--quick] [--big]
 *
 * Every collective x dtype x op (where meaningful), in place and out of
 * place, counts 0, 1, 7, not divisible by N, crossing the one-shot
 * threshold and spanning several chunks (the chunk sizes are read from the
 * communicator's shared-memory layout, so the counts follow QCOLL_SHM_BYTES).
 * Inputs are small integers, so every expected value is exact and computed
 * here from the same formula the ranks use; float results with rounding are
 * checked bitwise against qcoll__reduce_ranks over all ranks' inputs and
 * across ranks through a hash all-gather.
 *
 * --quick: fewer counts (for 64 ranks on a small machine).
 * --big:   also one all-reduce of 8 MiB of f32 per rank.
 * Exits 0 when every check passed; prints one summary line per rank.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "coll/host/host_coll.h"
#include "core/comm.h"
#include "base/dtype.h"
#include "qcoll.h"
#include "transport/shm.h"

typedef struct test {
  qcoll_comm_t comm;
  int rank, n;
  size_t slot, sub, oneshot, pair;
  bool quick;
  uint64_t hash; /* of every result that must be equal on all ranks */
} test_t;

static test_t T;

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

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static bool is_float(qcoll_dtype_t t) {
  return t >= QCOLL_F16;
}
static bool is_signed(qcoll_dtype_t t) {
  return t == QCOLL_I8 || t == QCOLL_I32 || t == QCOLL_I64 || is_float(t);
}

/* ---- exact inputs and expected values ------------------------------ */

/* Largest |value| such that the sum over N ranks stays within i8/u8 and is
 * exact in bf16 (8 significant bits). */
static int64_t amplitude(void) {
  int64_t a = 100 / T.n;
  return a < 1 ? 1 : a > 5 ? 5 : a;
}

/* Input of `rank` at element i for op: PROD gets values in {1, 2} (at most
 * three 2s per element, negated on one rank for signed types); the other
 * ops get small integers of both signs where the type has them.  `salt`
 * varies inputs between calls. */
static int64_t input(qcoll_dtype_t t, qcoll_op_t op, int rank, size_t i,
                     int salt) {
  if (op == QCOLL_PROD) {
    int64_t v =
        (rank < 6 && ((i + (size_t)rank + (size_t)salt) & 1) == 0) ? 2 : 1;
    if (is_signed(t) && (size_t)rank == (i + (size_t)salt) % (size_t)T.n)
      v = -v;
    return v;
  }
  int64_t a = amplitude();
  uint64_t h = (uint64_t)rank * 7919u + i * 104729u + (uint64_t)salt * 31u;
  h ^= h >> 7;
  if (is_signed(t)) return (int64_t)(h % (uint64_t)(2 * a + 1)) - a;
  return (int64_t)(h % (uint64_t)(a + 1));
}

static void store(qcoll_dtype_t t, void *p, size_t i, double x) {
  switch (t) {
    case QCOLL_I8: ((int8_t *)p)[i] = (int8_t)x; break;
    case QCOLL_U8: ((uint8_t *)p)[i] = (uint8_t)x; break;
    case QCOLL_I32: ((int32_t *)p)[i] = (int32_t)x; break;
    case QCOLL_U32: ((uint32_t *)p)[i] = (uint32_t)x; break;
    case QCOLL_I64: ((int64_t *)p)[i] = (int64_t)x; break;
    case QCOLL_U64: ((uint64_t *)p)[i] = (uint64_t)x; break;
    case QCOLL_F16: ((uint16_t *)p)[i] = qcoll__f32_to_f16((float)x); break;
    case QCOLL_BF16: ((uint16_t *)p)[i] = qcoll__f32_to_bf16((float)x); break;
    case QCOLL_F32: ((float *)p)[i] = (float)x; break;
    default: ((double *)p)[i] = x; break;
  }
}

/* Expected result at element i: exact integer arithmetic over all ranks;
 * AVG divides once (integers truncate toward zero, floats divide in f32,
 * or f64 for f64). */
static void expected(qcoll_dtype_t t, qcoll_op_t op, void *p, size_t out_i,
                     size_t in_i, int salt) {
  int64_t acc = input(t, op, 0, in_i, salt);
  for (int r = 1; r < T.n; r++) {
    int64_t v = input(t, op, r, in_i, salt);
    switch (op) {
      case QCOLL_PROD: acc *= v; break;
      case QCOLL_MIN: acc = v < acc ? v : acc; break;
      case QCOLL_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op != QCOLL_AVG) {
    store(t, p, out_i, (double)acc);
  } else if (!is_float(t)) {
    store(t, p, out_i, (double)(acc / T.n));
  } else if (t == QCOLL_F64) {
    store(t, p, out_i, (double)acc / (double)T.n);
  } else {
    store(t, p, out_i, (double)((float)acc / (float)T.n));
  }
}

static void fill_input(qcoll_dtype_t t, qcoll_op_t op, void *p, size_t count,
                       size_t first, int salt) {
  for (size_t i = 0; i < count; i++)
    store(t, p, i, (double)input(t, op, T.rank, first + i, salt));
}

/* Compare count elements; report the first difference. */
static bool same(const char *what, qcoll_dtype_t t, const void *got,
                 const void *want, size_t count) {
  size_t esz = qcoll_dtype_size(t);
  check_count++;
  if (count == 0 || memcmp(got, want, count * esz) == 0) return true;
  for (size_t i = 0; i < count; i++) {
    if (memcmp((const char *)got + i * esz, (const char *)want + i * esz,
               esz)) {
      uint64_t g = 0, w = 0;
      memcpy(&g, (const char *)got + i * esz, esz);
      memcpy(&w, (const char *)want + i * esz, esz);
      check_failures++;
      if (check_failures <= 20)
        fprintf(stderr,
                "rank %d: FAIL %s %s count=%zu: element %zu is 0x%" PRIx64
                ", expected 0x%" PRIx64 "\n",
                T.rank, what, qcoll_dtype_name(t), count, i, g, w);
      return false;
    }
  }
  return false;
}

/* ---- reductions ---------------------------------------------------- */

static void test_all_reduce(qcoll_dtype_t t, qcoll_op_t op, size_t count,
                            bool in_place, int salt) {
  size_t esz = qcoll_dtype_size(t);
  char *send = xmalloc(count * esz), *recv = xmalloc(count * esz),
       *want = xmalloc(count * esz);
  fill_input(t, op, send, count, 0, salt);
  memset(recv, 0xa5, count * esz);
  for (size_t i = 0; i < count; i++) expected(t, op, want, i, i, salt);
  char *out = in_place ? send : recv;
  OK(qcoll_all_reduce(send, out, count, t, op, T.comm, NULL));
  char what[96];
  snprintf(what, sizeof what, "all_reduce/%s%s", qcoll_op_name(op),
           in_place ? "/in-place" : "");
  same(what, t, out, want, count);
  T.hash = fnv(T.hash, out, count * esz);
  free(send);
  free(recv);
  free(want);
}

static void test_reduce(qcoll_dtype_t t, qcoll_op_t op, size_t count,
                        bool in_place, int root, int salt) {
  size_t esz = qcoll_dtype_size(t);
  bool is_root = T.rank == root;
  char *send = xmalloc(count * esz), *recv = xmalloc(count * esz),
       *want = xmalloc(count * esz);
  fill_input(t, op, send, count, 0, salt);
  memset(recv, 0xa5, count * esz);
  char *out = in_place ? send : (is_root || salt % 2 ? recv : NULL);
  OK(qcoll_reduce(send, out, count, t, op, root, T.comm, NULL));
  char what[96];
  snprintf(what, sizeof what, "reduce/%s root %d%s", qcoll_op_name(op), root,
           in_place ? "/in-place" : "");
  if (is_root) {
    for (size_t i = 0; i < count; i++) expected(t, op, want, i, i, salt);
    same(what, t, out, want, count);
  } else if (!in_place) {
    /* A non-root's recvbuf is not written. */
    memset(want, 0xa5, count * esz);
    same(what, t, recv, want, count);
  }
  free(send);
  free(recv);
  free(want);
}

static void test_reduce_scatter(qcoll_dtype_t t, qcoll_op_t op, size_t rc,
                                bool in_place, int salt) {
  size_t esz = qcoll_dtype_size(t), total = rc * (size_t)T.n;
  char *send = xmalloc(total * esz), *recv = xmalloc(rc * esz),
       *want = xmalloc(rc * esz);
  fill_input(t, op, send, total, 0, salt);
  memset(recv, 0xa5, rc * esz);
  for (size_t i = 0; i < rc; i++)
    expected(t, op, want, i, (size_t)T.rank * rc + i, salt);
  char *out = in_place ? send + (size_t)T.rank * rc * esz : recv;
  OK(qcoll_reduce_scatter(send, out, rc, t, op, T.comm, NULL));
  char what[96];
  snprintf(what, sizeof what, "reduce_scatter/%s%s", qcoll_op_name(op),
           in_place ? "/in-place" : "");
  same(what, t, out, want, rc);
  free(send);
  free(recv);
  free(want);
}

/* ---- data movement ------------------------------------------------- */

/* A value that names its origin: rank r, element i. */
static void fill_pattern(qcoll_dtype_t t, void *p, size_t count, int r,
                         size_t first) {
  for (size_t i = 0; i < count; i++)
    store(t, p, i, (double)(((size_t)r * 31 + first + i) % 97));
}

static void test_broadcast(qcoll_dtype_t t, size_t count, int root,
                           bool in_place) {
  size_t esz = qcoll_dtype_size(t);
  char *send = xmalloc(count * esz), *recv = xmalloc(count * esz),
       *want = xmalloc(count * esz);
  fill_pattern(t, want, count, root, 0);
  memcpy(send, want, count * esz);
  memset(recv, 0xa5, count * esz);
  char *out = in_place ? send : recv;
  if (in_place && T.rank != root) memset(out, 0x5a, count * esz);
  OK(qcoll_broadcast(T.rank == root ? send : NULL, out, count, t, root, T.comm,
                     NULL));
  char what[64];
  snprintf(what, sizeof what, "broadcast root %d%s", root,
           in_place ? "/in-place" : "");
  same(what, t, out, want, count);
  T.hash = fnv(T.hash, out, count * esz);
  free(send);
  free(recv);
  free(want);
}

static void test_all_gather(qcoll_dtype_t t, size_t count, bool in_place) {
  size_t esz = qcoll_dtype_size(t), total = count * (size_t)T.n;
  char *send = xmalloc(count * esz), *recv = xmalloc(total * esz),
       *want = xmalloc(total * esz);
  for (int r = 0; r < T.n; r++)
    fill_pattern(t, want + (size_t)r * count * esz, count, r, 0);
  memset(recv, 0xa5, total * esz);
  const char *in = send;
  if (in_place) {
    in = recv + (size_t)T.rank * count * esz;
    fill_pattern(t, recv + (size_t)T.rank * count * esz, count, T.rank, 0);
  } else {
    fill_pattern(t, send, count, T.rank, 0);
  }
  OK(qcoll_all_gather(in, recv, count, t, T.comm, NULL));
  same(in_place ? "all_gather/in-place" : "all_gather", t, recv, want, total);
  T.hash = fnv(T.hash, recv, total * esz);
  free(send);
  free(recv);
  free(want);
}

static void test_all_to_all(qcoll_dtype_t t, size_t count) {
  size_t esz = qcoll_dtype_size(t), total = count * (size_t)T.n;
  char *send = xmalloc(total * esz), *recv = xmalloc(total * esz),
       *want = xmalloc(total * esz);
  /* Block d of rank r's send holds pattern (r * N + d); rank me receives
   * block me of every rank s at position s. */
  for (int d = 0; d < T.n; d++)
    fill_pattern(t, send + (size_t)d * count * esz, count, T.rank * T.n + d, 0);
  for (int s = 0; s < T.n; s++)
    fill_pattern(t, want + (size_t)s * count * esz, count, s * T.n + T.rank, 0);
  memset(recv, 0xa5, total * esz);
  OK(qcoll_all_to_all(send, recv, count, t, T.comm, NULL));
  same("all_to_all", t, recv, want, total);
  free(send);
  free(recv);
  free(want);
}

/* Ring: every rank sends `count` elements to rank+1 and receives from
 * rank-1.  Small messages are sent before anyone receives (so send must not
 * block); streamed ones alternate the order (odd ranks receive first). */
static void test_send_recv(size_t count, bool streamed) {
  if (T.n < 2) return;
  qcoll_dtype_t t = QCOLL_I32;
  size_t esz = 4;
  int next = (T.rank + 1) % T.n, prev = (T.rank + T.n - 1) % T.n;
  char *send = xmalloc(count * esz), *recv = xmalloc(count * esz),
       *want = xmalloc(count * esz);
  fill_pattern(t, send, count, T.rank, 1000);
  fill_pattern(t, want, count, prev, 1000);
  memset(recv, 0xa5, count * esz);
  if (!streamed || T.rank % 2 == 0) {
    OK(qcoll_send(send, count, t, next, T.comm, NULL));
    OK(qcoll_recv(recv, count, t, prev, T.comm, NULL));
  } else {
    OK(qcoll_recv(recv, count, t, prev, T.comm, NULL));
    OK(qcoll_send(send, count, t, next, T.comm, NULL));
  }
  same(streamed ? "send/recv streamed" : "send/recv", t, recv, want, count);
  /* Several messages queued back to back on one pair, then drained. */
  if (!streamed && count > 0 && count * esz * 2 <= T.pair) {
    int a = 11 + T.rank, b = 0;
    OK(qcoll_send(&a, 1, QCOLL_I32, next, T.comm, NULL));
    OK(qcoll_send(&a, 1, QCOLL_I32, next, T.comm, NULL));
    for (int k = 0; k < 2; k++) {
      OK(qcoll_recv(&b, 1, QCOLL_I32, prev, T.comm, NULL));
      EXPECT(b == 11 + prev, "queued message %d from %d is %d", k, prev, b);
    }
  }
  free(send);
  free(recv);
  free(want);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 0 arrives 200 ms late: everyone else must wait for it. */
static void test_barrier(void) {
  OK(qcoll_barrier(T.comm, NULL));
  double t0 = now_s();
  if (T.rank == 0) usleep(200 * 1000);
  OK(qcoll_barrier(T.comm, NULL));
  double waited = now_s() - t0;
  EXPECT(waited >= 0.15, "barrier returned after %.3f s, before rank 0 arrived",
         waited);
  for (int i = 0; i < 20; i++) OK(qcoll_barrier(T.comm, NULL));
}

/* Inputs with rounding (not small integers), compared bitwise with
 * qcoll__reduce_ranks over every rank's input, regenerated here. */
static void rounding_input(qcoll_dtype_t t, void *p, size_t count, int r) {
  uint64_t s = 0x243f6a8885a308d3ull ^ ((uint64_t)r * 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < count; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double x = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 3.0;
    store(t, p, i, x);
  }
}

static void test_bitwise_identical(qcoll_dtype_t t, qcoll_op_t op,
                                   size_t count) {
  size_t esz = qcoll_dtype_size(t);
  char **all = xmalloc((size_t)T.n * sizeof *all);
  for (int r = 0; r < T.n; r++) {
    all[r] = xmalloc(count * esz);
    rounding_input(t, all[r], count, r);
  }
  char *recv = xmalloc(count * esz), *want = xmalloc(count * esz);
  OK(qcoll_all_reduce(all[T.rank], recv, count, t, op, T.comm, NULL));
  qcoll__reduce_ranks(want, (const void *const *)all, T.n, count, t, op, T.n);
  char what[64];
  snprintf(what, sizeof what, "all_reduce/%s with rounding", qcoll_op_name(op));
  same(what, t, recv, want, count);
  T.hash = fnv(T.hash, recv, count * esz);
  for (int r = 0; r < T.n; r++) free(all[r]);
  free(all);
  free(recv);
  free(want);
}

/* ---- driver -------------------------------------------------------- */

static size_t elems(size_t bytes, qcoll_dtype_t t) {
  return bytes / qcoll_dtype_size(t);
}

static void run_reductions(void) {
  int salt = 0;
  for (int ti = 0; ti < QCOLL_DTYPE_COUNT; ti++) {
    qcoll_dtype_t t = (qcoll_dtype_t)ti;
    size_t counts[8];
    int nc = 0;
    counts[nc++] = 0;
    counts[nc++] = 1;
    counts[nc++] = 7;
    counts[nc++] = (size_t)T.n * 13 + 5; /* not divisible by N */
    if (!T.quick) {
      counts[nc++] = elems(T.oneshot, t) + 3;      /* just past one-shot */
      counts[nc++] = elems(T.slot, t) * 5 / 2 + 1; /* several chunks */
    }
    for (int c = 0; c < nc; c++) {
      for (int op = 0; op < QCOLL_OP_COUNT; op++) {
        for (int ip = 0; ip < 2; ip++) {
          bool in_place = ip == 1;
          /* --quick: in place only for the small counts */
          if (T.quick && in_place && c > 2) continue;
          salt++;
          test_all_reduce(t, (qcoll_op_t)op, counts[c], in_place, salt);
          test_reduce(t, (qcoll_op_t)op, counts[c], in_place, salt % T.n, salt);
        }
      }
    }
    size_t rcounts[6];
    int nr = 0;
    rcounts[nr++] = 0;
    rcounts[nr++] = 1;
    rcounts[nr++] = 7;
    rcounts[nr++] = 13;
    if (!T.quick) rcounts[nr++] = elems(T.sub, t) * 2 + 3; /* several phases */
    for (int c = 0; c < nr; c++)
      for (int op = 0; op < QCOLL_OP_COUNT; op++)
        for (int ip = 0; ip < 2; ip++) {
          if (T.quick && ip == 1 && c > 2) continue;
          test_reduce_scatter(t, (qcoll_op_t)op, rcounts[c], ip == 1, ++salt);
        }
  }
}

static void run_movement(void) {
  for (int ti = 0; ti < QCOLL_DTYPE_COUNT; ti++) {
    qcoll_dtype_t t = (qcoll_dtype_t)ti;
    size_t counts[6];
    int nc = 0;
    counts[nc++] = 0;
    counts[nc++] = 1;
    counts[nc++] = 7;
    counts[nc++] = (size_t)T.n * 3 + 2;
    bool big = !T.quick && (t == QCOLL_U8 || t == QCOLL_F64);
    for (int c = 0; c < nc + (big ? 1 : 0); c++) {
      size_t bc =
          c < nc ? counts[c] : elems(T.slot * (size_t)T.n, t) * 3 / 2 + 1;
      size_t gc = c < nc ? counts[c] : elems(T.slot, t) * 2 + 1;
      size_t ac = c < nc ? counts[c] : elems(T.sub, t) * 2 + 3;
      for (int ip = 0; ip < 2; ip++) {
        test_broadcast(t, bc, (c + ip) % T.n, ip == 1);
        test_all_gather(t, gc, ip == 1);
      }
      test_all_to_all(t, ac);
    }
  }
}

static void check_segment_unlinked(void) {
  const char *name = qcoll__shm_name(&T.comm->ctx);
  char path[128];
  snprintf(path, sizeof path, "/dev/shm%s", name);
  EXPECT(name[0] == '/' && strncmp(name, "/qcoll", 6) == 0, "segment name '%s'",
         name);
  EXPECT(access(path, F_OK) != 0 && errno == ENOENT,
         "%s still exists after init", path);
}

int main(int argc, char **argv) {
  bool big = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      T.quick = true;
    else if (!strcmp(argv[i], "--big"))
      big = true;
    else {
      fprintf(stderr, "usage: %s [--quick] [--big]\n", argv[0]);
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
  check_rank = T.rank;
  OK(qcoll_comm_size(T.comm, &T.n));
  const qcoll__shm_layout_t *lay = qcoll__shm_layout(&T.comm->ctx);
  T.slot = lay->slot_bytes;
  T.sub = lay->slot_bytes / (size_t)T.n / 64 * 64;
  T.oneshot = lay->oneshot_bytes;
  T.pair = lay->pair_bytes;
  T.hash = 1469598103934665603ull;
  double t0 = now_s();

  check_segment_unlinked();
  run_reductions();
  run_movement();
  test_send_recv(0, false);
  test_send_recv(1, false);
  test_send_recv(T.pair / 4 / 2, false);    /* fits: sends return at once */
  test_send_recv(T.pair / 4 * 5 + 3, true); /* streams in many pieces */
  test_barrier();
  static const qcoll_dtype_t fts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32,
                                      QCOLL_F64};
  for (size_t k = 0; k < 4; k++) {
    size_t counts[2] = {elems(T.oneshot, fts[k]) / 2 + 1,
                        elems(T.slot, fts[k]) * 3 + 17};
    for (int c = 0; c < (T.quick ? 1 : 2); c++) {
      test_bitwise_identical(fts[k], QCOLL_SUM, counts[c]);
      test_bitwise_identical(fts[k], QCOLL_AVG, counts[c]);
      test_bitwise_identical(fts[k], QCOLL_PROD, counts[c]);
    }
  }
  if (big) {
    size_t count = (size_t)2 << 20; /* 8 MiB of f32 */
    test_all_reduce(QCOLL_F32, QCOLL_SUM, count, false, 12345);
    /* Timing, for information only (shared CI machines vary). */
    float *a = xmalloc(count * 4), *b = xmalloc(count * 4);
    for (size_t i = 0; i < count; i++) a[i] = (float)(i % 7);
    OK(qcoll_barrier(T.comm, NULL));
    double b0 = now_s();
    for (int it = 0; it < 5; it++)
      OK(qcoll_all_reduce(a, b, count, QCOLL_F32, QCOLL_SUM, T.comm, NULL));
    double per = (now_s() - b0) / 5;
    if (T.rank == 0)
      printf(
          "host_coll_test: 8 MiB f32 all-reduce over %d ranks: %.2f ms per "
          "call, algbw %.2f GB/s\n",
          T.n, per * 1e3, (double)count * 4 / per / 1e9);
    free(a);
    free(b);
  }

  /* Every rank must hold the same bits for every replicated result. */
  uint64_t *hashes = xmalloc((size_t)T.n * sizeof *hashes);
  OK(qcoll_all_gather(&T.hash, hashes, 1, QCOLL_U64, T.comm, NULL));
  for (int r = 0; r < T.n; r++)
    EXPECT(hashes[r] == T.hash,
           "rank %d's results hash to %016" PRIx64
           ", this rank's to %016" PRIx64,
           r, hashes[r], T.hash);
  free(hashes);

  /* Gather the failure counts so rank 0's line speaks for everyone. */
  long mine[2] = {check_count, check_failures}, sums[2];
  OK(qcoll_all_reduce(mine, sums, 2, QCOLL_I64, QCOLL_SUM, T.comm, NULL));
  if (T.rank == 0)
    printf(
        "host_coll_test: %d ranks%s: %ld checks, %ld failures, slot %zu B, "
        "one-shot %zu B, pair %zu B, %.2f s\n",
        T.n, T.quick ? " (quick)" : "", sums[0], sums[1], T.slot, T.oneshot,
        T.pair, now_s() - t0);
  OK(qcoll_comm_destroy(T.comm));
  return check_failures ? 1 : 0;
}
