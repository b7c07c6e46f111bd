/*
 * Public API on a one-rank communicator: enum helpers, unique ids, init
 * errors, every collective's identity at world size 1, and a table of bad
 * calls, each of which must fail with its named error and leave the
 * communicator serving the next valid call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "qcoll.h"

static qcoll_comm_t make_single_rank_comm(void) {
  qcoll_unique_id_t id;
  assert_int_equal(qcoll_get_unique_id(&id), QCOLL_OK);
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = 10;
  qcoll_comm_t comm = NULL;
  qcoll_status_t st = qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg);
  if (st != QCOLL_OK) fail_msg("init failed: %s", qcoll_last_error());
  return comm;
}

static void status_strings_are_distinct(void **state) {
  for (int a = 0; a >= QCOLL_ERR_INTERNAL; a--)
    for (int b = 0; b > a; b--)
      assert_string_not_equal(qcoll_status_string((qcoll_status_t)a),
                              qcoll_status_string((qcoll_status_t)b));
  assert_string_equal(qcoll_status_string((qcoll_status_t)-999),
                      "unknown status");
}

static void version_matches_header(void **state) {
  int v = 0;
  assert_int_equal(qcoll_get_version(&v), QCOLL_OK);
  assert_int_equal(v, QCOLL_VERSION_CODE);
  assert_int_equal(qcoll_get_version(NULL), QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "version"));
}

static void dtype_table(void **state) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  for (int d = 0; d < QCOLL_DTYPE_COUNT; d++)
    assert_int_equal(qcoll_dtype_size((qcoll_dtype_t)d), sizes[d]);
  assert_int_equal(qcoll_dtype_size(QCOLL_DTYPE_COUNT), 0);
  assert_string_equal(qcoll_dtype_name(QCOLL_BF16), "bf16");
  assert_string_equal(qcoll_op_name(QCOLL_AVG), "avg");
  assert_string_equal(qcoll_algo_name(QCOLL_ALGO_TWOSHOT), "twoshot");
  assert_string_equal(qcoll_algo_name(QCOLL_ALGO_IPC), "ipc");
  assert_string_equal(qcoll_algo_name(QCOLL_ALGO_COUNT), "invalid");
  assert_string_equal(qcoll_quant_name(QCOLL_QUANT_INT6), "int6");
  assert_string_equal(qcoll_op_name((qcoll_op_t)77), "invalid");
}

static void unique_id_hex_round_trip(void **state) {
  qcoll_unique_id_t id, back;
  for (int i = 0; i < QCOLL_UNIQUE_ID_BYTES; i++)
    id.bytes[i] = (unsigned char)(i * 37 + 5);
  char hex[2 * QCOLL_UNIQUE_ID_BYTES + 1];
  assert_int_equal(qcoll_unique_id_to_hex(&id, hex), QCOLL_OK);
  assert_int_equal(strlen(hex), 2 * QCOLL_UNIQUE_ID_BYTES);
  assert_int_equal(qcoll_unique_id_from_hex(hex, &back), QCOLL_OK);
  assert_memory_equal(id.bytes, back.bytes, QCOLL_UNIQUE_ID_BYTES);
  hex[10] = 'z';
  assert_int_equal(qcoll_unique_id_from_hex(hex, &back),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "non-hex"));
  assert_int_equal(qcoll_unique_id_from_hex("abcd", &back),
                   QCOLL_ERR_INVALID_ARGUMENT);
}

static void init_refuses_bad_arguments(void **state) {
  qcoll_unique_id_t id;
  memset(&id, 0, sizeof id);
  qcoll_comm_t comm = (qcoll_comm_t)0x1;
  assert_int_equal(qcoll_comm_init_rank(NULL, 1, &id, 0, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(qcoll_comm_init_rank(&comm, 0, &id, 0, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "nranks is 0"));
  assert_int_equal(qcoll_comm_init_rank(&comm, 4, &id, 4, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "rank 4 is out of range [0, 4)"));
  assert_int_equal(qcoll_comm_init_rank(&comm, 4, NULL, 0, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.size = 3;
  assert_int_equal(qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "config->size"));
  qcoll_config_init(&cfg);
  cfg.device = -7;
  assert_int_equal(qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "config->device is -7"));
}

static void init_env_without_launcher_is_explained(void **state) {
  const char *vars[] = {
      "QCOLL_RANK",   "QCOLL_WORLD_SIZE",     "RANK",
      "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS",         "PMI_RANK",
      "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  qcoll_comm_t comm;
  assert_int_equal(qcoll_comm_init_env(&comm, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "no launcher environment"));
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "2", 1);
  assert_int_equal(qcoll_comm_init_env(&comm, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "rank 3 is out of range"));
  setenv("WORLD_SIZE", "two", 1);
  assert_int_equal(qcoll_comm_init_env(&comm, NULL),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "WORLD_SIZE='two'"));
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

static void accessors_report_the_communicator(void **state) {
  qcoll_comm_t comm = make_single_rank_comm();
  int v = -5;
  assert_int_equal(qcoll_comm_rank(comm, &v), QCOLL_OK);
  assert_int_equal(v, 0);
  assert_int_equal(qcoll_comm_size(comm, &v), QCOLL_OK);
  assert_int_equal(v, 1);
  assert_int_equal(qcoll_comm_device(comm, &v), QCOLL_OK);
  assert_int_equal(v, QCOLL_DEVICE_NONE);
  assert_int_equal(qcoll_comm_rank(comm, NULL), QCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(qcoll_comm_rank(NULL, &v), QCOLL_ERR_INVALID_ARGUMENT);
  qcoll_status_t async = QCOLL_ERR_INTERNAL;
  assert_int_equal(qcoll_comm_get_async_error(comm, &async), QCOLL_OK);
  assert_int_equal(async, QCOLL_OK);
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
  assert_int_equal(qcoll_comm_destroy(NULL), QCOLL_OK);
}

/* At world size 1 every collective is a copy (AVG divides by 1). */
static void single_rank_collectives_are_identities(void **state) {
  qcoll_comm_t comm = make_single_rank_comm();
  int32_t in[5] = {1, -2, 3, -4, 5}, out[5];
  for (int op = 0; op < QCOLL_OP_COUNT; op++) {
    memset(out, 0, sizeof out);
    assert_int_equal(qcoll_all_reduce(in, out, 5, QCOLL_I32, op, comm, NULL),
                     QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
  }
  memset(out, 0, sizeof out);
  assert_int_equal(
      qcoll_reduce(in, out, 5, QCOLL_I32, QCOLL_MAX, 0, comm, NULL), QCOLL_OK);
  assert_memory_equal(in, out, sizeof in);
  memset(out, 0, sizeof out);
  assert_int_equal(qcoll_broadcast(in, out, 5, QCOLL_I32, 0, comm, NULL),
                   QCOLL_OK);
  assert_memory_equal(in, out, sizeof in);
  memset(out, 0, sizeof out);
  assert_int_equal(qcoll_all_gather(in, out, 5, QCOLL_I32, comm, NULL),
                   QCOLL_OK);
  assert_memory_equal(in, out, sizeof in);
  memset(out, 0, sizeof out);
  assert_int_equal(
      qcoll_reduce_scatter(in, out, 5, QCOLL_I32, QCOLL_SUM, comm, NULL),
      QCOLL_OK);
  assert_memory_equal(in, out, sizeof in);
  memset(out, 0, sizeof out);
  assert_int_equal(qcoll_all_to_all(in, out, 5, QCOLL_I32, comm, NULL),
                   QCOLL_OK);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(qcoll_barrier(comm, NULL), QCOLL_OK);
  assert_int_equal(
      qcoll_all_reduce(NULL, NULL, 0, QCOLL_F32, QCOLL_SUM, comm, NULL),
      QCOLL_OK);
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
}

typedef struct bad_call {
  const char *what;
  qcoll_status_t expected;
  const char *message_part;
} bad_call_t;

/* Runs bad call number i on comm; returns its status. */
static qcoll_status_t run_bad_call(int i, qcoll_comm_t comm, int32_t *buf) {
  qcoll_all_reduce_options_t opts;
  qcoll_all_reduce_options_init(&opts);
  switch (i) {
    case 0:
      return qcoll_all_reduce(NULL, buf, 4, QCOLL_I32, QCOLL_SUM, comm, NULL);
    case 1:
      return qcoll_all_reduce(buf, NULL, 4, QCOLL_I32, QCOLL_SUM, comm, NULL);
    case 2:
      return qcoll_all_reduce(buf, buf, 4, (qcoll_dtype_t)42, QCOLL_SUM, comm,
                              NULL);
    case 3:
      return qcoll_all_reduce(buf, buf, 4, QCOLL_I32, (qcoll_op_t)-1, comm,
                              NULL);
    case 4:
      return qcoll_all_reduce(buf, buf, SIZE_MAX / 2, QCOLL_I32, QCOLL_SUM,
                              comm, NULL);
    case 5:
      return qcoll_reduce(buf, buf, 4, QCOLL_I32, QCOLL_SUM, 1, comm, NULL);
    case 6: return qcoll_broadcast(buf, buf, 4, QCOLL_I32, -1, comm, NULL);
    case 7: return qcoll_send(buf, 4, QCOLL_I32, 0, comm, NULL);
    case 8: return qcoll_recv(buf, 4, QCOLL_I32, 5, comm, NULL);
    case 9: return qcoll_all_to_all(buf, buf + 1, 2, QCOLL_I32, comm, NULL);
    case 10:
      return qcoll_all_reduce(buf, buf + 1, 4, QCOLL_I32, QCOLL_SUM, NULL,
                              NULL);
    case 11:
      opts.algo = (qcoll_algo_t)99;
      return qcoll_all_reduce_ex(buf, buf, 4, QCOLL_I32, QCOLL_SUM, comm, NULL,
                                 &opts);
    case 12:
      opts.size = 1;
      return qcoll_all_reduce_ex(buf, buf, 4, QCOLL_I32, QCOLL_SUM, comm, NULL,
                                 &opts);
    case 13:
      opts.algo = QCOLL_ALGO_TWOSHOT;
      return qcoll_all_reduce_ex(buf, buf, 4, QCOLL_F32, QCOLL_SUM, comm, NULL,
                                 &opts);
    case 14:
      return qcoll_all_reduce(buf, buf + 1, 4, QCOLL_I32, QCOLL_SUM, comm,
                              NULL);
    case 15:
      opts.quant = QCOLL_QUANT_INT8;
      return qcoll_broadcast_ex(buf, buf, 4, QCOLL_F32, 0, comm, NULL, &opts);
    case 16:
      opts.algo = QCOLL_ALGO_NCCL;
      return qcoll_all_gather_ex(buf, buf + 8, 4, QCOLL_I32, comm, NULL, &opts);
    case 17:
      opts.size = 0;
      return qcoll_reduce_ex(buf, buf, 4, QCOLL_I32, QCOLL_SUM, 0, comm, NULL,
                             &opts);
    case 18:
      opts.algo = (qcoll_algo_t)-3;
      return qcoll_reduce_scatter_ex(buf, buf + 8, 4, QCOLL_I32, QCOLL_SUM,
                                     comm, NULL, &opts);
    case 19:
      opts.quant = (qcoll_quant_t)77;
      return qcoll_all_to_all_ex(buf, buf + 8, 4, QCOLL_I32, comm, NULL,
                                 &opts);
    case 20:
      opts.algo = QCOLL_ALGO_IPC;
      return qcoll_send_ex(buf, 4, QCOLL_I32, 0, comm, NULL, &opts);
  }
  return QCOLL_ERR_INTERNAL;
}

static const bad_call_t bad_calls[] = {
    {"NULL sendbuf", QCOLL_ERR_INVALID_ARGUMENT, "sendbuf is NULL"},
    {"NULL recvbuf", QCOLL_ERR_INVALID_ARGUMENT, "recvbuf is NULL"},
    {"invalid dtype", QCOLL_ERR_INVALID_ARGUMENT, "dtype 42"},
    {"invalid op", QCOLL_ERR_INVALID_ARGUMENT, "op -1"},
    {"byte size overflow", QCOLL_ERR_INVALID_ARGUMENT, "overflows"},
    {"root out of range", QCOLL_ERR_INVALID_ARGUMENT, "root 1 is out of range"},
    {"negative root", QCOLL_ERR_INVALID_ARGUMENT, "root -1"},
    {"send to self", QCOLL_ERR_INVALID_ARGUMENT, "peer 0 is this rank"},
    {"peer out of range", QCOLL_ERR_INVALID_ARGUMENT, "peer 5 is out of range"},
    {"overlapping all-to-all", QCOLL_ERR_INVALID_ARGUMENT, "overlap"},
    {"NULL communicator", QCOLL_ERR_INVALID_ARGUMENT, "comm is NULL"},
    {"invalid algorithm", QCOLL_ERR_INVALID_ARGUMENT, "algo 99"},
    {"options not initialised", QCOLL_ERR_INVALID_ARGUMENT, "opts->size"},
    {"GPU algorithm on host memory", QCOLL_ERR_UNSUPPORTED,
     "needs GPU buffers"},
    {"partly overlapping buffers", QCOLL_ERR_INVALID_ARGUMENT, "overlap"},
    {"quantised broadcast", QCOLL_ERR_UNSUPPORTED,
     "qcoll_broadcast_ex: quantisation int8 serves all_reduce only"},
    {"per-call NCCL on host memory", QCOLL_ERR_UNSUPPORTED,
     "qcoll_all_gather: algorithm nccl needs GPU buffers"},
    {"reduce options not initialised", QCOLL_ERR_INVALID_ARGUMENT,
     "qcoll_reduce_ex: opts->size is 0"},
    {"negative algorithm", QCOLL_ERR_INVALID_ARGUMENT, "algo -3"},
    {"quantisation out of range", QCOLL_ERR_INVALID_ARGUMENT, "quant 77"},
    {"send_ex to self", QCOLL_ERR_INVALID_ARGUMENT, "peer 0 is this rank"},
};

static void bad_calls_are_refused_and_comm_stays_usable(void **state) {
  qcoll_comm_t comm = make_single_rank_comm();
  int32_t buf[16];
  for (int i = 0; i < (int)(sizeof bad_calls / sizeof bad_calls[0]); i++) {
    for (int k = 0; k < 16; k++) buf[k] = k;
    qcoll_status_t st = run_bad_call(i, comm, buf);
    if (st != bad_calls[i].expected)
      fail_msg("%s: got %d (%s), expected %d", bad_calls[i].what, st,
               qcoll_last_error(), bad_calls[i].expected);
    if (!strstr(qcoll_last_error(), bad_calls[i].message_part))
      fail_msg("%s: message '%s' lacks '%s'", bad_calls[i].what,
               qcoll_last_error(), bad_calls[i].message_part);
    for (int k = 0; k < 16; k++) assert_int_equal(buf[k], k); /* untouched */
    int32_t one = 7, res = 0;
    assert_int_equal(
        qcoll_all_reduce(&one, &res, 1, QCOLL_I32, QCOLL_SUM, comm, NULL),
        QCOLL_OK);
    assert_int_equal(res, 7);
  }
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
}

/* Every _ex form with per-call options (host, auto, none, and quantisation
 * "none" for a collective that is not an all-reduce) gives the plain form's
 * result on a one-rank communicator. */
static void ex_forms_with_options_give_the_plain_results(void **state) {
  qcoll_comm_t comm = make_single_rank_comm();
  qcoll_options_t host, autoq, *none = NULL;
  assert_int_equal(qcoll_options_init(&host), QCOLL_OK);
  assert_int_equal(host.size, sizeof host);
  assert_int_equal(host.algo, QCOLL_ALGO_AUTO);
  assert_int_equal(host.quant, QCOLL_QUANT_DEFAULT);
  host.algo = QCOLL_ALGO_HOST;
  qcoll_options_init(&autoq);
  autoq.quant = QCOLL_QUANT_NONE;
  const qcoll_options_t *each[] = {&host, &autoq, none};
  for (int k = 0; k < 3; k++) {
    const qcoll_options_t *o = each[k];
    int32_t in[4] = {3, -1, 7, 40 + k}, out[4] = {0};
    assert_int_equal(qcoll_all_reduce_ex(in, out, 4, QCOLL_I32, QCOLL_MAX,
                                         comm, NULL, o),
                     QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
    memset(out, 0, sizeof out);
    assert_int_equal(qcoll_reduce_ex(in, out, 4, QCOLL_I32, QCOLL_SUM, 0, comm,
                                     NULL, o),
                     QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
    memset(out, 0, sizeof out);
    assert_int_equal(
        qcoll_broadcast_ex(in, out, 4, QCOLL_I32, 0, comm, NULL, o), QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
    memset(out, 0, sizeof out);
    assert_int_equal(
        qcoll_all_gather_ex(in, out, 4, QCOLL_I32, comm, NULL, o), QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
    memset(out, 0, sizeof out);
    assert_int_equal(qcoll_reduce_scatter_ex(in, out, 4, QCOLL_I32, QCOLL_SUM,
                                             comm, NULL, o),
                     QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
    memset(out, 0, sizeof out);
    assert_int_equal(
        qcoll_all_to_all_ex(in, out, 4, QCOLL_I32, comm, NULL, o), QCOLL_OK);
    assert_memory_equal(in, out, sizeof in);
  }
  /* a call of no elements moves nothing, whatever algorithm it names */
  qcoll_options_t ipc;
  qcoll_options_init(&ipc);
  ipc.algo = QCOLL_ALGO_IPC;
  int32_t untouched = 5;
  assert_int_equal(qcoll_broadcast_ex(&untouched, &untouched, 0, QCOLL_I32, 0,
                                      comm, NULL, &ipc),
                   QCOLL_OK);
  assert_int_equal(untouched, 5);
  /* the older names are the same type and defaults */
  qcoll_all_reduce_options_t old;
  assert_int_equal(qcoll_all_reduce_options_init(&old), QCOLL_OK);
  assert_int_equal(old.size, sizeof(qcoll_options_t));
  struct qcoll_all_reduce_options *tagged = &old;
  assert_int_equal(tagged->algo, QCOLL_ALGO_AUTO);
  assert_int_equal(qcoll_options_init(NULL), QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(qcoll_last_error(), "qcoll_options_init"));
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
}

static void aborted_comm_refuses_calls(void **state) {
  qcoll_comm_t comm = make_single_rank_comm();
  assert_int_equal(qcoll_comm_abort(comm), QCOLL_OK);
  assert_int_equal(qcoll_comm_abort(comm), QCOLL_OK); /* idempotent */
  int32_t x = 1;
  assert_int_equal(
      qcoll_all_reduce(&x, &x, 1, QCOLL_I32, QCOLL_SUM, comm, NULL),
      QCOLL_ERR_ABORTED);
  assert_non_null(strstr(qcoll_comm_last_error(comm), "aborted"));
  assert_int_equal(qcoll_barrier(comm, NULL), QCOLL_ERR_ABORTED);
  assert_int_equal(qcoll_comm_destroy(comm), QCOLL_OK);
}

static void describe_functions_fill_and_refuse_small_buffers(void **state) {
  qcoll_status_t (*fns[])(char *, size_t, size_t *) = {
      qcoll_selection_table_format, qcoll_backends_describe};
  const char *must_contain[] = {"staged", "NCCL"};
  for (int i = 0; i < 2; i++) {
    /* Size queries: a NULL buffer (whatever len says) or a len of 0. */
    size_t needed = 0, again = 0, zero = 0;
    assert_int_equal(fns[i](NULL, 0, &needed), QCOLL_OK);
    assert_true(needed > 10);
    assert_int_equal(fns[i](NULL, 4096, &again), QCOLL_OK);
    assert_int_equal(again, needed);
    char untouched[2] = {'x', 'y'};
    assert_int_equal(fns[i](untouched, 0, &zero), QCOLL_OK);
    assert_int_equal(zero, needed);
    assert_int_equal(untouched[0], 'x');
    assert_int_equal(fns[i](NULL, 0, NULL), QCOLL_ERR_INVALID_ARGUMENT);
    char small[4];
    assert_int_equal(fns[i](small, sizeof small, NULL),
                     QCOLL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qcoll_last_error(), "too small"));
    char *buf = malloc(needed);
    assert_int_equal(fns[i](buf, needed, NULL), QCOLL_OK);
    assert_int_equal(strlen(buf) + 1, needed);
    assert_non_null(strstr(buf, must_contain[i]));
    free(buf);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_strings_are_distinct),
      cmocka_unit_test(version_matches_header),
      cmocka_unit_test(dtype_table),
      cmocka_unit_test(unique_id_hex_round_trip),
      cmocka_unit_test(init_refuses_bad_arguments),
      cmocka_unit_test(init_env_without_launcher_is_explained),
      cmocka_unit_test(accessors_report_the_communicator),
      cmocka_unit_test(single_rank_collectives_are_identities),
      cmocka_unit_test(bad_calls_are_refused_and_comm_stays_usable),
      cmocka_unit_test(ex_forms_with_options_give_the_plain_results),
      cmocka_unit_test(aborted_comm_refuses_calls),
      cmocka_unit_test(describe_functions_fill_and_refuse_small_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
