/*
 * What qcoll-perf has in common with bench/mpi-perf.c, which measures
 * another library's collectives the same way so that the two tables can be
 * set side by side: the options both take, the size sweep, the collectives'
 * shapes and bus-bandwidth factors, the checker's input pattern and where
 * each expected value comes from, and the table's lines.
 *
 * No qcoll type appears here, so mpi-perf compiles perf_common.c with its
 * own compiler driver (bench/host_vs_mpi.sh) without the library.
 */
#ifndef QCOLL_PERF_COMMON_H
#define QCOLL_PERF_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- collectives ------------------------------------------------------ */

typedef enum perf_coll_id {
  PERF_ALL_REDUCE,
  PERF_REDUCE,
  PERF_BROADCAST,
  PERF_ALL_GATHER,
  PERF_REDUCE_SCATTER,
  PERF_ALL_TO_ALL,
  PERF_SENDRECV,
  PERF_BARRIER,
  PERF_COLL_COUNT
} perf_coll_id_t;

typedef struct perf_coll {
  perf_coll_id_t id;
  const char *name;
  bool has_op;       /* a reduction: the op column and -o apply */
  bool has_root;     /* the root column and -r apply */
  bool has_in_place; /* the API allows an in-place form */
} perf_coll_t;

/* By name ("all_reduce") or by the name without underscores ("allreduce"). */
const perf_coll_t *perf_coll_by_name(const char *name);
const perf_coll_t *perf_coll_by_id(perf_coll_id_t id);

/* Element counts of one row, derived from its size in bytes the way the
 * usual performance tests do: `size` is the largest buffer (the whole
 * gathered or scattered array), `count` the count argument of the call. */
typedef struct perf_shape {
  size_t count;      /* the call's count argument */
  size_t send_elems; /* elements in sendbuf */
  size_t recv_elems; /* elements in recvbuf */
  size_t bytes;      /* the size column: max(send, recv) bytes */
} perf_shape_t;

perf_shape_t perf_coll_shape(const perf_coll_t *c, size_t bytes,
                             size_t elem_size, int nranks);

/* algbw x factor = busbw, so bus bandwidths compare with the hardware's. */
double perf_busbw_factor(const perf_coll_t *c, int nranks);

/* ---- options ---------------------------------------------------------- */

/* Says what is wrong with the command line and ends the program (each
 * program decides which rank prints and how it leaves). */
typedef void (*perf_input_error_fn)(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* The options both programs take: -b -e -f -i -n -w -c -r. */
typedef struct perf_args {
  size_t min_bytes, max_bytes;
  double step_factor; /* > 1 when stepping by factor, 0 by increment */
  size_t step_bytes;  /* > 0 when stepping by increment */
  int iters, warmup, check, root;
  bool factor_given, step_given, root_given;
  bool op_given;     /* the caller's -o was given */
  char largest_unit; /* the largest SIZE suffix: 'G' or 'T' */
  perf_input_error_fn fail;
} perf_args_t;

/* getopt's spellings of those options, for the programs' tables. */
#define PERF_ARGS_SHORTOPTS "b:e:f:i:n:w:c:r:"
#define PERF_ARGS_LONGOPTS                            \
  {"minbytes", required_argument, NULL, 'b'},         \
      {"maxbytes", required_argument, NULL, 'e'},     \
      {"stepfactor", required_argument, NULL, 'f'},   \
      {"stepbytes", required_argument, NULL, 'i'},    \
      {"iters", required_argument, NULL, 'n'},        \
      {"warmup_iters", required_argument, NULL, 'w'}, \
      {"check", required_argument, NULL, 'c'}, {      \
    "root", required_argument, NULL, 'r'              \
  }
/* Their help lines. */
#define PERF_USAGE_SWEEP                                                     \
  "  -b, --minbytes SIZE     smallest size (default 32M)\n"                  \
  "  -e, --maxbytes SIZE     largest size (default 32M)\n"                   \
  "  -f, --stepfactor F      multiply the size by F each step (default 2)\n" \
  "  -i, --stepbytes SIZE    add SIZE each step instead\n"                   \
  "  -n, --iters N           timed iterations per size (default 20)\n"       \
  "  -w, --warmup_iters N    untimed iterations per size (default 5)\n"      \
  "  -c, --check 0|1         check every result exactly (default 1)\n"
#define PERF_USAGE_ROOT \
  "  -r, --root R            root of reduce and broadcast (default 0)\n"
#define PERF_USAGE_HELP                        \
  "  -h, --help              show this help\n" \
  "SIZE takes K, M, G suffixes (powers of 1024), e.g. 64K.\n"

/* The defaults: 32M to 32M by a factor of 2, 20 timed and 5 untimed
 * calls, checked, root 0. */
void perf_args_init(perf_args_t *a, char largest_unit,
                    perf_input_error_fn fail);
/* Take option c with its argument; false when c is not one of the
 * options above. */
bool perf_args_option(perf_args_t *a, int c, const char *arg);
/* Once the collective is known: the checks both programs make, in the
 * order they make them (-f with -i, -b over -e, -b 0 by a factor, -o and
 * -r where they do not apply). */
void perf_args_check(perf_args_t *a, const perf_coll_t *coll);

/* "64", "64K", "64KB", "64KiB", "1M", "2G" (and "1T" where largest_unit
 * is 'T'): powers of 1024. */
bool perf_parse_size(const char *s, char largest_unit, size_t *out);
/* An integer in lo..hi, or fail() says what was wrong with option opt. */
long perf_parse_int(const char *opt, const char *s, long lo, long hi,
                    perf_input_error_fn fail);

/* The sizes of the sweep (malloc'd, *n of them), or NULL out of memory. */
size_t *perf_sweep_sizes(const perf_args_t *a, int *n);

/* ---- the checker's inputs and expected values ------------------------- */

/* The reductions both libraries have (an average is a sum, divided by the
 * caller). */
typedef enum perf_red {
  PERF_RED_SUM,
  PERF_RED_PROD,
  PERF_RED_MIN,
  PERF_RED_MAX
} perf_red_t;

/* Rank r's input for element j is a small integer, exact in every type,
 * from a hash of j of rank r's own (so an element that lands at the wrong
 * index is caught, at every world size): hash_r(j) % span, less
 * (span - 1) / 2 when centred.  A product
 * gets 1s and at most one 2 per element (from rank j % nranks), so it
 * cannot overflow. */
typedef struct perf_pattern {
  int nranks;
  bool prod;    /* the inputs of a product */
  int span;     /* distinct values of the other ops */
  bool centred; /* values around zero (signed types) */
} perf_pattern_t;

int64_t perf_pattern_value(const perf_pattern_t *p, int rank, size_t j);
/* The reduction over all ranks' inputs for element j, exact. */
int64_t perf_pattern_reduce(const perf_pattern_t *p, perf_red_t red, size_t j);

/* Where one element of a rank's output comes from. */
typedef struct perf_source {
  bool reduced; /* the reduction of element `index` over all ranks */
  int rank;     /* otherwise input element `index` of this rank */
  size_t index;
} perf_source_t;

/* The source of output element k of `rank` after collective id with this
 * count and root; false when it has no defined value (reduce on a
 * non-root, barrier). */
bool perf_expected_source(perf_coll_id_t id, size_t count, int rank, int nranks,
                          int root, size_t k, perf_source_t *src);

/* ---- the table (rank 0 prints) --------------------------------------- */

/* What the columns add up to over a run. */
typedef struct perf_totals {
  int64_t wrong; /* mismatches of all checked calls */
  double bw_sum; /* bus bandwidths of the timed placements */
  int bw_count;
} perf_totals_t;

/* "# qcoll-perf all_reduce  (qcoll 0.1.0)" */
void perf_print_title(const char *prog, const char *coll, const char *library);
/* The sweep's line: ranks, sizes, step, iterations, check, graph launches. */
void perf_print_sweep(int nranks, const perf_args_t *a, int graph_launches);
/* The start of a rank's line, up to where its memory is described. */
void perf_print_rank(int rank, int pid, const char *host);
/* The three lines of column titles; nccl: with NCCL's three columns. */
void perf_print_columns(bool nccl);
/* The row's first five columns. */
void perf_print_row_start(size_t bytes, size_t count, const char *type,
                          const char *redop, int root);
/* Microseconds in `width` characters, with fewer decimals as they grow. */
void perf_format_time(double us, int width, char *buf, size_t len);
/* GB/s of a call that moves `bytes` in `sec` (0 for no time). */
double perf_algbw(size_t bytes, double sec);
/* A placement's four columns: time algbw busbw #wrong. */
void perf_print_placement(double sec, double algbw, double busbw,
                          const char *wrong);
/* ...for a placement that was not timed ("N/A", "nograph"). */
void perf_print_untimed(const char *time, const char *wrong);
/* "#wrong" of a checked placement, or "N/A" unchecked. */
void perf_format_wrong(bool checked, int64_t wrong, char *buf, size_t len);
/* The footer's first lines: the check's outcome and the average busbw. */
void perf_print_totals(int check, const perf_totals_t *t);

#endif
