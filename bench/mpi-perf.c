/*
 * mpi-perf: the MPI library's collectives, measured and checked exactly as
 * qcoll-perf measures and checks qcoll's, so that the two tables can be set
 * side by side row by row.
 *
 *   mpirun -n N mpi-perf [options] [collective]
 *
 * Same flags (-b -e -f -i -n -w -c -d -o -r), same sizes, same columns:
 *   size count type redop root | time algbw busbw #wrong  (out-of-place)
 *                              | time algbw busbw #wrong  (in-place)
 * the same bus-bandwidth factors (all-reduce 2(n-1)/n; all-gather,
 * reduce-scatter, all-to-all (n-1)/n; broadcast, reduce 1), the same timing
 * (w untimed calls, a barrier, n timed calls on the wall clock; the column is
 * the largest per-rank average) and the same check (one more call on small
 * integer inputs that depend on the rank and a hash of the index, every
 * element compared bit for bit with the exact result; the mismatches of all
 * ranks summed into #wrong, and a non-zero exit status when any).
 *
 * Where MPI's calls differ from qcoll's:
 *   broadcast  MPI_Bcast has one buffer.  Out of place the root first copies
 *              its send buffer into the receive buffer (what an out-of-place
 *              broadcast has to do), and that copy is timed; in place is the
 *              plain MPI_Bcast.
 *   reduce-scatter in place  MPI_IN_PLACE takes the whole input in the
 *              receive buffer and leaves this rank's block at its start.
 *   all-to-all  out of place only, as qcoll's.
 *   types, ops  the types MPI names (no 16-bit floats), and sum prod min max
 *              (MPI has no average).
 *
 * What it shares with qcoll-perf (the common options, the sweep, the
 * shapes and factors, the check's inputs and expected values, the table's
 * lines) is tools/qcoll-perf/perf_common.c, compiled in:
 *
 *   mpicc -std=c11 -Itools/qcoll-perf bench/mpi-perf.c \
 *         tools/qcoll-perf/perf_common.c -lm
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "perf_common.h"

#define PROG_NAME "mpi-perf"
#define EXIT_USAGE 2
/* Bytes written into output regions before a checked call, so a call that
 * writes nothing cannot pass on the previous call's results. */
#define POISON_BYTE 0xA5
/* Sweeps longer than this report progress on stderr. */
#define PROGRESS_MIN_ROWS 5

/* ---- types, ops, collectives ------------------------------------------- */

typedef enum dtype {
  I8,
  U8,
  I32,
  U32,
  I64,
  U64,
  F32,
  F64,
  DTYPE_COUNT
} dtype_t;

typedef struct dtype_info {
  const char *name;  /* qcoll's spelling, printed in the type column */
  const char *alias; /* the spelling of the usual performance tests */
  size_t size;
  bool is_float, is_unsigned;
} dtype_info_t;

static const dtype_info_t dtypes[DTYPE_COUNT] = {
    [I8] = {"i8", "int8", 1, false, false},
    [U8] = {"u8", "uint8", 1, false, true},
    [I32] = {"i32", "int32", 4, false, false},
    [U32] = {"u32", "uint32", 4, false, true},
    [I64] = {"i64", "int64", 8, false, false},
    [U64] = {"u64", "uint64", 8, false, true},
    [F32] = {"f32", "float", 4, true, false},
    [F64] = {"f64", "double", 8, true, false},
};

static MPI_Datatype mpi_dtype(dtype_t dt) {
  switch (dt) {
    case I8: return MPI_INT8_T;
    case U8: return MPI_UINT8_T;
    case I32: return MPI_INT32_T;
    case U32: return MPI_UINT32_T;
    case I64: return MPI_INT64_T;
    case U64: return MPI_UINT64_T;
    case F32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

#define OP_COUNT (PERF_RED_MAX + 1)
static const char *const op_names[OP_COUNT] = {"sum", "prod", "min", "max"};

static MPI_Op mpi_op(perf_red_t op) {
  switch (op) {
    case PERF_RED_PROD: return MPI_PROD;
    case PERF_RED_MIN: return MPI_MIN;
    case PERF_RED_MAX: return MPI_MAX;
    default: return MPI_SUM;
  }
}

/* qcoll-perf's collectives that MPI has (not its sendrecv ring, nor a
 * barrier, which moves no data). */
static const perf_coll_t *coll_by_name(const char *name) {
  const perf_coll_t *c = perf_coll_by_name(name);
  return c && c->id <= PERF_ALL_TO_ALL ? c : NULL;
}

/* ---- options ------------------------------------------------------------ */

typedef struct opts {
  const perf_coll_t *coll;
  perf_args_t args; /* sizes, iterations, check, root */
  dtype_t dts[DTYPE_COUNT];
  int n_dts;
  perf_red_t ops[OP_COUNT];
  int n_ops;
} opts_t;

static int world_rank, world_size;

/* Every rank parses the same command line; rank 0 says what is wrong and
 * every rank leaves with the usage status. */
static void input_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void input_error(const char *fmt, ...) {
  if (world_rank == 0) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, PROG_NAME ": %s (see " PROG_NAME " -h)\n", msg);
  }
  MPI_Finalize();
  exit(EXIT_USAGE);
}

static void print_usage(void) {
  if (world_rank != 0) return;
  printf("Usage: mpirun -n N " PROG_NAME
         " [options] [collective]\n"
         "Measure an MPI collective over a range of sizes, with qcoll-perf's "
         "columns.\n"
         "\n"
         "collective: all_reduce (default), reduce, broadcast, all_gather,\n"
         "            reduce_scatter, all_to_all\n"
         "%s"
         "  -d, --datatype T        i8 u8 i32 u32 i64 u64 f32 f64, or all "
         "(default f32)\n"
         "  -o, --op OP             sum prod min max, or all (default sum)\n"
         "%s"
         "      --mem host          accepted for qcoll-perf's command lines "
         "(host only)\n"
         "%s"
         "Exit status: 0, 1 when a result was wrong, 2 for bad input.\n",
         PERF_USAGE_SWEEP, PERF_USAGE_ROOT, PERF_USAGE_HELP);
}

static void parse_dtypes(const char *s, opts_t *o) {
  o->n_dts = 0;
  if (strcasecmp(s, "all") == 0) {
    for (int i = 0; i < DTYPE_COUNT; i++) o->dts[o->n_dts++] = (dtype_t)i;
    return;
  }
  for (int i = 0; i < DTYPE_COUNT; i++)
    if (strcasecmp(s, dtypes[i].name) == 0 ||
        strcasecmp(s, dtypes[i].alias) == 0) {
      o->dts[o->n_dts++] = (dtype_t)i;
      return;
    }
  if (strcasecmp(s, "f16") == 0 || strcasecmp(s, "bf16") == 0 ||
      strcasecmp(s, "half") == 0)
    input_error("-d %s: MPI has no standard 16-bit floating-point type", s);
  input_error(
      "-d: unknown datatype '%s' (i8 u8 i32 u32 i64 u64 f32 f64 or all)", s);
}

static void parse_ops(const char *s, opts_t *o) {
  o->n_ops = 0;
  for (int i = 0; i < OP_COUNT; i++)
    if (strcasecmp(s, "all") == 0 || strcasecmp(s, op_names[i]) == 0)
      o->ops[o->n_ops++] = (perf_red_t)i;
  if (o->n_ops) return;
  if (strcasecmp(s, "avg") == 0)
    input_error("-o avg: MPI has no average reduction");
  input_error("-o: unknown op '%s' (sum prod min max or all)", s);
}

/* Long options without a short form. */
enum { OPT_MEM = 256 };

static void parse_options(int argc, char **argv, opts_t *o) {
  static const struct option longopts[] = {
      PERF_ARGS_LONGOPTS,
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"mem", required_argument, NULL, OPT_MEM},
      {"memory", required_argument, NULL, OPT_MEM},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (opts_t){.dts = {F32}, .n_dts = 1, .ops = {PERF_RED_SUM}, .n_ops = 1};
  perf_args_init(&o->args, 'G', input_error);
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":" PERF_ARGS_SHORTOPTS "d:o:h",
                          longopts, NULL)) != -1) {
    if (perf_args_option(&o->args, c, optarg)) continue;
    switch (c) {
      case 'd': parse_dtypes(optarg, o); break;
      case 'o':
        parse_ops(optarg, o);
        o->args.op_given = true;
        break;
      case OPT_MEM:
        if (strcasecmp(optarg, "host") != 0)
          input_error("--mem %s: MPI runs on host memory here (--mem host only)",
                      optarg);
        break;
      case 'h':
        print_usage();
        MPI_Finalize();
        exit(0);
      case ':': input_error("option '%s' needs an argument", argv[optind - 1]);
      default: input_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  o->coll = perf_coll_by_id(PERF_ALL_REDUCE);
  if (optind < argc) {
    o->coll = coll_by_name(argv[optind]);
    if (!o->coll)
      input_error(
          "unknown collective '%s' (all_reduce reduce broadcast all_gather "
          "reduce_scatter all_to_all)",
          argv[optind]);
    optind++;
  }
  if (optind < argc)
    input_error("unexpected argument '%s' after the collective", argv[optind]);
  perf_args_check(&o->args, o->coll);
  if (o->coll->has_root && o->args.root >= world_size)
    input_error("-r %d: the root must be a rank in 0..%d", o->args.root,
                world_size - 1);
  /* MPI counts are int; the largest call must fit. */
  if (o->args.max_bytes > (size_t)INT32_MAX)
    input_error("-e %zu: MPI counts are int; use at most %d bytes",
                o->args.max_bytes, INT32_MAX);
}

/* ---- one call -------------------------------------------------------------
 */

typedef struct call {
  const perf_coll_t *coll;
  int rank, nranks, root;
  dtype_t dt;
  perf_red_t op;
  perf_shape_t shape;
  bool in_place;
  char *send, *recv; /* max_bytes each */
} call_t;

/* Where the call reads its input and writes its output (byte offsets into
 * send or recv).  In place everything lives in the receive buffer. */
typedef struct regions {
  char *in, *out;
  size_t in_elems, out_elems;
} regions_t;

static regions_t call_regions(const call_t *c) {
  size_t esz = dtypes[c->dt].size;
  regions_t g = {c->in_place ? c->recv : c->send, c->recv, c->shape.send_elems,
                 c->shape.recv_elems};
  /* MPI_IN_PLACE all-gather takes this rank's block where it belongs. */
  if (c->in_place && c->coll->id == PERF_ALL_GATHER)
    g.in += (size_t)c->rank * c->shape.count * esz;
  return g;
}

static void die_mpi(int err, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  fprintf(stderr, PROG_NAME ": rank %d: %s failed: %s\n", world_rank, what,
          msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

static void check_mpi(int err, const char *what) {
  if (err != MPI_SUCCESS) die_mpi(err, what);
}

/* One call of the collective. */
static void call_run(const call_t *c) {
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Datatype t = mpi_dtype(c->dt);
  MPI_Op op = mpi_op(c->op);
  int n = (int)c->shape.count;
  void *in = c->in_place ? MPI_IN_PLACE : c->send;
  switch (c->coll->id) {
    case PERF_ALL_REDUCE:
      check_mpi(MPI_Allreduce(in, c->recv, n, t, op, w), "MPI_Allreduce");
      break;
    case PERF_REDUCE:
      /* In place, only the root says MPI_IN_PLACE; the others send from recv.
       */
      if (c->in_place && c->rank != c->root) in = c->recv;
      check_mpi(MPI_Reduce(in, c->recv, n, t, op, c->root, w), "MPI_Reduce");
      break;
    case PERF_BROADCAST:
      if (!c->in_place && c->rank == c->root)
        memcpy(c->recv, c->send, c->shape.bytes);
      check_mpi(MPI_Bcast(c->recv, n, t, c->root, w), "MPI_Bcast");
      break;
    case PERF_ALL_GATHER:
      if (c->in_place)
        check_mpi(
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, n, t, w),
            "MPI_Allgather");
      else
        check_mpi(MPI_Allgather(c->send, n, t, c->recv, n, t, w),
                  "MPI_Allgather");
      break;
    case PERF_REDUCE_SCATTER:
      check_mpi(MPI_Reduce_scatter_block(in, c->recv, n, t, op, w),
                "MPI_Reduce_scatter_block");
      break;
    case PERF_ALL_TO_ALL:
      check_mpi(MPI_Alltoall(c->send, n, t, c->recv, n, t, w), "MPI_Alltoall");
      break;
    default: break;
  }
}

/* ---- the check: inputs and exact expectations -----------------------------
 */

/* The check's inputs: signed types get values around zero, unsigned
 * types non-negative ones (perf_common.h has the pattern). */
static perf_pattern_t pattern(const call_t *c) {
  return (perf_pattern_t){.nranks = c->nranks,
                          .prod = c->op == PERF_RED_PROD,
                          .span = 8,
                          .centred = !dtypes[c->dt].is_unsigned};
}

/* Store v as element k of p: integers keep their low bits (wrap), floats
 * are exact for these small values. */
static void store_value(dtype_t dt, void *p, size_t k, int64_t v) {
  switch (dt) {
    case I8:
    case U8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case I32:
    case U32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case I64:
    case U64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    case F32: ((float *)p)[k] = (float)v; break;
    default: ((double *)p)[k] = (double)v; break;
  }
}

/* The expected value of this rank's output element k; false when it has
 * none (reduce on a non-root). */
static bool expected_value(const call_t *c, const perf_pattern_t *p, size_t k,
                           int64_t *v) {
  perf_source_t src;
  if (!perf_expected_source(c->coll->id, c->shape.count, c->rank, c->nranks,
                            c->root, k, &src))
    return false;
  *v = src.reduced ? perf_pattern_reduce(p, c->op, src.index)
                   : perf_pattern_value(p, src.rank, src.index);
  return true;
}

/* Poison the output, then write this rank's inputs (in place the input is
 * part of the output region, so it comes second). */
static void check_prepare(const call_t *c) {
  regions_t g = call_regions(c);
  size_t esz = dtypes[c->dt].size;
  memset(g.out, POISON_BYTE, g.out_elems * esz);
  /* A broadcast reads only the root's input; elsewhere, in place, the
   * buffer must stay poisoned so a missing copy shows. */
  if (c->coll->id == PERF_BROADCAST && c->rank != c->root) return;
  perf_pattern_t p = pattern(c);
  for (size_t j = 0; j < g.in_elems; j++)
    store_value(c->dt, g.in, j, perf_pattern_value(&p, c->rank, j));
}

/* This rank's mismatches, bit for bit. */
static int64_t check_compare(const call_t *c) {
  regions_t g = call_regions(c);
  size_t esz = dtypes[c->dt].size;
  perf_pattern_t p = pattern(c);
  int64_t wrong = 0;
  uint64_t expect; /* one element of any type */
  for (size_t k = 0; k < g.out_elems; k++) {
    int64_t v;
    if (!expected_value(c, &p, k, &v)) continue;
    store_value(c->dt, &expect, 0, v);
    if (memcmp(g.out + k * esz, &expect, esz) != 0) wrong++;
  }
  return wrong;
}

/* ---- timing and the report -------------------------------------------------
 */

/* Seconds per call: the slowest rank's average over the timed loop. */
static double time_calls(const opts_t *o, const call_t *c) {
  for (int i = 0; i < o->args.warmup; i++) call_run(c);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->args.iters; i++) call_run(c);
  double mine = (MPI_Wtime() - t0) / o->args.iters, slowest = 0;
  check_mpi(
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
      "MPI_Allreduce of the times");
  return slowest;
}

/* One checked call on known inputs; the mismatches of all ranks. */
static int64_t check_call(const call_t *c) {
  check_prepare(c);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  call_run(c);
  int64_t mine = check_compare(c), all = 0;
  check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce of the error counts");
  return all;
}

/* Measure one placement and print its four columns (rank 0). */
static void run_placement(const opts_t *o, call_t *c, bool in_place,
                          perf_totals_t *tot) {
  if (in_place && !c->coll->has_in_place) {
    if (c->rank == 0) perf_print_untimed("N/A", "N/A");
    return;
  }
  c->in_place = in_place;
  double sec = time_calls(o, c);
  int64_t wrong = 0;
  if (o->args.check) {
    wrong = check_call(c);
    tot->wrong += wrong;
  }
  char wrong_str[24];
  perf_format_wrong(o->args.check, wrong, wrong_str, sizeof wrong_str);
  double algbw = perf_algbw(c->shape.bytes, sec);
  double busbw = algbw * perf_busbw_factor(c->coll, c->nranks);
  tot->bw_sum += busbw;
  tot->bw_count++;
  if (c->rank == 0) perf_print_placement(sec, algbw, busbw, wrong_str);
}

static void run_row(const opts_t *o, call_t *c, size_t bytes,
                    perf_totals_t *tot) {
  c->shape = perf_coll_shape(c->coll, bytes, dtypes[c->dt].size, c->nranks);
  if (c->rank == 0)
    perf_print_row_start(c->shape.bytes, c->shape.count, dtypes[c->dt].name,
                         c->coll->has_op ? op_names[c->op] : "none", c->root);
  run_placement(o, c, false, tot);
  run_placement(o, c, true, tot);
  if (c->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
}

typedef struct rank_info {
  char host[64];
  int32_t pid;
} rank_info_t;

static void print_header(const opts_t *o) {
  rank_info_t me = {0}, *all = calloc((size_t)world_size, sizeof *all);
  if (!all) die_mpi(MPI_ERR_NO_MEM, "calloc of the rank table");
  gethostname(me.host, sizeof me.host - 1);
  me.pid = (int32_t)getpid();
  check_mpi(MPI_Gather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, 0,
                       MPI_COMM_WORLD),
            "MPI_Gather of the rank table");
  if (world_rank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] =
        0; /* the first clause names the library and version */
    perf_print_title(PROG_NAME, o->coll->name, lib);
    perf_print_sweep(world_size, &o->args, 0);
    printf("#  memory: host  timing: wall clock (MPI_Wtime)\n");
    printf("#\n# Using ranks\n");
    for (int r = 0; r < world_size; r++) {
      all[r].host[sizeof all[r].host - 1] = 0;
      perf_print_rank(r, (int)all[r].pid, all[r].host);
      printf("host memory\n");
    }
    printf("#\n");
    perf_print_columns(false);
    fflush(stdout);
  }
  free(all);
}

static void print_footer(const opts_t *o, const perf_totals_t *tot) {
  perf_print_totals(o->args.check, tot);
  printf("#\n");
  fflush(stdout);
}

/* malloc'd and touched, as qcoll-perf's host buffers, so no timed call
 * pays for first-touch page faults that the other side did not. */
static char *alloc_touched(size_t bytes) {
  char *p = malloc(bytes ? bytes : 1);
  if (p) memset(p, 0, bytes);
  return p;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  /* Failures come back as codes, so the message can say which call failed. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  opts_t o;
  parse_options(argc, argv, &o);
  int n_sizes = 0;
  size_t *sizes = perf_sweep_sizes(&o.args, &n_sizes);
  call_t c = {.coll = o.coll,
              .rank = world_rank,
              .nranks = world_size,
              .root = o.coll->has_root ? o.args.root : -1,
              .send = alloc_touched(o.args.max_bytes),
              .recv = alloc_touched(o.args.max_bytes)};
  if (!sizes || !c.send || !c.recv)
    die_mpi(MPI_ERR_NO_MEM, "allocating two buffers");

  print_header(&o);
  perf_totals_t tot = {0, 0, 0};
  int n_ops = o.coll->has_op ? o.n_ops : 1;
  int rows = n_sizes * o.n_dts * n_ops, row = 0;
  for (int d = 0; d < o.n_dts; d++) {
    for (int k = 0; k < n_ops; k++) {
      for (int s = 0; s < n_sizes; s++) {
        c.dt = o.dts[d];
        c.op = o.ops[k];
        run_row(&o, &c, sizes[s], &tot);
        row++;
        if (world_rank == 0 && rows >= PROGRESS_MIN_ROWS)
          fprintf(stderr, "# [%d/%d] %zu B %s%s%s done\n", row, rows, sizes[s],
                  dtypes[c.dt].name, o.coll->has_op ? " " : "",
                  o.coll->has_op ? op_names[c.op] : "");
      }
    }
  }
  if (world_rank == 0) print_footer(&o, &tot);

  free(c.send);
  free(c.recv);
  free(sizes);
  MPI_Finalize();
  return tot.wrong ? 1 : 0;
}
