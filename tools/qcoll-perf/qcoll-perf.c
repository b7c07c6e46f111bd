/*
 * qcoll-perf: bandwidth and latency of qcoll's collectives.
 *
 *   qcoll-run -n N qcoll-perf [options] [collective]
 *
 * For each size of a sweep, every rank runs `warmup` untimed calls, a
 * barrier, then `iters` timed calls; the time reported is the largest
 * per-rank average (so the slowest rank decides, as it does in a real job).
 * Out-of-place is measured first, then in-place.  With -c 1 one more call
 * per size runs on known inputs and every element of the result is
 * compared with the exact expectation; the mismatches of all ranks are
 * summed into the #wrong column and make the exit status non-zero.
 *
 * The table has the columns of the usual collective performance tests:
 *   size count type redop root | time algbw busbw #wrong  (out-of-place)
 *                              | time algbw busbw #wrong  (in-place)
 * where algbw = size / time and busbw = algbw x a per-collective factor
 * (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
 * broadcast, reduce, sendrecv 1), so that bus bandwidths compare with the
 * links' peak whatever the rank count.
 *
 * Started without a launcher's environment, it runs as a single rank.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define PROG_NAME "qcoll-perf"
#define EXIT_USAGE 2
/* Sweeps longer than this report progress on stderr. */
#define PROGRESS_MIN_ROWS 5

typedef struct perf_opts {
  const perf_coll_t *coll;
  size_t min_bytes, max_bytes;
  double step_factor; /* > 1 when stepping by factor */
  size_t step_bytes;  /* > 0 when stepping by increment */
  int iters, warmup;
  int check;
  qcoll_dtype_t dtypes[QCOLL_DTYPE_COUNT];
  int n_dtypes;
  qcoll_op_t ops[QCOLL_OP_COUNT];
  int n_ops;
  int root;
  int graph_launches; /* -G: 0 = no graph */
  qcoll_algo_t algo;
  qcoll_quant_t quant;
  perf_mem_kind_t mem;
} perf_opts_t;

/* ---- messages ------------------------------------------------------------ */

/* Before init, only the process that will be rank 0 prints input errors:
 * every rank parses the same command line and would say the same thing. */
static bool print_input_errors(void) {
  static const char *rank_vars[] = {"QCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *v = getenv(rank_vars[i]);
    if (v) return strcmp(v, "0") == 0;
  }
  return true;
}

static void print_usage(FILE *f) {
  fprintf(f,
          "Usage: " PROG_NAME " [options] [collective]\n"
          "       qcoll-run -n N " PROG_NAME " [options] [collective]\n"
          "Measure a qcoll collective over a range of sizes.\n"
          "\n"
          "collective: all_reduce (default), reduce, broadcast, all_gather,\n"
          "            reduce_scatter, all_to_all, sendrecv (ring), barrier\n"
          "  -b, --minbytes SIZE     smallest size (default 32M)\n"
          "  -e, --maxbytes SIZE     largest size (default 32M)\n"
          "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
          "  -i, --stepbytes SIZE    add SIZE each step instead\n"
          "  -n, --iters N           timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N    untimed iterations per size (default 5)\n"
          "  -c, --check 0|1         check every result exactly (default 1)\n"
          "  -d, --datatype T        i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64, or all\n"
          "                          (default f32)\n"
          "  -o, --op OP             sum prod min max avg, or all (default sum)\n"
          "  -r, --root R            root of reduce and broadcast (default 0)\n"
          "  -G, --cudagraph N       capture the timed loop in a CUDA graph and\n"
          "                          launch it N times (GPU memory only)\n"
          "  -a, --algo A            all_reduce algorithm: auto host oneshot twoshot nccl\n"
          "  -q, --quant Q           all_reduce transfer: none fp8 int8 int6 int4\n"
          "  -m, --memory host|gpu   buffer memory (default gpu with a GPU, else host)\n"
          "  -h, --help              show this help\n"
          "SIZE takes K, M, G suffixes (powers of 1024), e.g. 64K.\n"
          "Exit status: 0, 1 when a result was wrong or a call failed, 2 for bad input.\n");
}

static void input_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void input_error(const char *fmt, ...) {
  if (print_input_errors()) {
    /* One write, so the message arrives whole. */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(msg, sizeof msg, PROG_NAME ": ");
    n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof msg)
      snprintf(msg + n, sizeof msg - (size_t)n, "\nRun '" PROG_NAME " --help' for the options.\n");
    fputs(msg, stderr);
  } else {
    /* Every rank found the same error and rank 0 explains it.  Leaving
     * first would make the launcher stop rank 0 before it has printed, so
     * give it a moment; the launcher ends this wait when rank 0 exits. */
    struct timespec pause = {2, 0};
    nanosleep(&pause, NULL);
  }
  exit(EXIT_USAGE);
}

/* ---- parsing -------------------------------------------------------------- */

/* "64", "64K", "64KB", "64KiB", "1M", "2G": powers of 1024. */
static bool parse_size(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  if (*s == '-' || *s == '+') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift && (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0 || strcmp(end, "b") == 0))
    end += strlen(end);
  if (*end) return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = (size_t)(v << shift);
  return true;
}

static long parse_int(const char *opt, const char *s, long lo, long hi) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    input_error("%s needs an integer in %ld..%ld, got '%s'", opt, lo, hi, s);
  return v;
}

static bool dtype_by_name(const char *s, qcoll_dtype_t *dt) {
  /* Also the names of the usual performance tests. */
  static const struct { const char *alias; qcoll_dtype_t dt; } aliases[] = {
      {"int8", QCOLL_I8},     {"uint8", QCOLL_U8},   {"int32", QCOLL_I32},
      {"int", QCOLL_I32},     {"uint32", QCOLL_U32}, {"int64", QCOLL_I64},
      {"uint64", QCOLL_U64},  {"half", QCOLL_F16},   {"float16", QCOLL_F16},
      {"bfloat16", QCOLL_BF16}, {"float", QCOLL_F32}, {"float32", QCOLL_F32},
      {"double", QCOLL_F64},  {"float64", QCOLL_F64}};
  for (int i = 0; i < QCOLL_DTYPE_COUNT; i++)
    if (strcasecmp(s, qcoll_dtype_name((qcoll_dtype_t)i)) == 0) {
      *dt = (qcoll_dtype_t)i;
      return true;
    }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcasecmp(s, aliases[i].alias) == 0) {
      *dt = aliases[i].dt;
      return true;
    }
  return false;
}

static void parse_dtypes(const char *s, perf_opts_t *o) {
  if (strcasecmp(s, "all") == 0) {
    for (int i = 0; i < QCOLL_DTYPE_COUNT; i++) o->dtypes[i] = (qcoll_dtype_t)i;
    o->n_dtypes = QCOLL_DTYPE_COUNT;
    return;
  }
  if (!dtype_by_name(s, &o->dtypes[0]))
    input_error("-d: unknown datatype '%s' (i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64 or all)", s);
  o->n_dtypes = 1;
}

static void parse_ops(const char *s, perf_opts_t *o) {
  if (strcasecmp(s, "all") == 0) {
    for (int i = 0; i < QCOLL_OP_COUNT; i++) o->ops[i] = (qcoll_op_t)i;
    o->n_ops = QCOLL_OP_COUNT;
    return;
  }
  for (int i = 0; i < QCOLL_OP_COUNT; i++)
    if (strcasecmp(s, qcoll_op_name((qcoll_op_t)i)) == 0) {
      o->ops[0] = (qcoll_op_t)i;
      o->n_ops = 1;
      return;
    }
  input_error("-o: unknown op '%s' (sum prod min max avg or all)", s);
}

static qcoll_algo_t parse_algo(const char *s) {
  for (int i = 0; i < QCOLL_ALGO_COUNT; i++)
    if (strcasecmp(s, qcoll_algo_name((qcoll_algo_t)i)) == 0) return (qcoll_algo_t)i;
  input_error("-a: unknown algorithm '%s' (auto host oneshot twoshot nccl)", s);
}

static qcoll_quant_t parse_quant(const char *s) {
  for (int i = QCOLL_QUANT_NONE; i < QCOLL_QUANT_COUNT; i++)
    if (strcasecmp(s, qcoll_quant_name((qcoll_quant_t)i)) == 0) return (qcoll_quant_t)i;
  input_error("-q: unknown quantisation '%s' (none fp8 int8 int6 int4)", s);
}

static void parse_options(int argc, char **argv, perf_opts_t *o) {
  static const struct option longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},  {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'}, {"stepbytes", required_argument, NULL, 'i'},
      {"iters", required_argument, NULL, 'n'},     {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},     {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},        {"root", required_argument, NULL, 'r'},
      {"cudagraph", required_argument, NULL, 'G'}, {"algo", required_argument, NULL, 'a'},
      {"quant", required_argument, NULL, 'q'},     {"memory", required_argument, NULL, 'm'},
      {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
  *o = (perf_opts_t){.min_bytes = 32u << 20,
                     .max_bytes = 32u << 20,
                     .step_factor = 2,
                     .iters = 20,
                     .warmup = 5,
                     .check = 1,
                     .dtypes = {QCOLL_F32},
                     .n_dtypes = 1,
                     .ops = {QCOLL_SUM},
                     .n_ops = 1,
                     .algo = QCOLL_ALGO_AUTO,
                     .quant = QCOLL_QUANT_DEFAULT,
                     .mem = perf_gpu_available() ? PERF_MEM_GPU : PERF_MEM_HOST};
  bool factor_given = false, step_given = false, op_given = false, root_given = false;
  bool algo_given = false, quant_given = false;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:G:a:q:m:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'b':
      if (!parse_size(optarg, &o->min_bytes)) input_error("-b: bad size '%s'", optarg);
      break;
    case 'e':
      if (!parse_size(optarg, &o->max_bytes)) input_error("-e: bad size '%s'", optarg);
      break;
    case 'f': {
      char *end = NULL;
      o->step_factor = strtod(optarg, &end);
      if (end == optarg || *end || !(o->step_factor > 1) || !isfinite(o->step_factor))
        input_error("-f needs a step factor greater than 1, got '%s'", optarg);
      factor_given = true;
      break;
    }
    case 'i':
      if (!parse_size(optarg, &o->step_bytes) || o->step_bytes == 0)
        input_error("-i needs a step of at least 1 byte, got '%s'", optarg);
      step_given = true;
      break;
    case 'n': o->iters = (int)parse_int("-n", optarg, 1, 1000000000); break;
    case 'w': o->warmup = (int)parse_int("-w", optarg, 0, 1000000000); break;
    case 'c': o->check = (int)parse_int("-c", optarg, 0, 1); break;
    case 'd': parse_dtypes(optarg, o); break;
    case 'o':
      parse_ops(optarg, o);
      op_given = true;
      break;
    case 'r':
      o->root = (int)parse_int("-r", optarg, 0, 1 << 30);
      root_given = true;
      break;
    case 'G': o->graph_launches = (int)parse_int("-G", optarg, 0, 1000000000); break;
    case 'a':
      o->algo = parse_algo(optarg);
      algo_given = true;
      break;
    case 'q':
      o->quant = parse_quant(optarg);
      quant_given = true;
      break;
    case 'm':
      if (strcasecmp(optarg, "host") == 0) o->mem = PERF_MEM_HOST;
      else if (strcasecmp(optarg, "gpu") == 0) o->mem = PERF_MEM_GPU;
      else input_error("-m: memory must be host or gpu, got '%s'", optarg);
      break;
    case 'h':
      print_usage(stdout);
      exit(0);
    case ':':
      if (optopt && strchr("befinwcdorGaqm", optopt))
        input_error("option -%c needs an argument", optopt);
      input_error("option '%s' needs an argument", argv[optind - 1]);
    default:
      if (optopt && !strchr("befinwcdorGaqmh", optopt))
        input_error("unknown option -%c", optopt);
      input_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  o->coll = perf_coll_by_id(PERF_ALL_REDUCE);
  if (optind < argc) {
    o->coll = perf_coll_by_name(argv[optind]);
    if (!o->coll)
      input_error("unknown collective '%s' (all_reduce reduce broadcast all_gather "
                  "reduce_scatter all_to_all sendrecv barrier)", argv[optind]);
    optind++;
  }
  if (optind < argc) input_error("unexpected argument '%s' after the collective", argv[optind]);

  if (factor_given && step_given) input_error("-f and -i exclude each other: step by factor or by bytes");
  if (step_given) o->step_factor = 0;
  if (o->min_bytes > o->max_bytes)
    input_error("-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (o->step_factor > 0 && o->min_bytes == 0 && o->max_bytes > 0)
    input_error("-b 0 cannot grow by a factor: use -b 1 or more, or -i");
  if (op_given && !o->coll->has_op)
    input_error("-o does not apply to %s (it does not reduce)", o->coll->name);
  if (root_given && !o->coll->has_root)
    input_error("-r does not apply to %s (it has no root)", o->coll->name);
  if ((algo_given || quant_given) && o->coll->id != PERF_ALL_REDUCE)
    input_error("-a and -q apply to all_reduce only, not to %s", o->coll->name);
  if (o->graph_launches > 0 && o->mem == PERF_MEM_HOST)
    input_error("-G (CUDA graph capture) needs GPU buffers; this run uses host memory "
                "(host collectives are synchronous and cannot be captured)");
  if (o->mem == PERF_MEM_HOST && o->algo != QCOLL_ALGO_AUTO && o->algo != QCOLL_ALGO_HOST)
    input_error("-a %s needs GPU buffers; this run uses host memory (use -a auto or host)",
                qcoll_algo_name(o->algo));
}

/* ---- the size sweep ------------------------------------------------------- */

static size_t *sweep_sizes(const perf_opts_t *o, int *n) {
  size_t cap = 16, k = 0;
  size_t *sizes = malloc(cap * sizeof *sizes);
  if (!sizes) return NULL;
  if (o->coll->id == PERF_BARRIER) { /* no sizes: one row */
    sizes[0] = 0;
    *n = 1;
    return sizes;
  }
  for (size_t s = o->min_bytes;;) {
    if (k == cap) {
      size_t *more = realloc(sizes, (cap *= 2) * sizeof *sizes);
      if (!more) {
        free(sizes);
        return NULL;
      }
      sizes = more;
    }
    sizes[k++] = s;
    double next = o->step_factor > 0 ? (double)s * o->step_factor : (double)s + (double)o->step_bytes;
    /* Truncation could stall a small size with a small factor. */
    size_t ns = next >= (double)o->max_bytes + 1 ? o->max_bytes + 1 : (size_t)next;
    if (ns <= s) ns = s + 1;
    if (ns > o->max_bytes || s == o->max_bytes) break;
    s = ns;
  }
  *n = (int)k;
  return sizes;
}

static const char *human_bytes(size_t b, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    u++;
  }
  snprintf(buf, len, "%zu %s", b, units[u]);
  return buf;
}

/* ---- running and timing ---------------------------------------------------- */

typedef struct bench {
  const perf_opts_t *opt;
  qcoll_comm_t comm;
  int rank, nranks, local_rank;
  perf_buf_t send, recv;
  void *stream;
  qcoll_quant_t quant_effective;
  int64_t total_wrong;
  double bw_sum;
  int bw_count;
} bench_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A failed qcoll call ends the run: the launcher stops the other ranks. */
static void die_on_status(bench_t *b, qcoll_status_t st, const char *what) {
  if (st == QCOLL_OK) return;
  fprintf(stderr, PROG_NAME ": rank %d: %s failed: %s: %s\n", b->rank, what,
          qcoll_status_string(st),
          b->comm ? qcoll_comm_last_error(b->comm) : qcoll_last_error());
  if (b->comm) qcoll_comm_abort(b->comm);
  exit(st == QCOLL_ERR_INVALID_ARGUMENT || st == QCOLL_ERR_UNSUPPORTED ? EXIT_USAGE : 1);
}

static void die(bench_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(bench_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG_NAME ": rank %d: ", b->rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  if (b->comm) qcoll_comm_abort(b->comm);
  exit(1);
}

static void run_call(bench_t *b, const perf_call_t *call) {
  qcoll_status_t st = perf_call_run(call);
  if (st != QCOLL_OK) {
    char what[160];
    snprintf(what, sizeof what, "%s(count %zu, %s%s%s%s)", perf_call_fn(call), call->shape.count,
             qcoll_dtype_name(call->dtype), call->coll->has_op ? ", " : "",
             call->coll->has_op ? qcoll_op_name(call->op) : "",
             call->in_place ? ", in place" : "");
    die_on_status(b, st, what);
  }
}

static void sync_stream(bench_t *b) {
  if (perf_stream_sync(b->opt->mem, b->stream) != 0) die(b, "waiting for the stream failed");
}

/* Seconds per call: the slowest rank's average over the timed loop. */
static double time_call(bench_t *b, const perf_call_t *call) {
  for (int i = 0; i < b->opt->warmup; i++) run_call(b, call);
  sync_stream(b);
  die_on_status(b, qcoll_barrier(b->comm, NULL), "qcoll_barrier");
  /* GPU HOOK: with -G, capture the loop below into a CUDA graph once and
   * time opt->graph_launches launches of it instead. */
  double t0 = now_s();
  for (int i = 0; i < b->opt->iters; i++) run_call(b, call);
  sync_stream(b);
  double mine = (now_s() - t0) / b->opt->iters, slowest = 0;
  die_on_status(b, qcoll_all_reduce(&mine, &slowest, 1, QCOLL_F64, QCOLL_MAX, b->comm, NULL),
                "qcoll_all_reduce of the times");
  return slowest;
}

/* Allowed error of a quantised all-reduce: each of the n inputs is rounded
 * once (at most half a step of its group's scale, max_in / levels) and the
 * sum once more, plus the final rounding to the dtype. */
static perf_tolerance_t tolerance(const bench_t *b, const perf_call_t *call) {
  perf_tolerance_t tol = {0};
  if (call->coll->id != PERF_ALL_REDUCE || b->opt->mem != PERF_MEM_GPU) return tol;
  double levels;
  switch (b->quant_effective) {
  case QCOLL_QUANT_INT8: levels = 127; break;
  case QCOLL_QUANT_INT6: levels = 31; break;
  case QCOLL_QUANT_INT4: levels = 7; break;
  case QCOLL_QUANT_FP8: levels = 8; break; /* e4m3: 3 mantissa bits, 2^-4 relative */
  default: return tol;
  }
  double max_in = perf_check_max_input(call->dtype, call->op, b->nranks);
  double max_out = max_in * b->nranks;
  double eps = call->dtype == QCOLL_BF16 ? 0x1p-8 : call->dtype == QCOLL_F16 ? 0x1p-11 : 0x1p-24;
  tol.abs = (b->nranks * max_in + max_out) / (2 * levels) * 1.01 + max_out * eps;
  return tol;
}

/* One checked call on known inputs; the mismatches of all ranks. */
static int64_t check_call(bench_t *b, const perf_call_t *call) {
  if (perf_check_prepare(call) != 0) die(b, "cannot set up the check's inputs");
  die_on_status(b, qcoll_barrier(b->comm, NULL), "qcoll_barrier");
  run_call(b, call);
  sync_stream(b);
  int64_t mine = 0, all = 0;
  if (perf_check_count_wrong(call, tolerance(b, call), &mine) != 0)
    die(b, "cannot read back the check's results");
  die_on_status(b, qcoll_all_reduce(&mine, &all, 1, QCOLL_I64, QCOLL_SUM, b->comm, NULL),
                "qcoll_all_reduce of the error counts");
  return all;
}

static void format_time(double us, char *buf, size_t len) {
  if (us >= 10000.0) snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%7.1f", us);
  else snprintf(buf, len, "%7.2f", us);
}

/* Measure one placement and print its four columns (rank 0). */
static void run_placement(bench_t *b, perf_call_t *call, bool in_place) {
  if (in_place && !call->coll->has_in_place) {
    if (b->rank == 0) printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  call->in_place = in_place;
  double sec = time_call(b, call);
  char wrong_str[24] = "N/A";
  if (b->opt->check) {
    int64_t wrong = check_call(b, call);
    b->total_wrong += wrong;
    snprintf(wrong_str, sizeof wrong_str, "%lld", (long long)wrong);
  }
  double algbw = sec > 0 ? (double)call->shape.bytes / sec / 1e9 : 0;
  double busbw = algbw * perf_busbw_factor(call->coll, b->nranks);
  b->bw_sum += busbw;
  b->bw_count++;
  if (b->rank == 0) {
    char t[32];
    format_time(sec * 1e6, t, sizeof t);
    printf("  %7s  %6.2f  %6.2f  %6s", t, algbw, busbw, wrong_str);
  }
}

static void run_row(bench_t *b, size_t bytes, qcoll_dtype_t dt, qcoll_op_t op) {
  const perf_opts_t *o = b->opt;
  perf_call_t call = {.coll = o->coll, .comm = b->comm, .rank = b->rank, .nranks = b->nranks,
                      .dtype = dt, .op = op, .root = o->coll->has_root ? o->root : -1,
                      .send = &b->send, .recv = &b->recv, .stream = b->stream};
  call.shape = perf_coll_shape(o->coll, bytes, qcoll_dtype_size(dt), b->nranks);
  if (o->coll->id == PERF_ALL_REDUCE &&
      (o->algo != QCOLL_ALGO_AUTO || o->quant != QCOLL_QUANT_DEFAULT)) {
    call.use_ex = true;
    qcoll_all_reduce_options_init(&call.opts);
    call.opts.algo = o->algo;
    call.opts.quant = o->quant;
  }
  if (b->rank == 0)
    printf("%12zu  %12zu  %8s  %6s  %6d", call.shape.bytes, call.shape.count,
           qcoll_dtype_name(dt), o->coll->has_op ? qcoll_op_name(op) : "none", call.root);
  run_placement(b, &call, false);
  run_placement(b, &call, true);
  if (b->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
}

/* ---- report ---------------------------------------------------------------- */

typedef struct rank_info {
  char host[64];
  int32_t pid;
  int32_t device;
} rank_info_t;

static void print_header(bench_t *b) {
  const perf_opts_t *o = b->opt;
  rank_info_t me = {0}, *all = calloc((size_t)b->nranks, sizeof *all);
  if (!all) die(b, "out of memory");
  gethostname(me.host, sizeof me.host - 1);
  me.pid = (int32_t)getpid();
  int dev = QCOLL_DEVICE_NONE;
  qcoll_comm_device(b->comm, &dev);
  me.device = dev;
  die_on_status(b, qcoll_all_gather(&me, all, sizeof me, QCOLL_U8, b->comm, NULL),
                "qcoll_all_gather of the rank table");
  if (b->rank == 0) {
    int v = 0;
    qcoll_get_version(&v);
    printf("# " PROG_NAME " %s  (qcoll %d.%d.%d)\n", o->coll->name, v / 10000, (v / 100) % 100,
           v % 100);
    if (o->step_factor > 0)
      printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %g(factor)", b->nranks,
             o->min_bytes, o->max_bytes, o->step_factor);
    else
      printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %zu(bytes)", b->nranks,
             o->min_bytes, o->max_bytes, o->step_bytes);
    printf("  warmup iters: %d  iters: %d  validation: %d  graph: %d\n", o->warmup, o->iters,
           o->check, o->graph_launches);
    printf("#  memory: %s", o->mem == PERF_MEM_GPU ? "gpu" : "host");
    if (o->coll->id == PERF_ALL_REDUCE)
      printf("  algo: %s  quant: %s", qcoll_algo_name(o->algo),
             qcoll_quant_name(b->quant_effective));
    printf("\n#\n# Using ranks\n");
    for (int r = 0; r < b->nranks; r++) {
      all[r].host[sizeof all[r].host - 1] = 0;
      printf("#  Rank %3d  Pid %7d  on %16s  ", r, (int)all[r].pid, all[r].host);
      if (all[r].device >= 0) printf("device %d\n", (int)all[r].device);
      else printf("host memory\n");
    }
    printf("#\n");
    printf("# %72s%31s\n", "out-of-place", "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
           "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
  }
  free(all);
}

/* ---- setup ------------------------------------------------------------------ */

/* Under a launcher (qcoll-run, torchrun, MPI, Slurm) join its job;
 * otherwise run alone. */
static qcoll_status_t init_comm(qcoll_comm_t *comm, const qcoll_config_t *cfg) {
  static const char *launcher_vars[] = {"QCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK",
                                        "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
    if (getenv(launcher_vars[i])) return qcoll_comm_init_env(comm, cfg);
  qcoll_unique_id_t id;
  qcoll_status_t st = qcoll_get_unique_id(&id);
  if (st != QCOLL_OK) return st;
  return qcoll_comm_init_rank(comm, 1, &id, 0, cfg);
}

/* The quantisation the library will apply: -q, else QCOLL_QUANT. */
static qcoll_quant_t effective_quant(const perf_opts_t *o) {
  if (o->quant != QCOLL_QUANT_DEFAULT) return o->quant;
  const char *env = getenv("QCOLL_QUANT");
  if (env)
    for (int i = QCOLL_QUANT_NONE; i < QCOLL_QUANT_COUNT; i++)
      if (strcasecmp(env, qcoll_quant_name((qcoll_quant_t)i)) == 0) return (qcoll_quant_t)i;
  return QCOLL_QUANT_NONE;
}

int main(int argc, char **argv) {
  perf_opts_t opt;
  parse_options(argc, argv, &opt);
  bench_t b = {.opt = &opt, .quant_effective = effective_quant(&opt)};

  const char *local = getenv("QCOLL_LOCAL_RANK");
  b.local_rank = local ? atoi(local) : 0;
  const char *why = NULL;
  if (perf_mem_setup(opt.mem, b.local_rank, &why) != 0) input_error("%s", why);

  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  if (opt.mem == PERF_MEM_HOST) cfg.device = QCOLL_DEVICE_NONE; /* never touch a GPU */
  qcoll_status_t st = init_comm(&b.comm, &cfg);
  if (st != QCOLL_OK) {
    fprintf(stderr, PROG_NAME ": cannot create the communicator: %s: %s\n",
            qcoll_status_string(st), qcoll_last_error());
    return 1;
  }
  qcoll_comm_rank(b.comm, &b.rank);
  qcoll_comm_size(b.comm, &b.nranks);

  /* Checks that need the world size: every rank decides alike. */
  if (opt.coll->has_root && opt.root >= b.nranks) {
    qcoll_comm_destroy(b.comm);
    input_error("-r %d: the root must be a rank in 0..%d", opt.root, b.nranks - 1);
  }
  if (opt.coll->id == PERF_SENDRECV && b.nranks < 2) {
    qcoll_comm_destroy(b.comm);
    input_error("sendrecv needs at least 2 ranks (a ring of one would send to itself)");
  }

  int n_sizes = 0;
  size_t *sizes = sweep_sizes(&opt, &n_sizes);
  if (!sizes) die(&b, "out of memory");
  if (perf_buf_alloc(&b.send, opt.mem, opt.max_bytes) != 0 ||
      perf_buf_alloc(&b.recv, opt.mem, opt.max_bytes) != 0)
    die(&b, "cannot allocate two buffers of %zu bytes", opt.max_bytes);

  print_header(&b);
  int n_ops = opt.coll->has_op ? opt.n_ops : 1;
  int rows = n_sizes * opt.n_dtypes * n_ops, row = 0;
  for (int d = 0; d < opt.n_dtypes; d++) {
    for (int k = 0; k < n_ops; k++) {
      for (int s = 0; s < n_sizes; s++) {
        run_row(&b, sizes[s], opt.dtypes[d], opt.ops[k]);
        row++;
        if (b.rank == 0 && rows >= PROGRESS_MIN_ROWS) {
          char hb[32];
          fprintf(stderr, "# [%d/%d] %s %s%s%s done\n", row, rows,
                  human_bytes(sizes[s], hb, sizeof hb), qcoll_dtype_name(opt.dtypes[d]),
                  opt.coll->has_op ? " " : "", opt.coll->has_op ? qcoll_op_name(opt.ops[k]) : "");
        }
      }
    }
  }

  if (b.rank == 0) {
    if (opt.check)
      printf("# Out of bounds values : %lld %s\n", (long long)b.total_wrong,
             b.total_wrong ? "FAILED" : "OK");
    else
      printf("# Out of bounds values : N/A (not checked, -c 0)\n");
    printf("# Avg bus bandwidth    : %g\n", b.bw_count ? b.bw_sum / b.bw_count : 0.0);
    printf("#\n");
    fflush(stdout);
  }
  perf_buf_free(&b.send);
  perf_buf_free(&b.recv);
  free(sizes);
  st = qcoll_comm_destroy(b.comm);
  if (st != QCOLL_OK) {
    fprintf(stderr, PROG_NAME ": rank %d: qcoll_comm_destroy failed: %s: %s\n", b.rank,
            qcoll_status_string(st), qcoll_last_error());
    return 1;
  }
  return b.total_wrong ? 1 : 0;
}
