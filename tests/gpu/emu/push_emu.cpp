/*
 * The push one-shot all-reduce (src/coll/cuda/allreduce_push.cu) on the
 * CPU: the real kernel and launcher, ipc_sync.cuh's waits and deadlines
 * (prepare.cmake swaps its PTX for C++ atomics), every rank a stream,
 * every block an OS thread, every CUDA thread a coroutine.
 *
 * Checked on every rank, bit for bit, against fp32 in rank order rounded
 * once (NaN: the canonical NaN of the type), with nothing written outside
 * the output, and with every slot of both buffers back to the sentinel
 * after each call:
 *  - f16/bf16/f32 x sum/min/max, counts from 1 value to several chunks,
 *    grid limits 1 and 4, packs per block of one per thread, 32 and 3
 *    (a message spread over more blocks), in place and out of place,
 *    unaligned pointers; on a grid of 1 or 4 blocks of 64 threads the
 *    larger counts give a thread several packs, so 2-4 ranks run the
 *    kernel's wide shapes (several packs per round) and 5-8 the narrow;
 *  - signed zeros (all negative: -0; mixed: +0), infinities, and NaNs of
 *    every sign and payload, the sentinel's own bit pattern included;
 *  - rotation: hundreds of calls enqueued back to back with new inputs,
 *    sizes and grids changing from call to call, checked afterwards;
 *  - world sizes 2-8, and many ranks on one grid limit of 1 (ranks
 *    sharing one GPU get the smallest grids);
 *  - a rank that never arrives: the others give up within the deadline,
 *    naming the missing rank and the push phase.
 * What it cannot see: the GPU's memory model, timing and occupancy.
 *
 *   push_emu [N...]     world sizes (default 2 3 4 5 8)
 */
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "emu_status.h"

#ifdef QCOLL_EMU_SKIP
int main() {
  printf("SKIP: %s\n", QCOLL_EMU_SKIP);
  return 77;
}
#else

#include "base/dtype.h"
#include "push_launch.h"
#include "push_values.h"

static const unsigned EMU_THREADS =
    64; /* kThreads of the prepared ipc_sync.cuh */
#include "emu_runtime.inc"

cudaError_t emu_launch(const void *fn, dim3 grid, void **args, int nargs,
                       cudaStream_t s) {
  if (nargs != 4) {
    fprintf(stderr, "emu_launch: %d args\n", nargs);
    abort();
  }
  auto f = (void (*)(qcoll__push_view_t, const void *, void *, size_t))fn;
  qcoll__push_view_t v = *(qcoll__push_view_t *)args[0];
  const void *send = *(const void **)args[1];
  void *recv = *(void **)args[2];
  size_t count = *(size_t *)args[3];
  unsigned g = grid.x;
  s->push([=] { run_grid([=] { f(v, send, recv, count); }, g); });
  return cudaSuccess;
}

/* Small slots: messages of a few thousand values take several launches. */
static const size_t SLOT_BYTES = 8192;
static const size_t GUARD = 64; /* elements around every output */

struct World {
  int n;
  size_t area_offset, alloc;
  std::vector<char *> bufs;
  std::vector<unsigned long long *> words;
  std::vector<qcoll__push_view_t> views;
  std::vector<emu_stream *> streams;
  World(int n_) : n(n_) {
    area_offset = qcoll__push_area_offset(QCOLL_IPC_HEADER_BYTES);
    alloc = area_offset + qcoll__push_area_bytes(n, SLOT_BYTES);
    for (int r = 0; r < n; r++) {
      char *b = (char *)aligned_alloc(4096, alloc);
      memset(b, 0, area_offset + QCOLL_PUSH_CONTROL_BYTES);
      memset(b + area_offset + QCOLL_PUSH_CONTROL_BYTES,
             QCOLL_PUSH_SENTINEL_BYTE,
             alloc - area_offset - QCOLL_PUSH_CONTROL_BYTES);
      bufs.push_back(b);
      words.push_back((unsigned long long *)calloc(2, 8));
      streams.push_back(new emu_stream);
    }
    for (int r = 0; r < n; r++) {
      qcoll__push_view_t v;
      memset(&v, 0, sizeof v);
      v.ipc =
          emu_view(bufs, words[r],
                   QCOLL_IPC_HEADER_BYTES + 4 * QCOLL_IPC_REGION_ALIGN, r, 4);
      v.area_offset = area_offset;
      v.slot_bytes = SLOT_BYTES;
      v.ipc.pdl = 1;
      views.push_back(v);
    }
  }
  ~World() {
    for (auto s : streams) delete s;
    for (auto b : bufs) free(b);
    for (auto w : words) free(w);
  }
  void sync() {
    for (auto s : streams) s->sync();
  }
  /* Every slot word of every rank holds the sentinel again. */
  bool all_empty(const char *what) {
    for (int r = 0; r < n; r++) {
      const uint32_t *w =
          (const uint32_t *)(bufs[r] + area_offset + QCOLL_PUSH_CONTROL_BYTES);
      size_t words_n = (alloc - area_offset - QCOLL_PUSH_CONTROL_BYTES) / 4;
      for (size_t i = 0; i < words_n; i++)
        if (w[i] != QCOLL_PUSH_SENTINEL) {
          FAIL("%s: rank %d push word %zu is 0x%08x after the call", what, r, i,
               w[i]);
          return false;
        }
    }
    return true;
  }
  bool no_errors(const char *what) {
    bool ok = true;
    for (int r = 0; r < n; r++)
      if (words[r][0]) {
        FAIL("%s: rank %d error word 0x%016llx", what, r, words[r][0]);
        ok = false;
      }
    return ok;
  }
};

/* ---- element bits ----------------------------------------------------- */

static size_t esize(qcoll_dtype_t d) {
  return d == QCOLL_F32 ? 4 : 2;
}
static const char *dtype_name(qcoll_dtype_t d) {
  return d == QCOLL_F32 ? "f32" : d == QCOLL_F16 ? "f16" : "bf16";
}
static const char *op_name(qcoll_op_t op) {
  return op == QCOLL_SUM ? "sum" : op == QCOLL_MIN ? "min" : "max";
}
/* The bits the kernel stores for the fp32 result y (NaN canonical). */
static uint32_t result_bits(float y, qcoll_dtype_t d) {
  if (std::isnan(y))
    return d == QCOLL_F32 ? 0x7fc00000u : d == QCOLL_F16 ? 0x7e00u : 0x7fc0u;
  if (d == QCOLL_F32) return qcoll__f32_to_bits(y);
  return d == QCOLL_F16 ? qcoll__f32_to_f16(y) : qcoll__f32_to_bf16(y);
}
static void put_bits(char *p, qcoll_dtype_t d, size_t i, uint32_t bits) {
  if (d == QCOLL_F32) {
    memcpy(p + 4 * i, &bits, 4);
  } else {
    uint16_t h = (uint16_t)bits;
    memcpy(p + 2 * i, &h, 2);
  }
}
static uint32_t get_bits(const char *p, qcoll_dtype_t d, size_t i) {
  if (d == QCOLL_F32) {
    uint32_t u;
    memcpy(&u, p + 4 * i, 4);
    return u;
  }
  uint16_t h;
  memcpy(&h, p + 2 * i, 2);
  return h;
}
/* ---- one batch of calls ------------------------------------------------- */

struct Call {
  qcoll_dtype_t d;
  qcoll_op_t op;
  size_t count;
  int grid_limit;
  bool in_place, specials;
  size_t mis_send, mis_recv;
  uint32_t seed;
  int block_packs; /* the view's (0: one pack per thread) */
};

struct Buffers {
  std::vector<std::vector<char> > send, recv;
};

static void describe(const World &w, const Call &c, char *what, size_t len) {
  snprintf(what, len, "N=%d %s %s count=%zu grid<=%d packs/block %d %s%s +%zu/+%zu",
           w.n, dtype_name(c.d), op_name(c.op), c.count, c.grid_limit, c.block_packs,
           c.in_place ? "in-place" : "out-of-place",
           c.specials ? " specials" : "", c.mis_send, c.mis_recv);
}

static void prepare(const World &w, const Call &c, Buffers &b) {
  const size_t es = esize(c.d), bytes = (c.count + 2 * GUARD + 4) * es;
  b.send.assign(w.n, std::vector<char>(bytes, (char)0x5a));
  b.recv.assign(w.n, c.in_place ? std::vector<char>()
                                : std::vector<char>(bytes, (char)0x5a));
  for (int r = 0; r < w.n; r++)
    for (size_t i = 0; i < c.count; i++)
      put_bits(b.send[r].data() + (GUARD + c.mis_send) * es, c.d, i,
               push_input_bits(r, i, c.d, c.seed, c.specials));
}

/* Enqueue the call on every rank, chunk by chunk as the transport does. */
static void enqueue(World &w, const Call &c, Buffers &b) {
  const size_t es = esize(c.d);
  const size_t lr = c.in_place ? GUARD + c.mis_send : GUARD + c.mis_recv;
  for (int r = 0; r < w.n; r++) {
    w.views[r].ipc.max_grid = c.grid_limit;
    w.views[r].block_packs = c.block_packs;
  }
  const size_t chunk = qcoll__cuda_push_chunk_elems(&w.views[0], c.d);
  for (size_t off = 0; off < c.count; off += chunk)
    for (int r = 0; r < w.n; r++) {
      char *s = b.send[r].data() + (GUARD + c.mis_send + off) * es;
      char *o =
          (c.in_place ? b.send[r].data() : b.recv[r].data()) + (lr + off) * es;
      size_t n = c.count - off < chunk ? c.count - off : chunk;
      if (qcoll__cuda_push_launch(&w.views[r], s, o, n, c.d, c.op,
                                  w.streams[r]) != cudaSuccess)
        FAIL("launch refused (rank %d, %zu elements)", r, n);
    }
}

/* The element's expected bits.  Sums of signed zeros, infinities and NaNs
 * are defined exactly by IEEE arithmetic; fminf/fmaxf leave the sign of a
 * zero result to the implementation, so min/max with specials are
 * checked against rank 0's result (bitwise identical on every rank) and
 * rank 0's against the reference where no zero is involved. */
static uint32_t expected_bits(const World &w, const Call &c, size_t i, int r,
                              const Buffers &b, size_t lr) {
  float acc = push_reference(w.n, i, c.d, c.op, c.seed, c.specials);
  if (c.op == QCOLL_SUM || !c.specials) return result_bits(acc, c.d);
  const char *out0 = c.in_place ? b.send[0].data() : b.recv[0].data();
  const uint32_t first = get_bits(out0 + lr * esize(c.d), c.d, i);
  if (r != 0 || acc == 0.0f) return first;
  return result_bits(acc, c.d);
}

static void check(const World &w, const Call &c, const Buffers &b) {
  char what[200];
  describe(w, c, what, sizeof what);
  const size_t es = esize(c.d);
  const size_t lr = c.in_place ? GUARD + c.mis_send : GUARD + c.mis_recv;
  const size_t bytes = (c.count + 2 * GUARD + 4) * es;
  for (int r = 0; r < w.n; r++) {
    const char *out = c.in_place ? b.send[r].data() : b.recv[r].data();
    size_t wrong = 0;
    for (size_t i = 0; i < c.count; i++) {
      uint32_t want = expected_bits(w, c, i, r, b, lr),
               got = get_bits(out + lr * es, c.d, i);
      if (want != got && wrong++ < 3)
        FAIL("%s rank %d: element %zu is 0x%x, expected 0x%x", what, r, i, got,
             want);
    }
    if (wrong > 3) FAIL("%s rank %d: %zu elements differ", what, r, wrong);
    for (size_t k = 0; k < bytes; k++)
      if ((k < lr * es || k >= (lr + c.count) * es) && out[k] != (char)0x5a) {
        FAIL("%s rank %d: byte %zd outside the output changed", what, r,
             (ptrdiff_t)k - (ptrdiff_t)(lr * es));
        break;
      }
  }
}

static void run_one(World &w, const Call &c) {
  char what[200];
  describe(w, c, what, sizeof what);
  Buffers b;
  prepare(w, c, b);
  enqueue(w, c, b);
  w.sync();
  if (!w.no_errors(what)) return;
  check(w, c, b);
  w.all_empty(what);
}

static void test_values(World &w) {
  const int before = failures;
  int cases = 0;
  uint32_t seed = 7;
  static const qcoll_dtype_t dts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  for (qcoll_dtype_t d : dts) {
    const size_t chunk = qcoll__cuda_push_chunk_elems(&w.views[0], d);
    const size_t counts[] = {1,    7,         8 * (size_t)w.n + 3,
                             1000, chunk + 5, 2 * chunk + 11};
    for (qcoll_op_t op : ops)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        Call c = {d,      op,    counts[k],   k % 2 ? 1 : 4, k % 3 == 1,
                  k != 2, k % 4, (k + 1) % 3, seed++};
        c.block_packs = (int)(k + (size_t)op) % 3 == 0 ? 0 : (k % 2 ? 32 : 3);
        run_one(w, c);
        cases++;
      }
  }
  printf("N=%d: %d value cases (signed zeros, infinities, NaNs) %s\n", w.n,
         cases, failures == before ? "ok" : "FAILED");
}

/* Many calls enqueued back to back on every rank before any is checked:
 * the buffers rotate under load, with sizes and grids changing. */
static void test_rotation(World &w, int calls) {
  const int before = failures;
  std::vector<Call> cs;
  std::vector<Buffers> bs(calls);
  for (int k = 0; k < calls; k++) {
    Call c = {k % 3 == 0   ? QCOLL_BF16
              : k % 3 == 1 ? QCOLL_F32
                           : QCOLL_F16,
              k % 5 == 4 ? QCOLL_MAX : QCOLL_SUM,
              (size_t)(1 + (k * 37) % 700),
              k % 4 == 0 ? 1 : 3,
              k % 2 == 0,
              k % 3 == 0,
              (size_t)(k % 2),
              (size_t)(k % 3),
              1000u + (uint32_t)k};
    c.block_packs = k % 3 == 1 ? 5 : 0;
    cs.push_back(c);
    prepare(w, c, bs[k]);
  }
  for (int k = 0; k < calls; k++) enqueue(w, cs[k], bs[k]);
  w.sync();
  if (w.no_errors("rotation")) {
    for (int k = 0; k < calls; k++) check(w, cs[k], bs[k]);
    w.all_empty("rotation");
  }
  printf("N=%d: %d calls back to back %s\n", w.n, calls,
         failures == before ? "ok" : "FAILED");
}

/* The last rank never launches: the others give up within the deadline. */
static void test_missing_peer(World &w) {
  const int before = failures;
  const double timeout = 0.5;
  for (auto &v : w.views) {
    v.ipc.timeout_ns = (unsigned long long)(timeout * 1e9);
    v.ipc.max_grid = 2;
  }
  const size_t count = 3000;
  std::vector<std::vector<float> > buf(w.n, std::vector<float>(count, 1.0f));
  auto t0 = std::chrono::steady_clock::now();
  const size_t chunk = qcoll__cuda_push_chunk_elems(&w.views[0], QCOLL_F32);
  for (size_t off = 0; off < count; off += chunk)
    for (int r = 0; r + 1 < w.n; r++)
      qcoll__cuda_push_launch(&w.views[r], buf[r].data() + off,
                              buf[r].data() + off,
                              count - off < chunk ? count - off : chunk,
                              QCOLL_F32, QCOLL_SUM, w.streams[r]);
  w.sync();
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  int timeouts = 0;
  for (int r = 0; r + 1 < w.n; r++) {
    unsigned long long e = w.words[r][0];
    unsigned kind = qcoll__ipc_err_kind(e);
    if (kind == QCOLL_IPC_ERR_TIMEOUT) {
      timeouts++;
      if (qcoll__ipc_err_peer(e) != w.n - 1)
        FAIL("missing peer: rank %d timed out on rank %d", r,
             qcoll__ipc_err_peer(e));
      if (qcoll__ipc_err_phase(e) != QCOLL_IPC_PHASE_PUSH)
        FAIL("missing peer: rank %d reports phase %d", r,
             qcoll__ipc_err_phase(e));
    } else if (kind != QCOLL_IPC_ERR_PEER_ABORTED) {
      FAIL("missing peer: rank %d's error word is 0x%016llx", r, e);
    }
  }
  if (timeouts == 0) FAIL("missing peer: no rank reported a timeout");
  if (took > 5 * timeout)
    FAIL("missing peer: the ranks took %.2f s, deadline %.2f s", took, timeout);
  printf(
      "N=%d: missing peer: %d rank(s) timed out after %.2f s (deadline "
      "%.2f s) %s\n",
      w.n, timeouts, took, timeout, failures == before ? "ok" : "FAILED");
}

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<int> sizes;
  for (int i = 1; i < argc; i++) sizes.push_back(atoi(argv[i]));
  if (sizes.empty()) sizes = {2, 3, 4, 5, 8};
  for (int n : sizes) {
    if (n < 1 || n > QCOLL_IPC_MAX_RANKS) {
      FAIL("world size %d is outside 1..%d", n, QCOLL_IPC_MAX_RANKS);
      continue;
    }
    {
      World w(n);
      test_values(w);
      test_rotation(w, n <= 4 ? 300 : 120);
    }
    if (n > 1) {
      World w(n);
      test_missing_peer(w);
    }
  }
  printf("%s (%d failure(s))\n", failures ? "FAILED" : "all passed", failures);
  return failures ? 1 : 0;
}
#endif
