/*
 * The parts qcoll-perf and bench/mpi-perf.c share (see perf_common.h).
 */
#include "perf_common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- collectives ------------------------------------------------------ */

static const perf_coll_t colls[PERF_COLL_COUNT] = {
    {PERF_ALL_REDUCE, "all_reduce", true, false, true},
    {PERF_REDUCE, "reduce", true, true, true},
    {PERF_BROADCAST, "broadcast", false, true, true},
    {PERF_ALL_GATHER, "all_gather", false, false, true},
    {PERF_REDUCE_SCATTER, "reduce_scatter", true, false, true},
    /* The API requires distinct buffers for these two. */
    {PERF_ALL_TO_ALL, "all_to_all", false, false, false},
    {PERF_SENDRECV, "sendrecv", false, false, false},
    {PERF_BARRIER, "barrier", false, false, false},
};

const perf_coll_t *perf_coll_by_name(const char *name) {
  for (int i = 0; i < PERF_COLL_COUNT; i++)
    if (strcmp(colls[i].name, name) == 0) return &colls[i];
  /* Also the spellings without underscores (allreduce, alltoall...). */
  for (int i = 0; i < PERF_COLL_COUNT; i++) {
    char squeezed[32];
    size_t k = 0;
    for (const char *s = colls[i].name; *s && k + 1 < sizeof squeezed; s++)
      if (*s != '_') squeezed[k++] = *s;
    squeezed[k] = 0;
    if (strcmp(squeezed, name) == 0) return &colls[i];
  }
  return NULL;
}

const perf_coll_t *perf_coll_by_id(perf_coll_id_t id) {
  return (unsigned)id < PERF_COLL_COUNT ? &colls[id] : NULL;
}

perf_shape_t perf_coll_shape(const perf_coll_t *c, size_t bytes,
                             size_t elem_size, int nranks) {
  perf_shape_t s = {0, 0, 0, 0};
  size_t elems = bytes / elem_size;
  size_t n = (size_t)nranks;
  switch (c->id) {
    case PERF_ALL_GATHER:
      s.count = elems / n;
      s.send_elems = s.count;
      s.recv_elems = s.count * n;
      break;
    case PERF_REDUCE_SCATTER:
      s.count = elems / n;
      s.send_elems = s.count * n;
      s.recv_elems = s.count;
      break;
    case PERF_ALL_TO_ALL:
      s.count = elems / n;
      s.send_elems = s.recv_elems = s.count * n;
      break;
    case PERF_BARRIER: break;
    default: s.count = s.send_elems = s.recv_elems = elems; break;
  }
  size_t most = s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems;
  s.bytes = most * elem_size;
  return s;
}

double perf_busbw_factor(const perf_coll_t *c, int nranks) {
  double n = nranks;
  switch (c->id) {
    case PERF_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case PERF_ALL_GATHER:
    case PERF_REDUCE_SCATTER:
    case PERF_ALL_TO_ALL: return (n - 1) / n;
    case PERF_BARRIER: return 0;
    default: /* reduce, broadcast, sendrecv: every byte crosses one link */
      return 1;
  }
}

/* ---- options ---------------------------------------------------------- */

void perf_args_init(perf_args_t *a, char largest_unit,
                    perf_input_error_fn fail) {
  *a = (perf_args_t){.min_bytes = 32u << 20,
                     .max_bytes = 32u << 20,
                     .step_factor = 2,
                     .iters = 20,
                     .warmup = 5,
                     .check = 1,
                     .largest_unit = largest_unit,
                     .fail = fail};
}

bool perf_parse_size(const char *s, char largest_unit, size_t *out) {
  char *end = NULL;
  errno = 0;
  if (*s == '-' || *s == '+') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  /* K M G (and T): shifts of 10, 20, 30 (and 40). */
  const char *units = largest_unit == 'T' ? "KMGT" : "KMG";
  const char *unit = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  unsigned shift = unit ? 10u * (unsigned)(unit - units + 1) : 0;
  if (unit) end++;
  if (shift && (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0 ||
                strcmp(end, "b") == 0))
    end += strlen(end);
  if (*end) return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = (size_t)(v << shift);
  return true;
}

long perf_parse_int(const char *opt, const char *s, long lo, long hi,
                    perf_input_error_fn fail) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    fail("%s needs an integer in %ld..%ld, got '%s'", opt, lo, hi, s);
  return v;
}

bool perf_args_option(perf_args_t *a, int c, const char *arg) {
  switch (c) {
    case 'b':
      if (!perf_parse_size(arg, a->largest_unit, &a->min_bytes))
        a->fail("-b: bad size '%s'", arg);
      return true;
    case 'e':
      if (!perf_parse_size(arg, a->largest_unit, &a->max_bytes))
        a->fail("-e: bad size '%s'", arg);
      return true;
    case 'f': {
      char *end = NULL;
      a->step_factor = strtod(arg, &end);
      if (end == arg || *end || !(a->step_factor > 1) ||
          !isfinite(a->step_factor))
        a->fail("-f needs a step factor greater than 1, got '%s'", arg);
      a->factor_given = true;
      return true;
    }
    case 'i':
      if (!perf_parse_size(arg, a->largest_unit, &a->step_bytes) ||
          a->step_bytes == 0)
        a->fail("-i needs a step of at least 1 byte, got '%s'", arg);
      a->step_given = true;
      return true;
    case 'n':
      a->iters = (int)perf_parse_int("-n", arg, 1, 1000000000, a->fail);
      return true;
    case 'w':
      a->warmup = (int)perf_parse_int("-w", arg, 0, 1000000000, a->fail);
      return true;
    case 'c':
      a->check = (int)perf_parse_int("-c", arg, 0, 1, a->fail);
      return true;
    case 'r':
      a->root = (int)perf_parse_int("-r", arg, 0, 1 << 30, a->fail);
      a->root_given = true;
      return true;
    default: return false;
  }
}

void perf_args_check(perf_args_t *a, const perf_coll_t *coll) {
  if (a->factor_given && a->step_given)
    a->fail("-f and -i exclude each other: step by factor or by bytes");
  if (a->step_given) a->step_factor = 0;
  if (a->min_bytes > a->max_bytes)
    a->fail("-b %zu is larger than -e %zu", a->min_bytes, a->max_bytes);
  if (a->step_factor > 0 && a->min_bytes == 0 && a->max_bytes > 0)
    a->fail("-b 0 cannot grow by a factor: use -b 1 or more, or -i");
  if (a->op_given && !coll->has_op)
    a->fail("-o does not apply to %s (it does not reduce)", coll->name);
  if (a->root_given && !coll->has_root)
    a->fail("-r does not apply to %s (it has no root)", coll->name);
}

size_t *perf_sweep_sizes(const perf_args_t *a, int *n) {
  size_t cap = 16, k = 0;
  size_t *sizes = malloc(cap * sizeof *sizes);
  if (!sizes) return NULL;
  for (size_t s = a->min_bytes;;) {
    if (k == cap) {
      size_t *more = realloc(sizes, (cap *= 2) * sizeof *sizes);
      if (!more) {
        free(sizes);
        return NULL;
      }
      sizes = more;
    }
    sizes[k++] = s;
    double next = a->step_factor > 0 ? (double)s * a->step_factor
                                     : (double)s + (double)a->step_bytes;
    /* Truncation could stall a small size with a small factor. */
    size_t ns =
        next >= (double)a->max_bytes + 1 ? a->max_bytes + 1 : (size_t)next;
    if (ns <= s) ns = s + 1;
    if (ns > a->max_bytes || s == a->max_bytes) break;
    s = ns;
  }
  *n = (int)k;
  return sizes;
}

/* ---- the checker's inputs and expected values ------------------------- */

/* A hash of the element index in 0..7 (Knuth's multiplicative hash). */
static unsigned index_hash(size_t j) {
  return (unsigned)(((uint64_t)j * 2654435761u) >> 13) & 7u;
}

int64_t perf_pattern_value(const perf_pattern_t *p, int rank, size_t j) {
  if (p->prod) /* only rank j%n may contribute a 2 */
    return ((size_t)rank == j % (size_t)p->nranks && (index_hash(j) & 1)) ? 2
                                                                          : 1;
  /* Each rank hashes the index on its own (an odd stride apart), so the
   * reduction of element j depends on j at every world size: with one hash
   * shifted by the rank, 8 ranks (a multiple of the span) summed the 8
   * residues to one constant, and a misplaced element went unseen. */
  unsigned h = index_hash(j + (size_t)rank * 0x9e3779b1u);
  int64_t v = (int64_t)(h % (unsigned)p->span);
  return p->centred ? v - (p->span - 1) / 2 : v;
}

int64_t perf_pattern_reduce(const perf_pattern_t *p, perf_red_t red, size_t j) {
  int64_t acc = perf_pattern_value(p, 0, j);
  for (int r = 1; r < p->nranks; r++) {
    int64_t v = perf_pattern_value(p, r, j);
    switch (red) {
      case PERF_RED_PROD: acc *= v; break;
      case PERF_RED_MIN: acc = v < acc ? v : acc; break;
      case PERF_RED_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

bool perf_expected_source(perf_coll_id_t id, size_t count, int rank, int nranks,
                          int root, size_t k, perf_source_t *src) {
  *src = (perf_source_t){false, 0, k};
  switch (id) {
    case PERF_ALL_REDUCE: src->reduced = true; return true;
    case PERF_REDUCE: src->reduced = true; return rank == root;
    case PERF_REDUCE_SCATTER:
      src->reduced = true;
      src->index = (size_t)rank * count + k;
      return true;
    case PERF_BROADCAST: src->rank = root; return true;
    case PERF_ALL_GATHER:
      src->rank = (int)(k / count);
      src->index = k % count;
      return true;
    case PERF_ALL_TO_ALL:
      src->rank = (int)(k / count);
      src->index = (size_t)rank * count + k % count;
      return true;
    case PERF_SENDRECV: /* from the previous rank of the ring */
      src->rank = (rank + nranks - 1) % nranks;
      return true;
    default: return false;
  }
}

/* ---- the table -------------------------------------------------------- */

void perf_print_title(const char *prog, const char *coll, const char *library) {
  printf("# %s %s  (%s)\n", prog, coll, library);
}

void perf_print_sweep(int nranks, const perf_args_t *a, int graph_launches) {
  if (a->step_factor > 0)
    printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %g(factor)", nranks,
           a->min_bytes, a->max_bytes, a->step_factor);
  else
    printf("#  nranks %d  minBytes %zu  maxBytes %zu  step: %zu(bytes)", nranks,
           a->min_bytes, a->max_bytes, a->step_bytes);
  printf("  warmup iters: %d  iters: %d  validation: %d  graph: %d\n",
         a->warmup, a->iters, a->check, graph_launches);
}

void perf_print_rank(int rank, int pid, const char *host) {
  printf("#  Rank %3d  Pid %7d  on %16s  ", rank, pid, host);
}

void perf_print_columns(bool nccl) {
  printf("# %72s%31s", "out-of-place", "in-place");
  if (nccl) printf("%31s", "nccl (out-of-place)");
  printf("\n");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s",
         "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
         "#wrong", "time", "algbw", "busbw", "#wrong");
  if (nccl) printf("  %9s  %10s  %6s", "nccl_time", "nccl_busbw", "ratio");
  printf(
      "\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
      "(GB/s)", "(GB/s)", "");
  if (nccl) printf("  %9s  %10s  %6s", "(us)", "(GB/s)", "(x)");
  printf("\n");
}

void perf_print_row_start(size_t bytes, size_t count, const char *type,
                          const char *redop, int root) {
  printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, redop, root);
  /* Each part of a row is flushed as it is printed, so a run stopped in
   * the middle of a row (a stalled call) shows how far the row got. */
  fflush(stdout);
}

void perf_format_time(double us, int width, char *buf, size_t len) {
  if (us >= 10000.0)
    snprintf(buf, len, "%*.0f", width, us);
  else if (us >= 100.0)
    snprintf(buf, len, "%*.1f", width, us);
  else
    snprintf(buf, len, "%*.2f", width, us);
}

double perf_algbw(size_t bytes, double sec) {
  return sec > 0 ? (double)bytes / sec / 1e9 : 0;
}

void perf_print_placement(double sec, double algbw, double busbw,
                          const char *wrong) {
  char ts[32];
  perf_format_time(sec * 1e6, 7, ts, sizeof ts);
  printf("  %7s  %6.2f  %6.2f  %6s", ts, algbw, busbw, wrong);
  fflush(stdout);
}

void perf_print_untimed(const char *time, const char *wrong) {
  printf("  %7s  %6s  %6s  %6s", time, "N/A", "N/A", wrong);
  fflush(stdout);
}

void perf_format_wrong(bool checked, int64_t wrong, char *buf, size_t len) {
  if (checked)
    snprintf(buf, len, "%lld", (long long)wrong);
  else
    snprintf(buf, len, "N/A");
}

void perf_print_totals(int check, const perf_totals_t *t) {
  if (check)
    printf("# Out of bounds values : %lld %s\n", (long long)t->wrong,
           t->wrong ? "FAILED" : "OK");
  else
    printf("# Out of bounds values : N/A (not checked, -c 0)\n");
  printf("# Avg bus bandwidth    : %g\n",
         t->bw_count ? t->bw_sum / t->bw_count : 0.0);
}
