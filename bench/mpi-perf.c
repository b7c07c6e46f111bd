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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

typedef enum op { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_COUNT } op_t;
static const char *const op_names[OP_COUNT] = {"sum", "prod", "min", "max"};

static MPI_Op mpi_op(op_t op) {
  switch (op) {
    case OP_PROD: return MPI_PROD;
    case OP_MIN: return MPI_MIN;
    case OP_MAX: return MPI_MAX;
    default: return MPI_SUM;
  }
}

typedef enum coll_id {
  ALL_REDUCE,
  REDUCE,
  BROADCAST,
  ALL_GATHER,
  REDUCE_SCATTER,
  ALL_TO_ALL,
  COLL_COUNT
} coll_id_t;

typedef struct coll {
  coll_id_t id;
  const char *name;
  const char *squeezed; /* the spelling without underscores */
  bool has_op, has_root, has_in_place;
} coll_t;

static const coll_t colls[COLL_COUNT] = {
    {ALL_REDUCE, "all_reduce", "allreduce", true, false, true},
    {REDUCE, "reduce", "reduce", true, true, true},
    {BROADCAST, "broadcast", "broadcast", false, true, true},
    {ALL_GATHER, "all_gather", "allgather", false, false, true},
    {REDUCE_SCATTER, "reduce_scatter", "reducescatter", true, false, true},
    {ALL_TO_ALL, "all_to_all", "alltoall", false, false, false},
};

/* ---- options ------------------------------------------------------------ */

typedef struct opts {
  const coll_t *coll;
  size_t min_bytes, max_bytes;
  double step_factor; /* > 0 when stepping by factor */
  size_t step_bytes;  /* > 0 when stepping by increment */
  int iters, warmup, check, root;
  dtype_t dts[DTYPE_COUNT];
  int n_dts;
  op_t ops[OP_COUNT];
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
  printf(
      "Usage: mpirun -n N " PROG_NAME
      " [options] [collective]\n"
      "Measure an MPI collective over a range of sizes, with qcoll-perf's "
      "columns.\n"
      "\n"
      "collective: all_reduce (default), reduce, broadcast, all_gather,\n"
      "            reduce_scatter, all_to_all\n"
      "  -b, --minbytes SIZE     smallest size (default 32M)\n"
      "  -e, --maxbytes SIZE     largest size (default 32M)\n"
      "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
      "  -i, --stepbytes SIZE    add SIZE each step instead\n"
      "  -n, --iters N           timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N    untimed iterations per size (default 5)\n"
      "  -c, --check 0|1         check every result exactly (default 1)\n"
      "  -d, --datatype T        i8 u8 i32 u32 i64 u64 f32 f64, or all "
      "(default f32)\n"
      "  -o, --op OP             sum prod min max, or all (default sum)\n"
      "  -r, --root R            root of reduce and broadcast (default 0)\n"
      "  -m, --memory host       accepted for qcoll-perf's command lines (host "
      "only)\n"
      "  -h, --help              show this help\n"
      "SIZE takes K, M, G suffixes (powers of 1024), e.g. 64K.\n"
      "Exit status: 0, 1 when a result was wrong, 2 for bad input.\n");
}

/* "64", "64K", "64KB", "64KiB", "1M", "2G": powers of 1024. */
static bool parse_size(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  if (*s == '-' || *s == '+') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  unsigned shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    default: break;
  }
  if (shift && (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0 ||
                strcmp(end, "b") == 0))
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
      o->ops[o->n_ops++] = (op_t)i;
  if (o->n_ops) return;
  if (strcasecmp(s, "avg") == 0)
    input_error("-o avg: MPI has no average reduction");
  input_error("-o: unknown op '%s' (sum prod min max or all)", s);
}

static const coll_t *coll_by_name(const char *name) {
  for (int i = 0; i < COLL_COUNT; i++)
    if (strcmp(colls[i].name, name) == 0 ||
        strcmp(colls[i].squeezed, name) == 0)
      return &colls[i];
  return NULL;
}

static void parse_options(int argc, char **argv, opts_t *o) {
  static const struct option longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"stepbytes", required_argument, NULL, 'i'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"root", required_argument, NULL, 'r'},
      {"memory", required_argument, NULL, 'm'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (opts_t){.min_bytes = 32u << 20,
                .max_bytes = 32u << 20,
                .step_factor = 2,
                .iters = 20,
                .warmup = 5,
                .check = 1,
                .dts = {F32},
                .n_dts = 1,
                .ops = {OP_SUM},
                .n_ops = 1};
  bool factor_given = false, step_given = false, op_given = false,
       root_given = false;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:m:h", longopts,
                          NULL)) != -1) {
    switch (c) {
      case 'b':
        if (!parse_size(optarg, &o->min_bytes))
          input_error("-b: bad size '%s'", optarg);
        break;
      case 'e':
        if (!parse_size(optarg, &o->max_bytes))
          input_error("-e: bad size '%s'", optarg);
        break;
      case 'f': {
        char *end = NULL;
        o->step_factor = strtod(optarg, &end);
        if (end == optarg || *end || !(o->step_factor > 1) ||
            !isfinite(o->step_factor))
          input_error("-f needs a step factor greater than 1, got '%s'",
                      optarg);
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
      case 'm':
        if (strcasecmp(optarg, "host") != 0)
          input_error("-m %s: MPI runs on host memory here (-m host only)",
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
  o->coll = &colls[ALL_REDUCE];
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
  if (factor_given && step_given)
    input_error("-f and -i exclude each other: step by factor or by bytes");
  if (step_given) o->step_factor = 0;
  if (o->min_bytes > o->max_bytes)
    input_error("-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (o->step_factor > 0 && o->min_bytes == 0 && o->max_bytes > 0)
    input_error("-b 0 cannot grow by a factor: use -b 1 or more, or -i");
  if (op_given && !o->coll->has_op)
    input_error("-o does not apply to %s (it does not reduce)", o->coll->name);
  if (root_given && !o->coll->has_root)
    input_error("-r does not apply to %s (it has no root)", o->coll->name);
  if (o->coll->has_root && o->root >= world_size)
    input_error("-r %d: the root must be a rank in 0..%d", o->root,
                world_size - 1);
  /* MPI counts are int; the largest call must fit. */
  if (o->max_bytes > (size_t)INT32_MAX)
    input_error("-e %zu: MPI counts are int; use at most %d bytes",
                o->max_bytes, INT32_MAX);
}

/* The sizes of the sweep, as qcoll-perf steps them. */
static size_t *sweep_sizes(const opts_t *o, int *n) {
  size_t cap = 16, k = 0;
  size_t *sizes = malloc(cap * sizeof *sizes);
  if (!sizes) return NULL;
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
    double next = o->step_factor > 0 ? (double)s * o->step_factor
                                     : (double)s + (double)o->step_bytes;
    /* Truncation could stall a small size with a small factor. */
    size_t ns =
        next >= (double)o->max_bytes + 1 ? o->max_bytes + 1 : (size_t)next;
    if (ns <= s) ns = s + 1;
    if (ns > o->max_bytes || s == o->max_bytes) break;
    s = ns;
  }
  *n = (int)k;
  return sizes;
}

/* ---- one call -------------------------------------------------------------
 */

/* Element counts of one row, as qcoll-perf derives them: `bytes` is the
 * largest buffer (the whole gathered or scattered array), `count` the count
 * argument of the call. */
typedef struct shape {
  size_t count, send_elems, recv_elems, bytes;
} shape_t;

static shape_t coll_shape(const coll_t *c, size_t bytes, size_t esz,
                          int nranks) {
  shape_t s = {0, 0, 0, 0};
  size_t elems = bytes / esz, n = (size_t)nranks;
  switch (c->id) {
    case ALL_GATHER:
      s.count = elems / n;
      s.send_elems = s.count;
      s.recv_elems = s.count * n;
      break;
    case REDUCE_SCATTER:
      s.count = elems / n;
      s.send_elems = s.count * n;
      s.recv_elems = s.count;
      break;
    case ALL_TO_ALL:
      s.count = elems / n;
      s.send_elems = s.recv_elems = s.count * n;
      break;
    default: s.count = s.send_elems = s.recv_elems = elems; break;
  }
  s.bytes = (s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems) * esz;
  return s;
}

/* algbw x factor = busbw, so bus bandwidths compare whatever the rank count. */
static double busbw_factor(const coll_t *c, int nranks) {
  double n = nranks;
  switch (c->id) {
    case ALL_REDUCE: return 2.0 * (n - 1) / n;
    case ALL_GATHER:
    case REDUCE_SCATTER:
    case ALL_TO_ALL: return (n - 1) / n;
    default: return 1; /* reduce, broadcast: every byte crosses one link */
  }
}

typedef struct call {
  const coll_t *coll;
  int rank, nranks, root;
  dtype_t dt;
  op_t op;
  shape_t shape;
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
  if (c->in_place && c->coll->id == ALL_GATHER)
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
    case ALL_REDUCE:
      check_mpi(MPI_Allreduce(in, c->recv, n, t, op, w), "MPI_Allreduce");
      break;
    case REDUCE:
      /* In place, only the root says MPI_IN_PLACE; the others send from recv.
       */
      if (c->in_place && c->rank != c->root) in = c->recv;
      check_mpi(MPI_Reduce(in, c->recv, n, t, op, c->root, w), "MPI_Reduce");
      break;
    case BROADCAST:
      if (!c->in_place && c->rank == c->root)
        memcpy(c->recv, c->send, c->shape.bytes);
      check_mpi(MPI_Bcast(c->recv, n, t, c->root, w), "MPI_Bcast");
      break;
    case ALL_GATHER:
      if (c->in_place)
        check_mpi(
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv, n, t, w),
            "MPI_Allgather");
      else
        check_mpi(MPI_Allgather(c->send, n, t, c->recv, n, t, w),
                  "MPI_Allgather");
      break;
    case REDUCE_SCATTER:
      check_mpi(MPI_Reduce_scatter_block(in, c->recv, n, t, op, w),
                "MPI_Reduce_scatter_block");
      break;
    case ALL_TO_ALL:
      check_mpi(MPI_Alltoall(c->send, n, t, c->recv, n, t, w), "MPI_Alltoall");
      break;
    default: break;
  }
}

/* ---- the check: inputs and exact expectations -----------------------------
 */

/* A hash of the element index in 0..7 (Knuth's multiplicative hash), so an
 * element that lands at the wrong index is caught. */
static unsigned index_hash(size_t j) {
  return (unsigned)(((uint64_t)j * 2654435761u) >> 13) & 7u;
}

/* Rank r's input for element j: small integers, exact in every type, whose
 * sums over any number of ranks stay exact.  A product gets 1s and at most
 * one 2 per element (from rank j % n), so it cannot overflow. */
static int64_t input_value(const call_t *c, int r, size_t j) {
  unsigned h = index_hash(j);
  if (c->op == OP_PROD)
    return ((size_t)r == j % (size_t)c->nranks && (h & 1)) ? 2 : 1;
  int64_t v = (int64_t)((h + (unsigned)r) % 8u);
  return dtypes[c->dt].is_unsigned ? v : v - 3; /* signed types: around zero */
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

/* The op over all ranks' inputs for element j. */
static int64_t reduced_value(const call_t *c, size_t j) {
  int64_t acc = input_value(c, 0, j);
  for (int r = 1; r < c->nranks; r++) {
    int64_t v = input_value(c, r, j);
    switch (c->op) {
      case OP_PROD: acc *= v; break;
      case OP_MIN: acc = v < acc ? v : acc; break;
      case OP_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

/* The expected value of this rank's output element k; false when it has
 * none (reduce on a non-root). */
static bool expected_value(const call_t *c, size_t k, int64_t *v) {
  size_t cnt = c->shape.count;
  int me = c->rank;
  switch (c->coll->id) {
    case ALL_REDUCE: *v = reduced_value(c, k); return true;
    case REDUCE:
      if (me != c->root) return false;
      *v = reduced_value(c, k);
      return true;
    case REDUCE_SCATTER:
      *v = reduced_value(c, (size_t)me * cnt + k);
      return true;
    case BROADCAST: *v = input_value(c, c->root, k); return true;
    case ALL_GATHER: *v = input_value(c, (int)(k / cnt), k % cnt); return true;
    case ALL_TO_ALL:
      *v = input_value(c, (int)(k / cnt), (size_t)me * cnt + k % cnt);
      return true;
    default: return false;
  }
}

/* Poison the output, then write this rank's inputs (in place the input is
 * part of the output region, so it comes second). */
static void check_prepare(const call_t *c) {
  regions_t g = call_regions(c);
  size_t esz = dtypes[c->dt].size;
  memset(g.out, POISON_BYTE, g.out_elems * esz);
  /* A broadcast reads only the root's input; elsewhere, in place, the
   * buffer must stay poisoned so a missing copy shows. */
  if (c->coll->id == BROADCAST && c->rank != c->root) return;
  for (size_t j = 0; j < g.in_elems; j++)
    store_value(c->dt, g.in, j, input_value(c, c->rank, j));
}

/* This rank's mismatches, bit for bit. */
static int64_t check_compare(const call_t *c) {
  regions_t g = call_regions(c);
  size_t esz = dtypes[c->dt].size;
  int64_t wrong = 0;
  uint64_t expect; /* one element of any type */
  for (size_t k = 0; k < g.out_elems; k++) {
    int64_t v;
    if (!expected_value(c, k, &v)) continue;
    store_value(c->dt, &expect, 0, v);
    if (memcmp(g.out + k * esz, &expect, esz) != 0) wrong++;
  }
  return wrong;
}

/* ---- timing and the report -------------------------------------------------
 */

/* Seconds per call: the slowest rank's average over the timed loop. */
static double time_calls(const opts_t *o, const call_t *c) {
  for (int i = 0; i < o->warmup; i++) call_run(c);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; i++) call_run(c);
  double mine = (MPI_Wtime() - t0) / o->iters, slowest = 0;
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

typedef struct totals {
  int64_t wrong;
  double bw_sum;
  int bw_count;
} totals_t;

static void format_time(double us, char *buf, size_t len) {
  if (us >= 10000.0)
    snprintf(buf, len, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(buf, len, "%7.1f", us);
  else
    snprintf(buf, len, "%7.2f", us);
}

/* Measure one placement and print its four columns (rank 0). */
static void run_placement(const opts_t *o, call_t *c, bool in_place,
                          totals_t *tot) {
  if (in_place && !c->coll->has_in_place) {
    if (c->rank == 0)
      printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  c->in_place = in_place;
  double sec = time_calls(o, c);
  char wrong_str[24] = "N/A";
  if (o->check) {
    int64_t wrong = check_call(c);
    tot->wrong += wrong;
    snprintf(wrong_str, sizeof wrong_str, "%lld", (long long)wrong);
  }
  double algbw = sec > 0 ? (double)c->shape.bytes / sec / 1e9 : 0;
  double busbw = algbw * busbw_factor(c->coll, c->nranks);
  tot->bw_sum += busbw;
  tot->bw_count++;
  if (c->rank == 0) {
    char ts[32];
    format_time(sec * 1e6, ts, sizeof ts);
    printf("  %7s  %6.2f  %6.2f  %6s", ts, algbw, busbw, wrong_str);
  }
}

static void run_row(const opts_t *o, call_t *c, size_t bytes, totals_t *tot) {
  c->shape = coll_shape(c->coll, bytes, dtypes[c->dt].size, c->nranks);
  if (c->rank == 0)
    printf("%12zu  %12zu  %8s  %6s  %6d", c->shape.bytes, c->shape.count,
           dtypes[c->dt].name, c->coll->has_op ? op_names[c->op] : "none",
           c->coll->has_root ? c->root : -1);
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
    printf("# " PROG_NAME " %s  (%s)\n", o->coll->name, lib);
    if (o->step_factor > 0)
      printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %g(factor)",
             world_size, o->min_bytes, o->max_bytes, o->step_factor);
    else
      printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %zu(bytes)",
             world_size, o->min_bytes, o->max_bytes, o->step_bytes);
    printf("  warmup iters: %d  iters: %d  validation: %d  graph: 0\n",
           o->warmup, o->iters, o->check);
    printf("#  memory: host  timing: wall clock (MPI_Wtime)\n");
    printf("#\n# Using ranks\n");
    for (int r = 0; r < world_size; r++) {
      all[r].host[sizeof all[r].host - 1] = 0;
      printf("#  Rank %3d  Pid %7d  on %16s  host memory\n", r, (int)all[r].pid,
             all[r].host);
    }
    printf("#\n# %72s%31s\n", "out-of-place", "in-place");
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
        "#wrong", "time", "algbw", "busbw", "#wrong");
    printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
        "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  free(all);
}

static void print_footer(const opts_t *o, const totals_t *tot) {
  if (o->check)
    printf("# Out of bounds values : %lld %s\n", (long long)tot->wrong,
           tot->wrong ? "FAILED" : "OK");
  else
    printf("# Out of bounds values : N/A (not checked, -c 0)\n");
  printf("# Avg bus bandwidth    : %g\n",
         tot->bw_count ? tot->bw_sum / tot->bw_count : 0.0);
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
  size_t *sizes = sweep_sizes(&o, &n_sizes);
  call_t c = {.coll = o.coll,
              .rank = world_rank,
              .nranks = world_size,
              .root = o.coll->has_root ? o.root : -1,
              .send = alloc_touched(o.max_bytes),
              .recv = alloc_touched(o.max_bytes)};
  if (!sizes || !c.send || !c.recv)
    die_mpi(MPI_ERR_NO_MEM, "allocating two buffers");

  print_header(&o);
  totals_t tot = {0, 0, 0};
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
