/*
 * Every collective on GPU buffers through the public API, on qcoll's own
 * CUDA IPC kernels.  One process per rank, started by qcoll-run; the CTest
 * entries hide NCCL (QCOLL_NCCL_LIB points nowhere), so every call below is
 * served by the IPC kernels (the "ipc" row of the selection table, or the
 * one-shot/two-shot rows for f16/bf16/f32 sum/min/max all-reduce) and none
 * by the host-staged fallback, which could not be captured in (b).
 *
 *  (a) exact results: all_reduce, reduce, broadcast, all_gather,
 *      reduce_scatter, all_to_all x every dtype x every op (reductions) x
 *      count 0, 1, 7, 1000, 1<<20 x in place / out of place (all_to_all:
 *      out of place only, as qcoll.h defines it) x aligned / unaligned by
 *      one element, root varying.  Inputs are small integers, so every
 *      expected value is computed here exactly (integers wrap, AVG divides
 *      once, f16/bf16 round once); reductions are also compared bit for
 *      bit with the host back end running the same call on host buffers;
 *      replicated results (all_reduce, broadcast, all_gather) are compared
 *      across ranks by hash; the bytes around every output must stay
 *      untouched, and reduce must not touch a non-root's recvbuf.
 *  (b) graph replay: each collective (and send/recv, and a mix of them)
 *      captured once and replayed 100 times, new inputs copied in before
 *      every replay on the same stream, every replay's output checked.
 *  (c) send/recv: ring exchange (to rank+1, from rank-1), every dtype,
 *      counts 0..1<<20, several messages in flight, aligned and not; small
 *      messages "send then recv" on one stream, large ones on two streams
 *      and in rank-parity order on one stream.
 *  (d) barrier on a stream: a rank that holds its stream for 50 ms before
 *      the barrier delays every rank's work after it (checked with the
 *      GPU's global timer when all ranks share a GPU); also captured.
 *
 *   gpu_collectives            (a)-(d)
 *   gpu_collectives failure    the last rank never sends: rank 0's recv
 *                              gives up within QCOLL_TIMEOUT and says why
 *   gpu_collectives per-call   (a)-(d) through the _ex forms with per-call
 *                              options: in (a) the calls take ipc, host and
 *                              auto in turn, in (b) and (c) ipc; then (e).
 *                              Run with QCOLL_ALGO=host, so the graphs of (b)
 *                              pass only if a per-call choice wins over the
 *                              environment's (the host path cannot be
 *                              captured), and with QCOLL_CHECK=1.
 *  (e) per-call refusals: host inside a capture, oneshot for a broadcast,
 *      quantisation for an all-gather, nccl without NCCL, and ranks asking
 *      for different algorithms (QCOLL_ERR_MISMATCH naming both): each is
 *      refused with its reason, on every rank alike, and the next call works.
 *
 * Every failure prints "[gpu_collectives rank r/n] FAIL <case>: element i
 * expected X (bits) got Y (bits)".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_test.h"
#include "base/dtype.h"
#include "gpu_test.h"

/* Largest world size this test runs. */
#define QCOLL_IPC_MAX_RANKS_TEST 8

static qcoll_comm_t comm;
static cudaStream_t stream, stream2;
static size_t ipc_bytes, p2p_bytes; /* QCOLL_IPC_BYTES, QCOLL_IPC_P2P_BYTES */

/* ---- the collectives ------------------------------------------------------
 */

typedef enum coll {
  ALL_REDUCE,
  REDUCE,
  BROADCAST,
  ALL_GATHER,
  REDUCE_SCATTER,
  ALL_TO_ALL,
  COLL_COUNT
} coll_t;

static const char *const coll_names[] = {"all_reduce",     "reduce",
                                         "broadcast",      "all_gather",
                                         "reduce_scatter", "all_to_all"};

static bool reduces(coll_t c) {
  return c == ALL_REDUCE || c == REDUCE || c == REDUCE_SCATTER;
}

/* ---- per-call options (gpu_collectives per-call) ---------------------------
 */

static bool per_call_mode;

static qcoll_options_t options_for(qcoll_algo_t algo) {
  qcoll_options_t o;
  qcoll_options_init(&o);
  o.algo = algo;
  return o;
}

/* The options of calls that must run on the GPU's stream (captured, or
 * ordered with other stream work): ipc in per-call mode, else none. */
static const qcoll_options_t *stream_opts(void) {
  static qcoll_options_t ipc;
  if (!per_call_mode) return NULL;
  ipc = options_for(QCOLL_ALGO_IPC);
  return &ipc;
}

static const qcoll_dtype_t all_dtypes[] = {
    QCOLL_I8,  QCOLL_U8,  QCOLL_I32,  QCOLL_U32, QCOLL_I64,
    QCOLL_U64, QCOLL_F16, QCOLL_BF16, QCOLL_F32, QCOLL_F64};
#define NDTYPES (sizeof all_dtypes / sizeof all_dtypes[0])
static const qcoll_op_t all_ops[] = {QCOLL_SUM, QCOLL_PROD, QCOLL_MIN,
                                     QCOLL_MAX, QCOLL_AVG};

/* Elements this rank sends and receives for count. */
static void sizes(coll_t c, size_t count, size_t *send_n, size_t *recv_n) {
  size_t n = (size_t)gt_nranks;
  switch (c) {
    case ALL_GATHER: *send_n = count, *recv_n = n * count; break;
    case REDUCE_SCATTER: *send_n = n * count, *recv_n = count; break;
    case ALL_TO_ALL: *send_n = *recv_n = n * count; break;
    default: *send_n = *recv_n = count; break;
  }
}

static qcoll_status_t call(coll_t c, const void *send, void *recv, size_t count,
                           qcoll_dtype_t d, qcoll_op_t op, int root, void *s,
                           const qcoll_options_t *o) {
  switch (c) {
    case ALL_REDUCE:
      return qcoll_all_reduce_ex(send, recv, count, d, op, comm, s, o);
    case REDUCE:
      return qcoll_reduce_ex(send, recv, count, d, op, root, comm, s, o);
    case BROADCAST:
      return qcoll_broadcast_ex(send, recv, count, d, root, comm, s, o);
    case ALL_GATHER: return qcoll_all_gather_ex(send, recv, count, d, comm, s, o);
    case REDUCE_SCATTER:
      return qcoll_reduce_scatter_ex(send, recv, count, d, op, comm, s, o);
    default: return qcoll_all_to_all_ex(send, recv, count, d, comm, s, o);
  }
}

/* ---- values -----------------------------------------------------------------
 */

static bool is_int(qcoll_dtype_t d) {
  return d <= QCOLL_U64;
}
static bool is_unsigned(qcoll_dtype_t d) {
  return d == QCOLL_U8 || d == QCOLL_U32 || d == QCOLL_U64;
}

/* Element i of rank's input: a small integer (-8..8, or 0..16 unsigned),
 * exact in every dtype; seed makes every case's data different. */
static int64_t input(qcoll_dtype_t d, int rank, size_t i, uint32_t seed) {
  int64_t v =
      (int64_t)((i * 7u + (size_t)rank * 13u + (size_t)seed * 5u) % 17u);
  return is_unsigned(d) ? v : v - 8;
}

/* Store the low bytes of bits (integers, little endian). */
static void put_bits(void *buf, size_t i, qcoll_dtype_t d, uint64_t bits) {
  size_t es = qcoll_dtype_size(d);
  memcpy((char *)buf + i * es, &bits, es);
}

static void put_float(void *buf, size_t i, qcoll_dtype_t d, double v) {
  switch (d) {
    case QCOLL_F16: ((uint16_t *)buf)[i] = qcoll__f32_to_f16((float)v); break;
    case QCOLL_BF16: ((uint16_t *)buf)[i] = qcoll__f32_to_bf16((float)v); break;
    case QCOLL_F32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
  }
}

static void put_value(void *buf, size_t i, qcoll_dtype_t d, int64_t v) {
  if (is_int(d))
    put_bits(buf, i, d, (uint64_t)v);
  else
    put_float(buf, i, d, (double)v);
}

static int64_t sign_extend(uint64_t bits, int width) {
  if (width == 64) return (int64_t)bits;
  uint64_t sign = 1ull << (width - 1);
  return (int64_t)((bits ^ sign) - sign);
}

/* dst[i] = op over v[0..n-1] in rank order, with qcoll's semantics (qcoll.h,
 * src/coll/host/reduce.c): integers wrap at their width and compare with
 * their signedness, AVG is the (wrapped) sum divided once, truncating;
 * f16/bf16/f32 accumulate in f32, f64 in f64, rounded once. */
static void put_reduced(void *dst, size_t i, qcoll_dtype_t d, qcoll_op_t op,
                        const int64_t *v, int n) {
  if (is_int(d)) {
    int width = 8 * (int)qcoll_dtype_size(d);
    uint64_t mask = width == 64 ? ~0ull : (1ull << width) - 1;
    if (op == QCOLL_MIN || op == QCOLL_MAX) {
      int64_t m = v[0];
      for (int r = 1; r < n; r++)
        m = op == QCOLL_MIN ? (v[r] < m ? v[r] : m) : (v[r] > m ? v[r] : m);
      put_bits(dst, i, d, (uint64_t)m);
      return;
    }
    uint64_t acc = (uint64_t)v[0];
    for (int r = 1; r < n; r++)
      acc = op == QCOLL_PROD ? acc * (uint64_t)v[r] : acc + (uint64_t)v[r];
    acc &= mask;
    if (op == QCOLL_AVG)
      acc = is_unsigned(d) ? acc / (uint64_t)n
                           : (uint64_t)(sign_extend(acc, width) / n);
    put_bits(dst, i, d, acc);
    return;
  }
  if (d == QCOLL_F64) {
    double acc = (double)v[0];
    for (int r = 1; r < n; r++) {
      double x = (double)v[r];
      switch (op) {
        case QCOLL_PROD: acc = acc * x; break;
        case QCOLL_MIN: acc = x < acc ? x : acc; break;
        case QCOLL_MAX: acc = x > acc ? x : acc; break;
        default: acc = acc + x; break;
      }
    }
    if (op == QCOLL_AVG) acc = acc / (double)n;
    put_float(dst, i, d, acc);
    return;
  }
  float acc = (float)v[0];
  for (int r = 1; r < n; r++) {
    float x = (float)v[r];
    switch (op) {
      case QCOLL_PROD: acc = acc * x; break;
      case QCOLL_MIN: acc = x < acc ? x : acc; break;
      case QCOLL_MAX: acc = x > acc ? x : acc; break;
      default: acc = acc + x; break;
    }
  }
  if (op == QCOLL_AVG) acc = acc / (float)n;
  put_float(dst, i, d, acc);
}

/* Element i of buf as text: its value and its bits. */
static void format_elem(char *out, size_t len, const void *buf, size_t i,
                        qcoll_dtype_t d) {
  const char *p = (const char *)buf + i * qcoll_dtype_size(d);
  switch (d) {
    case QCOLL_I8: snprintf(out, len, "%d", *(const int8_t *)p); break;
    case QCOLL_U8: snprintf(out, len, "%u", *(const uint8_t *)p); break;
    case QCOLL_I32: {
      int32_t x;
      memcpy(&x, p, 4);
      snprintf(out, len, "%d", x);
      break;
    }
    case QCOLL_U32: {
      uint32_t x;
      memcpy(&x, p, 4);
      snprintf(out, len, "%u", x);
      break;
    }
    case QCOLL_I64: {
      int64_t x;
      memcpy(&x, p, 8);
      snprintf(out, len, "%lld", (long long)x);
      break;
    }
    case QCOLL_U64: {
      uint64_t x;
      memcpy(&x, p, 8);
      snprintf(out, len, "%llu", (unsigned long long)x);
      break;
    }
    case QCOLL_F16:
    case QCOLL_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      float f = d == QCOLL_F16 ? qcoll__f16_to_f32(h) : qcoll__bf16_to_f32(h);
      snprintf(out, len, "%.9g (0x%04x)", f, h);
      break;
    }
    case QCOLL_F32: {
      float f;
      memcpy(&f, p, 4);
      snprintf(out, len, "%.9g (0x%08x)", f, qcoll__f32_to_bits(f));
      break;
    }
    default: {
      double f;
      uint64_t b;
      memcpy(&f, p, 8);
      memcpy(&b, p, 8);
      snprintf(out, len, "%.17g (0x%016llx)", f, (unsigned long long)b);
      break;
    }
  }
}

/* Compare count elements bit for bit; report the first few differences.
 * Returns the number of differing elements. */
static size_t compare(const void *want, const void *got, size_t count,
                      qcoll_dtype_t d, const char *what) {
  size_t es = qcoll_dtype_size(d), bad = 0;
  for (size_t i = 0; i < count; i++) {
    if (!memcmp((const char *)want + i * es, (const char *)got + i * es, es))
      continue;
    if (bad < 4) {
      char w[64], g[64];
      format_elem(w, sizeof w, want, i, d);
      format_elem(g, sizeof g, got, i, d);
      gt_fail("%s: element %zu expected %s got %s", what, i, w, g);
    }
    bad++;
  }
  if (bad > 4) gt_fail("%s: %zu of %zu elements differ", what, bad, count);
  return bad;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    gt_fail("out of host memory (%zu bytes)", bytes);
    exit(1);
  }
  return p;
}

static void check_async(const char *what) {
  qcoll_status_t async = QCOLL_OK;
  GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
  if (async != QCOLL_OK) {
    gt_fail("%s: asynchronous error %s: %s", what, qcoll_status_string(async),
            gt_last_error(comm));
    exit(1); /* the communicator is broken: nothing later can pass */
  }
}

/* Every rank's hash of its result must be rank 0's (host back end). */
static void same_on_every_rank(const void *data, size_t bytes,
                               const char *what) {
  uint64_t mine = gt_hash(data, bytes);
  uint64_t *all = xmalloc((size_t)gt_nranks * sizeof *all);
  GT_QCOLL(comm, qcoll_all_gather(&mine, all, 1, QCOLL_U64, comm, NULL));
  for (int r = 1; r < gt_nranks; r++)
    if (all[r] != all[0])
      gt_fail(
          "%s: rank %d's result (hash %016llx) differs from rank 0's "
          "(%016llx)",
          what, r, (unsigned long long)all[r], (unsigned long long)all[0]);
  free(all);
}

/* ---- device buffers with guard bytes ----------------------------------------
 */

#define GUARD 256 /* bytes before and after every buffer */
#define GUARD_BYTE 0xa5

/* A slice of a preallocated pool: [lead, lead + bytes) is the buffer, the
 * rest is guard. */
typedef struct dbuf {
  char *base; /* device */
  size_t lead, bytes;
} dbuf_t;

static char *pool[2];
static size_t pool_bytes;

static dbuf_t dbuf_take(int which, size_t bytes, size_t misalign) {
  dbuf_t b = {pool[which], GUARD + misalign, bytes};
  if (b.lead + bytes + GUARD > pool_bytes) {
    gt_fail("test bug: %zu bytes do not fit the pool of %zu", bytes,
            pool_bytes);
    exit(1);
  }
  GT_CUDA(cudaMemset(b.base, GUARD_BYTE, b.lead + bytes + GUARD));
  /* The memset runs on the legacy stream, which the test's non-blocking
   * streams do not wait for. */
  GT_CUDA(cudaDeviceSynchronize());
  return b;
}
static char *dbuf_ptr(const dbuf_t *b) {
  return b->base + b->lead;
}

static void dbuf_upload(const dbuf_t *b, size_t offset, const void *src,
                        size_t bytes) {
  if (bytes) gt_upload(dbuf_ptr(b) + offset, src, bytes);
}

/* Copy the buffer to host memory (out, b->bytes) and check its guards. */
static void dbuf_download(const dbuf_t *b, void *out, const char *what) {
  size_t total = b->lead + b->bytes + GUARD;
  unsigned char *all = xmalloc(total);
  GT_CUDA(cudaMemcpy(all, b->base, total, cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < total; k++) {
    if (k >= b->lead && k < b->lead + b->bytes) continue;
    if (all[k] != GUARD_BYTE) {
      gt_fail(
          "%s: byte %lld relative to the buffer was overwritten (0x%02x), "
          "outside [0, %zu)",
          what, (long long)k - (long long)b->lead, all[k], b->bytes);
      break;
    }
  }
  memcpy(out, all + b->lead, b->bytes);
  free(all);
}

/* ---- (a) exact results ------------------------------------------------------
 */

typedef struct placement {
  const char *name;
  bool in_place;
  size_t misalign; /* elements */
} placement_t;

static const placement_t placements[] = {
    {"out-of-place", false, 0},
    {"out-of-place +1", false, 1},
    {"in-place", true, 0},
    {"in-place +1", true, 1},
};

/* What this rank must hold after the call (recv_n elements). */
static void expected_result(coll_t c, qcoll_dtype_t d, qcoll_op_t op,
                            size_t count, int root, uint32_t seed,
                            void *expected) {
  const int n = gt_nranks, me = gt_rank;
  int64_t v[QCOLL_IPC_MAX_RANKS_TEST];
  switch (c) {
    case ALL_REDUCE:
    case REDUCE:
      for (size_t i = 0; i < count; i++) {
        for (int r = 0; r < n; r++) v[r] = input(d, r, i, seed);
        put_reduced(expected, i, d, op, v, n);
      }
      break;
    case REDUCE_SCATTER:
      for (size_t i = 0; i < count; i++) {
        for (int r = 0; r < n; r++)
          v[r] = input(d, r, (size_t)me * count + i, seed);
        put_reduced(expected, i, d, op, v, n);
      }
      break;
    case BROADCAST:
      for (size_t i = 0; i < count; i++)
        put_value(expected, i, d, input(d, root, i, seed));
      break;
    case ALL_GATHER:
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
          put_value(expected, (size_t)q * count + i, d, input(d, q, i, seed));
      break;
    default: /* all-to-all */
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
          put_value(expected, (size_t)q * count + i, d,
                    input(d, q, (size_t)me * count + i, seed));
      break;
  }
}

/* The same call on host buffers (the host back end), for reductions: the
 * GPU result must be the same bits. */
static void compare_with_host_back_end(coll_t c, qcoll_dtype_t d, qcoll_op_t op,
                                       size_t count, int root,
                                       const void *send_host, size_t send_n,
                                       const void *gpu_result, size_t recv_n,
                                       const char *what) {
  size_t es = qcoll_dtype_size(d);
  void *hs = xmalloc(send_n * es), *hr = xmalloc(recv_n * es);
  memcpy(hs, send_host, send_n * es);
  GT_QCOLL(comm, call(c, hs, hr, count, d, op, root, NULL, NULL));
  if (c != REDUCE || gt_rank == root) {
    char label[300];
    snprintf(label, sizeof label, "%s: GPU vs host back end", what);
    compare(hr, gpu_result, recv_n, d, label);
  }
  free(hs);
  free(hr);
}

/* In per-call mode the calls of (a) take ipc, host and auto in turn (the
 * seed is the same on every rank, so all ranks ask alike). */
static const qcoll_options_t *exact_opts(uint32_t seed, qcoll_options_t *o) {
  static const qcoll_algo_t turn[] = {QCOLL_ALGO_IPC, QCOLL_ALGO_HOST,
                                      QCOLL_ALGO_AUTO};
  if (!per_call_mode) return NULL;
  *o = options_for(turn[seed % 3]);
  return o;
}

static void run_case(coll_t c, qcoll_dtype_t d, qcoll_op_t op, size_t count,
                     const placement_t *pl, int root, uint32_t seed) {
  const int me = gt_rank;
  const size_t es = qcoll_dtype_size(d);
  qcoll_options_t opts_storage;
  const qcoll_options_t *opts = exact_opts(seed, &opts_storage);
  char what[256];
  snprintf(what, sizeof what, "%s %s%s%s count=%zu %s root=%d%s%s",
           coll_names[c], qcoll_dtype_name(d), reduces(c) ? "/" : "",
           reduces(c) ? qcoll_op_name(op) : "", count, pl->name, root,
           opts ? " per-call algo=" : "",
           opts ? qcoll_algo_name(opts->algo) : "");
  size_t send_n, recv_n;
  sizes(c, count, &send_n, &recv_n);
  char *send_host = xmalloc(send_n * es);
  for (size_t j = 0; j < send_n; j++)
    put_value(send_host, j, d, input(d, me, j, seed));
  char *expected = xmalloc(recv_n * es), *got = NULL;
  const bool root_only = c == REDUCE && me != root; /* recvbuf untouched */
  const size_t mis = pl->misalign * es;

  dbuf_t sbuf = {0}, rbuf = {0};
  const void *send_ptr;
  void *recv_ptr;
  size_t recv_offset = 0; /* of the result in rbuf */
  if (pl->in_place) {
    size_t total = send_n > recv_n ? send_n : recv_n;
    rbuf = dbuf_take(1, total * es, mis);
    got = xmalloc(total * es);
    char *p = dbuf_ptr(&rbuf);
    switch (c) {
      case ALL_GATHER:
        dbuf_upload(&rbuf, (size_t)me * count * es, send_host, send_n * es);
        send_ptr = p + (size_t)me * count * es;
        recv_ptr = p;
        break;
      case REDUCE_SCATTER:
        dbuf_upload(&rbuf, 0, send_host, send_n * es);
        send_ptr = p;
        recv_ptr = p + (size_t)me * count * es;
        recv_offset = (size_t)me * count * es;
        break;
      case BROADCAST:
        if (me == root) dbuf_upload(&rbuf, 0, send_host, send_n * es);
        send_ptr = recv_ptr = p;
        break;
      default: /* all-reduce, reduce */
        dbuf_upload(&rbuf, 0, send_host, send_n * es);
        send_ptr = recv_ptr = p;
        break;
    }
    if (root_only) memcpy(expected, send_host, recv_n * es); /* unchanged */
  } else {
    sbuf = dbuf_take(0, send_n * es, mis);
    rbuf = dbuf_take(1, recv_n * es, mis);
    got = xmalloc(recv_n * es);
    dbuf_upload(&sbuf, 0, send_host, send_n * es);
    send_ptr = dbuf_ptr(&sbuf);
    recv_ptr = dbuf_ptr(&rbuf);
    /* sendbuf is read on root only: others may pass NULL. */
    if (c == BROADCAST && me != root && pl->misalign) send_ptr = NULL;
    if (root_only) memset(expected, GUARD_BYTE, recv_n * es);
  }
  if (!root_only) expected_result(c, d, op, count, root, seed, expected);

  qcoll_status_t st =
      call(c, send_ptr, recv_ptr, count, d, op, root, stream, opts);
  if (st != QCOLL_OK) {
    gt_fail("%s: returned %s: %s", what, qcoll_status_string(st),
            gt_last_error(comm));
    exit(1); /* the ranks' call sequences no longer match */
  }
  gt_wait_stream(stream, 120, what);
  check_async(what);
  dbuf_download(&rbuf, got, what);
  compare(expected, got + recv_offset, recv_n, d, what);
  if (reduces(c))
    compare_with_host_back_end(c, d, op, count, root, send_host, send_n,
                               got + recv_offset, recv_n, what);
  if (c == ALL_REDUCE || c == BROADCAST || c == ALL_GATHER)
    same_on_every_rank(got + recv_offset, recv_n * es, what);
  free(send_host);
  free(expected);
  free(got);
}

static void test_exact(void) {
  static const size_t counts[] = {0, 1, 7, 1000, (size_t)1 << 20};
  uint32_t seed = 1;
  for (int c = 0; c < COLL_COUNT; c++) {
    int cases = 0;
    unsigned before = (unsigned)gt_failures();
    for (size_t di = 0; di < NDTYPES; di++) {
      qcoll_dtype_t d = all_dtypes[di];
      int nops = reduces((coll_t)c) ? 5 : 1;
      for (int oi = 0; oi < nops; oi++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          size_t count = counts[ci];
          for (size_t pi = 0; pi < sizeof placements / sizeof placements[0];
               pi++) {
            const placement_t *pl = &placements[pi];
            if (c == ALL_TO_ALL && pl->in_place) continue;
            /* The largest count: one aligned and one unaligned placement. */
            if (count > 1000 && pi != 0 && pi != 3 &&
                !(c == ALL_TO_ALL && pi == 1))
              continue;
            int root = (int)(seed % (uint32_t)gt_nranks);
            run_case((coll_t)c, d, all_ops[oi], count, pl, root, seed++);
            cases++;
          }
        }
      }
    }
    if ((unsigned)gt_failures() == before)
      gt_note("exact %s: ok (%d cases)", coll_names[c], cases);
  }
}

/* ---- (b) graph replay
 * -------------------------------------------------------- */

#define REPLAYS 100

typedef struct graph_case {
  coll_t coll;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  bool in_place;
  size_t count;
} graph_case_t;

/* Enqueue (or capture) one collective of gc on buffers laid out as in
 * run_case; returns the device pointers the inputs go to and the result
 * comes from. */
typedef struct graph_bufs {
  char *dev;         /* one device allocation */
  char *send, *recv; /* inside dev */
  char *upload;      /* where this rank's input goes */
  char *result;      /* where its result is */
  size_t send_n, recv_n, total_bytes;
} graph_bufs_t;

static graph_bufs_t graph_bufs_make(const graph_case_t *gc) {
  graph_bufs_t b;
  size_t es = qcoll_dtype_size(gc->dtype), me = (size_t)gt_rank;
  sizes(gc->coll, gc->count, &b.send_n, &b.recv_n);
  size_t send_bytes = b.send_n * es, recv_bytes = b.recv_n * es;
  b.total_bytes = gc->in_place
                      ? (send_bytes > recv_bytes ? send_bytes : recv_bytes)
                      : send_bytes + 256 + recv_bytes;
  GT_CUDA(cudaMalloc((void **)&b.dev, b.total_bytes));
  GT_CUDA(cudaMemset(b.dev, GUARD_BYTE, b.total_bytes));
  GT_CUDA(cudaDeviceSynchronize());
  if (!gc->in_place) {
    b.send = b.upload = b.dev;
    b.recv = b.result = b.dev + send_bytes + 256;
  } else if (gc->coll == ALL_GATHER) {
    b.recv = b.result = b.dev;
    b.send = b.upload = b.dev + me * gc->count * es;
  } else if (gc->coll == REDUCE_SCATTER) {
    b.send = b.upload = b.dev;
    b.recv = b.result = b.dev + me * gc->count * es;
  } else {
    b.send = b.recv = b.upload = b.result = b.dev;
  }
  return b;
}

static void graph_replay(const graph_case_t *gc) {
  const int me = gt_rank, root = gt_nranks - 1;
  const size_t es = qcoll_dtype_size(gc->dtype);
  char what[200];
  snprintf(what, sizeof what, "graph x%d: %s %s%s%s count=%zu %s", REPLAYS,
           coll_names[gc->coll], qcoll_dtype_name(gc->dtype),
           reduces(gc->coll) ? "/" : "",
           reduces(gc->coll) ? qcoll_op_name(gc->op) : "", gc->count,
           gc->in_place ? "in-place" : "out-of-place");
  graph_bufs_t b = graph_bufs_make(gc);
  const size_t in_bytes = b.send_n * es, out_bytes = b.recv_n * es;
  char *in, *out;
  GT_CUDA(cudaHostAlloc((void **)&in, REPLAYS * in_bytes + 1, 0));
  GT_CUDA(cudaHostAlloc((void **)&out, REPLAYS * out_bytes + 1, 0));
  for (int k = 0; k < REPLAYS; k++)
    for (size_t j = 0; j < b.send_n; j++)
      put_value(in + k * in_bytes, j, gc->dtype,
                input(gc->dtype, me, j, 1000u + (uint32_t)k));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  qcoll_status_t st = call(gc->coll, b.send, b.recv, gc->count, gc->dtype,
                           gc->op, root, stream, stream_opts());
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (st != QCOLL_OK) {
    gt_fail("%s: capture refused: %s: %s", what, qcoll_status_string(st),
            gt_last_error(comm));
    exit(1);
  }
  GT_CUDA(end);
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  /* Reduce: a non-root's buffer keeps its content; remember it. */
  const bool root_only = gc->coll == REDUCE && me != root;
  char *before = xmalloc(out_bytes);
  GT_CUDA(cudaMemcpy(before, b.result, out_bytes, cudaMemcpyDeviceToHost));
  for (int k = 0; k < REPLAYS; k++) {
    GT_CUDA(cudaMemcpyAsync(b.upload, in + k * in_bytes, in_bytes,
                            cudaMemcpyHostToDevice, stream));
    GT_CUDA(cudaGraphLaunch(exec, stream));
    GT_CUDA(cudaMemcpyAsync(out + k * out_bytes, b.result, out_bytes,
                            cudaMemcpyDeviceToHost, stream));
  }
  gt_wait_stream(stream, 120, what);
  check_async(what);

  char *expected = xmalloc(out_bytes);
  size_t bad_replays = 0;
  for (int k = 0; k < REPLAYS; k++) {
    if (root_only)
      /* in place: the last input uploaded; out of place: untouched. */
      memcpy(expected, gc->in_place ? in + k * in_bytes : before, out_bytes);
    else
      expected_result(gc->coll, gc->dtype, gc->op, gc->count, root,
                      1000u + (uint32_t)k, expected);
    char label[260];
    snprintf(label, sizeof label, "%s, replay %d", what, k);
    if (compare(expected, out + k * out_bytes, b.recv_n, gc->dtype, label))
      if (++bad_replays >= 3) break;
  }
  if (!bad_replays) gt_note("%s: ok", what);
  free(expected);
  free(before);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
  GT_CUDA(cudaFreeHost(in));
  GT_CUDA(cudaFreeHost(out));
  GT_CUDA(cudaFree(b.dev));
}

/* Several different collectives in one graph, replayed with new inputs:
 * broadcast (i64) -> all_reduce (u32 max) -> all_gather (f64) -> barrier. */
static void graph_mix(void) {
  const int me = gt_rank, n = gt_nranks;
  const size_t count = 3001;
  const char *what =
      "graph x100: broadcast + all_reduce + all_gather + barrier";
  int64_t *b_dev;
  uint32_t *a_send, *a_recv;
  double *g_send, *g_recv;
  GT_CUDA(cudaMalloc((void **)&b_dev, count * 8));
  GT_CUDA(cudaMalloc((void **)&a_send, count * 4));
  GT_CUDA(cudaMalloc((void **)&a_recv, count * 4));
  GT_CUDA(cudaMalloc((void **)&g_send, count * 8));
  GT_CUDA(cudaMalloc((void **)&g_recv, (size_t)n * count * 8));
  const size_t in_bytes = count * (8 + 4 + 8),
               out_bytes = count * (8 + 4) + (size_t)n * count * 8;
  char *in, *out;
  GT_CUDA(cudaHostAlloc((void **)&in, REPLAYS * in_bytes, 0));
  GT_CUDA(cudaHostAlloc((void **)&out, REPLAYS * out_bytes, 0));
  for (int k = 0; k < REPLAYS; k++) {
    char *p = in + k * in_bytes;
    uint32_t seed = 5000u + (uint32_t)k;
    for (size_t i = 0; i < count; i++) {
      put_value(p, i, QCOLL_I64, input(QCOLL_I64, me, i, seed));
      put_value(p + count * 8, i, QCOLL_U32, input(QCOLL_U32, me, i, seed));
      put_value(p + count * 12, i, QCOLL_F64, input(QCOLL_F64, me, i, seed));
    }
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_QCOLL(comm, qcoll_broadcast_ex(b_dev, b_dev, count, QCOLL_I64, 1 % n,
                                    comm, stream, stream_opts()));
  GT_QCOLL(comm, qcoll_all_reduce_ex(a_send, a_recv, count, QCOLL_U32,
                                     QCOLL_MAX, comm, stream, stream_opts()));
  GT_QCOLL(comm, qcoll_all_gather_ex(g_send, g_recv, count, QCOLL_F64, comm,
                                     stream, stream_opts()));
  GT_QCOLL(comm, qcoll_barrier(comm, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 0; k < REPLAYS; k++) {
    char *p = in + k * in_bytes, *q = out + k * out_bytes;
    GT_CUDA(
        cudaMemcpyAsync(b_dev, p, count * 8, cudaMemcpyHostToDevice, stream));
    GT_CUDA(cudaMemcpyAsync(a_send, p + count * 8, count * 4,
                            cudaMemcpyHostToDevice, stream));
    GT_CUDA(cudaMemcpyAsync(g_send, p + count * 12, count * 8,
                            cudaMemcpyHostToDevice, stream));
    GT_CUDA(cudaGraphLaunch(exec, stream));
    GT_CUDA(
        cudaMemcpyAsync(q, b_dev, count * 8, cudaMemcpyDeviceToHost, stream));
    GT_CUDA(cudaMemcpyAsync(q + count * 8, a_recv, count * 4,
                            cudaMemcpyDeviceToHost, stream));
    GT_CUDA(cudaMemcpyAsync(q + count * 12, g_recv, (size_t)n * count * 8,
                            cudaMemcpyDeviceToHost, stream));
  }
  gt_wait_stream(stream, 120, what);
  check_async(what);
  char *e = xmalloc(out_bytes);
  size_t bad = 0;
  for (int k = 0; k < REPLAYS && bad < 3; k++) {
    uint32_t seed = 5000u + (uint32_t)k;
    char *q = out + k * out_bytes;
    char label[200];
    expected_result(BROADCAST, QCOLL_I64, QCOLL_SUM, count, 1 % n, seed, e);
    snprintf(label, sizeof label, "%s, replay %d, broadcast", what, k);
    bad += compare(e, q, count, QCOLL_I64, label) != 0;
    expected_result(ALL_REDUCE, QCOLL_U32, QCOLL_MAX, count, 0, seed, e);
    snprintf(label, sizeof label, "%s, replay %d, all_reduce", what, k);
    bad += compare(e, q + count * 8, count, QCOLL_U32, label) != 0;
    expected_result(ALL_GATHER, QCOLL_F64, QCOLL_SUM, count, 0, seed, e);
    snprintf(label, sizeof label, "%s, replay %d, all_gather", what, k);
    bad += compare(e, q + count * 12, (size_t)n * count, QCOLL_F64, label) != 0;
  }
  if (!bad) gt_note("%s: ok", what);
  free(e);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
  GT_CUDA(cudaFreeHost(in));
  GT_CUDA(cudaFreeHost(out));
  void *bufs[] = {b_dev, a_send, a_recv, g_send, g_recv};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    GT_CUDA(cudaFree(bufs[i]));
}

/* Elements of dtype that make `chunks` launches and a few more, from the
 * IPC buffer size: a graph that holds several launches of one call. */
static size_t several_chunks(coll_t c, qcoll_dtype_t d) {
  size_t region = (ipc_bytes - 64 * 1024) / 2 / 4096 * 4096;
  size_t es = qcoll_dtype_size(d);
  if (c == REDUCE_SCATTER || c == ALL_TO_ALL)
    region = region / (size_t)gt_nranks / 16 * 16;
  return 2 * (region / es) + 5;
}

static void test_graphs(void) {
  graph_case_t cases[] = {
      {ALL_REDUCE, QCOLL_I32, QCOLL_SUM, false, 4099},
      {ALL_REDUCE, QCOLL_BF16, QCOLL_AVG, true, 4099},
      {ALL_REDUCE, QCOLL_U64, QCOLL_PROD, false, 4099},
      {ALL_REDUCE, QCOLL_F64, QCOLL_MIN, true, 4099},
      {ALL_REDUCE, QCOLL_F32, QCOLL_SUM, false, 4099}, /* one-shot kernel */
      {REDUCE, QCOLL_U8, QCOLL_MAX, false, 4099},
      {REDUCE, QCOLL_F32, QCOLL_PROD, true, 4099},
      {BROADCAST, QCOLL_I64, QCOLL_SUM, false, 4099},
      {BROADCAST, QCOLL_F16, QCOLL_SUM, true, 4099},
      {ALL_GATHER, QCOLL_I8, QCOLL_SUM, false, 4099},
      {ALL_GATHER, QCOLL_F32, QCOLL_SUM, true, 4099},
      {REDUCE_SCATTER, QCOLL_F64, QCOLL_SUM, false, 4099},
      {REDUCE_SCATTER, QCOLL_I32, QCOLL_AVG, true, 4099},
      {ALL_TO_ALL, QCOLL_U32, QCOLL_SUM, false, 4099},
      {ALL_TO_ALL, QCOLL_BF16, QCOLL_SUM, false, 4099},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    graph_replay(&cases[i]);
  /* Several launches per call in one graph: only with a small IPC buffer,
   * where that stays small. */
  if (ipc_bytes <= ((size_t)4 << 20)) {
    graph_case_t big[] = {
        {ALL_REDUCE, QCOLL_I64, QCOLL_SUM, false,
         several_chunks(ALL_REDUCE, QCOLL_I64)},
        {REDUCE_SCATTER, QCOLL_U32, QCOLL_MIN, true,
         several_chunks(REDUCE_SCATTER, QCOLL_U32)},
        {ALL_TO_ALL, QCOLL_I8, QCOLL_SUM, false,
         several_chunks(ALL_TO_ALL, QCOLL_I8)},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
      graph_replay(&big[i]);
  } else {
    gt_note(
        "graphs of several launches per call: not run (QCOLL_IPC_BYTES=%zu "
        "makes one launch hold the whole message; the small_ipc test runs "
        "them)",
        ipc_bytes);
  }
  graph_mix();
}

/* ---- (c) send/recv
 * -------------------------------------------------------------- */

/* Messages [0, rounds) from every rank to rank + 1, enqueued before any is
 * checked.  mode 0: send then recv on one stream (needs messages that fit
 * the inbox); 1: sends on stream, recvs on stream2; 2: one stream, even
 * ranks send first, odd ranks receive first. */
static void ring_case(qcoll_dtype_t d, size_t count, size_t misalign, int mode,
                      int rounds, uint32_t seed) {
  const int n = gt_nranks, me = gt_rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const size_t es = qcoll_dtype_size(d), bytes = count * es;
  static const char *const modes[] = {"one stream", "two streams",
                                      "one stream, parity order"};
  char what[200];
  snprintf(what, sizeof what, "ring send/recv %s count=%zu %s%s x%d",
           qcoll_dtype_name(d), count, modes[mode], misalign ? " +1" : "",
           rounds);
  char *sdev, *rdev;
  const size_t stride = bytes + 256 + misalign * es;
  GT_CUDA(cudaMalloc((void **)&sdev, (size_t)rounds * stride + 1));
  GT_CUDA(cudaMalloc((void **)&rdev, (size_t)rounds * stride + 1));
  GT_CUDA(cudaMemset(rdev, GUARD_BYTE, (size_t)rounds * stride + 1));
  GT_CUDA(cudaDeviceSynchronize());
  char *host = xmalloc(bytes), *expected = xmalloc(bytes);
  for (int k = 0; k < rounds; k++) {
    for (size_t i = 0; i < count; i++)
      put_value(host, i, d, input(d, me, i, seed + (uint32_t)k));
    if (bytes)
      gt_upload(sdev + (size_t)k * stride + misalign * es, host, bytes);
  }
  for (int k = 0; k < rounds; k++) {
    const char *s = sdev + (size_t)k * stride + misalign * es;
    char *r = rdev + (size_t)k * stride + misalign * es;
    bool send_first = mode != 2 || me % 2 == 0;
    for (int step = 0; step < 2; step++) {
      if ((step == 0) == send_first)
        GT_QCOLL(comm,
                 qcoll_send_ex(s, count, d, next, comm, stream, stream_opts()));
      else
        GT_QCOLL(comm, qcoll_recv_ex(r, count, d, prev, comm,
                                     mode == 1 ? stream2 : stream,
                                     stream_opts()));
    }
  }
  gt_wait_stream(stream, 120, what);
  gt_wait_stream(stream2, 120, what);
  check_async(what);
  size_t bad = 0;
  for (int k = 0; k < rounds && !bad; k++) {
    for (size_t i = 0; i < count; i++)
      put_value(expected, i, d, input(d, prev, i, seed + (uint32_t)k));
    char *got = xmalloc(stride);
    GT_CUDA(cudaMemcpy(got, rdev + (size_t)k * stride, stride,
                       cudaMemcpyDeviceToHost));
    char label[260];
    snprintf(label, sizeof label, "%s, message %d from rank %d", what, k, prev);
    bad += compare(expected, got + misalign * es, count, d, label);
    for (size_t b = misalign * es + bytes; b < stride; b++)
      if ((unsigned char)got[b] != GUARD_BYTE) {
        gt_fail("%s: byte %zu after the message was overwritten", label,
                b - misalign * es - bytes);
        bad++;
        break;
      }
    free(got);
  }
  free(host);
  free(expected);
  GT_CUDA(cudaFree(sdev));
  GT_CUDA(cudaFree(rdev));
}

static void test_send_recv(void) {
  if (gt_nranks < 2) {
    gt_note("send/recv: not run with one rank");
    return;
  }
  unsigned before = (unsigned)gt_failures();
  int cases = 0;
  uint32_t seed = 77;
  static const size_t small[] = {0, 1, 7, 1000};
  for (size_t di = 0; di < NDTYPES; di++)
    for (size_t ci = 0; ci < sizeof small / sizeof small[0]; ci++)
      for (size_t mis = 0; mis < 2; mis++) {
        qcoll_dtype_t d = all_dtypes[di];
        /* "send then recv" everywhere needs every message to fit the inbox */
        if (small[ci] * qcoll_dtype_size(d) <= p2p_bytes)
          ring_case(d, small[ci], mis, 0, 3, seed++);
        ring_case(d, small[ci], mis, 1, 3, seed++);
        cases += 2;
      }
  static const qcoll_dtype_t big_dtypes[] = {QCOLL_U8, QCOLL_F16, QCOLL_I32,
                                             QCOLL_F64};
  for (size_t di = 0; di < sizeof big_dtypes / sizeof big_dtypes[0]; di++) {
    ring_case(big_dtypes[di], (size_t)1 << 20, di % 2, 1, 2, seed++);
    ring_case(big_dtypes[di], (size_t)1 << 20, 0, 2, 2, seed++);
    cases += 2;
  }
  /* Odd sizes: words of 1 byte on one side, wider on the other. */
  ring_case(QCOLL_U8, 1001, 1, 1, 2, seed++);
  ring_case(QCOLL_U8, 100003, 3, 1, 2, seed++);
  cases += 2;
  if ((unsigned)gt_failures() == before)
    gt_note("send/recv ring: ok (%d cases)", cases);

  /* Captured: send to rank + 1 and recv from rank - 1 on one stream,
   * replayed with new inputs. */
  const int n = gt_nranks, me = gt_rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const size_t count = 4099, bytes = count * 4;
  const char *what = "graph x100: ring send/recv i32 count=4099";
  if (bytes > p2p_bytes) {
    gt_note("%s: not run (QCOLL_IPC_P2P_BYTES=%zu < %zu bytes)", what,
            p2p_bytes, bytes);
    return;
  }
  int32_t *sdev, *rdev;
  char *in, *out;
  GT_CUDA(cudaMalloc((void **)&sdev, bytes));
  GT_CUDA(cudaMalloc((void **)&rdev, bytes));
  GT_CUDA(cudaHostAlloc((void **)&in, REPLAYS * bytes, 0));
  GT_CUDA(cudaHostAlloc((void **)&out, REPLAYS * bytes, 0));
  for (int k = 0; k < REPLAYS; k++)
    for (size_t i = 0; i < count; i++)
      put_value(in + k * bytes, i, QCOLL_I32,
                input(QCOLL_I32, me, i, 9000u + (uint32_t)k));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_QCOLL(comm, qcoll_send_ex(sdev, count, QCOLL_I32, next, comm, stream,
                               stream_opts()));
  GT_QCOLL(comm, qcoll_recv_ex(rdev, count, QCOLL_I32, prev, comm, stream,
                               stream_opts()));
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 0; k < REPLAYS; k++) {
    GT_CUDA(cudaMemcpyAsync(sdev, in + k * bytes, bytes, cudaMemcpyHostToDevice,
                            stream));
    GT_CUDA(cudaGraphLaunch(exec, stream));
    GT_CUDA(cudaMemcpyAsync(out + k * bytes, rdev, bytes,
                            cudaMemcpyDeviceToHost, stream));
  }
  gt_wait_stream(stream, 120, what);
  check_async(what);
  char *e = xmalloc(bytes);
  size_t bad = 0;
  for (int k = 0; k < REPLAYS && bad < 3; k++) {
    for (size_t i = 0; i < count; i++)
      put_value(e, i, QCOLL_I32,
                input(QCOLL_I32, prev, i, 9000u + (uint32_t)k));
    char label[200];
    snprintf(label, sizeof label, "%s, replay %d", what, k);
    bad += compare(e, out + k * bytes, count, QCOLL_I32, label) != 0;
  }
  if (!bad) gt_note("%s: ok", what);
  free(e);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
  GT_CUDA(cudaFreeHost(in));
  GT_CUDA(cudaFreeHost(out));
  GT_CUDA(cudaFree(sdev));
  GT_CUDA(cudaFree(rdev));
}

/* ---- (d) barrier on a stream
 * ------------------------------------------------------ */

/* Whether every rank uses the same physical GPU (so global timer stamps of
 * different ranks compare). */
static bool one_gpu_for_all(void) {
  struct cudaDeviceProp prop;
  GT_CUDA(cudaGetDeviceProperties(&prop, gt_device()));
  unsigned char *all = xmalloc((size_t)gt_nranks * 16);
  GT_QCOLL(comm,
           qcoll_all_gather(prop.uuid.bytes, all, 16, QCOLL_U8, comm, NULL));
  bool same = true;
  for (int r = 1; r < gt_nranks; r++)
    if (memcmp(all, all + (size_t)r * 16, 16)) same = false;
  free(all);
  return same;
}

/* Rank `late` holds its stream 50 ms before the barrier (enqueued with
 * `barrier`); every rank stamps its stream after it.  No rank's stamp may
 * precede the late rank's end of spin. */
static void barrier_order(int late, bool timing, cudaGraphExec_t exec,
                          const char *what) {
  unsigned long long *stamps, host[2] = {0, 0};
  GT_CUDA(cudaMalloc((void **)&stamps, 2 * sizeof *stamps));
  GT_CUDA(cudaMemset(stamps, 0, 2 * sizeof *stamps));
  GT_CUDA(cudaDeviceSynchronize());
  /* Everyone's stream is idle and every rank is here before the spin. */
  GT_QCOLL(comm, qcoll_barrier(comm, NULL));
  if (gt_rank == late) GT_CUDA(ct_spin_launch(50000000ull, &stamps[0], stream));
  if (exec)
    GT_CUDA(cudaGraphLaunch(exec, stream));
  else
    GT_QCOLL(comm, qcoll_barrier(comm, stream));
  GT_CUDA(ct_stamp_launch(&stamps[1], stream));
  gt_wait_stream(stream, 60, what);
  check_async(what);
  GT_CUDA(cudaMemcpy(host, stamps, sizeof host, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaFree(stamps));
  unsigned long long *all = xmalloc((size_t)gt_nranks * 2 * sizeof *all);
  GT_QCOLL(comm, qcoll_all_gather(host, all, 2, QCOLL_U64, comm, NULL));
  unsigned long long spin_end = all[2 * late];
  for (int r = 0; timing && r < gt_nranks; r++) {
    unsigned long long after = all[2 * r + 1];
    if (after < spin_end)
      gt_fail(
          "%s: rank %d ran work after the barrier at t=%llu ns, %.3f ms "
          "before rank %d reached the barrier (t=%llu ns)",
          what, r, after, (double)(spin_end - after) * 1e-6, late, spin_end);
  }
  free(all);
}

static void test_barrier(void) {
  bool timing = one_gpu_for_all();
  if (!timing)
    gt_note(
        "barrier: the ranks use different GPUs, whose timers do not "
        "compare: only completion is checked");
  unsigned before = (unsigned)gt_failures();
  for (int late = 0; late < gt_nranks; late++)
    barrier_order(late, timing, NULL, "barrier on a stream");
  if ((unsigned)gt_failures() == before)
    gt_note("barrier on a stream: ok (each rank late once%s)",
            timing ? ", order checked on the GPU timer" : "");

  /* Captured once, replayed: 100 replays back to back, then the order
   * check through the graph. */
  const char *what = "graph x100: barrier";
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  qcoll_status_t st = qcoll_barrier(comm, stream);
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (st != QCOLL_OK) {
    gt_fail("%s: capture refused: %s: %s", what, qcoll_status_string(st),
            gt_last_error(comm));
    exit(1);
  }
  GT_CUDA(end);
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int k = 0; k < REPLAYS; k++) GT_CUDA(cudaGraphLaunch(exec, stream));
  gt_wait_stream(stream, 60, what);
  check_async(what);
  before = (unsigned)gt_failures();
  barrier_order(gt_nranks - 1, timing, exec, what);
  if ((unsigned)gt_failures() == before) gt_note("%s: ok", what);
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
}

/* ---- (e) per-call refusals
 * ------------------------------------------------------ */

/* st must be `expected` with a message holding `part`; a refusal enqueues
 * nothing, so an all-reduce right after still gives the exact sum. */
static void expect_refused(qcoll_status_t st, qcoll_status_t expected,
                           const char *part, const char *what, int32_t *dev) {
  const char *msg = gt_last_error(comm);
  if (st != expected)
    gt_fail("%s: returned %s, expected %s (%s)", what, qcoll_status_string(st),
            qcoll_status_string(expected), msg);
  else if (!strstr(msg, part))
    gt_fail("%s: message '%s' lacks '%s'", what, msg, part);
  else
    gt_note("%s: refused as expected: %s", what, msg);
  const int32_t mine = gt_rank + 1;
  int32_t sum = 0;
  GT_CUDA(cudaMemcpy(dev, &mine, sizeof mine, cudaMemcpyHostToDevice));
  GT_QCOLL(comm, qcoll_all_reduce_ex(dev, dev, 1, QCOLL_I32, QCOLL_SUM, comm,
                                     stream, stream_opts()));
  gt_wait_stream(stream, 60, what);
  GT_CUDA(cudaMemcpy(&sum, dev, sizeof sum, cudaMemcpyDeviceToHost));
  if (sum != gt_nranks * (gt_nranks + 1) / 2)
    gt_fail("%s: the all-reduce after the refusal gave %d, expected %d", what,
            sum, gt_nranks * (gt_nranks + 1) / 2);
}

static void test_per_call_refusals(void) {
  int32_t *dev;
  GT_CUDA(cudaMalloc((void **)&dev, 64 * sizeof *dev));
  qcoll_options_t o = options_for(QCOLL_ALGO_HOST);

  /* host inside a capture: the per-call choice took effect (the table's
   * path would have been captured) and is refused before anything runs */
  cudaGraph_t graph;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  qcoll_status_t st = qcoll_all_reduce_ex(dev, dev, 16, QCOLL_F32, QCOLL_SUM,
                                          comm, stream, &o);
  GT_CUDA(cudaStreamEndCapture(stream, &graph));
  GT_CUDA(cudaGraphDestroy(graph));
  expect_refused(st, QCOLL_ERR_UNSUPPORTED, "cannot be captured",
                 "per-call host inside a capture", dev);

  o = options_for(QCOLL_ALGO_ONESHOT);
  st = qcoll_broadcast_ex(dev, dev, 16, QCOLL_F32, 0, comm, stream, &o);
  expect_refused(st, QCOLL_ERR_UNSUPPORTED, "oneshot is an all_reduce algorithm",
                 "per-call oneshot for a broadcast", dev);

  o = options_for(QCOLL_ALGO_AUTO);
  o.quant = QCOLL_QUANT_INT8;
  st = qcoll_all_gather_ex(dev, dev + 32, 4, QCOLL_F32, comm, stream, &o);
  expect_refused(st, QCOLL_ERR_UNSUPPORTED, "all_reduce only",
                 "per-call int8 for an all-gather", dev);

  /* QCOLL_NCCL_LIB points nowhere in this test's CTest entry */
  o = options_for(QCOLL_ALGO_NCCL);
  st = qcoll_reduce_scatter_ex(dev, dev + 32, 4, QCOLL_I32, QCOLL_SUM, comm,
                               stream, &o);
  expect_refused(st, QCOLL_ERR_UNSUPPORTED, "NCCL",
                 "per-call nccl without NCCL", dev);

  /* rank 0 asks for ipc, the others for host: QCOLL_CHECK catches it on
   * every rank before either path runs */
  if (getenv("QCOLL_CHECK") && atoi(getenv("QCOLL_CHECK")) == 1 &&
      gt_nranks > 1) {
    o = options_for(gt_rank == 0 ? QCOLL_ALGO_IPC : QCOLL_ALGO_HOST);
    st = qcoll_all_reduce_ex(dev, dev, 16, QCOLL_F32, QCOLL_SUM, comm, stream,
                             &o);
    expect_refused(st, QCOLL_ERR_MISMATCH,
                   gt_rank == 0 ? "algo=host" : "algo=ipc",
                   "ranks forcing different algorithms", dev);
  } else {
    gt_note("ranks forcing different algorithms: not run (needs QCOLL_CHECK=1 "
            "and two ranks)");
  }
  GT_CUDA(cudaFree(dev));
}

/* ---- failure
 * ---------------------------------------------------------------------- */

/* The last rank never sends to rank 0: rank 0's recv kernel gives up within
 * the deadline, the error names the rank and the recv, and the next call is
 * refused at once. */
static int test_failure(void) {
  const char *t = getenv("QCOLL_TIMEOUT");
  const double timeout = t ? atof(t) : 300;
  if (timeout > 20) {
    gt_fail(
        "QCOLL_TIMEOUT=%g: the failure test needs a short deadline (its "
        "CTest entry sets 3)",
        timeout);
    return 1;
  }
  const int missing = gt_nranks - 1;
  int32_t *buf;
  GT_CUDA(cudaMalloc((void **)&buf, 4096 * sizeof *buf));
  /* One good exchange first: what fails below is not an init problem. */
  GT_QCOLL(comm, qcoll_broadcast(buf, buf, 4096, QCOLL_I32, 0, comm, stream));
  gt_wait_stream(stream, timeout + 30, "the first broadcast");
  check_async("the first broadcast");
  if (gt_rank == 0) {
    double t0 = gt_now();
    GT_QCOLL(comm, qcoll_recv(buf, 4096, QCOLL_I32, missing, comm, stream));
    gt_wait_stream(stream, timeout + 30, "the recv from the missing rank");
    double waited = gt_now() - t0;
    qcoll_status_t async = QCOLL_OK;
    GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
    const char *msg = gt_last_error(comm);
    char who[32];
    snprintf(who, sizeof who, "rank %d", missing);
    if (async != QCOLL_ERR_TIMEOUT)
      gt_fail("async error is %s, expected a timeout: %s",
              qcoll_status_string(async), msg);
    else if (!strstr(msg, who) || !strstr(msg, "recv"))
      gt_fail("the timeout message should name %s and the recv: \"%s\"", who,
              msg);
    else
      gt_note("the recv gave up after %.1f s (deadline %.1f s): %s", waited,
              timeout, msg);
    if (waited > timeout + 5)
      gt_fail("the recv gave up after %.1f s, the deadline is %.1f s", waited,
              timeout);
    qcoll_status_t st = qcoll_send(buf, 16, QCOLL_I32, 1, comm, stream);
    if (st == QCOLL_OK)
      gt_fail("a send after the failure was accepted");
    else
      gt_note("the next send is refused: %s: %s", qcoll_status_string(st),
              gt_last_error(comm));
  } else {
    gt_note("not sending to rank 0 (%.0f s)", timeout + 2);
    usleep((useconds_t)((timeout + 2) * 1e6));
  }
  double t2 = gt_now();
  qcoll_status_t st = qcoll_comm_destroy(comm);
  gt_note("qcoll_comm_destroy returned %s after %.1f s",
          qcoll_status_string(st), gt_now() - t2);
  GT_CUDA(cudaFree(buf));
  return gt_failures() ? 1 : 0;
}

int main(int argc, char **argv) {
  gt_skip_without_gpu("gpu_collectives");
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GT_CUDA(cudaStreamCreateWithFlags(&stream2, cudaStreamNonBlocking));
  if (gt_nranks > QCOLL_IPC_MAX_RANKS_TEST) {
    gt_fail("this test runs up to %d ranks", QCOLL_IPC_MAX_RANKS_TEST);
    return 1;
  }
  if (argc > 1 && !strcmp(argv[1], "failure")) return test_failure();
  per_call_mode = argc > 1 && !strcmp(argv[1], "per-call");
  if (argc > 1 && !per_call_mode) {
    gt_fail("unknown argument '%s' (failure, per-call, or none)", argv[1]);
    return 2;
  }

  ipc_bytes = gt_env_bytes("QCOLL_IPC_BYTES", (size_t)64 << 20);
  p2p_bytes = gt_env_bytes("QCOLL_IPC_P2P_BYTES", (size_t)1 << 20);
  gt_note("device %d, QCOLL_IPC_BYTES %zu, QCOLL_IPC_P2P_BYTES %zu",
          gt_device(), ipc_bytes, p2p_bytes);
  pool_bytes = (size_t)gt_nranks * ((size_t)1 << 20) * 8 + 2 * GUARD + 64;
  GT_CUDA(cudaMalloc((void **)&pool[0], pool_bytes));
  GT_CUDA(cudaMalloc((void **)&pool[1], pool_bytes));

  double t0 = gt_now();
  test_exact();
  gt_note("(a) exact results: %.1f s", gt_now() - t0);
  t0 = gt_now();
  test_graphs();
  gt_note("(b) graphs: %.1f s", gt_now() - t0);
  t0 = gt_now();
  test_send_recv();
  gt_note("(c) send/recv: %.1f s", gt_now() - t0);
  t0 = gt_now();
  test_barrier();
  gt_note("(d) barrier: %.1f s", gt_now() - t0);
  if (per_call_mode) {
    t0 = gt_now();
    test_per_call_refusals();
    gt_note("(e) per-call refusals: %.1f s", gt_now() - t0);
  }

  check_async("the end of the run");
  GT_CUDA(cudaFree(pool[0]));
  GT_CUDA(cudaFree(pool[1]));
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  gt_note(gt_failures() ? "FAILED" : "all passed");
  return gt_failures() ? 1 : 0;
}
