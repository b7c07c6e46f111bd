/*
 * qcoll-perf: bandwidth and latency of qcoll's collectives.
 *
 *   qcoll-run -n N qcoll-perf [options] [collective]
 *
 * For each size of a sweep, every rank runs `warmup` untimed calls, a
 * barrier, then `iters` timed calls; the time reported is the largest
 * per-rank average (so the slowest rank decides, as it does in a real job).
 * With --rounds R the timed loop runs R times and the row reports the
 * median round, so that an occasional slow round (processes sharing a
 * GPU) does not set the figure.
 * Out-of-place is measured first, then in-place.  With -c 1 one more call
 * per size runs on known inputs and every element of the result is
 * compared with the exact expectation (or, with a quantised transfer, with
 * a stated tolerance); the mismatches of all ranks are summed into the
 * #wrong column and make the exit status non-zero.
 *
 * GPU buffers (--mem gpu, the default when a GPU is visible): each rank takes
 * device local_rank % device count before the communicator is created,
 * the collectives run on a non-blocking stream of the tool's and CUDA
 * events on that stream time the loop.  With -G N the timed loop is
 * captured into a CUDA graph once and the graph is launched N times; when
 * the library refuses to capture a collective, the row says "nograph".
 * With --vs-nccl, NCCL runs the same collective on the same buffers right
 * after qcoll, and three more columns give its time, bus bandwidth and
 * the ratio nccl_time / qcoll_time (out of place; > 1: qcoll is faster).
 *
 * The table has the columns of the usual collective performance tests:
 *   size count type redop root | time algbw busbw #wrong  (out-of-place)
 *                              | time algbw busbw #wrong  (in-place)
 *                              [| nccl_time nccl_busbw ratio]
 * where algbw = size / time and busbw = algbw x a per-collective factor
 * (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
 * broadcast, reduce, sendrecv 1), so that bus bandwidths compare with the
 * links' peak whatever the rank count.
 *
 * The options the usual collective performance tests have keep their
 * letters and meanings (-b -e -f -i -n -w -c -o -d -r -G, -a for how the
 * ranks' times combine, -m for calls per timed iteration); qcoll's own
 * options have long names (--algo, --mem) or free letters (-q, -J).
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
#include "perf_json.h"

#define PROG_NAME "qcoll-perf"
#define EXIT_USAGE 2
/* Sweeps longer than this report progress on stderr. */
#define PROGRESS_MIN_ROWS 5

typedef struct perf_opts {
  const perf_coll_t *coll;
  perf_args_t args; /* sizes, iterations, check, root */
  qcoll_dtype_t dtypes[QCOLL_DTYPE_COUNT];
  int n_dtypes;
  qcoll_op_t ops[QCOLL_OP_COUNT];
  int n_ops;
  int graph_launches; /* -G: 0 = no graph */
  qcoll_options_t call_opts; /* --algo and -q (defaults without them) */
  bool use_call_opts;        /* --algo or -q given: calls take call_opts */
  perf_mem_kind_t mem;
  bool vs_nccl; /* NCCL on the same buffers, side by side */
  bool register_bufs; /* --register: both buffers registered with qcoll */
  int average;  /* -a: the time reported (perf_average_t) */
  int agg_iters; /* -m: calls per timed iteration */
  int rounds;    /* --rounds: timed loops per row, the median reported */
  const char *json_path; /* -J: the results as JSON, written by rank 0 */
} perf_opts_t;

/* -a: which rank's time a row reports, with the usual tests' numbers. */
typedef enum perf_average {
  PERF_AVG_RANK0 = 0,
  PERF_AVG_MEAN = 1,
  PERF_AVG_MIN = 2,
  PERF_AVG_MAX = 3
} perf_average_t;
static const char *const average_name[] = {"rank0", "mean", "min", "max"};

/* Most timed loops per row (--rounds): their times are kept on the stack. */
enum { PERF_MAX_ROUNDS = 1000 };

/* Long options without a short form. */
enum {
  OPT_VS_NCCL = 256,
  OPT_ALGO,
  OPT_MEM,
  OPT_VERSION,
  OPT_REGISTER,
  OPT_ROUNDS
};

/* ---- messages ------------------------------------------------------------ */

/* Before init, only the process that will be rank 0 prints input errors:
 * every rank parses the same command line and would say the same thing. */
static bool print_input_errors(void) {
  static const char *rank_vars[] = {"QCOLL_RANK", "RANK",
                                    "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *v = getenv(rank_vars[i]);
    if (v) return strcmp(v, "0") == 0;
  }
  return true;
}

static void print_usage(FILE *f) {
  fprintf(
      f,
      "Usage: " PROG_NAME
      " [options] [collective]\n"
      "       qcoll-run -n N " PROG_NAME
      " [options] [collective]\n"
      "Measure a qcoll collective over a range of sizes.\n"
      "\n"
      "collective: all_reduce (default), reduce, broadcast, all_gather,\n"
      "            reduce_scatter, all_to_all, sendrecv (ring), "
      "barrier\n" PERF_USAGE_SWEEP
      "  -d, --datatype T        i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64, or "
      "all\n"
      "                          (default f32)\n"
      "  -o, --op OP             sum prod min max avg, or all (default "
      "sum)\n" PERF_USAGE_ROOT
      "  -G, --cudagraph N       capture the timed loop in a CUDA graph and\n"
      "                          launch it N times (GPU memory only)\n"
      "  -a, --average 0|1|2|3   the time a row reports: rank 0's (0), the mean\n"
      "                          (1), the fastest (2) or the slowest rank's (3,\n"
      "                          the default)\n"
      "  -m, --agg_iters N       calls per timed iteration (default 1): a row's\n"
      "                          time is per call over iters x N calls\n"
      "      --rounds N          time the loop N times per row and report the\n"
      "                          median round (default 1), which a run that is\n"
      "                          now and then slow (GPUs shared by processes)\n"
      "                          does not move\n"
      "      --algo A            force an algorithm per call: auto host nccl "
      "ipc,\n"
      "                          and oneshot twoshot for all_reduce (not "
      "barrier)\n"
      "  -q, --quant Q           all_reduce transfer: none fp8 int8 int6 int4\n"
      "                          int3; +rot rotates groups (int8+rot)\n"
      "      --mem host|gpu      buffer memory (default gpu with a GPU, else "
      "host)\n"
      "  -J, --json FILE         also write the results as JSON to FILE\n"
      "      --vs-nccl           also run NCCL on the same buffers and print "
      "its\n"
      "                          time, bus bandwidth and nccl_time/qcoll_time\n"
      "                          (GPU memory only; NCCL loaded from "
      "QCOLL_NCCL_LIB,\n"
      "                          else libnccl.so.2)\n"
      "      --register          register both buffers with the communicator\n"
      "                          (qcoll_comm_register) before the sweep, so the\n"
      "                          two-shot reads and writes them in place\n"
      "                          (GPU memory only; with -G capture registers them\n"
      "                          anyway unless QCOLL_GRAPH_REGISTER=0)\n"
      "      --version           show the version\n" PERF_USAGE_HELP
      "Exit status: 0, 1 when a result was wrong or a call failed (GPU work\n"
      "not finished after QCOLL_TIMEOUT seconds included), 2 for bad input.\n"
      "A row whose time says 'nograph' was not timed: the library refused to\n"
      "capture that collective into a CUDA graph (the reason is printed "
      "once).\n");
}

static void input_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
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
      snprintf(msg + n, sizeof msg - (size_t)n,
               "\nRun '" PROG_NAME " --help' for the options.\n");
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

/* ---- parsing --------------------------------------------------------------
 */

static bool dtype_by_name(const char *s, qcoll_dtype_t *dt) {
  /* Also the names of the usual performance tests. */
  static const struct {
    const char *alias;
    qcoll_dtype_t dt;
  } aliases[] = {
      {"int8", QCOLL_I8},       {"uint8", QCOLL_U8},   {"int32", QCOLL_I32},
      {"int", QCOLL_I32},       {"uint32", QCOLL_U32}, {"int64", QCOLL_I64},
      {"uint64", QCOLL_U64},    {"half", QCOLL_F16},   {"float16", QCOLL_F16},
      {"bfloat16", QCOLL_BF16}, {"float", QCOLL_F32},  {"float32", QCOLL_F32},
      {"double", QCOLL_F64},    {"float64", QCOLL_F64}};
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
    input_error(
        "-d: unknown datatype '%s' (i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64 or "
        "all)",
        s);
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
    if (strcasecmp(s, qcoll_algo_name((qcoll_algo_t)i)) == 0)
      return (qcoll_algo_t)i;
  input_error("--algo: unknown algorithm '%s' (auto host oneshot twoshot nccl ipc)", s);
}

/* A quantisation name with an optional "+rot" suffix (rotated groups):
 * the format, QCOLL_QUANT_COUNT for an unknown name; *rotate the suffix. */
static qcoll_quant_t quant_from_name(const char *s, int *rotate) {
  const char *plus = strchr(s, '+');
  size_t len = plus ? (size_t)(plus - s) : strlen(s);
  *rotate = plus && strcasecmp(plus, "+rot") == 0;
  if (plus && !*rotate) return QCOLL_QUANT_COUNT;
  for (int i = QCOLL_QUANT_NONE; i < QCOLL_QUANT_COUNT; i++) {
    const char *name = qcoll_quant_name((qcoll_quant_t)i);
    if (strlen(name) == len && strncasecmp(s, name, len) == 0)
      return (qcoll_quant_t)i;
  }
  return QCOLL_QUANT_COUNT;
}

static qcoll_quant_t parse_quant(const char *s, int *rotate) {
  qcoll_quant_t q = quant_from_name(s, rotate);
  if (q != QCOLL_QUANT_COUNT) return q;
  input_error("-q: unknown quantisation '%s' (none fp8 int8 int6 int4 int3, "
              "optionally with +rot)",
              s);
}

/* -a and -m are numbers, as in the usual performance tests; a word there is
 * most likely an older command line's algorithm or memory. */
static int parse_average(const char *s) {
  for (int i = 0; i < QCOLL_ALGO_COUNT; i++)
    if (strcasecmp(s, qcoll_algo_name((qcoll_algo_t)i)) == 0)
      input_error("-a takes 0|1|2|3 (the time reported: rank 0, mean, min, "
                  "max over ranks); the algorithm is --algo %s", s);
  return (int)perf_parse_int("-a", s, PERF_AVG_RANK0, PERF_AVG_MAX, input_error);
}

static int parse_agg_iters(const char *s) {
  if (strcasecmp(s, "host") == 0 || strcasecmp(s, "gpu") == 0)
    input_error("-m takes a number of calls per timed iteration; buffer memory "
                "is --mem %s", s);
  return (int)perf_parse_int("-m", s, 1, 1000000, input_error);
}

/* -q asks for a format; where all ranks share a GPU the library quantises it
 * only from the size where it pays (the selection table's floors line),
 * so the header says from where. */
static void print_quant_floors(void) {
  char table[8192];
  if (qcoll_selection_table_format(table, sizeof table, NULL) != QCOLL_OK)
    return;
  const char *line = strstr(table, "quantised where all ranks share a GPU");
  if (!line) return;
  int len = (int)strcspn(line, "\n");
  printf(
      "#  %.*s (smaller messages run exact; QCOLL_QUANT_SHARED_GPU_FLOORS=0 "
      "quantises every size from QCOLL_QUANT_MIN_BYTES)\n",
      len, line);
}

static void print_version(void) {
  int v = 0;
  qcoll_get_version(&v);
  printf(PROG_NAME " %d.%d.%d (library qcoll %d.%d.%d, built with %s)\n",
         QCOLL_VERSION_MAJOR, QCOLL_VERSION_MINOR, QCOLL_VERSION_PATCH,
         v / 10000, (v / 100) % 100, v % 100,
         perf_cuda_built() ? "CUDA" : "no CUDA");
}

static void parse_options(int argc, char **argv, perf_opts_t *o) {
  static const struct option longopts[] = {
      PERF_ARGS_LONGOPTS,
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"cudagraph", required_argument, NULL, 'G'},
      {"average", required_argument, NULL, 'a'},
      {"agg_iters", required_argument, NULL, 'm'},
      {"algo", required_argument, NULL, OPT_ALGO},
      {"quant", required_argument, NULL, 'q'},
      {"mem", required_argument, NULL, OPT_MEM},
      {"memory", required_argument, NULL, OPT_MEM},
      {"json", required_argument, NULL, 'J'},
      {"vs-nccl", no_argument, NULL, OPT_VS_NCCL},
      {"register", no_argument, NULL, OPT_REGISTER},
      {"rounds", required_argument, NULL, OPT_ROUNDS},
      {"version", no_argument, NULL, OPT_VERSION},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (perf_opts_t){.dtypes = {QCOLL_F32},
                     .n_dtypes = 1,
                     .ops = {QCOLL_SUM},
                     .n_ops = 1,
                     .mem = PERF_MEM_HOST,
                     .average = PERF_AVG_MAX,
                     .agg_iters = 1,
                     .rounds = 1};
  qcoll_options_init(&o->call_opts);
  perf_args_init(&o->args, 'T', input_error);
  bool algo_given = false, quant_given = false, mem_given = false;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":" PERF_ARGS_SHORTOPTS "d:o:G:a:m:q:J:h",
                          longopts, NULL)) != -1) {
    if (perf_args_option(&o->args, c, optarg)) continue;
    switch (c) {
      case 'd': parse_dtypes(optarg, o); break;
      case 'o':
        parse_ops(optarg, o);
        o->args.op_given = true;
        break;
      case 'G':
        o->graph_launches =
            (int)perf_parse_int("-G", optarg, 0, 1000000000, input_error);
        break;
      case 'a': o->average = parse_average(optarg); break;
      case 'm': o->agg_iters = parse_agg_iters(optarg); break;
      case 'J': o->json_path = optarg; break;
      case OPT_ALGO:
        o->call_opts.algo = parse_algo(optarg);
        algo_given = true;
        break;
      case 'q':
        o->call_opts.quant = parse_quant(optarg, &o->call_opts.quant_rotate);
        quant_given = true;
        break;
      case OPT_MEM:
        if (strcasecmp(optarg, "host") == 0)
          o->mem = PERF_MEM_HOST;
        else if (strcasecmp(optarg, "gpu") == 0)
          o->mem = PERF_MEM_GPU;
        else
          input_error("--mem: memory must be host or gpu, got '%s'", optarg);
        mem_given = true;
        break;
      case OPT_VS_NCCL: o->vs_nccl = true; break;
      case OPT_REGISTER: o->register_bufs = true; break;
      case OPT_ROUNDS:
        o->rounds = (int)perf_parse_int("--rounds", optarg, 1, PERF_MAX_ROUNDS,
                                   input_error);
        break;
      case OPT_VERSION: print_version(); exit(0);
      case 'h': print_usage(stdout); exit(0);
      case ':':
        if (optopt > 0 && optopt < 128 && strchr("befinwcdorGamqJ", optopt))
          input_error("option -%c needs an argument", optopt);
        input_error("option '%s' needs an argument", argv[optind - 1]);
      default:
        if (optopt > 0 && optopt < 128 && !strchr("befinwcdorGamqJh", optopt))
          input_error("unknown option -%c", optopt);
        input_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  o->coll = perf_coll_by_id(PERF_ALL_REDUCE);
  if (optind < argc) {
    o->coll = perf_coll_by_name(argv[optind]);
    if (!o->coll)
      input_error(
          "unknown collective '%s' (all_reduce reduce broadcast all_gather "
          "reduce_scatter all_to_all sendrecv barrier)",
          argv[optind]);
    optind++;
  }
  if (optind < argc)
    input_error("unexpected argument '%s' after the collective", argv[optind]);

  perf_args_check(&o->args, o->coll);
  if (quant_given && o->coll->id != PERF_ALL_REDUCE)
    input_error("-q applies to all_reduce only, not to %s", o->coll->name);
  if (algo_given && o->coll->id == PERF_BARRIER)
    input_error("--algo does not apply to barrier: it moves no data and keeps its "
                "own path");
  const qcoll_algo_t algo = o->call_opts.algo;
  if ((algo_given && o->coll->id != PERF_ALL_REDUCE) &&
      (algo == QCOLL_ALGO_ONESHOT || algo == QCOLL_ALGO_TWOSHOT))
    input_error("--algo %s is an all_reduce algorithm; %s takes auto, host, nccl "
                "or ipc",
                qcoll_algo_name(algo), o->coll->name);
  o->use_call_opts = algo_given || quant_given;
  /* Ask the driver only when it matters: --mem host never touches a GPU. */
  const char *no_gpu = NULL;
  if (!mem_given)
    o->mem = perf_gpu_available(&no_gpu) ? PERF_MEM_GPU : PERF_MEM_HOST;
  char why_host[360] = "";
  if (o->mem == PERF_MEM_HOST && no_gpu)
    snprintf(why_host, sizeof why_host, ", as %s", no_gpu);
  else if (o->mem == PERF_MEM_HOST && !perf_cuda_built())
    snprintf(why_host, sizeof why_host,
             ", and this qcoll-perf was built without CUDA");
  if (o->graph_launches > 0 && o->mem == PERF_MEM_HOST)
    input_error(
        "-G (CUDA graph capture) needs GPU buffers; this run uses host "
        "memory%s "
        "(host collectives are synchronous and cannot be captured)",
        why_host);
  if (o->vs_nccl && o->mem == PERF_MEM_HOST)
    input_error(
        "--vs-nccl needs GPU buffers (NCCL runs on GPU memory); this run uses "
        "host "
        "memory%s",
        why_host);
  if (o->register_bufs && o->mem == PERF_MEM_HOST)
    input_error("--register needs GPU buffers; this run uses host memory%s",
                why_host);
  if (o->mem == PERF_MEM_HOST && o->call_opts.algo != QCOLL_ALGO_AUTO &&
      o->call_opts.algo != QCOLL_ALGO_HOST)
    input_error(
        "--algo %s needs GPU buffers; this run uses host memory%s (use --algo "
        "auto or host)",
        qcoll_algo_name(o->call_opts.algo), why_host);
}

/* ---- the size sweep -------------------------------------------------------
 */

static size_t *sweep_sizes(const perf_opts_t *o, int *n) {
  if (o->coll->id != PERF_BARRIER) return perf_sweep_sizes(&o->args, n);
  size_t *sizes = malloc(sizeof *sizes); /* no sizes: one row */
  if (!sizes) return NULL;
  sizes[0] = 0;
  *n = 1;
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

/* ---- running and timing ----------------------------------------------------
 */

/* Who runs a call: qcoll, or NCCL on the same buffers. */
typedef enum engine {
  ENGINE_QCOLL = 0,
  ENGINE_NCCL = 1,
  ENGINE_COUNT
} engine_t;
static const char *const engine_name[ENGINE_COUNT] = {"qcoll", "NCCL"};

typedef struct bench {
  const perf_opts_t *opt;
  qcoll_comm_t comm;
  int rank, nranks, local_rank;
  perf_buf_t send, recv;
  void *stream; /* the tool's stream (GPU memory), NULL for host memory */
  perf_timer_t timer;
  perf_nccl_t *nccl;      /* --vs-nccl and NCCL accepted */
  qcoll_reg_t reg_send, reg_recv; /* --register */
  char nccl_refused[320]; /* --vs-nccl and NCCL refused: why */
  qcoll_quant_t quant_effective;
  int rotate_effective; /* rotated groups (-q ...+rot, else QCOLL_QUANT) */
  perf_totals_t totals;
  /* Quantised checks: the largest error seen and the largest allowed. */
  double max_err, max_tol;
  bool tolerance_used;
  /* Placements the library (or NCCL) would not capture, and why. */
  int not_captured[ENGINE_COUNT];
  char capture_refusal[ENGINE_COUNT][512];
  /* NCCL's side of the comparison. */
  double nccl_bw_sum, log_ratio_sum;
  int nccl_bw_count, ratio_count;
  perf_json_t json; /* -J, rank 0: json.f open */
} bench_t;

/* One placement's outcome: the slowest rank's seconds per call. */
typedef struct timing {
  bool timed; /* false: -G and the capture was refused */
  double sec;
  perf_graph_t graph; /* -G: the captured loop, kept for the check */
} timing_t;

/* A failed qcoll call ends the run: the launcher stops the other ranks. */
/* Leave after a failure without exit()'s handlers: the CUDA runtime's
 * would wait for GPU work that may never finish (a stalled kernel), so the
 * rank would hang after printing why it gave up. */
static void leave(int code) __attribute__((noreturn));
static void leave(int code) {
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

static void die_on_status(bench_t *b, qcoll_status_t st, const char *what) {
  if (st == QCOLL_OK) return;
  fprintf(stderr, PROG_NAME ": rank %d: %s failed: %s: %s\n", b->rank, what,
          qcoll_status_string(st),
          b->comm ? qcoll_comm_last_error(b->comm) : qcoll_last_error());
  if (b->comm) qcoll_comm_abort(b->comm);
  leave(st == QCOLL_ERR_INVALID_ARGUMENT || st == QCOLL_ERR_UNSUPPORTED
            ? EXIT_USAGE
            : 1);
}

static void die(bench_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void die(bench_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG_NAME ": rank %d: ", b->rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  if (b->comm) qcoll_comm_abort(b->comm);
  leave(1);
}

static void describe_call(const perf_call_t *call, char *buf, size_t len) {
  snprintf(buf, len, "%s(count %zu, %s%s%s%s)", perf_call_fn(call),
           call->shape.count, qcoll_dtype_name(call->dtype),
           call->coll->has_op ? ", " : "",
           call->coll->has_op ? qcoll_op_name(call->op) : "",
           call->in_place ? ", in place" : "");
}

/* Enqueue one call on engine e.  A failure ends the run, except while the
 * stream is being captured: then a call that cannot be captured (qcoll
 * says QCOLL_ERR_UNSUPPORTED; NCCL fails) is returned as false with the
 * reason in why, so the row can be marked instead. */
static bool enqueue(bench_t *b, engine_t e, const perf_call_t *call,
                    bool capturing, char *why, size_t len) {
  char what[200];
  if (e == ENGINE_NCCL) {
    if (perf_nccl_run(b->nccl, call, why, len) == 0) return true;
    if (capturing) return false;
    die(b, "NCCL %s (count %zu, %s) failed: %s", call->coll->name,
        call->shape.count, qcoll_dtype_name(call->dtype), why);
  }
  qcoll_status_t st = perf_call_run(call);
  if (st == QCOLL_OK) return true;
  if (capturing && st == QCOLL_ERR_UNSUPPORTED) {
    snprintf(why, len, "%s", qcoll_comm_last_error(b->comm));
    return false;
  }
  describe_call(call, what, sizeof what);
  if (capturing)
    strncat(what, " while capturing a CUDA graph",
            sizeof what - strlen(what) - 1);
  die_on_status(b, st, what);
  return false; /* not reached */
}

/* Wait for the stream; a GPU kernel that gave up (a peer never came)
 * reports here rather than in the call that launched it. */
static void sync_stream(bench_t *b) {
  if (perf_stream_sync(b->opt->mem, b->stream) != 0)
    die(b, "waiting for the stream failed: %s", perf_gpu_error());
  if (b->opt->mem == PERF_MEM_GPU) {
    qcoll_status_t async = QCOLL_OK;
    die_on_status(b, qcoll_comm_get_async_error(b->comm, &async),
                  "qcoll_comm_get_async_error");
    if (async != QCOLL_OK)
      die_on_status(b, async, "a GPU collective (asynchronous error)");
  }
}

static void barrier(bench_t *b) {
  die_on_status(b, qcoll_barrier(b->comm, NULL), "qcoll_barrier");
}

/* The first refusal of each engine is printed (rank 0), the rest counted. */
static void note_refusal(bench_t *b, engine_t e, const perf_call_t *call,
                         int who, const char *why) {
  if (b->not_captured[e]++ == 0) {
    snprintf(b->capture_refusal[e], sizeof b->capture_refusal[e], "%s", why);
    if (b->rank == 0)
      fprintf(stderr,
              PROG_NAME
              ": %s did not capture %s (%s) into a CUDA graph on rank %d: "
              "%s\n" PROG_NAME ": such rows say 'nograph' and are not timed\n",
              engine_name[e], call->coll->name, qcoll_dtype_name(call->dtype),
              who, why);
  }
}

/* Calls in one timed loop: iters iterations of -m calls each. */
static int timed_calls(const perf_opts_t *o) { return o->args.iters * o->agg_iters; }

/* The median of n times (the lower middle one for even n), reordering
 * them. */
static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median_of(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, compare_doubles);
  return t[(n - 1) / 2];
}

/* This rank's seconds per call combined over the ranks as -a says. */
static double combine_times(bench_t *b, double mine) {
  static const qcoll_op_t op_of[] = {[PERF_AVG_MEAN] = QCOLL_SUM,
                                     [PERF_AVG_MIN] = QCOLL_MIN,
                                     [PERF_AVG_MAX] = QCOLL_MAX};
  double out = 0;
  if (b->opt->average == PERF_AVG_RANK0) {
    die_on_status(b, qcoll_broadcast(&mine, &out, 1, QCOLL_F64, 0, b->comm, NULL),
                  "qcoll_broadcast of rank 0's time");
    return out;
  }
  die_on_status(b,
                qcoll_all_reduce(&mine, &out, 1, QCOLL_F64, op_of[b->opt->average],
                                 b->comm, NULL),
                "qcoll_all_reduce of the times");
  return b->opt->average == PERF_AVG_MEAN ? out / b->nranks : out;
}

/* Capture the timed loop (iters x agg_iters calls) into *g.  Collective: a graph only
 * when every rank captured one, since a graph launched on some ranks only
 * would wait for the others until its deadline. */
static bool capture(bench_t *b, engine_t e, const perf_call_t *call,
                    perf_graph_t *g) {
  char why[512] = "";
  bool ok = true;
  if (perf_capture_begin(b->stream) != 0)
    die(b, "cannot start capturing a CUDA graph: %s", perf_gpu_error());
  for (int i = 0; ok && i < timed_calls(b->opt); i++)
    ok = enqueue(b, e, call, true, why, sizeof why);
  if (perf_capture_end(b->stream, ok, g) != 0 && ok) {
    ok = false;
    snprintf(why, sizeof why, "the calls returned, but the capture failed: %s",
             perf_gpu_error());
  }
  int32_t mine = ok ? b->nranks : b->rank, first = b->nranks;
  die_on_status(
      b,
      qcoll_all_reduce(&mine, &first, 1, QCOLL_I32, QCOLL_MIN, b->comm, NULL),
      "qcoll_all_reduce of the capture outcomes");
  if (first == b->nranks) return true;
  perf_graph_destroy(g);
  /* The reason of the first rank that could not capture, for everyone. */
  die_on_status(
      b, qcoll_broadcast(why, why, sizeof why, QCOLL_U8, first, b->comm, NULL),
      "qcoll_broadcast of the capture refusal");
  why[sizeof why - 1] = 0;
  note_refusal(b, e, call, first, why);
  return false;
}

/* Seconds per call on engine e: each rank's average over the timed loop,
 * timed on the stream, combined over the ranks as -a says (by default the
 * slowest rank's). */
static timing_t time_calls(bench_t *b, engine_t e, const perf_call_t *call) {
  const perf_opts_t *o = b->opt;
  timing_t t = {.timed = true};
  char why[512];
  for (int i = 0; i < o->args.warmup; i++)
    enqueue(b, e, call, false, why, sizeof why);
  sync_stream(b);
  int launches = 1;
  if (o->graph_launches > 0) {
    if (!capture(b, e, call, &t.graph)) {
      t.timed = false;
      return t;
    }
    launches = o->graph_launches;
  }
  double rounds[PERF_MAX_ROUNDS];
  for (int r = 0; r < o->rounds; r++) {
    barrier(b);
    if (perf_timer_start(&b->timer, b->stream) != 0)
      die(b, "cannot start the timer: %s", perf_gpu_error());
    if (t.graph.exec) {
      for (int k = 0; k < launches; k++)
        if (perf_graph_launch(&t.graph, b->stream) != 0)
          die(b, "launching the CUDA graph failed: %s", perf_gpu_error());
    } else {
      for (int i = 0; i < timed_calls(o); i++)
        enqueue(b, e, call, false, why, sizeof why);
    }
    double elapsed = 0;
    if (perf_timer_stop(&b->timer, b->stream, &elapsed) != 0)
      die(b, "waiting for the timed loop failed: %s", perf_gpu_error());
    sync_stream(b); /* asynchronous errors of the loop */
    /* Every rank combines every round, so all hold the same list. */
    rounds[r] = combine_times(b, elapsed / ((double)timed_calls(o) * launches));
  }
  t.sec = median_of(rounds, o->rounds);
  return t;
}

/* Exact, or within the bound of a quantised all-reduce on GPU buffers. */
static perf_tolerance_t tolerance(const bench_t *b, const perf_call_t *call) {
  perf_tolerance_t tol = {0};
  if (call->coll->id != PERF_ALL_REDUCE || b->opt->mem != PERF_MEM_GPU)
    return tol;
  tol = perf_quant_tolerance(b->quant_effective, call->dtype, call->op,
                             b->nranks);
  /* Rotated groups: |error of a value| <= the largest error of its rotated
   * group, whose amax is at most 32 times the inputs' (codec.h). */
  if (b->rotate_effective) tol.abs *= 32;
  return tol;
}

/* One checked call on known inputs; the mismatches of all ranks.  With a
 * captured graph and out of place, the graph itself runs: each of its
 * calls reads the same input and writes the same output, so one replay on
 * fresh inputs must give the exact result (a replay that reused state
 * frozen at capture would not). */
static int64_t check_call(bench_t *b, const perf_call_t *call,
                          const timing_t *t) {
  if (perf_check_prepare(call) != 0)
    die(b, "cannot set up the check's inputs: %s", perf_gpu_error());
  barrier(b);
  if (t->graph.exec && !call->in_place) {
    if (perf_graph_launch(&t->graph, b->stream) != 0)
      die(b, "launching the CUDA graph failed: %s", perf_gpu_error());
  } else {
    char why[512];
    enqueue(b, ENGINE_QCOLL, call, false, why, sizeof why);
  }
  sync_stream(b);
  perf_tolerance_t tol = tolerance(b, call);
  int64_t mine = 0, all = 0;
  double err = 0, worst = 0;
  if (perf_check_compare(call, tol, &mine, &err) != 0)
    die(b, "cannot read back the check's results: %s", perf_gpu_error());
  die_on_status(
      b, qcoll_all_reduce(&mine, &all, 1, QCOLL_I64, QCOLL_SUM, b->comm, NULL),
      "qcoll_all_reduce of the error counts");
  if (tol.abs > 0) {
    die_on_status(
        b,
        qcoll_all_reduce(&err, &worst, 1, QCOLL_F64, QCOLL_MAX, b->comm, NULL),
        "qcoll_all_reduce of the errors");
    b->tolerance_used = true;
    if (worst > b->max_err) b->max_err = worst;
    if (tol.abs > b->max_tol) b->max_tol = tol.abs;
  }
  return all;
}

/* Measure one placement with qcoll, print its four columns (rank 0) and
 * describe it in *res.  Returns the seconds per call, or -1 when not
 * timed. */
static double run_placement(bench_t *b, perf_call_t *call, bool in_place,
                            perf_json_result_t *res) {
  *res = (perf_json_result_t){.present = false};
  if (in_place && !call->coll->has_in_place) {
    if (b->rank == 0) perf_print_untimed("N/A", "N/A");
    return -1;
  }
  res->present = true;
  call->in_place = in_place;
  timing_t t = time_calls(b, ENGINE_QCOLL, call);
  int64_t wrong = 0;
  if (b->opt->args.check) {
    wrong = check_call(b, call, &t);
    b->totals.wrong += wrong;
  }
  char wrong_str[24];
  perf_format_wrong(b->opt->args.check, wrong, wrong_str, sizeof wrong_str);
  perf_graph_destroy(&t.graph);
  res->checked = b->opt->args.check;
  res->wrong = wrong;
  if (!t.timed) {
    if (b->rank == 0) perf_print_untimed("nograph", wrong_str);
    res->untimed = "nograph";
    return -1;
  }
  double algbw = perf_algbw(call->shape.bytes, t.sec);
  double busbw = algbw * perf_busbw_factor(call->coll, b->nranks);
  res->sec = t.sec;
  res->algbw = algbw;
  res->busbw = busbw;
  b->totals.bw_sum += busbw;
  b->totals.bw_count++;
  if (b->rank == 0) perf_print_placement(t.sec, algbw, busbw, wrong_str);
  return t.sec;
}

/* NCCL out of place on the same buffers, and the ratio to qcoll's
 * out-of-place time (rank 0 prints three columns; *res describes them). */
static void run_nccl(bench_t *b, perf_call_t *call, double qcoll_sec,
                     perf_json_result_t *res) {
  *res = (perf_json_result_t){.present = false};
  if (!perf_nccl_supports(call)) {
    if (b->rank == 0) printf("  %9s  %10s  %6s", "N/A", "N/A", "N/A");
    return;
  }
  res->present = true;
  call->in_place = false;
  timing_t t = time_calls(b, ENGINE_NCCL, call);
  perf_graph_destroy(&t.graph);
  if (!t.timed) {
    if (b->rank == 0) printf("  %9s  %10s  %6s", "nograph", "N/A", "N/A");
    res->untimed = "nograph";
    return;
  }
  double busbw = perf_algbw(call->shape.bytes, t.sec) *
                 perf_busbw_factor(call->coll, b->nranks);
  b->nccl_bw_sum += busbw;
  b->nccl_bw_count++;
  res->sec = t.sec;
  res->busbw = busbw;
  char ratio[16] = "N/A";
  if (qcoll_sec > 0 && t.sec > 0) {
    res->ratio = t.sec / qcoll_sec;
    snprintf(ratio, sizeof ratio, "%6.2f", t.sec / qcoll_sec);
    b->log_ratio_sum += log(t.sec / qcoll_sec);
    b->ratio_count++;
  }
  if (b->rank == 0) {
    char ts[32];
    perf_format_time(t.sec * 1e6, 9, ts, sizeof ts);
    printf("  %9s  %10.2f  %6s", ts, busbw, ratio);
  }
}

static void run_row(bench_t *b, size_t bytes, qcoll_dtype_t dt, qcoll_op_t op) {
  const perf_opts_t *o = b->opt;
  perf_call_t call = {.coll = o->coll,
                      .comm = b->comm,
                      .rank = b->rank,
                      .nranks = b->nranks,
                      .dtype = dt,
                      .op = op,
                      .root = o->coll->has_root ? o->args.root : -1,
                      .send = &b->send,
                      .recv = &b->recv,
                      .stream = b->stream};
  call.shape = perf_coll_shape(o->coll, bytes, qcoll_dtype_size(dt), b->nranks);
  call.opts = o->use_call_opts ? &o->call_opts : NULL;
  perf_json_row_t row = {.size = call.shape.bytes,
                         .count = call.shape.count,
                         .type = qcoll_dtype_name(dt),
                         .redop = o->coll->has_op ? qcoll_op_name(op) : "none",
                         .root = call.root};
  if (b->rank == 0)
    perf_print_row_start(row.size, row.count, row.type, row.redop, row.root);
  double out_of_place = run_placement(b, &call, false, &row.out_of_place);
  run_placement(b, &call, true, &row.in_place);
  if (b->nccl) run_nccl(b, &call, out_of_place, &row.nccl);
  if (b->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
  if (b->json.f) perf_json_row(&b->json, &row);
}

/* ---- report ----------------------------------------------------------------
 */

typedef struct rank_info {
  char host[64];
  int32_t pid;
  int32_t device;
  char gpu[96];
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
  if (o->mem == PERF_MEM_GPU) perf_gpu_describe(me.gpu, sizeof me.gpu);
  die_on_status(b,
                qcoll_all_gather(&me, all, sizeof me, QCOLL_U8, b->comm, NULL),
                "qcoll_all_gather of the rank table");
  if (b->rank == 0) {
    int v = 0;
    qcoll_get_version(&v);
    char library[32];
    snprintf(library, sizeof library, "qcoll %d.%d.%d", v / 10000,
             (v / 100) % 100, v % 100);
    perf_print_title(PROG_NAME, o->coll->name, library);
    perf_print_sweep(b->nranks, &o->args, o->graph_launches);
    printf("#  memory: %s", o->mem == PERF_MEM_GPU ? "gpu" : "host");
    if (o->coll->id == PERF_ALL_REDUCE)
      printf("  algo: %s  quant: %s%s", qcoll_algo_name(o->call_opts.algo),
             qcoll_quant_name(b->quant_effective),
             b->rotate_effective ? "+rot" : "");
    else if (o->coll->id != PERF_BARRIER)
      printf("  algo: %s", qcoll_algo_name(o->call_opts.algo));
    printf("  buffers: %s", o->register_bufs ? "registered" : "not registered");
    printf("  timing: %s  time: %s of ranks  agg iters: %d  rounds: %d%s\n",
           o->mem == PERF_MEM_HOST      ? "wall clock"
           : o->graph_launches > 0 ? "CUDA events around graph launches"
                                   : "CUDA events on the stream",
           average_name[o->average], o->agg_iters, o->rounds,
           o->rounds > 1 ? " (median)" : "");
    if (o->coll->id == PERF_ALL_REDUCE && o->mem == PERF_MEM_GPU &&
        b->quant_effective != QCOLL_QUANT_NONE)
      print_quant_floors();
    if (b->nccl)
      printf(
          "#  NCCL %s on the same buffers, out of place; "
          "ratio = nccl_time / qcoll out-of-place time (> 1: qcoll is "
          "faster)\n",
          perf_nccl_describe(b->nccl));
    else if (o->vs_nccl)
      printf("# NCCL refused: %s; going on without the NCCL columns\n",
             b->nccl_refused);
    printf("#\n# Using ranks\n");
    for (int r = 0; r < b->nranks; r++) {
      all[r].host[sizeof all[r].host - 1] = 0;
      all[r].gpu[sizeof all[r].gpu - 1] = 0;
      perf_print_rank(r, (int)all[r].pid, all[r].host);
      if (all[r].device >= 0)
        printf("device %d  %s\n", (int)all[r].device, all[r].gpu);
      else
        printf("host memory\n");
    }
    printf("#\n");
    perf_print_columns(b->nccl != NULL);
    fflush(stdout);
  }
  free(all);
}

static void print_footer(const bench_t *b) {
  const perf_opts_t *o = b->opt;
  perf_print_totals(o->args.check, &b->totals);
  if (b->tolerance_used)
    printf("# Max abs error        : %g (quantised transfer %s; allowed %g)\n",
           b->max_err, qcoll_quant_name(b->quant_effective), b->max_tol);
  if (b->nccl) {
    printf("# Avg NCCL bus bandwidth : %g\n",
           b->nccl_bw_count ? b->nccl_bw_sum / b->nccl_bw_count : 0.0);
    if (b->ratio_count)
      printf(
          "# Geomean ratio        : %.3f (nccl_time / qcoll_time over %d "
          "rows)\n",
          exp(b->log_ratio_sum / b->ratio_count), b->ratio_count);
  }
  for (int e = 0; e < ENGINE_COUNT; e++)
    if (b->not_captured[e])
      printf("# Not captured         : %d placement(s) of %s (nograph): %s\n",
             b->not_captured[e], engine_name[e], b->capture_refusal[e]);
  printf("#\n");
  fflush(stdout);
}

/* -J: rank 0 starts the JSON document once the header is known. */
static void start_json(bench_t *b) {
  const perf_opts_t *o = b->opt;
  if (!o->json_path || b->rank != 0) return;
  int v = 0;
  qcoll_get_version(&v);
  char library[32], version[32];
  snprintf(library, sizeof library, "qcoll %d.%d.%d", v / 10000,
           (v / 100) % 100, v % 100);
  snprintf(version, sizeof version, "%d.%d.%d", QCOLL_VERSION_MAJOR,
           QCOLL_VERSION_MINOR, QCOLL_VERSION_PATCH);
  char quant[32];
  snprintf(quant, sizeof quant, "%s%s", qcoll_quant_name(b->quant_effective),
           b->rotate_effective ? "+rot" : "");
  perf_json_run_t run = {
      .version = version,
      .library = library,
      .collective = o->coll->name,
      .memory = o->mem == PERF_MEM_GPU ? "gpu" : "host",
      .algo = qcoll_algo_name(o->call_opts.algo),
      .quant = quant,
      .average = average_name[o->average],
      .nranks = b->nranks,
      .iters = o->args.iters,
      .warmup_iters = o->args.warmup,
      .agg_iters = o->agg_iters,
      .rounds = o->rounds,
      .graph_launches = o->graph_launches,
      .registered = o->register_bufs,
      .check = o->args.check,
      .nccl = b->nccl ? perf_nccl_describe(b->nccl) : NULL};
  if (perf_json_open(&b->json, o->json_path, &run) != 0)
    die(b, "-J %s: cannot write %s.tmp: %s", o->json_path, o->json_path,
        strerror(errno));
}

static void finish_json(bench_t *b) {
  if (!b->json.f) return;
  const char *path = b->opt->json_path;
  double avg = b->totals.bw_count ? b->totals.bw_sum / b->totals.bw_count : 0;
  if (perf_json_close(&b->json, b->totals.wrong, avg) != 0)
    die(b, "-J %s: writing the results failed: %s", path, strerror(errno));
}

/* ---- setup ------------------------------------------------------------------
 */

/* The tool's GPU waits end where the library's do: QCOLL_TIMEOUT, or its
 * default from the library's table; 0 (keep the tool's own) if unreadable. */
static double wait_deadline(void) {
  const char *value = getenv("QCOLL_TIMEOUT");
  const char *name = NULL, *fallback = NULL;
  for (int i = 0; (!value || !*value) &&
                  qcoll_env_describe(i, &name, &fallback, NULL) == QCOLL_OK;
       i++)
    if (!strcmp(name, "QCOLL_TIMEOUT")) value = fallback;
  char *end = NULL;
  double seconds = value ? strtod(value, &end) : 0;
  return end && end != value && !*end ? seconds : 0;
}

/* Under a launcher (qcoll-run, torchrun, MPI, Slurm) join its job;
 * otherwise run alone. */
static qcoll_status_t init_comm(qcoll_comm_t *comm, const qcoll_config_t *cfg) {
  static const char *launcher_vars[] = {"QCOLL_RANK", "RANK",
                                        "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
    if (getenv(launcher_vars[i])) return qcoll_comm_init_env(comm, cfg);
  qcoll_unique_id_t id;
  qcoll_status_t st = qcoll_get_unique_id(&id);
  if (st != QCOLL_OK) return st;
  return qcoll_comm_init_rank(comm, 1, &id, 0, cfg);
}

/* This process's index among the ranks of its host, as the launchers
 * qcoll_comm_init_env() knows set it; 0 when run alone. */
static int local_rank_from_env(void) {
  static const char *vars[] = {"QCOLL_LOCAL_RANK", "LOCAL_RANK",
                               "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  return 0;
}

/* The quantisation the library will apply: -q, else QCOLL_QUANT. */
static qcoll_quant_t effective_quant(const perf_opts_t *o, int *rotate) {
  *rotate = o->call_opts.quant_rotate;
  if (o->call_opts.quant != QCOLL_QUANT_DEFAULT) return o->call_opts.quant;
  const char *env = getenv("QCOLL_QUANT");
  qcoll_quant_t q = env ? quant_from_name(env, rotate) : QCOLL_QUANT_COUNT;
  if (q == QCOLL_QUANT_COUNT) *rotate = 0;
  return q == QCOLL_QUANT_COUNT ? QCOLL_QUANT_NONE : q;
}

/* GPU memory: the communicator must have taken the device this rank
 * selected, or every collective on these buffers would be refused. */
static void check_device(bench_t *b) {
  if (b->opt->mem != PERF_MEM_GPU) return;
  int comm_dev = QCOLL_DEVICE_NONE, mine = perf_current_device();
  qcoll_comm_device(b->comm, &comm_dev);
  if (comm_dev != mine)
    die(b,
        "the communicator took device %d, but this rank selected device %d "
        "(local rank %d) "
        "for its buffers",
        comm_dev, mine, b->local_rank);
}

int main(int argc, char **argv) {
  perf_opts_t opt;
  parse_options(argc, argv, &opt);
  bench_t b = {.opt = &opt};
  b.quant_effective = effective_quant(&opt, &b.rotate_effective);

  /* The device first: the communicator takes the one current at init. */
  b.local_rank = local_rank_from_env();
  const char *why = NULL;
  if (perf_mem_setup(opt.mem, b.local_rank, &why) != 0) input_error("%s", why);

  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  if (opt.mem == PERF_MEM_HOST)
    cfg.device = QCOLL_DEVICE_NONE; /* never touch a GPU */
  qcoll_status_t st = init_comm(&b.comm, &cfg);
  if (st != QCOLL_OK) {
    fprintf(stderr, PROG_NAME ": cannot create the communicator: %s: %s\n",
            qcoll_status_string(st), qcoll_last_error());
    return 1;
  }
  qcoll_comm_rank(b.comm, &b.rank);
  qcoll_comm_size(b.comm, &b.nranks);
  check_device(&b);
  perf_set_wait_deadline(wait_deadline());

  /* Checks that need the world size: every rank decides alike. */
  if (opt.coll->has_root && opt.args.root >= b.nranks) {
    qcoll_comm_destroy(b.comm);
    input_error("-r %d: the root must be a rank in 0..%d", opt.args.root,
                b.nranks - 1);
  }
  if (opt.coll->id == PERF_SENDRECV && b.nranks < 2) {
    qcoll_comm_destroy(b.comm);
    input_error(
        "sendrecv needs at least 2 ranks (a ring of one would send to itself)");
  }

  int n_sizes = 0;
  size_t *sizes = sweep_sizes(&opt, &n_sizes);
  if (!sizes) die(&b, "out of memory");
  if (perf_buf_alloc(&b.send, opt.mem, opt.args.max_bytes) != 0 ||
      perf_buf_alloc(&b.recv, opt.mem, opt.args.max_bytes) != 0)
    die(&b, "cannot allocate two buffers of %zu bytes%s%s", opt.args.max_bytes,
        opt.mem == PERF_MEM_GPU ? ": " : "",
        opt.mem == PERF_MEM_GPU ? perf_gpu_error() : "");
  if (opt.register_bufs &&
      ((st = qcoll_comm_register(b.comm, b.send.ptr, opt.args.max_bytes,
                                 &b.reg_send)) != QCOLL_OK ||
       (st = qcoll_comm_register(b.comm, b.recv.ptr, opt.args.max_bytes,
                                 &b.reg_recv)) != QCOLL_OK))
    die(&b, "--register: %s: %s", qcoll_status_string(st),
        qcoll_comm_last_error(b.comm));
  if (perf_stream_create(opt.mem, &b.stream) != 0)
    die(&b, "cannot create a stream: %s", perf_gpu_error());
  if (perf_timer_init(&b.timer, opt.mem) != 0)
    die(&b, "cannot create the timer's events: %s", perf_gpu_error());
  if (opt.vs_nccl)
    b.nccl = perf_nccl_start(b.comm, b.rank, b.nranks, b.nccl_refused,
                             sizeof b.nccl_refused);

  print_header(&b);
  start_json(&b);
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
                  human_bytes(sizes[s], hb, sizeof hb),
                  qcoll_dtype_name(opt.dtypes[d]), opt.coll->has_op ? " " : "",
                  opt.coll->has_op ? qcoll_op_name(opt.ops[k]) : "");
        }
      }
    }
  }

  if (b.rank == 0) print_footer(&b);
  finish_json(&b);
  perf_nccl_stop(b.nccl);
  perf_timer_destroy(&b.timer);
  perf_stream_destroy(opt.mem, b.stream);
  if (opt.register_bufs &&
      ((st = qcoll_comm_deregister(b.comm, b.reg_send)) != QCOLL_OK ||
       (st = qcoll_comm_deregister(b.comm, b.reg_recv)) != QCOLL_OK))
    die(&b, "--register: deregistering: %s: %s", qcoll_status_string(st),
        qcoll_comm_last_error(b.comm));
  perf_buf_free(&b.send);
  perf_buf_free(&b.recv);
  free(sizes);
  st = qcoll_comm_destroy(b.comm);
  if (st != QCOLL_OK) {
    fprintf(stderr, PROG_NAME ": rank %d: qcoll_comm_destroy failed: %s: %s\n",
            b.rank, qcoll_status_string(st), qcoll_last_error());
    return 1;
  }
  return b.totals.wrong ? 1 : 0;
}
