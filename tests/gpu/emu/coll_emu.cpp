/*
 * The CUDA IPC kernels of src/coll/cuda/collectives.cu, run on the CPU, so
 * that machines without a GPU (CI) test their indexing, chunking, layouts
 * and synchronisation protocol.  The kernels and the barrier, epochs and
 * deadlines of ipc_sync.cuh are the real code (prepare.cmake only swaps the
 * PTX memory-model primitives for C++ atomics, and makes blocks small);
 * every rank is two streams (worker threads), every block an OS thread and
 * every CUDA thread a coroutine of it, switched at __syncthreads and now and
 * then while a thread spins on a flag.  Ranks share memory as the ranks of
 * one process share an IPC mapping.
 *
 * Checked against the host back end's reduction (src/coll/host/reduce.c),
 * bit for bit: every collective x dtype x op, counts 0..3001 with data
 * regions of 8 KiB (so many launches per call), in place and out of place,
 * aligned and not, every root; buffers around outputs untouched and a
 * non-root's reduce buffer untouched; 200 mixed launches enqueued back to
 * back with send/recv running on a second stream; send/recv rings of every
 * dtype, with messages larger than the 4 KiB inboxes.  What it cannot see:
 * the GPU's memory model and timing, occupancy (the GPU tests do).
 *
 *   coll_emu [full] [N...]   world sizes (default 2 3); "full": every
 *                            placement for every count
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "emu_status.h"

#ifdef QCOLL_EMU_SKIP
int main() {
  printf("SKIP: %s\n", QCOLL_EMU_SKIP);
  return 77;
}
#else

#include "collectives.h"

extern "C" void qcoll__reduce_ranks(void *dst, const void *const *srcs,
                                    int nsrcs, size_t count,
                                    qcoll_dtype_t dtype, qcoll_op_t op,
                                    int avg_divisor);

static const unsigned EMU_THREADS = 8;
#include "emu_runtime.inc"

static std::atomic<long> launches{0};

cudaError_t emu_launch(const void *fn, dim3 grid, void **args, int nargs,
                       cudaStream_t s) {
  launches++;
  if (nargs == 2) {
    auto f = (void (*)(qcoll__ipc_view_t, qcoll__ipc_coll_args_t))fn;
    qcoll__ipc_view_t v = *(qcoll__ipc_view_t *)args[0];
    qcoll__ipc_coll_args_t a = *(qcoll__ipc_coll_args_t *)args[1];
    unsigned g = grid.x;
    s->push([=] { run_grid([=] { f(v, a); }, g); });
  } else if (nargs == 5) {
    auto f =
        (void (*)(qcoll__ipc_view_t, qcoll__ipc_p2p_t, void *, size_t, int))fn;
    qcoll__ipc_view_t v = *(qcoll__ipc_view_t *)args[0];
    qcoll__ipc_p2p_t c = *(qcoll__ipc_p2p_t *)args[1];
    void *p = *(void **)args[2];
    size_t n = *(size_t *)args[3];
    int peer = *(int *)args[4];
    unsigned g = grid.x;
    s->push([=] { run_grid([=] { f(v, c, p, n, peer); }, g); });
  } else {
    fprintf(stderr, "emu_launch: %d args\n", nargs);
    abort();
  }
  return cudaSuccess;
}

/* ---- the driver -------------------------------------------------------------
 */

/* The library's dtype and op names, without the library. */
extern "C" size_t qcoll_dtype_size(qcoll_dtype_t d) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  return (unsigned)d < 10 ? sizes[d] : 0;
}
extern "C" const char *qcoll_dtype_name(qcoll_dtype_t d) {
  static const char *names[] = {"i8",  "u8",  "i32",  "u32", "i64",
                                "u64", "f16", "bf16", "f32", "f64"};
  return (unsigned)d < 10 ? names[d] : "invalid";
}
extern "C" const char *qcoll_op_name(qcoll_op_t o) {
  static const char *names[] = {"sum", "prod", "min", "max", "avg"};
  return (unsigned)o < 5 ? names[o] : "invalid";
}

struct World {
  int n;
  size_t buffer_bytes;
  std::vector<char *> bufs;
  std::vector<unsigned long long *> words;
  std::vector<qcoll__ipc_view_t> views;
  std::vector<emu_stream *> s1, s2;
  qcoll__ipc_p2p_t p2p;
  World(int n_, size_t buffer_bytes_, size_t pair_bytes, int max_grid)
      : n(n_), buffer_bytes(buffer_bytes_) {
    p2p.pair_bytes = qcoll__ipc_p2p_pair_bytes(pair_bytes);
    p2p.offset = qcoll__ipc_p2p_offset(buffer_bytes);
    size_t alloc = qcoll__ipc_alloc_bytes(buffer_bytes, n, p2p.pair_bytes);
    for (int r = 0; r < n; r++) {
      char *b = (char *)aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
      memset(b, 0, QCOLL_IPC_HEADER_BYTES);
      memset(b + QCOLL_IPC_HEADER_BYTES, 0x77, alloc - QCOLL_IPC_HEADER_BYTES);
      bufs.push_back(b);
      words.push_back((unsigned long long *)calloc(2, 8));
      s1.push_back(new emu_stream);
      s2.push_back(new emu_stream);
    }
    for (int r = 0; r < n; r++)
      views.push_back(emu_view(bufs, words[r], buffer_bytes, r, max_grid));
  }
  ~World() {
    for (auto s : s1) delete s;
    for (auto s : s2) delete s;
    for (auto b : bufs) free(b);
    for (auto w : words) free(w);
  }
  void sync() {
    for (auto s : s1) s->sync();
    for (auto s : s2) s->sync();
  }
  bool errors(const char *what) {
    bool bad = false;
    for (int r = 0; r < n; r++)
      if (words[r][0]) {
        FAIL("%s: rank %d error word 0x%016llx", what, r, words[r][0]);
        bad = true;
      }
    return bad;
  }
};

static std::mt19937_64 rng(12345);

static void random_fill(void *p, size_t bytes) {
  unsigned char *c = (unsigned char *)p;
  for (size_t i = 0; i < bytes; i++) c[i] = (unsigned char)rng();
}

/* Random inputs: any bits for integers; for floats mostly values of
 * several magnitudes, sometimes any bits (infinities, subnormals), but no
 * NaN: after arithmetic the host's NaN payloads depend on the operand order
 * its compiler picks (the GPU returns a canonical NaN). */
static void fill_inputs(void *p, size_t count, qcoll_dtype_t d) {
  size_t es = qcoll_dtype_size(d);
  random_fill(p, count * es);
  if (d == QCOLL_F16 || d == QCOLL_BF16) {
    /* NaN payloads after arithmetic depend on operand order chosen by the
     * compiler (host) or are canonical (GPU): keep NaNs out. */
    uint16_t *h = (uint16_t *)p;
    for (size_t i = 0; i < count; i++) {
      bool nan = d == QCOLL_F16 ? ((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff))
                                : ((h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f));
      if (nan) h[i] = 0x3c00;
    }
  } else if (d == QCOLL_F32) {
    float *f = (float *)p;
    for (size_t i = 0; i < count; i++)
      if (rng() % 8 || f[i] != f[i])
        f[i] = (float)((int)(rng() % 2001) - 1000) / 7.0f;
  } else if (d == QCOLL_F64) {
    double *f = (double *)p;
    for (size_t i = 0; i < count; i++)
      if (rng() % 8 || f[i] != f[i])
        f[i] = (double)((int)(rng() % 2001) - 1000) / 7.0;
  }
}

static const char *kind_names[] = {"all_reduce", "reduce",         "broadcast",
                                   "all_gather", "reduce_scatter", "all_to_all",
                                   "barrier"};

/* The host loop of cuda_ipc.c: launches of at most one chunk. */
static void enqueue(World &w, int r, qcoll__ipc_coll_t kind, const void *send,
                    void *recv, size_t count, qcoll_dtype_t d, qcoll_op_t op,
                    int root, emu_stream *s) {
  qcoll__ipc_coll_args_t a;
  memset(&a, 0, sizeof a);
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = d;
  a.op = op;
  a.root = root;
  if (kind == QCOLL_IPC_COLL_BARRIER) {
    if (qcoll__cuda_coll_launch(&w.views[r], &a, s))
      FAIL("barrier launch refused");
    return;
  }
  size_t chunk = qcoll__cuda_coll_chunk_elems(&w.views[r], kind, d);
  if (!chunk) {
    FAIL("chunk 0");
    return;
  }
  for (size_t off = 0; off < count; off += chunk) {
    a.offset = off;
    a.len = count - off < chunk ? count - off : chunk;
    if (qcoll__cuda_coll_launch(&w.views[r], &a, s)) FAIL("launch refused");
  }
}

struct Case {
  qcoll__ipc_coll_t kind;
  qcoll_dtype_t d;
  qcoll_op_t op;
  size_t count;
  int placement; /* 0 out aligned, 1 out +1 elem, 2 in-place, 3 in-place +1 */
  int root;
};

/* Runs one case on every rank and checks every rank's result. */
static void run_case(World &w, const Case &c) {
  const int n = w.n;
  const size_t es = qcoll_dtype_size(c.d);
  const bool in_place = c.placement >= 2;
  const size_t mis = (c.placement % 2) * es;
  size_t send_n = c.count, recv_n = c.count;
  if (c.kind == QCOLL_IPC_COLL_ALL_GATHER) recv_n = (size_t)n * c.count;
  if (c.kind == QCOLL_IPC_COLL_REDUCE_SCATTER) send_n = (size_t)n * c.count;
  if (c.kind == QCOLL_IPC_COLL_ALL_TO_ALL)
    send_n = recv_n = (size_t)n * c.count;
  char what[200];
  snprintf(what, sizeof what, "n=%d %s %s/%s count=%zu placement=%d root=%d", n,
           kind_names[c.kind], qcoll_dtype_name(c.d), qcoll_op_name(c.op),
           c.count, c.placement, c.root);
  const size_t guard = 64;
  std::vector<std::vector<char> > inputs(n), sbufs(n), rbufs(n);
  std::vector<char *> send(n), recv(n), result(n);
  for (int r = 0; r < n; r++) {
    inputs[r].resize(send_n * es + 1);
    fill_inputs(inputs[r].data(), send_n, c.d);
    size_t total = in_place ? std::max(send_n, recv_n) : recv_n;
    rbufs[r].assign(total * es + 2 * guard + 16 + mis, (char)0x5a);
    char *rb = rbufs[r].data() + guard + mis;
    rb += (16 - ((uintptr_t)rbufs[r].data() + guard) % 16) %
          16;  // base aligned, then mis
    if (in_place) {
      switch (c.kind) {
        case QCOLL_IPC_COLL_ALL_GATHER:
          memcpy(rb + (size_t)r * c.count * es, inputs[r].data(), send_n * es);
          send[r] = rb + (size_t)r * c.count * es;
          recv[r] = rb;
          result[r] = rb;
          break;
        case QCOLL_IPC_COLL_REDUCE_SCATTER:
          memcpy(rb, inputs[r].data(), send_n * es);
          send[r] = rb;
          recv[r] = rb + (size_t)r * c.count * es;
          result[r] = recv[r];
          break;
        default:
          if (c.kind != QCOLL_IPC_COLL_BROADCAST || r == c.root)
            memcpy(rb, inputs[r].data(), send_n * es);
          send[r] = recv[r] = result[r] = rb;
      }
    } else {
      sbufs[r].assign(send_n * es + 32 + mis, 0);
      char *sb =
          sbufs[r].data() + (16 - (uintptr_t)sbufs[r].data() % 16) % 16 + mis;
      memcpy(sb, inputs[r].data(), send_n * es);
      send[r] = sb;
      recv[r] = rb;
      result[r] = rb;
    }
  }
  std::vector<std::vector<char> > before(n);
  for (int r = 0; r < n; r++) before[r] = rbufs[r];
  for (int r = 0; r < n; r++)
    enqueue(w, r, c.kind, send[r], recv[r], c.count, c.d, c.op, c.root,
            w.s1[r]);
  w.sync();
  if (w.errors(what)) return;
  // expected
  std::vector<char> expect(recv_n * es + 1);
  std::vector<const void *> srcs(n);
  for (int r = 0; r < n; r++) {
    switch (c.kind) {
      case QCOLL_IPC_COLL_ALL_REDUCE:
      case QCOLL_IPC_COLL_REDUCE:
        for (int q = 0; q < n; q++) srcs[q] = inputs[q].data();
        qcoll__reduce_ranks(expect.data(), srcs.data(), n, c.count, c.d, c.op,
                            n);
        break;
      case QCOLL_IPC_COLL_REDUCE_SCATTER:
        for (int q = 0; q < n; q++)
          srcs[q] = inputs[q].data() + (size_t)r * c.count * es;
        qcoll__reduce_ranks(expect.data(), srcs.data(), n, c.count, c.d, c.op,
                            n);
        break;
      case QCOLL_IPC_COLL_BROADCAST:
        memcpy(expect.data(), inputs[c.root].data(), c.count * es);
        break;
      case QCOLL_IPC_COLL_ALL_GATHER:
        for (int q = 0; q < n; q++)
          memcpy(expect.data() + (size_t)q * c.count * es, inputs[q].data(),
                 c.count * es);
        break;
      default:
        for (int q = 0; q < n; q++)
          memcpy(expect.data() + (size_t)q * c.count * es,
                 inputs[q].data() + (size_t)r * c.count * es, c.count * es);
    }
    bool untouched = c.kind == QCOLL_IPC_COLL_REDUCE && r != c.root;
    if (untouched) {
      if (rbufs[r] != before[r])
        FAIL("%s: non-root rank %d's buffer changed", what, r);
      continue;
    }
    if (memcmp(expect.data(), result[r], recv_n * es)) {
      size_t i = 0;
      while (memcmp(expect.data() + i * es, result[r] + i * es, es)) i++;
      for (i = 0; i < recv_n; i++)
        if (memcmp(expect.data() + i * es, result[r] + i * es, es)) break;
      FAIL("%s: rank %d element %zu differs", what, r, i);
      if (es == 2 && failures < 10) {
        uint16_t e16, g16;
        memcpy(&e16, expect.data() + i * es, 2);
        memcpy(&g16, result[r] + i * es, 2);
        fprintf(stderr, "   expected %04x got %04x inputs:", e16, g16);
        for (int q = 0; q < n; q++) {
          uint16_t x;
          size_t base =
              c.kind == QCOLL_IPC_COLL_REDUCE_SCATTER ? (size_t)r * c.count : 0;
          memcpy(&x, inputs[q].data() + (base + i) * es, 2);
          fprintf(stderr, " %04x", x);
        }
        fprintf(stderr, "\n");
      }
      continue;
    }
    // guards: outside the output (and, in place, outside the whole buffer)
    char *lo = in_place ? (c.kind == QCOLL_IPC_COLL_REDUCE_SCATTER ? send[r]
                                                                   : result[r])
                        : result[r];
    size_t span = in_place ? std::max(send_n, recv_n) * es : recv_n * es;
    for (char *p = rbufs[r].data(); p < rbufs[r].data() + rbufs[r].size();
         p++) {
      if (p >= lo && p < lo + span) continue;
      if (*p != (char)0x5a) {
        FAIL("%s: rank %d guard byte %td changed", what, r, p - lo);
        break;
      }
    }
  }
}

static void ring(World &w, qcoll_dtype_t d, size_t count, int rounds,
                 bool two_streams, size_t mis_send, size_t mis_recv) {
  const int n = w.n;
  const size_t es = qcoll_dtype_size(d), bytes = count * es;
  char what[160];
  snprintf(what, sizeof what, "n=%d ring %s count=%zu rounds=%d %s mis=%zu/%zu",
           n, qcoll_dtype_name(d), count, rounds,
           two_streams ? "2 streams" : "1 stream", mis_send, mis_recv);
  std::vector<std::vector<char> > in(n * rounds), out(n * rounds);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < rounds; k++) {
      in[r * rounds + k].resize(bytes + 32);
      random_fill(in[r * rounds + k].data(), bytes + 32);
      out[r * rounds + k].assign(bytes + 32, (char)0x5a);
    }
  for (int r = 0; r < n; r++) {
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int k = 0; k < rounds; k++) {
      const char *s = in[r * rounds + k].data() + mis_send;
      char *o = out[r * rounds + k].data() + mis_recv;
      bool send_first = two_streams || r % 2 == 0 || bytes <= w.p2p.pair_bytes;
      for (int step = 0; step < 2; step++) {
        if ((step == 0) == send_first) {
          if (qcoll__cuda_send_launch(&w.views[r], &w.p2p, s, bytes, next,
                                      w.s1[r]))
            FAIL("%s: send refused", what);
        } else {
          if (qcoll__cuda_recv_launch(&w.views[r], &w.p2p, o, bytes, prev,
                                      two_streams ? w.s2[r] : w.s1[r]))
            FAIL("%s: recv refused", what);
        }
      }
    }
  }
  w.sync();
  if (w.errors(what)) return;
  for (int r = 0; r < n; r++) {
    int prev = (r + n - 1) % n;
    for (int k = 0; k < rounds; k++) {
      const char *e = in[prev * rounds + k].data() + mis_send;
      const char *g = out[r * rounds + k].data() + mis_recv;
      if (memcmp(e, g, bytes)) {
        size_t i = 0;
        while (e[i] == g[i]) i++;
        FAIL("%s: rank %d message %d byte %zu differs", what, r, k, i);
      }
      const char *o = out[r * rounds + k].data();
      for (size_t b = 0; b < bytes + 32; b++)
        if ((b < mis_recv || b >= mis_recv + bytes) && o[b] != (char)0x5a) {
          FAIL("%s: rank %d message %d guard byte %zu changed", what, r, k, b);
          break;
        }
    }
  }
}

/* Many launches of every kind enqueued back to back on every rank (and
 * send/recv on the second stream meanwhile), checked only at the end. */
static void pipeline(World &w, int ops_count) {
  const int n = w.n;
  struct Op {
    Case c;
    std::vector<std::vector<char> > in, out;
  };
  std::vector<Op> ops(ops_count);
  std::vector<std::vector<char> > pin(n * ops_count), pout(n * ops_count);
  const qcoll_dtype_t dtypes[] = {QCOLL_I8,  QCOLL_U8,  QCOLL_I32, QCOLL_U32,
                                  QCOLL_I64, QCOLL_U64, QCOLL_F16, QCOLL_BF16,
                                  QCOLL_F32, QCOLL_F64};
  for (int k = 0; k < ops_count; k++) {
    Op &o = ops[k];
    o.c.kind = (qcoll__ipc_coll_t)(rng() % 7);
    o.c.d = dtypes[rng() % 10];
    o.c.op = (qcoll_op_t)(rng() % 5);
    o.c.count = 1 + rng() % 3000;
    o.c.placement = 0;
    o.c.root = (int)(rng() % n);
    size_t es = qcoll_dtype_size(o.c.d);
    o.in.resize(n);
    o.out.resize(n);
    for (int r = 0; r < n; r++) {
      o.in[r].resize((size_t)n * o.c.count * es);
      fill_inputs(o.in[r].data(), (size_t)n * o.c.count, o.c.d);
      o.out[r].assign((size_t)n * o.c.count * es, 0);
      pin[r * ops_count + k].resize(1000 + k);
      random_fill(pin[r * ops_count + k].data(), 1000 + k);
      pout[r * ops_count + k].assign(1000 + k, 0);
    }
  }
  for (int r = 0; r < n; r++) {
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int k = 0; k < ops_count; k++) {
      Op &o = ops[k];
      enqueue(w, r, o.c.kind, o.in[r].data(), o.out[r].data(), o.c.count, o.c.d,
              o.c.op, o.c.root, w.s1[r]);
      if (n > 1) {
        qcoll__cuda_send_launch(&w.views[r], &w.p2p,
                                pin[r * ops_count + k].data(), 1000 + k, next,
                                w.s2[r]);
        qcoll__cuda_recv_launch(&w.views[r], &w.p2p,
                                pout[r * ops_count + k].data(), 1000 + k, prev,
                                w.s2[r]);
      }
    }
  }
  w.sync();
  if (w.errors("pipeline")) return;
  for (int k = 0; k < ops_count; k++) {
    Op &o = ops[k];
    size_t es = qcoll_dtype_size(o.c.d), cnt = o.c.count;
    std::vector<char> e((size_t)n * cnt * es);
    std::vector<const void *> srcs(n);
    for (int r = 0; r < n; r++) {
      size_t len = cnt;
      bool check = true;
      switch (o.c.kind) {
        case QCOLL_IPC_COLL_ALL_REDUCE:
        case QCOLL_IPC_COLL_REDUCE:
          for (int q = 0; q < n; q++) srcs[q] = o.in[q].data();
          qcoll__reduce_ranks(e.data(), srcs.data(), n, cnt, o.c.d, o.c.op, n);
          check = o.c.kind == QCOLL_IPC_COLL_ALL_REDUCE || r == o.c.root;
          break;
        case QCOLL_IPC_COLL_REDUCE_SCATTER:
          for (int q = 0; q < n; q++)
            srcs[q] = o.in[q].data() + (size_t)r * cnt * es;
          qcoll__reduce_ranks(e.data(), srcs.data(), n, cnt, o.c.d, o.c.op, n);
          break;
        case QCOLL_IPC_COLL_BROADCAST:
          memcpy(e.data(), o.in[o.c.root].data(), cnt * es);
          break;
        case QCOLL_IPC_COLL_ALL_GATHER:
          for (int q = 0; q < n; q++)
            memcpy(e.data() + q * cnt * es, o.in[q].data(), cnt * es);
          len = n * cnt;
          break;
        case QCOLL_IPC_COLL_ALL_TO_ALL:
          for (int q = 0; q < n; q++)
            memcpy(e.data() + q * cnt * es,
                   o.in[q].data() + (size_t)r * cnt * es, cnt * es);
          len = n * cnt;
          break;
        default: check = false;
      }
      if (check && memcmp(e.data(), o.out[r].data(), len * es))
        FAIL(
            "pipeline n=%d op %d (%s %s/%s count=%zu root=%d): rank %d differs",
            n, k, kind_names[o.c.kind], qcoll_dtype_name(o.c.d),
            qcoll_op_name(o.c.op), cnt, o.c.root, r);
      if (n > 1 && memcmp(pin[((r + n - 1) % n) * ops_count + k].data(),
                          pout[r * ops_count + k].data(), 1000 + k))
        FAIL("pipeline n=%d message %d: rank %d differs", n, k, r);
    }
  }
}

/* The launch size of large messages (no data moved): reduce and broadcast
 * at most QCOLL_IPC_ROOTED_LAUNCH_BYTES over all ranks in whole 4 KiB, the
 * others a whole region, whatever the element size. */
static void check_launch_sizes() {
  for (int n = 1; n <= QCOLL_IPC_MAX_RANKS; n++) {
    qcoll__ipc_view_t v;
    memset(&v, 0, sizeof v);
    v.nranks = n;
    v.region_bytes = (size_t)30688 << 10; /* QCOLL_IPC_BYTES=64M */
    const size_t rooted = QCOLL_IPC_ROOTED_LAUNCH_BYTES / (size_t)n / 4096 * 4096;
    for (qcoll_dtype_t d : {QCOLL_U8, QCOLL_BF16, QCOLL_F32, QCOLL_F64}) {
      const size_t es = qcoll_dtype_size(d);
      for (int k : {QCOLL_IPC_COLL_REDUCE, QCOLL_IPC_COLL_BROADCAST}) {
        size_t got = qcoll__cuda_coll_chunk_elems(&v, (qcoll__ipc_coll_t)k, d);
        if (got * es != rooted || rooted % 16)
          FAIL("n=%d %s: launches of %zu bytes, expected %zu", n,
               kind_names[k], got * es, rooted);
      }
      for (int k : {QCOLL_IPC_COLL_ALL_REDUCE, QCOLL_IPC_COLL_ALL_GATHER}) {
        size_t got = qcoll__cuda_coll_chunk_elems(&v, (qcoll__ipc_coll_t)k, d);
        if (got != v.region_bytes / es)
          FAIL("n=%d %s: launches of %zu bytes, expected a region (%zu)", n,
               kind_names[k], got * es, v.region_bytes);
      }
    }
    /* a region smaller than the cap is what bounds a launch */
    v.region_bytes = 8192;
    if (qcoll__cuda_coll_chunk_elems(&v, QCOLL_IPC_COLL_BROADCAST, QCOLL_U8) !=
        8192u)
      FAIL("n=%d broadcast: an 8 KiB region does not bound the launch", n);
  }
  printf("launch sizes: reduce/broadcast %zu bytes over all ranks, others a "
         "region\n", (size_t)QCOLL_IPC_ROOTED_LAUNCH_BYTES);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  check_launch_sizes();
  const qcoll_dtype_t dtypes[] = {QCOLL_I8,  QCOLL_U8,  QCOLL_I32, QCOLL_U32,
                                  QCOLL_I64, QCOLL_U64, QCOLL_F16, QCOLL_BF16,
                                  QCOLL_F32, QCOLL_F64};
  const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_PROD, QCOLL_MIN, QCOLL_MAX,
                            QCOLL_AVG};
  bool full = false;
  std::vector<int> ranks;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "full"))
      full = true;
    else
      ranks.push_back(atoi(argv[i]));
  }
  if (ranks.empty()) ranks = {2, 3};
  const size_t counts[] = {0, 1, 7, 33, 700, 3001};
  for (int n : ranks) {
    if (n < 1 || n > QCOLL_IPC_MAX_RANKS) {
      fprintf(stderr, "world size %d is outside 1..%d\n", n,
              QCOLL_IPC_MAX_RANKS);
      return 2;
    }
    /* Data regions of 8 KiB (a launch holds at most 8 KiB per rank),
     * inboxes of 4 KiB (slots of 256 bytes), grids of at most 3 blocks of
     * 8 threads. */
    World w(n, 64 * 1024 + 2 * 8192, 4096, 3);
    long cases = 0;
    int before = failures;
    for (int k = 0; k < 6; k++)
      for (qcoll_dtype_t d : dtypes)
        for (int oi = 0; oi < 5; oi++) {
          bool red = k == QCOLL_IPC_COLL_ALL_REDUCE ||
                     k == QCOLL_IPC_COLL_REDUCE ||
                     k == QCOLL_IPC_COLL_REDUCE_SCATTER;
          if (!red && oi) continue;
          for (size_t count : counts)
            for (int pl = 0; pl < 4; pl++) {
              if (k == QCOLL_IPC_COLL_ALL_TO_ALL && pl >= 2) continue;
              /* Quick: every placement for small counts, out of place and
               * in place + 1 element for the others. */
              if (!full && count > 7 && pl != 0 && pl != 3 &&
                  !(k == QCOLL_IPC_COLL_ALL_TO_ALL && pl == 1))
                continue;
              Case c{(qcoll__ipc_coll_t)k, d, ops[oi], count, pl,
                     (int)(cases % n)};
              run_case(w, c);
              cases++;
            }
        }
    for (int r = 0; r < n; r++)
      for (int j = 0; j < 5; j++)
        enqueue(w, r, QCOLL_IPC_COLL_BARRIER, nullptr, nullptr, 0, QCOLL_U8,
                QCOLL_SUM, 0, w.s1[r]);
    w.sync();
    w.errors("5 barriers in a row");
    printf("n=%d: %ld collective cases and 5 barriers: %d failure(s)\n", n,
           cases, failures - before);
    before = failures;
    pipeline(w, full ? 200 : 60);
    printf(
        "n=%d: %d mixed launches back to back, with send/recv: %d "
        "failure(s)\n",
        n, full ? 200 : 60, failures - before);
    if (n < 2) continue;
    before = failures;
    int rc = 0;
    for (qcoll_dtype_t d : dtypes)
      for (size_t count :
           {(size_t)0, (size_t)1, (size_t)7, (size_t)100, (size_t)511}) {
        ring(w, d, count, 3, false, 0, 0);
        ring(w, d, count, 2, true, qcoll_dtype_size(d), 0);
        rc += 2;
      }
    /* Larger than the inbox: several steps per lane. */
    ring(w, QCOLL_U8, 20000, 2, true, 0, 0);
    ring(w, QCOLL_U8, 20001, 2, true, 1, 3);
    ring(w, QCOLL_F64, 5000, 3, true, 8, 0);
    ring(w, QCOLL_I32, 9000, 2, false, 0, 4); /* parity order, one stream */
    rc += 4;
    printf("n=%d: %d send/recv rings: %d failure(s)\n", n, rc,
           failures - before);
  }
  printf("%ld launches: %s (%d failure(s))\n", launches.load(),
         failures ? "FAILED" : "all passed", failures);
  return failures ? 1 : 0;
}

#endif /* QCOLL_EMU_SKIP */
