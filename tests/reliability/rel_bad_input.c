/*
 * Bad input across ranks on the host back end, started by qcoll-run:
 *
 *   qcoll-run -n N rel_bad_input checked     (with QCOLL_CHECK=1)
 *   qcoll-run -n N rel_bad_input unchecked   (QCOLL_CHECK unset or 0)
 *
 * Three tables, each case followed by a valid all-reduce whose exact result
 * every rank checks (so a case that left the ranks out of step, or the
 * communicator unusable, fails there):
 *
 *  mismatches (checked only): one rank (the culprit, a different one from
 *    case to case) calls with another count, dtype, op, root or collective
 *    than the others.  Every rank must get QCOLL_ERR_MISMATCH with a message
 *    that names its own call and the other rank's, and no buffer may change.
 *  refusals: the culprit alone makes a call that is invalid on its own
 *    (root or peer out of range, NULL buffers on the root, overflowing
 *    count, bad enums, overlapping buffers, a GPU algorithm on host memory).
 *    It must get the named error with its buffers untouched while the others
 *    wait in the valid call; then it retries with the valid call and every
 *    rank must complete it exactly.  So a refused call changed nothing: not
 *    the barrier counts, nor the staging parity, nor the bootstrap ring.
 *  valid edges: NULL buffers where the API allows them, count 0, in-place
 *    layouts, the last rank as root.
 * Each rank prints "rank R: PASS n cases" or FAIL lines.
 */
#include <stdint.h>
#include <unistd.h>

#include "rel_util.h"

#define BUF 4096 /* elements of every buffer: enough for 4 ranks x 1024 */
#define SENTINEL 0x5a5a5a5a

static qcoll_comm_t comm;
static int32_t sendbuf[BUF], recvbuf[BUF];
static int cases_run;

static void fill_sentinels(void) {
  for (int i = 0; i < BUF; i++)
    sendbuf[i] = 1000 * rel_rank + i, recvbuf[i] = SENTINEL;
}

static bool buffers_untouched(void) {
  for (int i = 0; i < BUF; i++)
    if (sendbuf[i] != 1000 * rel_rank + i || recvbuf[i] != SENTINEL)
      return false;
  return true;
}

/* The valid all-reduce after every case: sum of (r + 1) * (i + 1) + tag. */
static void check_still_in_step(const char *after, int tag) {
  int32_t x[16], expect_base = rel_size * (rel_size + 1) / 2;
  for (int i = 0; i < 16; i++) x[i] = (rel_rank + 1) * (i + 1) + tag;
  qcoll_status_t st =
      qcoll_all_reduce(x, x, 16, QCOLL_I32, QCOLL_SUM, comm, NULL);
  EXPECT(st == QCOLL_OK, "after %s: the next all-reduce failed: %s (%s)", after,
         qcoll_status_string(st), qcoll_comm_last_error(comm));
  for (int i = 0; st == QCOLL_OK && i < 16; i++)
    EXPECT(x[i] == expect_base * (i + 1) + rel_size * tag,
           "after %s: element %d is %d, expected %d", after, i, x[i],
           expect_base * (i + 1) + rel_size * tag);
  cases_run++;
}

static void expect_error(const char *what, qcoll_status_t st,
                         qcoll_status_t want, const char *part) {
  const char *msg = qcoll_comm_last_error(comm);
  EXPECT(st == want, "%s: got %s, expected %s (%s)", what,
         qcoll_status_string(st), qcoll_status_string(want), msg);
  EXPECT(!part || strstr(msg, part), "%s: message '%s' lacks '%s'", what, msg,
         part);
}

/* ---- mismatches (QCOLL_CHECK=1) ------------------------------------------ */

typedef struct call {
  const char *fn; /* as the message names it */
  int kind;       /* 0 all_reduce 1 reduce 2 broadcast 3 all_gather
                     4 reduce_scatter 5 barrier */
  size_t count;
  qcoll_dtype_t dtype;
  qcoll_op_t op;
  int root;
  bool ex; /* all-reduce only: the _ex form with algo */
  qcoll_algo_t algo;
  int rotate; /* with ex: opts.quant_rotate */
} call_t;

static const char *const kind_fn[] = {
    "qcoll_all_reduce", "qcoll_reduce",         "qcoll_broadcast",
    "qcoll_all_gather", "qcoll_reduce_scatter", "qcoll_barrier"};

static qcoll_status_t issue(const call_t *c) {
  switch (c->kind) {
    case 0:
      if (c->ex) {
        qcoll_options_t o;
        qcoll_options_init(&o);
        o.algo = c->algo;
        o.quant_rotate = c->rotate;
        return qcoll_all_reduce_ex(sendbuf, recvbuf, c->count, c->dtype, c->op,
                                   comm, NULL, &o);
      }
      return qcoll_all_reduce(sendbuf, recvbuf, c->count, c->dtype, c->op, comm,
                              NULL);
    case 1:
      return qcoll_reduce(sendbuf, recvbuf, c->count, c->dtype, c->op, c->root,
                          comm, NULL);
    case 2:
      return qcoll_broadcast(sendbuf, recvbuf, c->count, c->dtype, c->root,
                             comm, NULL);
    case 3:
      return qcoll_all_gather(sendbuf, recvbuf, c->count, c->dtype, comm, NULL);
    case 4:
      return qcoll_reduce_scatter(sendbuf, recvbuf, c->count, c->dtype, c->op,
                                  comm, NULL);
    default: return qcoll_barrier(comm, NULL);
  }
}

/* What the message must say about one call: "rank R called fn(count=C" and,
 * for the field that differs, its value. */
static void expect_named(const char *what, const char *msg, int rank,
                         const call_t *c, const char *field) {
  char part[160];
  snprintf(part, sizeof part, "rank %d called %s(count=%zu", rank,
           kind_fn[c->kind], c->kind == 5 ? (size_t)0 : c->count);
  EXPECT(strstr(msg, part), "%s: message '%s' lacks '%s'", what, msg, part);
  if (!field) return;
  if (!strcmp(field, "dtype"))
    snprintf(part, sizeof part, "dtype=%s", qcoll_dtype_name(c->dtype));
  else if (!strcmp(field, "op"))
    snprintf(part, sizeof part, "op=%s", qcoll_op_name(c->op));
  else if (!strcmp(field, "options"))
    snprintf(part, sizeof part, "options %s/default%s", qcoll_algo_name(c->algo),
             c->rotate ? "+rot" : ")");
  else
    snprintf(part, sizeof part, "root=%d", c->root);
  EXPECT(strstr(msg, part), "%s: message '%s' lacks '%s'", what, msg, part);
}

typedef struct mismatch {
  const char *what;
  const char *field; /* the differing field to find named, or NULL */
  call_t others, culprit;
  bool everyone_differs; /* count = others.count + rank on every rank */
} mismatch_t;

static const mismatch_t mismatches[] = {
    {"all-reduce count",
     NULL,
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 9, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    /* Same element size: without the check the bytes would be read as the
     * wrong type, silently. */
    {"all-reduce dtype",
     "dtype",
     {NULL, 0, 8, QCOLL_F32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"all-reduce op",
     "op",
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 8, QCOLL_I32, QCOLL_MAX, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"reduce root",
     "root",
     {NULL, 1, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 1, 8, QCOLL_I32, QCOLL_SUM, 1, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"broadcast root",
     "root",
     {NULL, 2, 8, QCOLL_I32, QCOLL_SUM, 1, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 2, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"all-gather count",
     NULL,
     {NULL, 3, 100, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 3, 64, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"reduce-scatter op",
     "op",
     {NULL, 4, 16, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 4, 16, QCOLL_I32, QCOLL_PROD, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"all-gather instead of all-reduce",
     NULL,
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 3, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    {"barrier instead of all-reduce",
     NULL,
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 5, 0, QCOLL_U8, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     false},
    /* Both take the host path, yet the options differ: the header makes
     * any difference in the options a mismatch. */
    {"all-reduce options auto vs host",
     "options",
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, true, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, true, QCOLL_ALGO_HOST, 0},
     false},
    /* Rotation asked for on one rank only: ignored on host buffers, a
     * corrupted sum on quantised GPU ones; refused on both. */
    {"all-reduce options rotation",
     "options",
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, true, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, true, QCOLL_ALGO_AUTO, 1},
     false},
    {"every rank a different count",
     NULL,
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     {NULL, 0, 8, QCOLL_I32, QCOLL_SUM, 0, false, QCOLL_ALGO_AUTO, 0},
     true},
};

static void run_mismatches(void) {
  int n_cases = (int)(sizeof mismatches / sizeof mismatches[0]);
  for (int k = 0; k < n_cases; k++) {
    const mismatch_t *m = &mismatches[k];
    int culprit = k % rel_size;
    call_t mine = rel_rank == culprit ? m->culprit : m->others;
    if (m->everyone_differs) mine.count = m->others.count + (size_t)rel_rank;
    fill_sentinels();
    qcoll_status_t st = issue(&mine);
    const char *msg = qcoll_comm_last_error(comm);
    EXPECT(st == QCOLL_ERR_MISMATCH, "%s (culprit rank %d): got %s (%s)",
           m->what, culprit, qcoll_status_string(st), msg);
    /* The first rank whose call differs from this rank's is named. */
    int other = m->everyone_differs   ? (rel_rank == 0 ? 1 : 0)
                : rel_rank != culprit ? culprit
                : culprit == 0        ? 1
                                      : 0;
    call_t theirs =
        other == culprit && !m->everyone_differs ? m->culprit : m->others;
    if (m->everyone_differs) theirs.count = m->others.count + (size_t)other;
    if (st == QCOLL_ERR_MISMATCH) {
      expect_named(m->what, msg, rel_rank, &mine, m->field);
      expect_named(m->what, msg, other, &theirs, m->field);
    }
    EXPECT(buffers_untouched(), "%s: a buffer changed", m->what);
    check_still_in_step(m->what, k);
  }
}

/* ---- refusals by one rank -------------------------------------------------
 */

typedef struct refusal {
  const char *what;
  qcoll_status_t expected;
  const char *message_part; /* "%d" is replaced by the world size */
} refusal_t;

/* The bad call of case k on the culprit (culprit rank c). */
static qcoll_status_t bad_call(int k, int n) {
  qcoll_all_reduce_options_t opts;
  qcoll_all_reduce_options_init(&opts);
  switch (k) {
    case 0:
      return qcoll_reduce(sendbuf, recvbuf, 8, QCOLL_I32, QCOLL_SUM, n, comm,
                          NULL);
    case 1:
      return qcoll_broadcast(sendbuf, recvbuf, 8, QCOLL_I32, -1, comm, NULL);
    case 2:
      return qcoll_reduce(sendbuf, NULL, 8, QCOLL_I32, QCOLL_SUM, rel_rank,
                          comm, NULL);
    case 3:
      return qcoll_broadcast(NULL, recvbuf, 8, QCOLL_I32, rel_rank, comm, NULL);
    case 4:
      return qcoll_all_reduce(sendbuf, recvbuf, 8, (qcoll_dtype_t)42, QCOLL_SUM,
                              comm, NULL);
    case 5:
      return qcoll_all_reduce(sendbuf, recvbuf, 8, QCOLL_I32, (qcoll_op_t)99,
                              comm, NULL);
    case 6:
      return qcoll_all_reduce(sendbuf, recvbuf, SIZE_MAX / 8, QCOLL_I32,
                              QCOLL_SUM, comm, NULL);
    case 7:
      return qcoll_all_gather(recvbuf + 1, recvbuf, 8, QCOLL_I32, comm, NULL);
    case 8:
      return qcoll_all_to_all(sendbuf, sendbuf + 4, 8, QCOLL_I32, comm, NULL);
    case 9:
      return qcoll_all_reduce(sendbuf, sendbuf + 2, 8, QCOLL_I32, QCOLL_SUM,
                              comm, NULL);
    case 10:
      opts.algo = QCOLL_ALGO_ONESHOT;
      return qcoll_all_reduce_ex(sendbuf, recvbuf, 8, QCOLL_I32, QCOLL_SUM,
                                 comm, NULL, &opts);
    case 11:
      opts.size = 3;
      return qcoll_all_reduce_ex(sendbuf, recvbuf, 8, QCOLL_I32, QCOLL_SUM,
                                 comm, NULL, &opts);
    case 12: return qcoll_send(sendbuf, 8, QCOLL_I32, n, comm, NULL);
    case 13: return qcoll_recv(recvbuf, 8, QCOLL_I32, rel_rank, comm, NULL);
  }
  return QCOLL_ERR_INTERNAL;
}

static const refusal_t refusals[] = {
    {"reduce root = world size", QCOLL_ERR_INVALID_ARGUMENT,
     "root %d is out of range"},
    {"broadcast root -1", QCOLL_ERR_INVALID_ARGUMENT,
     "root -1 is out of range"},
    {"reduce with NULL recvbuf on the root", QCOLL_ERR_INVALID_ARGUMENT,
     "recvbuf is NULL"},
    {"broadcast with NULL sendbuf on the root", QCOLL_ERR_INVALID_ARGUMENT,
     "sendbuf is NULL"},
    {"dtype 42", QCOLL_ERR_INVALID_ARGUMENT, "dtype 42"},
    {"op 99", QCOLL_ERR_INVALID_ARGUMENT, "op 99"},
    {"count overflowing with the world size", QCOLL_ERR_INVALID_ARGUMENT,
     "overflows"},
    {"all-gather sendbuf overlapping recvbuf off its slot",
     QCOLL_ERR_INVALID_ARGUMENT, "overlaps"},
    {"all-to-all overlapping buffers", QCOLL_ERR_INVALID_ARGUMENT, "overlap"},
    {"all-reduce partly overlapping buffers", QCOLL_ERR_INVALID_ARGUMENT,
     "overlap"},
    {"one-shot algorithm on host memory", QCOLL_ERR_UNSUPPORTED,
     "needs GPU buffers"},
    {"options without qcoll_all_reduce_options_init",
     QCOLL_ERR_INVALID_ARGUMENT, "opts->size"},
    {"send to peer = world size", QCOLL_ERR_INVALID_ARGUMENT,
     "peer %d is out of range"},
    {"recv from itself", QCOLL_ERR_INVALID_ARGUMENT, "is this rank itself"},
};

/* The valid call of case k, which every rank makes (the culprit after its
 * refusal) and whose result is checked exactly. */
static void valid_call(int k, int culprit, const char *what) {
  int n = rel_size;
  int32_t in[8], out[4 * 8];
  for (int i = 0; i < 8; i++) in[i] = (rel_rank + 1) * (i + 1);
  memset(out, 0, sizeof out);
  qcoll_status_t st;
  int32_t ranks_sum = n * (n + 1) / 2;
  if (k == 12 || k == 13) { /* a message from the culprit (12) or to it (13) */
    int from = k == 12 ? culprit : (culprit + n - 1) % n;
    int to = (from + 1) % n;
    st = QCOLL_OK;
    if (rel_rank == from) st = qcoll_send(in, 8, QCOLL_I32, to, comm, NULL);
    if (rel_rank == to) st = qcoll_recv(out, 8, QCOLL_I32, from, comm, NULL);
    EXPECT(st == QCOLL_OK, "%s: valid send/recv: %s (%s)", what,
           qcoll_status_string(st), qcoll_comm_last_error(comm));
    for (int i = 0; rel_rank == to && i < 8; i++)
      EXPECT(out[i] == (from + 1) * (i + 1), "%s: received [%d] = %d", what, i,
             out[i]);
    st = qcoll_barrier(comm, NULL);
    EXPECT(st == QCOLL_OK, "%s: barrier: %s", what, qcoll_status_string(st));
    return;
  }
  int root = (k == 2 || k == 3) ? culprit : n - 1;
  if (k == 0 || k == 2) {
    st = qcoll_reduce(in, out, 8, QCOLL_I32, QCOLL_SUM, root, comm, NULL);
    for (int i = 0; st == QCOLL_OK && rel_rank == root && i < 8; i++)
      EXPECT(out[i] == ranks_sum * (i + 1), "%s: reduce [%d] = %d", what, i,
             out[i]);
  } else if (k == 1 || k == 3) {
    st = qcoll_broadcast(in, out, 8, QCOLL_I32, root, comm, NULL);
    for (int i = 0; st == QCOLL_OK && i < 8; i++)
      EXPECT(out[i] == (root + 1) * (i + 1), "%s: broadcast [%d] = %d", what, i,
             out[i]);
  } else if (k == 7) {
    st = qcoll_all_gather(in, out, 8, QCOLL_I32, comm, NULL);
    for (int i = 0; st == QCOLL_OK && i < 8 * n; i++)
      EXPECT(out[i] == (i / 8 + 1) * (i % 8 + 1), "%s: all-gather [%d] = %d",
             what, i, out[i]);
  } else if (k == 8) {
    int32_t a2a[4 * 8];
    for (int i = 0; i < 8 * n; i++) a2a[i] = 100 * rel_rank + i;
    st = qcoll_all_to_all(a2a, out, 8, QCOLL_I32, comm, NULL);
    for (int i = 0; st == QCOLL_OK && i < 8 * n; i++)
      EXPECT(out[i] == 100 * (i / 8) + rel_rank * 8 + i % 8,
             "%s: all-to-all [%d] = %d", what, i, out[i]);
  } else {
    st = qcoll_all_reduce(in, out, 8, QCOLL_I32, QCOLL_SUM, comm, NULL);
    for (int i = 0; st == QCOLL_OK && i < 8; i++)
      EXPECT(out[i] == ranks_sum * (i + 1), "%s: all-reduce [%d] = %d", what, i,
             out[i]);
  }
  EXPECT(st == QCOLL_OK, "%s: the valid call failed: %s (%s)", what,
         qcoll_status_string(st), qcoll_comm_last_error(comm));
}

static void run_refusals(bool everyone) {
  int n_cases = (int)(sizeof refusals / sizeof refusals[0]);
  for (int k = 0; k < n_cases; k++) {
    const refusal_t *r = &refusals[k];
    int culprit = (k + 1) % rel_size;
    char what[160], part[96];
    snprintf(what, sizeof what, "%s (%s)", r->what,
             everyone ? "every rank" : "one rank");
    snprintf(part, sizeof part, r->message_part, rel_size);
    if (everyone || rel_rank == culprit) {
      fill_sentinels();
      qcoll_status_t st = bad_call(k, rel_size);
      expect_error(what, st, r->expected, part);
      EXPECT(buffers_untouched(), "%s: a buffer changed", what);
    }
    /* When every rank refused a send or a recv, nobody is left to pair. */
    if (!everyone || (k != 12 && k != 13)) valid_call(k, culprit, what);
    check_still_in_step(what, 100 + k);
  }
}

/* ---- reduce-scatter with partly overlapping buffers -------------------------
 * All-reduce, all-gather and all-to-all refuse buffers that overlap other
 * than in their documented in-place layout.  Reduce-scatter must too: run
 * on every rank (so an accepted call cannot leave the ranks out of step),
 * with recvbuf one element past sendbuf and enough elements for several
 * pieces, it must be refused; if it is accepted, the result shows whether
 * the overlap corrupted it. */
static void reduce_scatter_partial_overlap(void) {
  const size_t count = 20000; /* several pieces with QCOLL_SHM_BYTES=256K */
  size_t n = (size_t)rel_size;
  int32_t *buf = malloc((count * n + 1) * sizeof *buf);
  int32_t ranks_sum = rel_size * (rel_size + 1) / 2;
  for (size_t i = 0; i < count * n + 1; i++)
    buf[i] = (rel_rank + 1) * (int32_t)(i % 1000);
  qcoll_status_t st = qcoll_reduce_scatter(buf, buf + 1, count, QCOLL_I32,
                                           QCOLL_SUM, comm, NULL);
  size_t wrong = 0;
  for (size_t i = 0; st == QCOLL_OK && i < count; i++)
    wrong += buf[1 + i] !=
             ranks_sum * (int32_t)(((size_t)rel_rank * count + i) % 1000);
  EXPECT(
      st == QCOLL_ERR_INVALID_ARGUMENT,
      "reduce-scatter with recvbuf = sendbuf + 1 was %s, not refused like the "
      "other collectives' partial overlaps%s (%zu of %zu results wrong)",
      qcoll_status_string(st), wrong ? ", and it corrupted the result" : "",
      wrong, count);
  free(buf);
  check_still_in_step("reduce-scatter with partly overlapping buffers", 300);
}

/* ---- valid edges ------------------------------------------------------------
 */

static void run_valid_edges(void) {
  int n = rel_size, last = n - 1;
  int32_t in[8], out[4 * 8];
  int32_t ranks_sum = n * (n + 1) / 2;
  for (int i = 0; i < 8; i++) in[i] = (rel_rank + 1) * (i + 1);
  /* Non-roots may pass NULL for what they do not use. */
  memset(out, 0, sizeof out);
  qcoll_status_t st = qcoll_reduce(in, rel_rank == last ? out : NULL, 8,
                                   QCOLL_I32, QCOLL_SUM, last, comm, NULL);
  EXPECT(st == QCOLL_OK, "reduce with NULL recvbuf off the root: %s (%s)",
         qcoll_status_string(st), qcoll_comm_last_error(comm));
  for (int i = 0; st == QCOLL_OK && rel_rank == last && i < 8; i++)
    EXPECT(out[i] == ranks_sum * (i + 1), "reduce [%d] = %d", i, out[i]);
  check_still_in_step("reduce with NULL recvbuf off the root", 200);

  st = qcoll_broadcast(rel_rank == last ? in : NULL, out, 8, QCOLL_I32, last,
                       comm, NULL);
  EXPECT(st == QCOLL_OK, "broadcast with NULL sendbuf off the root: %s (%s)",
         qcoll_status_string(st), qcoll_comm_last_error(comm));
  for (int i = 0; st == QCOLL_OK && i < 8; i++)
    EXPECT(out[i] == n * (i + 1), "broadcast [%d] = %d", i, out[i]);
  check_still_in_step("broadcast with NULL sendbuf off the root", 201);

  /* Count 0 on every rank: nothing happens, nothing desynchronises. */
  st = qcoll_all_reduce(NULL, NULL, 0, QCOLL_F32, QCOLL_SUM, comm, NULL);
  EXPECT(st == QCOLL_OK, "all-reduce of 0 elements: %s",
         qcoll_status_string(st));
  st = qcoll_all_gather(NULL, NULL, 0, QCOLL_F32, comm, NULL);
  EXPECT(st == QCOLL_OK, "all-gather of 0 elements: %s",
         qcoll_status_string(st));
  check_still_in_step("count 0", 202);

  /* In place, at the documented slots. */
  for (int i = 0; i < 8 * n; i++) out[i] = -1;
  for (int i = 0; i < 8; i++) out[rel_rank * 8 + i] = in[i];
  st = qcoll_all_gather(out + rel_rank * 8, out, 8, QCOLL_I32, comm, NULL);
  EXPECT(st == QCOLL_OK, "in-place all-gather: %s", qcoll_status_string(st));
  for (int i = 0; st == QCOLL_OK && i < 8 * n; i++)
    EXPECT(out[i] == (i / 8 + 1) * (i % 8 + 1), "in-place all-gather [%d] = %d",
           i, out[i]);
  for (int i = 0; i < 8 * n; i++) out[i] = (rel_rank + 1) * (i + 1);
  st = qcoll_reduce_scatter(out, out + rel_rank * 8, 8, QCOLL_I32, QCOLL_SUM,
                            comm, NULL);
  EXPECT(st == QCOLL_OK, "in-place reduce-scatter: %s",
         qcoll_status_string(st));
  for (int i = 0; st == QCOLL_OK && i < 8; i++)
    EXPECT(out[rel_rank * 8 + i] == ranks_sum * (rel_rank * 8 + i + 1),
           "in-place reduce-scatter [%d] = %d", i, out[rel_rank * 8 + i]);
  check_still_in_step("in-place layouts", 203);
}

int main(int argc, char **argv) {
  const char *mode = argc == 2 ? argv[1] : "";
  bool checked = !strcmp(mode, "checked");
  bool overlap_only = !strcmp(mode, "rs-overlap");
  if (!checked && !overlap_only && strcmp(mode, "unchecked")) {
    fprintf(stderr, "usage: %s checked|unchecked|rs-overlap\n", argv[0]);
    return 2;
  }
  const char *env = getenv("QCOLL_CHECK");
  bool env_checked = env && !strcmp(env, "1");
  if (!overlap_only && env_checked != checked) {
    fprintf(stderr,
            "rel_bad_input %s needs QCOLL_CHECK=%d in the environment\n", mode,
            checked);
    return 2;
  }
  comm = rel_init(30);
  if (rel_size < 2 || rel_size > 4) {
    fprintf(stderr, "rel_bad_input runs on 2 to 4 ranks\n");
    return 2;
  }
  if (overlap_only) {
    reduce_scatter_partial_overlap();
  } else {
    if (checked) run_mismatches();
    run_refusals(false);
    run_refusals(true);
    run_valid_edges();
  }
  qcoll_status_t st = qcoll_comm_destroy(comm);
  EXPECT(st == QCOLL_OK, "destroy: %s", qcoll_status_string(st));
  printf("rank %d: %s %d cases (%s)\n", rel_rank,
         check_failures ? "FAIL" : "PASS", cases_run,
         env_checked ? "QCOLL_CHECK=1" : "QCOLL_CHECK off");
  return check_failures ? 1 : 0;
}
