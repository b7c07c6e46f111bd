/*
 * Large-message bandwidth of the host back end against a plain memcpy,
 * measured in the same run, started by qcoll-run:
 *
 *   qcoll-run -n N host_bw_bench [-b MIN] [-e MAX] [-f F] [-n ITERS]
 *                                [-w WARMUP] [-r ROUNDS] [-d f32|bf16|f16|f64]
 *                                [--untouched-send] [COLLECTIVE]
 *
 * COLLECTIVE: all_reduce (default), reduce_scatter, all_gather, broadcast.
 *
 * For each size and round it times, in an order that rotates from round to
 * round: every rank copying SIZE bytes with memcpy at the same moment (the
 * ceiling: each byte of an all-reduce is read and written at least once by
 * a rank), the collective out of place, and in place.  A time is the
 * slowest rank's average over ITERS calls after WARMUP untimed ones; the
 * table gives the median over ROUNDS and the collective's time in units of
 * the memcpy time.  Minor page faults per call (the slowest rank's) are
 * counted too, and the first two calls of the largest size are timed on
 * their own before the sweep.
 *
 * Every buffer is written with non-zero data before it is timed: a buffer
 * that is allocated zeroed and never written is backed by the kernel's
 * shared zero page, so reading it is a read of one cached 4 KiB page and
 * looks faster than memory.  --untouched-send keeps the send buffer in that
 * state (mmap, never written) to show the effect.
 *
 * After the timed rounds, one checked call per placement on small-integer
 * inputs compares every element with the exact expectation; the exit
 * status is 1 when any element was wrong.  The library comes from the
 * shared object, so LD_LIBRARY_PATH selects which build is measured.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "qcoll.h"

enum coll { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST };
static const char *const coll_names[] = {"all_reduce", "reduce_scatter",
                                         "all_gather", "broadcast"};
enum what { MEMCPY, OUT_OF_PLACE, IN_PLACE, NWHAT };
#define MAX_ROUNDS 64

typedef struct opts {
  size_t min_bytes, max_bytes;
  double factor;
  int iters, warmup, rounds;
  qcoll_dtype_t dtype;
  enum coll coll;
  bool untouched_send;
} opts_t;

typedef struct bench {
  opts_t o;
  qcoll_comm_t comm;
  int rank, n;
  uint8_t *send, *recv, *copy_src, *copy_dst;
  size_t send_cap, recv_cap;
  long wrong;
} bench_t;

static void die(const bench_t *b, const char *what, qcoll_status_t st) {
  fprintf(stderr, "host_bw_bench: rank %d: %s failed: %s (%s)\n", b->rank, what,
          qcoll_status_string(st),
          b->comm ? qcoll_comm_last_error(b->comm) : qcoll_last_error());
  exit(1);
}

#define OK(b, call)                            \
  do {                                         \
    qcoll_status_t st_ = (call);               \
    if (st_ != QCOLL_OK) die((b), #call, st_); \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct usage {
  long faults;
  double cpu_s; /* user + system */
} usage_t;

static usage_t usage_now(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (usage_t){
      ru.ru_minflt,
      (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6};
}

static bool parse_size(const char *s, size_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      end++;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      end++;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      end++;
      break;
    default: break;
  }
  if (*end) return false;
  *out = (size_t)v;
  return true;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: host_bw_bench [-b MIN] [-e MAX] [-f F] [-n ITERS] [-w WARMUP]\n"
      "                     [-r ROUNDS] [-d f32|bf16|f16|f64] "
      "[--untouched-send]\n"
      "                     "
      "[all_reduce|reduce_scatter|all_gather|broadcast]\n");
  exit(2);
}

static opts_t parse(int argc, char **argv) {
  opts_t o = {1 << 20, 64 << 20, 4, 10, 3, 3, QCOLL_F32, ALL_REDUCE, false};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = a[0] == '-' && a[1] && !a[2] && strchr("befnwrd", a[1]);
    if (takes && !v) usage();
    if (!strcmp(a, "-b")) {
      if (!parse_size(v, &o.min_bytes)) usage();
    } else if (!strcmp(a, "-e")) {
      if (!parse_size(v, &o.max_bytes)) usage();
    } else if (!strcmp(a, "-f"))
      o.factor = atof(v);
    else if (!strcmp(a, "-n"))
      o.iters = atoi(v);
    else if (!strcmp(a, "-w"))
      o.warmup = atoi(v);
    else if (!strcmp(a, "-r"))
      o.rounds = atoi(v);
    else if (!strcmp(a, "-d")) {
      if (!strcmp(v, "f32"))
        o.dtype = QCOLL_F32;
      else if (!strcmp(v, "bf16"))
        o.dtype = QCOLL_BF16;
      else if (!strcmp(v, "f16"))
        o.dtype = QCOLL_F16;
      else if (!strcmp(v, "f64"))
        o.dtype = QCOLL_F64;
      else
        usage();
    } else if (!strcmp(a, "--untouched-send")) {
      o.untouched_send = true;
      continue;
    } else {
      bool found = false;
      for (int c = 0; c < 4; c++)
        if (!strcmp(a, coll_names[c])) {
          o.coll = (enum coll)c;
          found = true;
        }
      if (!found) usage();
      continue;
    }
    i++;
  }
  if (o.factor <= 1 || o.iters < 1 || o.warmup < 0 || o.rounds < 1 ||
      o.rounds > MAX_ROUNDS || o.min_bytes == 0 || o.min_bytes > o.max_bytes)
    usage();
  return o;
}

/* ---- buffers ------------------------------------------------------- */

static uint8_t *map_bytes(size_t bytes) {
  void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("host_bw_bench: mmap");
    exit(1);
  }
  return p;
}

/* Non-zero bytes in every page, so nothing is backed by the zero page. */
static void touch(uint8_t *p, size_t bytes, unsigned seed) {
  for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)(i * 13u + seed) | 1u;
}

/* Small integers: exact in every float type for any realistic rank count. */
static void store_small(qcoll_dtype_t t, void *p, size_t i, int v) {
  float f = (float)v;
  uint32_t u;
  switch (t) {
    case QCOLL_F64: ((double *)p)[i] = v; break;
    case QCOLL_BF16:
      memcpy(&u, &f, 4);
      ((uint16_t *)p)[i] = (uint16_t)(u >> 16); /* exact for small ints */
      break;
    case QCOLL_F16: {
      /* Small non-negative integers (< 2048) as f16, exactly. */
      uint16_t h = 0;
      if (v > 0) {
        int e = 0;
        while ((1 << (e + 1)) <= v) e++;
        h = (uint16_t)((e + 15) << 10 | ((v - (1 << e)) << (10 - e)));
      }
      ((uint16_t *)p)[i] = h;
      break;
    }
    default: ((float *)p)[i] = f; break;
  }
}

static int input_value(int rank, size_t i) {
  return (int)((i + (size_t)rank) % 5);
}

/* ---- the calls ----------------------------------------------------- */

/* Bytes per rank of the buffers the collective reads and writes, for a
 * row of `bytes` (as qcoll-perf counts: the larger of the two). */
typedef struct shape {
  size_t count, send_bytes, recv_bytes;
} shape_t;

static shape_t shape_of(const bench_t *b, size_t bytes) {
  size_t es = qcoll_dtype_size(b->o.dtype), n = (size_t)b->n;
  size_t elems = bytes / es;
  shape_t s;
  switch (b->o.coll) {
    case REDUCE_SCATTER:
      s.count = elems / n;
      s.send_bytes = s.count * n * es;
      s.recv_bytes = s.count * es;
      break;
    case ALL_GATHER:
      s.count = elems / n;
      s.send_bytes = s.count * es;
      s.recv_bytes = s.count * n * es;
      break;
    default:
      s.count = elems;
      s.send_bytes = s.recv_bytes = elems * es;
      break;
  }
  return s;
}

static qcoll_status_t call(bench_t *b, const shape_t *s, bool in_place) {
  size_t es = qcoll_dtype_size(b->o.dtype);
  uint8_t *recv = b->recv;
  const uint8_t *send = in_place ? recv : b->send;
  switch (b->o.coll) {
    case REDUCE_SCATTER:
      return qcoll_reduce_scatter(
          send, in_place ? recv + (size_t)b->rank * s->count * es : recv,
          s->count, b->o.dtype, QCOLL_SUM, b->comm, NULL);
    case ALL_GATHER:
      return qcoll_all_gather(
          in_place ? recv + (size_t)b->rank * s->count * es : send, recv,
          s->count, b->o.dtype, b->comm, NULL);
    case BROADCAST:
      return qcoll_broadcast(send, recv, s->count, b->o.dtype, 0, b->comm,
                             NULL);
    default:
      return qcoll_all_reduce(send, recv, s->count, b->o.dtype, QCOLL_SUM,
                              b->comm, NULL);
  }
}

typedef struct sample {
  double sec;    /* wall clock, the slowest rank */
  double cpu;    /* CPU seconds (user + system), the mean over ranks */
  double faults; /* minor page faults, the most of any rank */
} sample_t;

/* Per call: the slowest rank's seconds, the ranks' mean CPU seconds (on a
 * machine shared with other jobs the CPU time moves less than the wall
 * clock, which includes time the ranks were not running) and the most
 * faults of a rank. */
static sample_t time_one(bench_t *b, const shape_t *s, enum what w) {
  size_t copy_bytes =
      s->send_bytes > s->recv_bytes ? s->send_bytes : s->recv_bytes;
  for (int i = 0; i < b->o.warmup; i++) {
    if (w == MEMCPY)
      memcpy(b->copy_dst, b->copy_src, copy_bytes);
    else
      OK(b, call(b, s, w == IN_PLACE));
  }
  OK(b, qcoll_barrier(b->comm, NULL));
  usage_t u0 = usage_now();
  double t0 = now_s();
  for (int i = 0; i < b->o.iters; i++) {
    if (w == MEMCPY) {
      memcpy(b->copy_dst, b->copy_src, copy_bytes);
      __asm__ __volatile__("" ::"r"(b->copy_dst) : "memory");
    } else {
      OK(b, call(b, s, w == IN_PLACE));
    }
  }
  double wall = (now_s() - t0) / b->o.iters;
  usage_t u1 = usage_now();
  double mine[2] = {wall, (double)(u1.faults - u0.faults) / b->o.iters};
  double cpu = (u1.cpu_s - u0.cpu_s) / b->o.iters, cpu_sum = 0, worst[2];
  OK(b, qcoll_all_reduce(mine, worst, 2, QCOLL_F64, QCOLL_MAX, b->comm, NULL));
  OK(b,
     qcoll_all_reduce(&cpu, &cpu_sum, 1, QCOLL_F64, QCOLL_SUM, b->comm, NULL));
  return (sample_t){worst[0], cpu_sum / b->n, worst[1]};
}

/* One call on known inputs; the wrong elements of all ranks. */
static long check(bench_t *b, const shape_t *s, bool in_place) {
  qcoll_dtype_t t = b->o.dtype;
  size_t es = qcoll_dtype_size(t), n = (size_t)b->n;
  uint8_t *in = in_place ? b->recv : b->send;
  size_t in_elems = s->send_bytes / es, out_elems = s->recv_bytes / es;
  memset(b->recv, 0xa5, s->recv_bytes);
  if (in_place && b->o.coll == REDUCE_SCATTER)
    memset(b->recv, 0xa5, s->send_bytes);
  size_t in_first = 0;
  if (in_place && b->o.coll == ALL_GATHER) {
    in += (size_t)b->rank * s->count * es;
    in_first = (size_t)b->rank * s->count;
  }
  for (size_t i = 0; i < in_elems; i++)
    store_small(
        t, in, i,
        b->o.coll == BROADCAST || b->o.coll == ALL_GATHER
            ? input_value(b->o.coll == ALL_GATHER ? b->rank : 0, in_first + i)
            : input_value(b->rank, i));
  OK(b, call(b, s, in_place));
  const uint8_t *out = b->recv;
  if (in_place && b->o.coll == REDUCE_SCATTER)
    out += (size_t)b->rank * s->count * es;
  long wrong = 0;
  uint8_t want[8];
  for (size_t i = 0; i < out_elems; i++) {
    int v = 0;
    switch (b->o.coll) {
      case ALL_GATHER: v = input_value((int)(i / s->count), i); break;
      case BROADCAST: v = input_value(0, i); break;
      case REDUCE_SCATTER:
        for (size_t r = 0; r < n; r++)
          v += input_value((int)r, (size_t)b->rank * s->count + i);
        break;
      default:
        for (size_t r = 0; r < n; r++) v += input_value((int)r, i);
        break;
    }
    store_small(t, want, 0, v);
    if (memcmp(out + i * es, want, es)) wrong++;
  }
  long all = 0;
  OK(b, qcoll_all_reduce(&wrong, &all, 1, QCOLL_I64, QCOLL_SUM, b->comm, NULL));
  return all;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int k) {
  qsort(v, (size_t)k, sizeof *v, cmp_double);
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

static void run_size(bench_t *b, size_t bytes) {
  shape_t s = shape_of(b, bytes);
  double sec[NWHAT][MAX_ROUNDS], cpu[NWHAT][MAX_ROUNDS], flt[NWHAT][MAX_ROUNDS];
  for (int r = 0; r < b->o.rounds; r++)
    for (int k = 0; k < NWHAT; k++) {
      enum what w = (enum what)((k + r) % NWHAT); /* rotate the order */
      sample_t x = time_one(b, &s, w);
      sec[w][r] = x.sec;
      cpu[w][r] = x.cpu;
      flt[w][r] = x.faults;
    }
  long wrong = check(b, &s, false) + check(b, &s, true);
  b->wrong += wrong;
  double med[NWHAT], mc[NWHAT], mf[NWHAT];
  for (int w = 0; w < NWHAT; w++) {
    med[w] = median(sec[w], b->o.rounds);
    mc[w] = median(cpu[w], b->o.rounds);
    mf[w] = median(flt[w], b->o.rounds);
  }
  if (b->rank != 0) return;
  size_t moved = s.send_bytes > s.recv_bytes ? s.send_bytes : s.recv_bytes;
  printf(
      "%10zu  %9.1f %9.1f %6.2f  %9.1f %9.1f %6.2f %5.2f  %9.1f %9.1f "
      "%6.2f %5.2f  %6.0f %6.0f  %6ld\n",
      bytes, med[MEMCPY] * 1e6, mc[MEMCPY] * 1e6, moved / med[MEMCPY] / 1e9,
      med[OUT_OF_PLACE] * 1e6, mc[OUT_OF_PLACE] * 1e6,
      moved / med[OUT_OF_PLACE] / 1e9, med[OUT_OF_PLACE] / med[MEMCPY],
      med[IN_PLACE] * 1e6, mc[IN_PLACE] * 1e6, moved / med[IN_PLACE] / 1e9,
      med[IN_PLACE] / med[MEMCPY], mf[OUT_OF_PLACE], mf[IN_PLACE], wrong);
  fflush(stdout);
}

int main(int argc, char **argv) {
  bench_t b = {.o = parse(argc, argv)};
  OK(&b, qcoll_comm_init_env(&b.comm, NULL));
  OK(&b, qcoll_comm_rank(b.comm, &b.rank));
  OK(&b, qcoll_comm_size(b.comm, &b.n));
  shape_t big = shape_of(&b, b.o.max_bytes);
  /* In place, reduce-scatter reads the whole send size from recv. */
  b.recv_cap =
      big.send_bytes > big.recv_bytes ? big.send_bytes : big.recv_bytes;
  b.send_cap = big.send_bytes;
  b.send = map_bytes(b.send_cap);
  b.recv = map_bytes(b.recv_cap);
  b.copy_src = map_bytes(b.recv_cap);
  b.copy_dst = map_bytes(b.recv_cap);
  if (!b.o.untouched_send) touch(b.send, b.send_cap, (unsigned)b.rank);
  touch(b.recv, b.recv_cap, 7u + (unsigned)b.rank);
  touch(b.copy_src, b.recv_cap, 3u);
  touch(b.copy_dst, b.recv_cap, 5u);
  if (b.rank == 0) {
    printf(
        "# host_bw_bench %s  nranks %d  dtype %s  iters %d  warmup %d  "
        "rounds %d (median)%s\n",
        coll_names[b.o.coll], b.n, qcoll_dtype_name(b.o.dtype), b.o.iters,
        b.o.warmup, b.o.rounds,
        b.o.untouched_send ? "  send buffer NEVER WRITTEN (zero page)" : "");
    printf(
        "# memcpy: every rank copies SIZE bytes at the same time; "
        "x = time / memcpy time\n");
    printf(
        "# wall: the slowest rank; cpu: the ranks' mean user + system time\n");
    printf("#%9s  %26s  %32s  %32s  %13s  %6s\n", "size", "memcpy",
           "out-of-place", "in-place", "faults/call", "");
    printf(
        "#%9s  %9s %9s %6s  %9s %9s %6s %5s  %9s %9s %6s %5s  %6s %6s  %6s\n",
        "(B)", "wall(us)", "cpu(us)", "GB/s", "wall(us)", "cpu(us)", "GB/s",
        "x", "wall(us)", "cpu(us)", "GB/s", "x", "oop", "ip", "#wrong");
  }
  /* The first two calls of the largest size, before anything else: the
   * first one also maps the staging area into this process. */
  for (int k = 0; k < 2; k++) {
    OK(&b, qcoll_barrier(b.comm, NULL));
    usage_t u0 = usage_now();
    double t0 = now_s();
    OK(&b, call(&b, &big, false));
    double mine[2] = {now_s() - t0, (double)(usage_now().faults - u0.faults)},
           worst[2];
    OK(&b,
       qcoll_all_reduce(mine, worst, 2, QCOLL_F64, QCOLL_MAX, b.comm, NULL));
    if (b.rank == 0)
      printf(
          "# call %d of %zu bytes: %.1f us, %.0f minor faults (slowest rank, "
          "most faults)\n",
          k + 1, b.o.max_bytes, worst[0] * 1e6, worst[1]);
  }
  for (size_t bytes = b.o.min_bytes;;) {
    run_size(&b, bytes);
    if (bytes >= b.o.max_bytes) break;
    size_t next = (size_t)((double)bytes * b.o.factor);
    bytes = next > b.o.max_bytes || next <= bytes ? b.o.max_bytes : next;
  }
  if (b.rank == 0) printf("# wrong elements: %ld\n", b.wrong);
  OK(&b, qcoll_comm_destroy(b.comm));
  return b.wrong ? 1 : 0;
}
