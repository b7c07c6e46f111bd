/*
 * Bad input for every public function, as a table checked against the
 * header:
 *
 *   rel_api_table PATH/TO/qcoll.h
 *
 * The program reads every function the header declares and fails when one
 * has no case here (so a new function cannot be added without its bad
 * input being tried) or when a case names a function the header lacks.
 * Each case is one call with a wrong argument and the status (or value) it
 * must give.  Every function that takes a communicator is also called on a
 * destroyed one (INVALID_USAGE, without the library reading freed memory:
 * run under AddressSanitizer too) and on an aborted one (collectives
 * ABORTED; queries answer, as the header says).  After every case the live
 * communicator's buffers must be untouched and a valid all-reduce on it
 * must still be exact.  World size 1, host memory; QCOLL_DISABLE_CUDA=1.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qcoll.h"

#define N 64
#define SENTINEL 0x5a5a5a5a
#define IA QCOLL_ERR_INVALID_ARGUMENT
#define IU QCOLL_ERR_INVALID_USAGE
#define AB QCOLL_ERR_ABORTED
#define OK QCOLL_OK

static qcoll_comm_t L, D, A; /* live, destroyed, aborted */
static qcoll_comm_t scratch; /* what a refused init may write */
static int32_t sb[N], rb[N];
static qcoll_reg_t reg_out;
static uint64_t fake_reg[4]; /* not a registration: its magic is 0 */

/* A host buffer's registration succeeds and does nothing; deregistered. */
static qcoll_status_t register_host_buffer(qcoll_comm_t c) {
  qcoll_reg_t h = NULL;
  qcoll_status_t st = qcoll_comm_register(c, sb, sizeof sb, &h);
  if (st != QCOLL_OK) return st;
  return qcoll_comm_deregister(c, h);
}
static int failures, cases;
static qcoll_options_t bad_size, bad_algo, bad_quant, oneshot;
static qcoll_unique_id_t id_probe;
static char buf[8192], small[4];
static size_t needed;
static int ival = 12345;
static qcoll_status_t sval;
static const char *name_out, *default_out, *doc_out;
static qcoll_config_t bad_config, bad_device, bad_timeout;

static void fill(void) {
  for (int i = 0; i < N; i++) sb[i] = 1000 + i, rb[i] = SENTINEL;
}

static bool untouched(void) {
  for (int i = 0; i < N; i++)
    if (sb[i] != 1000 + i || rb[i] != SENTINEL) return false;
  return true;
}

/* A valid call on the live communicator, exact (world size 1: a copy). */
static bool still_usable(void) {
  int32_t x[4] = {1, -2, 3, 40}, y[4] = {0};
  if (qcoll_all_reduce(x, y, 4, QCOLL_I32, QCOLL_SUM, L, NULL) != QCOLL_OK)
    return false;
  return !memcmp(x, y, sizeof x);
}

static void check(const char *fn, const char *what, int want, int got) {
  cases++;
  bool ok = got == want;
  if (!ok)
    fprintf(stderr, "FAIL %s (%s): got %d, expected %d (%s)\n", fn, what, got,
            want, qcoll_last_error());
  if (ok && !untouched()) {
    fprintf(stderr, "FAIL %s (%s): a buffer changed\n", fn, what);
    ok = false;
  }
  if (ok && !still_usable()) {
    fprintf(stderr,
            "FAIL %s (%s): the live communicator is no longer usable: "
            "%s\n",
            fn, what, qcoll_comm_last_error(L));
    ok = false;
  }
  if (!ok) failures++;
  fill();
}

/* 0 when s is a string containing part. */
static int says(const char *s, const char *part) {
  return s && strstr(s, part) ? 0 : 1;
}

/* from_hex must leave the id as it was when it refuses. */
static int from_hex_untouched(const char *hex) {
  memset(&id_probe, 0x77, sizeof id_probe);
  int st = qcoll_unique_id_from_hex(hex, &id_probe);
  for (size_t i = 0; i < sizeof id_probe.bytes; i++)
    if (id_probe.bytes[i] != 0x77) return 99;
  return st;
}

static const char *hex_of(char c, size_t len) {
  static char h[2 * QCOLL_UNIQUE_ID_BYTES + 8];
  memset(h, '0', sizeof h);
  h[len] = '\0';
  if (len > 7) h[7] = c;
  return h;
}

/* Every query and call taking a communicator, on each bad handle. */
#define ON_COMM(fn, c, want, call) X(fn, #c, want, call)
#define COMM_CASES(fn, call_with, aborted_want) \
  X(fn, "comm NULL", IA, call_with(NULL))       \
  X(fn, "destroyed comm", IU, call_with(D))     \
  X(fn, "aborted comm", aborted_want, call_with(A))

#define C_RANK(c) qcoll_comm_rank(c, &ival)
#define C_SIZE(c) qcoll_comm_size(c, &ival)
#define C_DEVICE(c) qcoll_comm_device(c, &ival)
#define C_ASYNC(c) qcoll_comm_get_async_error(c, &sval)
#define C_ABORT(c) qcoll_comm_abort(c)
#define C_AR(c) qcoll_all_reduce(sb, rb, 8, QCOLL_I32, QCOLL_SUM, c, NULL)
#define C_AR_EX(c) \
  qcoll_all_reduce_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, c, NULL, NULL)
#define C_RED(c) qcoll_reduce(sb, rb, 8, QCOLL_I32, QCOLL_SUM, 0, c, NULL)
#define C_RED_EX(c) \
  qcoll_reduce_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, 0, c, NULL, NULL)
#define C_BC(c) qcoll_broadcast(sb, rb, 8, QCOLL_I32, 0, c, NULL)
#define C_BC_EX(c) qcoll_broadcast_ex(sb, rb, 8, QCOLL_I32, 0, c, NULL, NULL)
#define C_AG(c) qcoll_all_gather(sb, rb, 8, QCOLL_I32, c, NULL)
#define C_AG_EX(c) qcoll_all_gather_ex(sb, rb, 8, QCOLL_I32, c, NULL, NULL)
#define C_RS(c) qcoll_reduce_scatter(sb, rb, 8, QCOLL_I32, QCOLL_SUM, c, NULL)
#define C_RS_EX(c) \
  qcoll_reduce_scatter_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, c, NULL, NULL)
#define C_A2A(c) qcoll_all_to_all(sb, rb, 8, QCOLL_I32, c, NULL)
#define C_A2A_EX(c) qcoll_all_to_all_ex(sb, rb, 8, QCOLL_I32, c, NULL, NULL)
#define C_SEND(c) qcoll_send(sb, 8, QCOLL_I32, 0, c, NULL)
#define C_SEND_EX(c) qcoll_send_ex(sb, 8, QCOLL_I32, 0, c, NULL, NULL)
#define C_RECV(c) qcoll_recv(rb, 8, QCOLL_I32, 0, c, NULL)
#define C_RECV_EX(c) qcoll_recv_ex(rb, 8, QCOLL_I32, 0, c, NULL, NULL)
#define C_BARRIER(c) qcoll_barrier(c, NULL)
#define C_REG(c) qcoll_comm_register(c, sb, sizeof sb, &reg_out)
#define C_DEREG(c) qcoll_comm_deregister(c, NULL)
#define C_DESTROY(c) qcoll_comm_destroy(c)
#define C_LAST(c) \
  says(qcoll_comm_last_error(c), c == D ? "destroyed" : c ? "" : "NULL")

/* The cases of the collectives that only the live communicator shows. */
#define COLL_ARG_CASES(fn, ex)                                     \
  X(fn, "dtype 42", IA, ex(sb, rb, 8, (qcoll_dtype_t)42))          \
  X(fn, "NULL buffers, count 8", IA, ex(NULL, NULL, 8, QCOLL_I32)) \
  X(fn, "count overflows bytes", IA, ex(sb, rb, SIZE_MAX / 2, QCOLL_I32))

#define AR(s, r, n, t) qcoll_all_reduce(s, r, n, t, QCOLL_SUM, L, NULL)
#define RED(s, r, n, t) qcoll_reduce(s, r, n, t, QCOLL_SUM, 0, L, NULL)
#define BC(s, r, n, t) qcoll_broadcast(s, r, n, t, 0, L, NULL)
#define AG(s, r, n, t) qcoll_all_gather(s, r, n, t, L, NULL)
#define RS(s, r, n, t) qcoll_reduce_scatter(s, r, n, t, QCOLL_SUM, L, NULL)
#define A2A(s, r, n, t) qcoll_all_to_all(s, r, n, t, L, NULL)
#define SEND(s, r, n, t) qcoll_send(s, n, t, 0, L, NULL)
#define EXO(o) (&o)
#define AR_EX(o) \
  qcoll_all_reduce_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, L, NULL, o)
#define RED_EX(o) \
  qcoll_reduce_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, 0, L, NULL, o)
#define BC_EX(o) qcoll_broadcast_ex(sb, rb, 8, QCOLL_I32, 0, L, NULL, o)
#define AG_EX(o) qcoll_all_gather_ex(sb, rb, 8, QCOLL_I32, L, NULL, o)
#define RS_EX(o) \
  qcoll_reduce_scatter_ex(sb, rb, 8, QCOLL_I32, QCOLL_SUM, L, NULL, o)
#define A2A_EX(o) qcoll_all_to_all_ex(sb, rb, 8, QCOLL_I32, L, NULL, o)
#define SEND_EX(o) qcoll_send_ex(sb, 8, QCOLL_I32, 1, L, NULL, o)
#define RECV_EX(o) qcoll_recv_ex(rb, 8, QCOLL_I32, 1, L, NULL, o)
#define OPT_CASES(fn, call)                       \
  X(fn, "opts->size 0", IA, call(EXO(bad_size)))  \
  X(fn, "opts->algo 99", IA, call(EXO(bad_algo))) \
  X(fn, "opts->quant 99", IA, call(EXO(bad_quant)))

/* clang-format off */
#define CASES                                                                  \
  X(qcoll_status_string, "status -999", 0, says(qcoll_status_string((qcoll_status_t)-999), "")) \
  X(qcoll_get_version, "version NULL", IA, qcoll_get_version(NULL))           \
  X(qcoll_last_error, "never NULL", 0, says(qcoll_last_error(), ""))          \
  X(qcoll_dtype_size, "dtype 42", 0, (int)qcoll_dtype_size((qcoll_dtype_t)42)) \
  X(qcoll_dtype_size, "dtype -1", 0, (int)qcoll_dtype_size((qcoll_dtype_t)-1)) \
  X(qcoll_dtype_name, "dtype 42", 0, says(qcoll_dtype_name((qcoll_dtype_t)42), "invalid")) \
  X(qcoll_op_name, "op 99", 0, says(qcoll_op_name((qcoll_op_t)99), "invalid")) \
  X(qcoll_algo_name, "algo 99", 0, says(qcoll_algo_name((qcoll_algo_t)99), "invalid")) \
  X(qcoll_quant_name, "quant -3", 0, says(qcoll_quant_name((qcoll_quant_t)-3), "invalid")) \
  X(qcoll_config_init, "config NULL", IA, qcoll_config_init(NULL))            \
  X(qcoll_options_init, "opts NULL", IA, qcoll_options_init(NULL))            \
  X(qcoll_all_reduce_options_init, "opts NULL", IA, qcoll_all_reduce_options_init(NULL)) \
  X(qcoll_get_unique_id, "id NULL", IA, qcoll_get_unique_id(NULL))            \
  X(qcoll_unique_id_to_hex, "id NULL", IA, qcoll_unique_id_to_hex(NULL, buf)) \
  X(qcoll_unique_id_to_hex, "out NULL", IA, qcoll_unique_id_to_hex(&id_probe, NULL)) \
  X(qcoll_unique_id_from_hex, "hex NULL", IA, qcoll_unique_id_from_hex(NULL, &id_probe)) \
  X(qcoll_unique_id_from_hex, "id NULL", IA, qcoll_unique_id_from_hex(hex_of('0', 256), NULL)) \
  X(qcoll_unique_id_from_hex, "255 digits, id unchanged", IA, from_hex_untouched(hex_of('0', 255))) \
  X(qcoll_unique_id_from_hex, "a 'g' at 7, id unchanged", IA, from_hex_untouched(hex_of('g', 256))) \
  X(qcoll_comm_init_rank, "comm NULL", IA, qcoll_comm_init_rank(NULL, 1, &id_probe, 0, NULL)) \
  X(qcoll_comm_init_rank, "nranks 0", IA, qcoll_comm_init_rank(&scratch, 0, &id_probe, 0, NULL)) \
  X(qcoll_comm_init_rank, "rank -1", IA, qcoll_comm_init_rank(&scratch, 2, &id_probe, -1, NULL)) \
  X(qcoll_comm_init_rank, "rank == nranks", IA, qcoll_comm_init_rank(&scratch, 2, &id_probe, 2, NULL)) \
  X(qcoll_comm_init_rank, "id NULL", IA, qcoll_comm_init_rank(&scratch, 1, NULL, 0, NULL)) \
  X(qcoll_comm_init_rank, "config->size 0", IA, qcoll_comm_init_rank(&scratch, 1, &id_probe, 0, &bad_config)) \
  X(qcoll_comm_init_rank, "config->device -5", IA, qcoll_comm_init_rank(&scratch, 1, &id_probe, 0, &bad_device)) \
  X(qcoll_comm_init_rank, "config->timeout_s -1", IA, qcoll_comm_init_rank(&scratch, 1, &id_probe, 0, &bad_timeout)) \
  X(qcoll_comm_init_env, "comm NULL", IA, qcoll_comm_init_env(NULL, NULL))    \
  X(qcoll_comm_init_env, "config->size 0", IA, qcoll_comm_init_env(&scratch, &bad_config)) \
  X(qcoll_comm_destroy, "destroyed comm", IU, C_DESTROY(D))                   \
  X(qcoll_comm_destroy, "NULL (accepted)", OK, C_DESTROY(NULL))               \
  X(qcoll_comm_abort, "comm NULL", IA, C_ABORT(NULL))                         \
  X(qcoll_comm_abort, "destroyed comm", IU, C_ABORT(D))                       \
  X(qcoll_comm_abort, "aborted comm (again)", OK, C_ABORT(A))                 \
  COMM_CASES(qcoll_comm_rank, C_RANK, OK)                                     \
  X(qcoll_comm_rank, "rank NULL", IA, qcoll_comm_rank(L, NULL))               \
  COMM_CASES(qcoll_comm_size, C_SIZE, OK)                                     \
  X(qcoll_comm_size, "size NULL", IA, qcoll_comm_size(L, NULL))               \
  COMM_CASES(qcoll_comm_device, C_DEVICE, OK)                                 \
  X(qcoll_comm_device, "device NULL", IA, qcoll_comm_device(L, NULL))         \
  COMM_CASES(qcoll_comm_get_async_error, C_ASYNC, OK)                         \
  X(qcoll_comm_get_async_error, "status NULL", IA, qcoll_comm_get_async_error(L, NULL)) \
  X(qcoll_comm_last_error, "comm NULL", 0, C_LAST(NULL))                      \
  X(qcoll_comm_last_error, "destroyed comm", 0, C_LAST(D))                    \
  X(qcoll_comm_last_error, "aborted comm", 0, C_LAST(A))                      \
  COMM_CASES(qcoll_all_reduce, C_AR, AB)                                      \
  COLL_ARG_CASES(qcoll_all_reduce, AR)                                        \
  X(qcoll_all_reduce, "op 99", IA, qcoll_all_reduce(sb, rb, 8, QCOLL_I32, (qcoll_op_t)99, L, NULL)) \
  X(qcoll_all_reduce, "partly overlapping buffers", IA, qcoll_all_reduce(sb, sb + 1, 8, QCOLL_I32, QCOLL_SUM, L, NULL)) \
  COMM_CASES(qcoll_all_reduce_ex, C_AR_EX, AB)                                \
  OPT_CASES(qcoll_all_reduce_ex, AR_EX)                                       \
  X(qcoll_all_reduce_ex, "oneshot on host memory", QCOLL_ERR_UNSUPPORTED, AR_EX(EXO(oneshot))) \
  COMM_CASES(qcoll_reduce, C_RED, AB)                                         \
  COLL_ARG_CASES(qcoll_reduce, RED)                                           \
  X(qcoll_reduce, "root 1 of 1", IA, qcoll_reduce(sb, rb, 8, QCOLL_I32, QCOLL_SUM, 1, L, NULL)) \
  X(qcoll_reduce, "recvbuf NULL on the root", IA, qcoll_reduce(sb, NULL, 8, QCOLL_I32, QCOLL_SUM, 0, L, NULL)) \
  COMM_CASES(qcoll_reduce_ex, C_RED_EX, AB)                                   \
  OPT_CASES(qcoll_reduce_ex, RED_EX)                                          \
  X(qcoll_reduce_ex, "oneshot (all-reduce only)", QCOLL_ERR_UNSUPPORTED, RED_EX(EXO(oneshot)))   \
  COMM_CASES(qcoll_broadcast, C_BC, AB)                                       \
  COLL_ARG_CASES(qcoll_broadcast, BC)                                         \
  X(qcoll_broadcast, "root -1", IA, qcoll_broadcast(sb, rb, 8, QCOLL_I32, -1, L, NULL)) \
  COMM_CASES(qcoll_broadcast_ex, C_BC_EX, AB)                                 \
  OPT_CASES(qcoll_broadcast_ex, BC_EX)                                        \
  COMM_CASES(qcoll_all_gather, C_AG, AB)                                      \
  COLL_ARG_CASES(qcoll_all_gather, AG)                                        \
  COMM_CASES(qcoll_all_gather_ex, C_AG_EX, AB)                                \
  OPT_CASES(qcoll_all_gather_ex, AG_EX)                                       \
  COMM_CASES(qcoll_reduce_scatter, C_RS, AB)                                  \
  COLL_ARG_CASES(qcoll_reduce_scatter, RS)                                    \
  X(qcoll_reduce_scatter, "op -1", IA, qcoll_reduce_scatter(sb, rb, 8, QCOLL_I32, (qcoll_op_t)-1, L, NULL)) \
  COMM_CASES(qcoll_reduce_scatter_ex, C_RS_EX, AB)                            \
  OPT_CASES(qcoll_reduce_scatter_ex, RS_EX)                                   \
  COMM_CASES(qcoll_all_to_all, C_A2A, AB)                                     \
  COLL_ARG_CASES(qcoll_all_to_all, A2A)                                       \
  X(qcoll_all_to_all, "sendbuf == recvbuf", IA, qcoll_all_to_all(sb, sb, 8, QCOLL_I32, L, NULL)) \
  COMM_CASES(qcoll_all_to_all_ex, C_A2A_EX, AB)                               \
  OPT_CASES(qcoll_all_to_all_ex, A2A_EX)                                      \
  COMM_CASES(qcoll_send, C_SEND, AB)                                          \
  X(qcoll_send, "peer 0 (itself)", IA, qcoll_send(sb, 8, QCOLL_I32, 0, L, NULL)) \
  X(qcoll_send, "peer 1 of 1", IA, qcoll_send(sb, 8, QCOLL_I32, 1, L, NULL))  \
  X(qcoll_send, "dtype 42", IA, qcoll_send(sb, 8, (qcoll_dtype_t)42, 0, L, NULL)) \
  COMM_CASES(qcoll_send_ex, C_SEND_EX, AB)                                    \
  OPT_CASES(qcoll_send_ex, SEND_EX)                                           \
  COMM_CASES(qcoll_recv, C_RECV, AB)                                          \
  X(qcoll_recv, "peer 0 (itself)", IA, qcoll_recv(rb, 8, QCOLL_I32, 0, L, NULL)) \
  X(qcoll_recv, "peer -1", IA, qcoll_recv(rb, 8, QCOLL_I32, -1, L, NULL))     \
  X(qcoll_recv, "recvbuf NULL", IA, qcoll_recv(NULL, 8, QCOLL_I32, 0, L, NULL)) \
  COMM_CASES(qcoll_recv_ex, C_RECV_EX, AB)                                    \
  OPT_CASES(qcoll_recv_ex, RECV_EX)                                           \
  COMM_CASES(qcoll_barrier, C_BARRIER, AB)                                    \
  COMM_CASES(qcoll_comm_register, C_REG, AB)                                  \
  X(qcoll_comm_register, "handle NULL", IA, qcoll_comm_register(L, sb, sizeof sb, NULL)) \
  X(qcoll_comm_register, "buf NULL", IA, qcoll_comm_register(L, NULL, 64, &reg_out)) \
  X(qcoll_comm_register, "bytes 0", IA, qcoll_comm_register(L, sb, 0, &reg_out)) \
  X(qcoll_comm_register, "host buffer (no-op), deregistered", OK, register_host_buffer(L)) \
  COMM_CASES(qcoll_comm_deregister, C_DEREG, AB)                              \
  X(qcoll_comm_deregister, "handle NULL", OK, qcoll_comm_deregister(L, NULL)) \
  X(qcoll_comm_deregister, "not a registration", IA, qcoll_comm_deregister(L, (qcoll_reg_t)fake_reg)) \
  X(qcoll_env_describe, "index -1", IA, qcoll_env_describe(-1, &name_out, &default_out, &doc_out)) \
  X(qcoll_env_describe, "index 100000", IA, qcoll_env_describe(100000, NULL, NULL, NULL)) \
  X(qcoll_selection_table_format, "size query", OK, qcoll_selection_table_format(NULL, 0, &needed)) \
  X(qcoll_selection_table_format, "NULL buffer, len 100", OK, qcoll_selection_table_format(NULL, 100, &needed)) \
  X(qcoll_selection_table_format, "neither buffer nor needed", IA, qcoll_selection_table_format(NULL, 0, NULL)) \
  X(qcoll_selection_table_format, "buffer of 4", IA, qcoll_selection_table_format(small, sizeof small, &needed)) \
  X(qcoll_backends_describe, "size query", OK, qcoll_backends_describe(NULL, 0, &needed)) \
  X(qcoll_backends_describe, "NULL buffer, len 100", OK, qcoll_backends_describe(NULL, 100, &needed)) \
  X(qcoll_backends_describe, "neither buffer nor needed", IA, qcoll_backends_describe(NULL, 0, NULL)) \
  X(qcoll_backends_describe, "buffer of 4", IA, qcoll_backends_describe(small, sizeof small, &needed))
/* clang-format on */

static const char *const covered[] = {
#define X(fn, what, want, call) #fn,
    CASES
#undef X
};
#define COVERED (sizeof covered / sizeof covered[0])

static bool is_covered(const char *fn) {
  for (size_t i = 0; i < COVERED; i++)
    if (!strcmp(covered[i], fn)) return true;
  return false;
}

/* Every "qcoll_xxx(" outside comments and preprocessor lines: the header
 * declares functions and calls none. */
static int header_functions(const char *path, char names[][64], int cap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  char line[512];
  int n = 0;
  bool in_comment = false;
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ') p++;
    if (in_comment || !strncmp(p, "/*", 2) || *p == '*' || *p == '#') {
      in_comment = !strstr(line, "*/") && (in_comment || !strncmp(p, "/*", 2));
      continue;
    }
    for (char *q = strstr(line, "qcoll_"); q; q = strstr(q + 1, "qcoll_")) {
      size_t k = strspn(q, "abcdefghijklmnopqrstuvwxyz0123456789_");
      if (q[k] != '(' || (q > line && (q[-1] == '_' || q[-1] == '.'))) continue;
      if (n < cap) snprintf(names[n++], 64, "%.*s", (int)k, q);
    }
  }
  fclose(f);
  return n;
}

static qcoll_comm_t make_comm(void) {
  qcoll_unique_id_t id;
  qcoll_comm_t c = NULL;
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = 10;
  if (qcoll_get_unique_id(&id) != QCOLL_OK ||
      qcoll_comm_init_rank(&c, 1, &id, 0, &cfg) != QCOLL_OK) {
    fprintf(stderr, "cannot make a communicator: %s\n", qcoll_last_error());
    exit(2);
  }
  return c;
}

static void init_inputs(void) {
  qcoll_options_init(&bad_size);
  bad_size.size = 0;
  qcoll_options_init(&bad_algo);
  bad_algo.algo = (qcoll_algo_t)99;
  qcoll_options_init(&bad_quant);
  bad_quant.quant = (qcoll_quant_t)99;
  qcoll_options_init(&oneshot);
  oneshot.algo = QCOLL_ALGO_ONESHOT;
  qcoll_config_init(&bad_config);
  bad_config.size = 0;
  qcoll_config_init(&bad_device);
  bad_device.device = -5;
  qcoll_config_init(&bad_timeout);
  bad_timeout.timeout_s = -1;
  memset(&id_probe, 0, sizeof id_probe);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: rel_api_table PATH/TO/qcoll.h\n");
    return 2;
  }
  static char names[256][64];
  int n = header_functions(argv[1], names, 256);
  int missing = 0;
  for (int i = 0; i < n; i++)
    if (!is_covered(names[i])) {
      fprintf(stderr,
              "FAIL %s is declared in the header but has no bad-input "
              "case here\n",
              names[i]);
      missing++;
    }
  for (size_t i = 0; i < COVERED; i++) {
    bool declared = false;
    for (int j = 0; j < n && !declared; j++)
      declared = !strcmp(names[j], covered[i]);
    if (!declared) {
      fprintf(stderr, "FAIL case for %s, which the header does not declare\n",
              covered[i]);
      missing++;
    }
  }
  if (n < 30) {
    fprintf(stderr, "FAIL only %d functions found in %s\n", n, argv[1]);
    return 1;
  }

  init_inputs();
  L = make_comm();
  A = make_comm();
  D = make_comm();
  qcoll_comm_abort(A);
  qcoll_comm_destroy(D); /* D now dangles, as a user's stale handle would */
  fill();
#define X(fn, what, want, call) check(#fn, what, (int)(want), (int)(call));
  CASES
#undef X
  /* The queries on the aborted communicator gave its values. */
  int r = -1, s = -1;
  qcoll_comm_rank(A, &r);
  qcoll_comm_size(A, &s);
  if (r != 0 || s != 1) {
    fprintf(stderr, "FAIL queries on the aborted comm: rank %d size %d\n", r,
            s);
    failures++;
  }
  qcoll_comm_destroy(A);
  qcoll_comm_destroy(L);
  printf("%d functions in the header, all covered: %s; %d cases, %d failed\n",
         n, missing ? "no" : "yes", cases, failures);
  if (missing || failures) return 1;
  printf("rel_api_table: all checks passed\n");
  return 0;
}
