/*
 * The all-reduce kernels of src/coll/cuda (allreduce.cu: one-shot and
 * two-shot; allreduce_quant.cu: quantised two-shot) run on the CPU, so that
 * machines without a GPU (CI) test their layouts, chunking, warp code and
 * synchronisation protocol.  The kernels, codec.h's warp encode/decode and
 * ipc_sync.cuh are the real code (prepare.cmake swaps the PTX memory-model
 * primitives for C++ atomics and makes a block one warp; emu_shim.h gives
 * the warp exchanges); every rank is a stream (a worker thread), every
 * block an OS thread, every CUDA thread a coroutine of it.
 *
 * Checked on every rank, bit for bit, nothing written outside the output,
 * in place and out of place, counts from 1 value to several chunks, grid
 * limits 1 and 4:
 *  - one-shot and two-shot, f16/bf16/f32 x sum/min/max, unaligned
 *    pointers, against fp32 accumulation in rank order rounded once;
 *  - quantised, every format x f16/bf16/f32, against the CPU model of the
 *    scheme (tests/codec/ref_scheme.c) rounded once to the element type,
 *    with zero groups, outliers and a group holding inf (NaN policy);
 *    the same over rotated groups against the rotated CPU model;
 *  - one-shot, two-shot and quantised all-reduces alternating on one
 *    world (epochs and flags carry over from one kind to the next);
 *  - registered buffers (one-shot and two-shot, in and out of place):
 *    every rank, one rank, inputs only, outputs only, a rank whose own
 *    registration went stale (it stages, the others read in place), and
 *    peers that lack a rank's registration (reported, not guessed);
 *  - the grids of long launches (launch.h QCOLL_IPC_LONG_*_BYTES): the
 *    larger limit for a two-shot above 16 MiB and for every quantised
 *    format above 4 MiB, the ordinary one otherwise; the rounds of long
 *    quantised launches (44 MiB of message for INT4, 40 for INT6, 32 for
 *    INT3 on the larger grid, what the regions hold otherwise,
 *    QCOLL_QUANT_ROUND_BYTES where it is set);
 *  - a rank that never arrives: the others give up within the deadline
 *    once (not once per enqueued chunk), the first to time out naming the
 *    missing rank and the flag value it waited for.
 * What it cannot see: the GPU's memory model, timing and occupancy.
 *
 *   allreduce_emu [N...]     world sizes (default 2 3 4)
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
#include "launch.h"
#include "ref_scheme.h"

static const unsigned EMU_THREADS = 64; /* kThreads of the prepared ipc_sync.cuh */
#include "emu_runtime.inc"

cudaError_t emu_launch(const void *fn, dim3 grid, void **args, int nargs,
                       cudaStream_t s) {
  if (nargs != 2 && nargs != 8) {
    fprintf(stderr, "emu_launch: %d args\n", nargs);
    abort();
  }
  qcoll__ipc_view_t v = *(qcoll__ipc_view_t *)args[0];
  unsigned g = grid.x;
  if (nargs == 2) { /* one-shot, two-shot: the view and their arguments */
    auto f = (void (*)(qcoll__ipc_view_t, qcoll__ipc_ar_args_t))fn;
    qcoll__ipc_ar_args_t a = *(qcoll__ipc_ar_args_t *)args[1];
    s->push([=] { run_grid([=] { f(v, a); }, g); });
    return cudaSuccess;
  }
  const void *send = *(const void **)args[1];
  void *recv = *(void **)args[2];
  size_t count = *(size_t *)args[3];
  /* the quantised kernel: its chunk, area and ring, then its rotation
   * flag */
  size_t chunk = *(size_t *)args[4], area = *(size_t *)args[5];
  auto f = (void (*)(qcoll__ipc_view_t, const void *, void *, size_t, size_t,
                     size_t, int, int))fn;
  int ring = *(int *)args[6], rot = *(int *)args[7];
  s->push([=] {
    run_grid([=] { f(v, send, recv, count, chunk, area, ring, rot); }, g);
  });
  return cudaSuccess;
}

extern "C" size_t qcoll_dtype_size(qcoll_dtype_t d) {
  /* f16, bf16, f32: the dtypes of the all-reduce kernels */
  return d == QCOLL_F32 ? 4 : 2;
}
extern "C" const char *qcoll_quant_name(qcoll_quant_t q) {
  static const char *names[] = {"default", "none", "fp8", "int8",
                                 "int6",    "int4", "int3"};
  return (unsigned)q < QCOLL_QUANT_COUNT ? names[q] : "?";
}

/* Small buffers: a chunk is a few thousand values, so messages of tens of
 * thousands take several launches. */
static const size_t IPC_BYTES = QCOLL_IPC_HEADER_BYTES + 2 * 16384;
static const size_t GUARD = 64; /* elements around every output */

/* Every rank's buffer: the IPC buffer, then the descriptor area. */
static const size_t ALLOC_BYTES = IPC_BYTES + QCOLL_IPC_DESC_BYTES;

struct World {
  int n;
  std::vector<char *> bufs;
  std::vector<unsigned long long *> words;
  std::vector<qcoll__ipc_view_t> views;
  std::vector<emu_stream *> streams;
  /* Every rank's registry table (its "device" memory). */
  std::vector<std::vector<qcoll__ipc_reg_entry_t> > tables;
  World(int n_) : n(n_) {
    for (int r = 0; r < n; r++) {
      char *b = (char *)aligned_alloc(4096, ALLOC_BYTES);
      memset(b + IPC_BYTES, 0, QCOLL_IPC_DESC_BYTES);
      memset(b, 0, QCOLL_IPC_HEADER_BYTES);
      memset(b + QCOLL_IPC_HEADER_BYTES, 0x77,
             IPC_BYTES - QCOLL_IPC_HEADER_BYTES);
      bufs.push_back(b);
      words.push_back((unsigned long long *)calloc(2, 8));
      streams.push_back(new emu_stream);
    }
    tables.assign(n, std::vector<qcoll__ipc_reg_entry_t>(
                         (size_t)QCOLL_IPC_MAX_RANKS * QCOLL_IPC_REG_SLOTS));
    for (int r = 0; r < n; r++) {
      views.push_back(emu_view(bufs, words[r], IPC_BYTES, r, 4));
      views[r].reg_table = tables[r].data();
      views[r].desc_offset = IPC_BYTES;
    }
  }
  qcoll__ipc_reg_entry_t &entry(int owner_of_table, int row, uint32_t slot) {
    return tables[owner_of_table][(size_t)row * QCOLL_IPC_REG_SLOTS + slot];
  }
  ~World() {
    for (auto s : streams) delete s;
    for (auto b : bufs) free(b);
    for (auto w : words) free(w);
  }
  void sync() {
    for (auto s : streams) s->sync();
  }
  void reset() {
    sync();
    for (int r = 0; r < n; r++) {
      memset(bufs[r], 0, QCOLL_IPC_HEADER_BYTES);
      words[r][0] = words[r][1] = 0;
    }
  }
};

/* ---- element types --------------------------------------------------- */

static float load(const char *p, qcoll_dtype_t d, size_t i) {
  uint16_t h;
  switch (d) {
    case QCOLL_F32: {
      float f;
      memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case QCOLL_F16: memcpy(&h, p + 2 * i, 2); return qcoll__f16_to_f32(h);
    default: memcpy(&h, p + 2 * i, 2); return qcoll__bf16_to_f32(h);
  }
}
/* The bits the kernel stores for the f32 result y (NaN canonical). */
static uint32_t result_bits(float y, qcoll_dtype_t d) {
  if (std::isnan(y))
    return d == QCOLL_F32 ? 0x7fc00000u : d == QCOLL_F16 ? 0x7e00u : 0x7fc0u;
  if (d == QCOLL_F32) return qcoll__f32_to_bits(y);
  return d == QCOLL_F16 ? qcoll__f32_to_f16(y) : qcoll__f32_to_bf16(y);
}
static void store(char *p, qcoll_dtype_t d, size_t i, float x) {
  uint32_t bits = result_bits(x, d);
  if (d == QCOLL_F32)
    memcpy(p + 4 * i, &bits, 4);
  else {
    uint16_t h = (uint16_t)bits;
    memcpy(p + 2 * i, &h, 2);
  }
}
static uint32_t bits_at(const char *p, qcoll_dtype_t d, size_t i) {
  if (d == QCOLL_F32) {
    uint32_t u;
    memcpy(&u, p + 4 * i, 4);
    return u;
  }
  uint16_t h;
  memcpy(&h, p + 2 * i, 2);
  return h;
}
static const char *dtype_name(qcoll_dtype_t d) {
  return d == QCOLL_F32 ? "f32" : d == QCOLL_F16 ? "f16" : "bf16";
}

/* Rank r's inputs: mixed magnitudes per group, a zero group, an outlier in
 * a group, and (specials) one group holding inf. */
static std::vector<float> inputs(int r, size_t count, qcoll_dtype_t d,
                                 uint32_t seed, bool specials) {
  std::mt19937 rng(seed * 131u + (uint32_t)r);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(count);
  std::vector<char> tmp(4);
  for (size_t i = 0; i < count; i++) {
    size_t g = i / 32;
    float scale = std::ldexp(1.0f, (int)(g % 9) - 4);
    float v = g % 11 == 5 ? 0.0f : u(rng) * scale;
    if (i % 97 == 13) v *= 300.0f; /* an outlier in its group */
    if (specials && g == 2 && i % 32 == 7 && r == 0) v = INFINITY;
    store(tmp.data(), d, 0, v); /* representable in d */
    x[i] = load(tmp.data(), d, 0);
  }
  return x;
}

/* Rank r's output: count elements at `lead` elements into out, each with
 * the bits want(i); every other byte of the bytes must still be 0x5a. */
static void check_output(const char *what, int r, const char *out, size_t lead,
                         size_t count, size_t bytes, qcoll_dtype_t d,
                         const std::function<uint32_t(size_t)> &want) {
  const size_t es = qcoll_dtype_size(d);
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t expected = want(i), got = bits_at(out + lead * es, d, i);
    if (expected != got && wrong++ < 3)
      FAIL("%s rank %d: element %zu is 0x%x, expected 0x%x", what, r, i, got,
           expected);
  }
  if (wrong > 3) FAIL("%s rank %d: %zu elements differ", what, r, wrong);
  for (size_t b = 0; b < bytes; b++)
    if ((b < lead * es || b >= (lead + count) * es) && out[b] != (char)0x5a) {
      FAIL("%s rank %d: byte %zd outside the output changed", what, r,
           (ptrdiff_t)b - (ptrdiff_t)(lead * es));
      break;
    }
}

/* ---- one all-reduce case -------------------------------------------- */

/* mis_send, mis_recv: elements by which the input and output start past
 * the guard, so that the user pointers are not 16-byte aligned. */
static void run_case(World &w, qcoll_quant_t fmt, qcoll_dtype_t d, size_t count,
                     int grid_limit, bool in_place, bool specials,
                     uint32_t seed, size_t mis_send, size_t mis_recv,
                     bool rot = false, int pipeline = 1) {
  const size_t ls = GUARD + mis_send, lr = in_place ? ls : GUARD + mis_recv;
  char what[200];
  snprintf(what, sizeof what,
           "N=%d %s%s %s count=%zu grid<=%d %s%s, pointers +%zu/+%zu%s", w.n,
           qcoll_quant_name(fmt), rot ? "+rot" : "", dtype_name(d), count,
           grid_limit,
           in_place ? "in-place" : "out-of-place", specials ? " +inf" : "",
           mis_send, mis_recv,
           pipeline == 0   ? ", rounds unpipelined"
           : pipeline == 2 ? ", rounds pipelined"
                           : "");
  const size_t es = qcoll_dtype_size(d);
  const size_t bytes = (count + 2 * GUARD + 4) * es;
  std::vector<std::vector<float> > in(w.n);
  std::vector<const float *> in_ptr(w.n);
  std::vector<std::vector<char> > send(w.n), recv(w.n);
  for (int r = 0; r < w.n; r++) {
    in[r] = inputs(r, count, d, seed, specials);
    in_ptr[r] = in[r].data();
    send[r].assign(bytes, (char)0x5a);
    for (size_t i = 0; i < count; i++)
      store(send[r].data() + ls * es, d, i, in[r][i]);
    recv[r] =
        in_place ? std::vector<char>() : std::vector<char>(bytes, (char)0x5a);
  }
  for (int r = 0; r < w.n; r++) {
    w.views[r].max_grid = grid_limit;
    w.views[r].quant_pipeline = pipeline;
  }
  /* One launch per rank, as the transport makes it: the kernel streams a
   * message of several chunks through the regions itself. */
  for (int r = 0; r < w.n; r++) {
    char *s = send[r].data() + ls * es;
    char *o = (in_place ? send[r].data() : recv[r].data()) + lr * es;
    cudaError_t err = qcoll__cuda_all_reduce_quant_launch(
        &w.views[r], s, o, count, d, fmt, rot ? 1 : 0, w.streams[r]);
    if (err != cudaSuccess) FAIL("%s: launch refused (%d)", what, err);
  }
  w.sync();
  for (int r = 0; r < w.n; r++)
    if (w.words[r][0])
      FAIL("%s: rank %d error word 0x%016llx", what, r, w.words[r][0]);
  std::vector<float> expected(count);
  if (count &&
      (rot ? ref_scheme_qcoll_rot(fmt, w.n, count, in_ptr.data(),
                                  expected.data())
           : ref_scheme_qcoll(fmt, w.n, count, in_ptr.data(),
                              expected.data())) != 0) {
    FAIL("%s: out of memory in the reference", what);
    return;
  }
  for (int r = 0; r < w.n; r++) {
    check_output(what, r, in_place ? send[r].data() : recv[r].data(), lr,
                 count, bytes, d,
                 [&](size_t i) { return result_bits(expected[i], d); });
    w.views[r].quant_pipeline = 1;
  }
}

/* Every format and element type against the CPU model, bit for bit;
 * rot: over rotated groups, against the rotated model (the padding of a
 * partial last group is rotated into real values there), on three of the
 * counts (one value, a partial group, two chunks with a partial last group
 * and a group with inf: the emulated shuffles of the transform are slow).
 * Counts from one value to several chunks, outliers and a group with inf;
 * the messages of several chunks both with their rounds pipelined
 * (QCOLL_QUANT_PIPELINE=2; the default pipelines limited rounds only) and
 * one round after the other (0). */
static void test_quantised(World &w, bool rot) {
  const int before = failures;
  int cases = 0;
  uint32_t seed = rot ? 500 : 1;
  static const qcoll_quant_t fmts[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                       QCOLL_QUANT_INT6, QCOLL_QUANT_INT4,
                                       QCOLL_QUANT_INT3};
  static const qcoll_dtype_t dts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  for (qcoll_quant_t f : fmts) {
    const size_t chunk =
        qcoll__cuda_all_reduce_quant_chunk_elems(&w.views[0], f);
    const size_t counts[] = {
        1,    31,    32,         33,           32 * (size_t)w.n + 5,
        2000, chunk, chunk + 45, 2 * chunk + 3, chunk - 5, chunk / 2 + 17};
    for (qcoll_dtype_t d : dts)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        if (rot && c != 0 && c != 3 && c != 7) continue;
        bool in_place = (c + (size_t)d) % 2 == 1;
        int limit = c % 2 ? 1 : 4;
        const bool streams = counts[c] > chunk;
        for (int pipe = streams ? 0 : 1; pipe <= 1; pipe++) {
          run_case(w, f, d, counts[c], limit, in_place,
                   c == 5 || c == 7 || c == 10, seed++,
                   (c * 3 + (size_t)f) % 4, (c + 1 + (size_t)d) % 4, rot,
                   pipe ? 2 : 0);
          cases++;
        }
      }
  }
  printf("N=%d: %d %squantised cases %s\n", w.n, cases, rot ? "rotated " : "",
         failures == before ? "ok" : "FAILED");
}

/* ---- one-shot and two-shot ------------------------------------------ */

/* The reference of the unquantised kernels: fp32 in rank order, one
 * rounding to the element type. */
static float combine(qcoll_op_t op, float a, float b) {
  return op == QCOLL_SUM ? a + b : op == QCOLL_MIN ? fminf(a, b) : fmaxf(a, b);
}

/* Every rank's input (values in[r], stored at `lead` elements into
 * send[r]) and output buffers, guards of 0x5a around them. */
struct Buffers {
  std::vector<std::vector<float> > in;
  std::vector<std::vector<char> > send, recv;
  bool in_place;
  char *out(int r) { return in_place ? send[r].data() : recv[r].data(); }
};
static Buffers make_buffers(const World &w, size_t count, qcoll_dtype_t d,
                            uint32_t seed, size_t lead, size_t bytes,
                            bool in_place) {
  const size_t es = qcoll_dtype_size(d);
  Buffers b;
  b.in_place = in_place;
  b.in.resize(w.n);
  b.send.resize(w.n);
  b.recv.resize(w.n);
  for (int r = 0; r < w.n; r++) {
    b.in[r] = inputs(r, count, d, seed, false);
    b.send[r].assign(bytes, (char)0x5a);
    for (size_t i = 0; i < count; i++)
      store(b.send[r].data() + lead * es, d, i, b.in[r][i]);
    if (!in_place) b.recv[r].assign(bytes, (char)0x5a);
  }
  return b;
}

/* No error word set, and every rank's output fp32 in rank order rounded
 * once, bit for bit, nothing written outside it. */
static void check_plain(World &w, const char *what, Buffers &b, qcoll_op_t op,
                        size_t lead, size_t count, size_t bytes,
                        qcoll_dtype_t d) {
  for (int r = 0; r < w.n; r++)
    if (w.words[r][0])
      FAIL("%s: rank %d error word 0x%016llx", what, r, w.words[r][0]);
  auto want = [&](size_t i) {
    float acc = b.in[0][i];
    for (int p = 1; p < w.n; p++) acc = combine(op, acc, b.in[p][i]);
    return result_bits(acc, d);
  };
  for (int r = 0; r < w.n; r++)
    check_output(what, r, b.out(r), lead, count, bytes, d, want);
}

static void run_plain(World &w, qcoll__ipc_algo_t algo, qcoll_dtype_t d,
                      qcoll_op_t op, size_t count, int grid_limit,
                      bool in_place, size_t misalign, uint32_t seed) {
  char what[200];
  snprintf(what, sizeof what, "N=%d %s %s %s count=%zu grid<=%d %s+%zu", w.n,
           algo == QCOLL_IPC_ONESHOT ? "one-shot" : "two-shot", dtype_name(d),
           op == QCOLL_SUM   ? "sum"
           : op == QCOLL_MIN ? "min"
                             : "max",
           count, grid_limit, in_place ? "in-place" : "out-of-place", misalign);
  const size_t es = qcoll_dtype_size(d);
  const size_t lead = GUARD + misalign, bytes = (count + 2 * GUARD + 1) * es;
  Buffers b = make_buffers(w, count, d, seed, lead, bytes, in_place);
  for (int r = 0; r < w.n; r++) w.views[r].max_grid = grid_limit;
  const size_t chunk =
      qcoll__cuda_all_reduce_chunk_elems(&w.views[0], algo, d);
  for (size_t off = 0; off < count; off += chunk)
    for (int r = 0; r < w.n; r++) {
      char *s = b.send[r].data() + (lead + off) * es;
      char *o = b.out(r) + (lead + off) * es;
      if (qcoll__cuda_all_reduce_launch(
              &w.views[r], algo, s, o,
              count - off < chunk ? count - off : chunk, d, op,
              w.streams[r]) != cudaSuccess)
        FAIL("%s: launch refused", what);
    }
  w.sync();
  check_plain(w, what, b, op, lead, count, bytes, d);
}

static void test_plain(World &w) {
  const int before = failures;
  int cases = 0;
  uint32_t seed = 500;
  static const qcoll__ipc_algo_t algos[] = {QCOLL_IPC_ONESHOT,
                                            QCOLL_IPC_TWOSHOT};
  static const qcoll_dtype_t dts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  for (qcoll__ipc_algo_t a : algos)
    for (qcoll_dtype_t d : dts) {
      const size_t chunk =
          qcoll__cuda_all_reduce_chunk_elems(&w.views[0], a, d);
      const size_t counts[] = {1,    7,         8 * (size_t)w.n + 3,
                               1000, chunk + 5, 2 * chunk + 11};
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        qcoll_op_t op = ops[(c + (size_t)d) % 3];
        run_plain(w, a, d, op, counts[c], c % 2 ? 1 : 4, c % 3 == 1, c % 2,
                  seed++);
        cases++;
      }
    }
  printf("N=%d: %d one-shot/two-shot cases %s\n", w.n, cases,
         failures == before ? "ok" : "FAILED");
}

/* ---- registered buffers ---------------------------------------------- */

/* How each rank's buffers take part in a registered case. */
struct RegRank {
  bool send, recv; /* the host passes a reference for it */
  bool stale;      /* its own table row no longer holds that registration
                      (deregistered before a graph replay): it must stage */
  bool unmapped;   /* peers' tables lack its send registration: they must
                      report it, never read a guessed address */
};

/* One all-reduce in which rank r's send (recv) buffer is "registered" as
 * registration slot 1 (2) with generation gen: every rank's table row r
 * holds it (the world is one address space, so the mapping is the
 * address itself), and the launches carry references to it.  Checked bit
 * for bit against fp32 in rank order, nothing written outside the output,
 * over several chunks.  expect_error: some rank must report a registry
 * disagreement instead. */
static void run_registered(World &w, qcoll__ipc_algo_t algo, qcoll_dtype_t d,
                           qcoll_op_t op, size_t count, bool in_place,
                           const std::vector<RegRank> &how, uint32_t seed,
                           const char *label, bool expect_error = false) {
  char what[240];
  snprintf(what, sizeof what, "N=%d registered %s %s %s count=%zu %s (%s)",
           w.n, algo == QCOLL_IPC_ONESHOT ? "one-shot" : "two-shot",
           dtype_name(d), op == QCOLL_SUM ? "sum" : op == QCOLL_MIN ? "min" : "max",
           count, in_place ? "in-place" : "out-of-place", label);
  const size_t es = qcoll_dtype_size(d);
  /* The "allocation" is the whole vector; the buffer starts 16-byte
   * aligned past a guard and the allocation holds every whole pack. */
  const size_t lead = GUARD, bytes = (count + 2 * GUARD + 8) * es;
  const uint32_t gen = 40 + seed;
  Buffers b = make_buffers(w, count, d, seed, lead, bytes, in_place);
  auto &send = b.send;
  auto out_of = [&](int r) { return b.out(r); };
  for (int q = 0; q < w.n; q++) {
    std::fill(w.tables[q].begin(), w.tables[q].end(), qcoll__ipc_reg_entry_t());
    for (int r = 0; r < w.n; r++) {
      const bool own = q == r;
      if (how[r].send && !(how[r].unmapped && !own))
        w.entry(q, r, 1) = {(unsigned long long)(uintptr_t)send[r].data(),
                            bytes, own && how[r].stale ? gen + 1 : gen, 0};
      if (how[r].recv)
        w.entry(q, r, 2) = {(unsigned long long)(uintptr_t)out_of(r), bytes,
                            own && how[r].stale ? gen + 1 : gen, 0};
    }
    w.views[q].max_grid = 4;
  }
  const size_t chunk = qcoll__cuda_all_reduce_chunk_elems(&w.views[0], algo, d);
  for (size_t off = 0; off < count; off += chunk)
    for (int r = 0; r < w.n; r++) {
      char *sp = send[r].data() + (lead + off) * es;
      char *op_ = out_of(r) + (lead + off) * es;
      qcoll__ipc_reg_ref_t sref = {0, 0, 0}, rref = {0, 0, 0};
      if (how[r].send)
        sref = {1, gen, (unsigned long long)(sp - send[r].data())};
      if (how[r].recv) rref = {2, gen, (unsigned long long)(op_ - out_of(r))};
      if (qcoll__cuda_all_reduce_launch_reg(
              &w.views[r], algo, sp, op_,
              count - off < chunk ? count - off : chunk, d, op, &sref, &rref,
              w.streams[r]) != cudaSuccess)
        FAIL("%s: launch refused", what);
    }
  w.sync();
  if (expect_error) {
    int reported = 0;
    for (int r = 0; r < w.n; r++)
      if (qcoll__ipc_err_kind(w.words[r][0]) == QCOLL_IPC_ERR_REGISTRY)
        reported++;
    if (!reported) FAIL("%s: no rank reported the registry disagreement", what);
    w.reset();
    return;
  }
  check_plain(w, what, b, op, lead, count, bytes, d);
}

/* Every registration pattern with both kernels, in and out of place:
 * all ranks registered, one rank only, inputs only, outputs only, a rank
 * whose registration went stale; then plain launches on the same world
 * (the descriptors and epochs carry over), and a disagreement. */
static void test_registered(World &w) {
  const int before = failures;
  int cases = 0;
  uint32_t seed = 700;
  const int n = w.n;
  auto all = [&](bool s_, bool r_) {
    return std::vector<RegRank>(n, RegRank{s_, r_, false, false});
  };
  std::vector<std::pair<const char *, std::vector<RegRank> > > patterns;
  patterns.push_back({"all registered", all(true, true)});
  patterns.push_back({"inputs only", all(true, false)});
  patterns.push_back({"outputs only", all(false, true)});
  {
    auto one = all(false, false);
    one[0] = {true, true, false, false};
    patterns.push_back({"rank 0 only", one});
  }
  {
    auto stale = all(true, true);
    stale[n - 1].stale = true;
    patterns.push_back({"last rank's registration stale", stale});
  }
  static const qcoll__ipc_algo_t algos[] = {QCOLL_IPC_ONESHOT,
                                            QCOLL_IPC_TWOSHOT};
  static const qcoll_dtype_t dts[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  for (qcoll__ipc_algo_t a : algos)
    for (size_t k = 0; k < patterns.size(); k++)
      for (int in_place = 0; in_place < 2; in_place++) {
        qcoll_dtype_t d = dts[(k + (size_t)in_place) % 3];
        const size_t chunk =
            qcoll__cuda_all_reduce_chunk_elems(&w.views[0], a, d);
        const size_t counts[] = {1, 8 * (size_t)n + 3, 2 * chunk + 11};
        for (size_t c = 0; c < 3; c++) {
          auto how = patterns[k].second;
          if (in_place)
            for (auto &h : how) h.recv = h.send = h.send || h.recv;
          run_registered(w, a, d, ops[(c + k) % 3], counts[c], in_place != 0,
                         how, seed++, patterns[k].first);
          cases++;
        }
        /* a plain launch in between: its descriptors say "staged" */
        run_plain(w, a, d, QCOLL_SUM, 1000, 4, false, 1, seed++);
      }
  for (qcoll__ipc_algo_t a : algos) {
    auto how = all(true, false);
    how[0].unmapped = true;
    run_registered(w, a, QCOLL_F32, QCOLL_SUM, 500, false, how, seed++,
                   "peers lack rank 0's registration", true);
  }
  printf("N=%d: %d registered cases, and the disagreement reported %s\n", n,
         cases, failures == before ? "ok" : "FAILED");
}

/* One-shot, two-shot and quantised all-reduces alternating on one world:
 * the epochs and flags each kind leaves behind must serve the next, also
 * after a quantised launch of several rounds, pipelined or not. */
static void test_mixed(World &w) {
  const int before = failures;
  const size_t chunk =
      qcoll__cuda_all_reduce_quant_chunk_elems(&w.views[0], QCOLL_QUANT_INT4);
  for (int k = 0; k < 6; k++) {
    run_plain(w, k % 2 ? QCOLL_IPC_TWOSHOT : QCOLL_IPC_ONESHOT, QCOLL_BF16,
              QCOLL_SUM, 3000 + (size_t)k * 97, 4, k % 2, 0, 900 + (uint32_t)k);
    run_case(w, QCOLL_QUANT_INT6, QCOLL_F16, 2500 + (size_t)k * 31, 4, k % 2,
             false, 950 + (uint32_t)k, 0, 0);
    run_case(w, QCOLL_QUANT_INT4, QCOLL_BF16, 2 * chunk + 77 * (size_t)k, 4,
             k % 3 == 0, false, 970 + (uint32_t)k, 0, 0, false,
             k % 4 < 2 ? 2 : 0);
  }
  printf("N=%d: alternating kinds %s\n", w.n,
         failures == before ? "ok" : "FAILED");
}

/* The last rank never launches: every other rank gives up once, within
 * the deadline, for the whole message of eight chunks, whether that is one
 * launch (one_launch, as the transport makes it) or eight launches of one
 * chunk (a failed rank's later launches must stop at once too). */
static void test_missing_peer(World &w, bool one_launch) {
  w.reset();
  const double timeout = 0.5;
  for (auto &v : w.views) {
    v.timeout_ns = (unsigned long long)(timeout * 1e9);
    v.max_grid = 2;
  }
  const qcoll_dtype_t d = QCOLL_F32;
  const size_t chunk =
      qcoll__cuda_all_reduce_quant_chunk_elems(&w.views[0], QCOLL_QUANT_INT8);
  const size_t count = 8 * chunk;
  const size_t per_launch = one_launch ? count : chunk;
  std::vector<std::vector<float> > buf(w.n, std::vector<float>(count, 1.0f));
  auto t0 = std::chrono::steady_clock::now();
  for (size_t off = 0; off < count; off += per_launch)
    for (int r = 0; r + 1 < w.n; r++)
      qcoll__cuda_all_reduce_quant_launch(&w.views[r], buf[r].data() + off,
                                          buf[r].data() + off, per_launch, d,
                                          QCOLL_QUANT_INT8, 0, w.streams[r]);
  w.sync();
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  int timeouts = 0;
  for (int r = 0; r + 1 < w.n; r++) {
    unsigned long long e = w.words[r][0];
    unsigned kind = qcoll__ipc_err_kind(e);
    unsigned peer = (unsigned)qcoll__ipc_err_peer(e);
    unsigned want = qcoll__ipc_err_awaited(e), seen = qcoll__ipc_err_seen(e);
    if (kind == QCOLL_IPC_ERR_TIMEOUT) {
      timeouts++;
      if ((int)peer != w.n - 1)
        FAIL("missing peer: rank %d timed out on rank %u", r, peer);
      /* Fresh flags: the first launch awaits epoch 1 and sees 0. */
      if (want != 1 || seen != 0)
        FAIL(
            "missing peer: rank %d's word says awaited ..%02x, seen ..%02x; "
            "expected ..01 and ..00",
            r, want, seen);
    } else if (kind != QCOLL_IPC_ERR_PEER_ABORTED) {
      FAIL("missing peer: rank %d's error word is 0x%016llx", r, e);
    }
  }
  if (timeouts == 0) FAIL("missing peer: no rank reported a timeout");
  /* Eight chunks, one deadline: later launches of a failed rank stop at
   * once (waiting out each one's deadline would take eight). */
  if (took > 5 * timeout)
    FAIL(
        "missing peer: the ranks took %.2f s for eight chunks, deadline %.2f s",
        took, timeout);
  printf(
      "N=%d: missing peer: %d rank(s) timed out, the others followed; "
      "eight chunks in %s ended after %.2f s (deadline %.2f s)\n",
      w.n, timeouts, one_launch ? "one launch" : "eight launches", took,
      timeout);
  w.reset();
  for (auto &v : w.views) v.timeout_ns = 20ull * 1000000000ull;
}

/* The rounds of a long quantised launch of 128 MiB of bf16 (more than 40
 * MiB, less than the 64 MiB regions hold for the narrower codes): INT4 in
 * rounds of at most 44 MiB, INT6 of 40 MiB, INT3 of 32 MiB, on the larger
 * grid only; INT8 (whose groups the regions hold fewer of) in rounds of what
 * they hold; QCOLL_QUANT_ROUND_BYTES (1 MiB here) for every format and
 * grid. */
static void test_long_launch_rounds(int n, qcoll__ipc_view_t v) {
  const size_t mib = (size_t)1 << 20, count = 64 * mib;
  const size_t limit4 = 22 * mib; /* 44 MiB of bf16 */
  const size_t limit = 20 * mib;  /* 40 MiB of bf16 */
  const size_t limit3 = 16 * mib; /* 32 MiB of bf16 */
  struct {
    const char *what;
    qcoll_quant_t quant;
    int max_grid_long;
    size_t round_bytes;
    size_t at_least, at_most;
  } cases[] = {
      {"INT4, larger grid", QCOLL_QUANT_INT4, 5, 0, limit4 - 5 * 32 * n,
       limit4},
      {"INT3, larger grid", QCOLL_QUANT_INT3, 5, 0, limit3 - 5 * 32 * n,
       limit3},
      {"INT6, larger grid", QCOLL_QUANT_INT6, 5, 0, limit - 5 * 32 * n, limit},
      {"INT8, larger grid", QCOLL_QUANT_INT8, 5, 0, limit + 1, count - 1},
      {"INT4, no larger grid", QCOLL_QUANT_INT4, 0, 0, count, count},
      {"INT4, QCOLL_QUANT_ROUND_BYTES=1M", QCOLL_QUANT_INT4, 5, mib,
       mib / 2 - 5 * 32 * n, mib / 2},
      {"INT8, QCOLL_QUANT_ROUND_BYTES=1M, no larger grid", QCOLL_QUANT_INT8, 0,
       mib, mib / 2 - 3 * 32 * n, mib / 2}};
  for (const auto &c : cases) {
    v.max_grid_long = c.max_grid_long;
    v.quant_round_bytes = c.round_bytes;
    size_t round = 0;
    qcoll__cuda_all_reduce_quant_grid(&v, count, QCOLL_BF16, c.quant, &round);
    if (round < c.at_least || round > c.at_most)
      FAIL("N=%d: %s, 128 MiB (bf16): rounds of %zu elements, expected "
           "%zu..%zu",
           n, c.what, round, c.at_least, c.at_most);
  }
}

/* Which grid limit each launch takes (no launch is made: the grids are
 * functions of the view and the call).  Limits 3 (ordinary) and 5 (long)
 * with regions of 64 MiB, so that every message below is one round with
 * far more groups and packs than five blocks take. */
static void test_long_launch_grids(const World &w) {
  qcoll__ipc_view_t v = w.views[0];
  v.region_bytes = (size_t)64 << 20;
  v.max_grid = 3;
  v.max_grid_long = 5;
  const size_t mib = (size_t)1 << 20;
  struct {
    const char *what;
    qcoll__ipc_algo_t algo;
    size_t bytes;
    int want;
  } plain[] = {
      {"two-shot of 16 MiB", QCOLL_IPC_TWOSHOT, 16 * mib, 3},
      {"two-shot of 16 MiB + 32 B", QCOLL_IPC_TWOSHOT, 16 * mib + 32, 5},
      {"two-shot of 32 MiB", QCOLL_IPC_TWOSHOT, 32 * mib, 5},
      {"one-shot of 32 MiB", QCOLL_IPC_ONESHOT, 32 * mib, 3}};
  for (const auto &c : plain) {
    int got = qcoll__cuda_all_reduce_grid(&v, c.algo, c.bytes / 2, QCOLL_BF16);
    if (got != c.want)
      FAIL("N=%d: %s (bf16): grid %d, expected %d", w.n, c.what, got, c.want);
  }
  struct {
    qcoll_quant_t quant;
    size_t bytes;
    int want;
  } quant[] = {{QCOLL_QUANT_INT8, 4 * mib, 3}, {QCOLL_QUANT_INT8, 8 * mib, 5},
               {QCOLL_QUANT_FP8, 8 * mib, 5},  {QCOLL_QUANT_INT4, 4 * mib, 3},
               {QCOLL_QUANT_INT4, 8 * mib, 5}, {QCOLL_QUANT_INT6, 8 * mib, 5},
               {QCOLL_QUANT_INT3, 8 * mib, 5}};
  for (const auto &c : quant) {
    size_t round = 0;
    int got = qcoll__cuda_all_reduce_quant_grid(&v, c.bytes / 2, QCOLL_BF16,
                                                c.quant, &round);
    if (got != c.want || round != c.bytes / 2)
      FAIL("N=%d: %s all-reduce of %zu MiB (bf16): grid %d in rounds of %zu "
           "elements, expected %d in one",
           w.n, qcoll_quant_name(c.quant), c.bytes / mib, got, round, c.want);
  }
  test_long_launch_rounds(w.n, v);
  /* No larger limit agreed (4 or more ranks on a GPU): the ordinary one. */
  v.max_grid_long = 0;
  int got =
      qcoll__cuda_all_reduce_grid(&v, QCOLL_IPC_TWOSHOT, 16 * mib, QCOLL_BF16);
  if (got != 3)
    FAIL("N=%d: two-shot of 32 MiB without a long limit: grid %d, expected 3",
         w.n, got);
  printf("N=%d: long launch grids ok\n", w.n);
}

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<int> sizes;
  for (int i = 1; i < argc; i++) sizes.push_back(atoi(argv[i]));
  if (sizes.empty()) sizes = {2, 3, 4};
  for (int n : sizes) {
    if (n < 1 || n > QCOLL_IPC_MAX_RANKS) {
      FAIL("world size %d is outside 1..%d", n, QCOLL_IPC_MAX_RANKS);
      continue;
    }
    World w(n);
    test_long_launch_grids(w);
    test_plain(w);
    if (n > 1) test_registered(w);
    test_quantised(w, false);
    test_quantised(w, true);
    test_mixed(w);
    if (n > 1) test_missing_peer(w, false);
    if (n > 1) test_missing_peer(w, true);
  }
  printf("%s (%d failure(s))\n", failures ? "FAILED" : "all passed", failures);
  return failures ? 1 : 0;
}
#endif
