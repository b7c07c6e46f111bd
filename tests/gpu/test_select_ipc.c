/*
 * The selection table's rows for GPU calls (src/core/select.c), run on the
 * host: which path each collective, dtype and op gets depending on what
 * the communicator can do.  No GPU needed: the table is a pure function of
 * its inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "core/select.h"

static qcoll__select_in_t gpu_call(qcoll__coll_t coll, qcoll_dtype_t dtype,
                                   qcoll_op_t op, size_t bytes, bool ipc,
                                   bool nccl) {
  qcoll__select_in_t in = {.coll = coll,
                           .bytes = bytes,
                           .nranks = 2,
                           .dtype = dtype,
                           .op = op,
                           .quant = QCOLL_QUANT_NONE,
                           .gpu = true,
                           .ipc = ipc,
                           .ranks_per_gpu = ipc ? 1 : 0,
                           .nccl = nccl};
  return in;
}

/* Whether forcing NCCL warns, with the thresholds of the environment as it
 * is now. */
static bool nccl_stalls(qcoll__select_in_t in) {
  qcoll__config_t config;
  qcoll__config_read(&config);
  in.config = &config;
  return qcoll__select_nccl_stalls(&in);
}

/* The table with the thresholds of the environment as it is now. */
static qcoll__path_t pick(qcoll__select_in_t in) {
  qcoll__config_t config;
  qcoll__config_read(&config);
  in.config = &config;
  int row = -1;
  qcoll__path_t path = qcoll__select(&in, &row);
  assert_true(row >= 0);
  return path;
}

static const qcoll_dtype_t dtypes[] = {
    QCOLL_I8,  QCOLL_U8,  QCOLL_I32,  QCOLL_U32, QCOLL_I64,
    QCOLL_U64, QCOLL_F16, QCOLL_BF16, QCOLL_F32, QCOLL_F64};

static bool fp32_kernel_serves(qcoll_dtype_t d, qcoll_op_t op) {
  return (d == QCOLL_F16 || d == QCOLL_BF16 || d == QCOLL_F32) &&
         (op == QCOLL_SUM || op == QCOLL_MIN || op == QCOLL_MAX);
}

/* Without NCCL, every GPU collective runs on the IPC kernels: the
 * all-reduce pairs of the fp32 kernels one-shot/two-shot, everything else
 * "ipc"; never staged. */
static void without_nccl_every_gpu_call_is_ipc(void **state) {
  (void)state;
  for (int c = 0; c < QCOLL__COLL_COUNT; c++)
    for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++)
      for (int op = 0; op < QCOLL_OP_COUNT; op++)
        for (size_t bytes = 0; bytes <= ((size_t)1 << 30);
             bytes = bytes * 64 + 8) {
          qcoll__path_t p = pick(gpu_call((qcoll__coll_t)c, dtypes[di],
                                          (qcoll_op_t)op, bytes, true, false));
          if (c == QCOLL__COLL_ALL_REDUCE && fp32_kernel_serves(dtypes[di], op))
            assert_true(p == QCOLL__PATH_ONESHOT || p == QCOLL__PATH_TWOSHOT);
          else
            assert_int_equal(p, QCOLL__PATH_IPC);
        }
}

/* NCCL keeps the collectives it serves; the stream barrier, which it does
 * not have, stays on the IPC kernels. */
static void nccl_is_preferred_where_it_serves(void **state) {
  (void)state;
  for (int c = 0; c < QCOLL__COLL_COUNT; c++) {
    qcoll__path_t p = pick(
        gpu_call((qcoll__coll_t)c, QCOLL_I32, QCOLL_PROD, 4096, true, true));
    assert_int_equal(
        p, c == QCOLL__COLL_BARRIER ? QCOLL__PATH_IPC : QCOLL__PATH_NCCL);
  }
  /* The fp32 kernels' rows still come first for small all-reduces. */
  assert_int_equal(pick(gpu_call(QCOLL__COLL_ALL_REDUCE, QCOLL_F32, QCOLL_SUM,
                                 4096, true, true)),
                   QCOLL__PATH_ONESHOT);
}

/* All-reduce on the fp32 kernels: one-shot up to 4 MiB at 2 ranks, 4 MiB
 * over the ranks with more (1 MiB at 4, 512 KiB at 8), two-shot above; a
 * set QCOLL_ONESHOT_MAX_BYTES is the limit at every world size. */
static void oneshot_gives_way_to_twoshot_by_rank_count(void **state) {
  (void)state;
  const int worlds[] = {2, 4, 8};
  for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
    size_t limit = worlds[w] == 2 ? (size_t)4 << 20
                                  : ((size_t)4 << 20) / (size_t)worlds[w];
    qcoll__select_in_t in = gpu_call(QCOLL__COLL_ALL_REDUCE, QCOLL_BF16,
                                     QCOLL_SUM, limit, true, false);
    in.nranks = worlds[w];
    assert_int_equal(pick(in), QCOLL__PATH_ONESHOT);
    in.bytes = limit + 2;
    assert_int_equal(pick(in), QCOLL__PATH_TWOSHOT);
  }
  setenv("QCOLL_ONESHOT_MAX_BYTES", "64K", 1);
  for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
    qcoll__select_in_t in = gpu_call(QCOLL__COLL_ALL_REDUCE, QCOLL_F32,
                                     QCOLL_SUM, 64 << 10, true, false);
    in.nranks = worlds[w];
    assert_int_equal(pick(in), QCOLL__PATH_ONESHOT);
    in.bytes += 4;
    assert_int_equal(pick(in), QCOLL__PATH_TWOSHOT);
  }
  unsetenv("QCOLL_ONESHOT_MAX_BYTES");
}

/* Ranks sharing a GPU with an NCCL that accepts them: the IPC kernels keep
 * reduce, broadcast, all-gather, reduce-scatter and all-to-all up to
 * QCOLL_SHARED_GPU_IPC_MAX_BYTES (2 MiB by default), NCCL takes them past
 * it and keeps send/recv at every size; all-reduce keeps its own rows. */
static void shared_gpu_keeps_small_collectives_on_ipc(void **state) {
  (void)state;
  const size_t limit = (size_t)2 << 20;
  for (int c = 0; c < QCOLL__COLL_COUNT; c++) {
    for (size_t bytes = 8; bytes <= 4 * limit; bytes *= 2) {
      qcoll__select_in_t in =
          gpu_call((qcoll__coll_t)c, QCOLL_I32, QCOLL_SUM, bytes, true, true);
      in.ranks_per_gpu = 2;
      qcoll__path_t p = pick(in);
      qcoll__select_in_t apart = in;
      apart.ranks_per_gpu = 1;
      qcoll__path_t q = pick(apart);
      bool kept = c == QCOLL__COLL_REDUCE || c == QCOLL__COLL_BROADCAST ||
                  c == QCOLL__COLL_ALL_GATHER ||
                  c == QCOLL__COLL_REDUCE_SCATTER ||
                  c == QCOLL__COLL_ALL_TO_ALL;
      if (c == QCOLL__COLL_BARRIER)
        assert_int_equal(p, QCOLL__PATH_IPC);
      else if (kept && bytes <= limit)
        assert_int_equal(p, QCOLL__PATH_IPC);
      else
        assert_int_equal(p, QCOLL__PATH_NCCL);
      /* ranks on GPUs of their own: NCCL wherever it serves, as before */
      assert_int_equal(q, c == QCOLL__COLL_BARRIER ? QCOLL__PATH_IPC
                                                   : QCOLL__PATH_NCCL);
    }
  }
  /* the threshold follows its variable */
  setenv("QCOLL_SHARED_GPU_IPC_MAX_BYTES", "4K", 1);
  qcoll__select_in_t in =
      gpu_call(QCOLL__COLL_BROADCAST, QCOLL_U8, QCOLL_SUM, 8192, true, true);
  in.ranks_per_gpu = 2;
  assert_int_equal(pick(in), QCOLL__PATH_NCCL);
  in.bytes = 4096;
  assert_int_equal(pick(in), QCOLL__PATH_IPC);
  unsetenv("QCOLL_SHARED_GPU_IPC_MAX_BYTES");
}

/* More ranks on one GPU than QCOLL_SHARED_GPU_NCCL_MAX_RANKS (2 by
 * default): every collective but send/recv stays on qcoll's kernels at
 * every size, all-reduce of the fp32 kernels' pairs on two-shot past the
 * one-shot limit; send/recv is still NCCL's.  At 2 ranks per GPU the sizes
 * past QCOLL_SHARED_GPU_IPC_MAX_BYTES go to NCCL as before. */
static void crowded_gpu_keeps_nccl_off_but_send_recv(void **state) {
  (void)state;
  for (int c = 0; c < QCOLL__COLL_COUNT; c++)
    for (size_t bytes = 8; bytes <= ((size_t)1 << 30); bytes *= 8) {
      qcoll__select_in_t in =
          gpu_call((qcoll__coll_t)c, QCOLL_BF16, QCOLL_SUM, bytes, true, true);
      in.nranks = 4;
      in.ranks_per_gpu = 3;
      qcoll__path_t p = pick(in);
      if (c == QCOLL__COLL_SEND || c == QCOLL__COLL_RECV)
        assert_int_equal(p, QCOLL__PATH_NCCL);
      else if (c == QCOLL__COLL_ALL_REDUCE)
        assert_int_equal(p, bytes <= ((size_t)256 << 10) ? QCOLL__PATH_ONESHOT
                                                         : QCOLL__PATH_TWOSHOT);
      else
        assert_int_equal(p, QCOLL__PATH_IPC);
      /* What forcing NCCL warns about: the same calls the table keeps off */
      assert_int_equal(nccl_stalls(in),
                       c != QCOLL__COLL_SEND && c != QCOLL__COLL_RECV);
      in.ranks_per_gpu = 2;
      assert_false(nccl_stalls(in));
      if (bytes > ((size_t)16 << 20) && c != QCOLL__COLL_BARRIER)
        assert_int_equal(pick(in), QCOLL__PATH_NCCL);
    }
  /* the limit follows its variable: 4 allowed, so 3 on a GPU use NCCL */
  setenv("QCOLL_SHARED_GPU_NCCL_MAX_RANKS", "4", 1);
  qcoll__select_in_t in = gpu_call(QCOLL__COLL_BROADCAST, QCOLL_U8, QCOLL_SUM,
                                   (size_t)64 << 20, true, true);
  in.ranks_per_gpu = 3;
  assert_int_equal(pick(in), QCOLL__PATH_NCCL);
  in.ranks_per_gpu = 5;
  assert_int_equal(pick(in), QCOLL__PATH_IPC);
  unsetenv("QCOLL_SHARED_GPU_NCCL_MAX_RANKS");
  /* without IPC the rule cannot apply: NCCL or staging as before */
  in = gpu_call(QCOLL__COLL_BROADCAST, QCOLL_U8, QCOLL_SUM, (size_t)64 << 20,
                false, true);
  in.ranks_per_gpu = 0;
  assert_int_equal(pick(in), QCOLL__PATH_NCCL);
}

/* Staged only when IPC cannot serve; host buffers stay on the host. */
static void staged_only_without_ipc(void **state) {
  (void)state;
  for (int c = 0; c < QCOLL__COLL_COUNT; c++) {
    assert_int_equal(pick(gpu_call((qcoll__coll_t)c, QCOLL_U8, QCOLL_SUM, 100,
                                   false, false)),
                     QCOLL__PATH_STAGED);
    qcoll__select_in_t host =
        gpu_call((qcoll__coll_t)c, QCOLL_U8, QCOLL_SUM, 100, true, true);
    host.gpu = false;
    assert_int_equal(pick(host), QCOLL__PATH_HOST);
  }
}

/* Whether a sum all-reduce of `bytes` in `quant` is quantised with
 * `ranks_per_gpu`, under the environment as it is now.  The table's row
 * and the call's transfer ask the same function; the row's path is the
 * two-shot exactly when it answers yes, whatever NCCL can do. */
static bool quantises_placed(qcoll_quant_t quant, size_t bytes, int nranks,
                             int ranks_per_gpu) {
  qcoll__config_t config;
  qcoll__config_read(&config);
  qcoll__select_in_t in = gpu_call(QCOLL__COLL_ALL_REDUCE, QCOLL_BF16,
                                   QCOLL_SUM, bytes, true, false);
  in.quant = quant;
  in.nranks = nranks;
  in.ranks_per_gpu = ranks_per_gpu;
  in.config = &config;
  bool yes = qcoll__select_quantises(&in);
  in.nccl = true;
  int row = -1;
  qcoll__path_t path = qcoll__select(&in, &row);
  if (yes) assert_int_equal(path, QCOLL__PATH_TWOSHOT);
  if (yes) assert_int_equal(row, 1); /* the quantised row */
  if (!yes) assert_int_not_equal(row, 1);
  return yes;
}
/* Every rank on one GPU (ranks_per_gpu of them), or one per GPU (1). */
static bool quantises(qcoll_quant_t quant, size_t bytes, int ranks_per_gpu) {
  return quantises_placed(quant, bytes, ranks_per_gpu > 1 ? ranks_per_gpu : 2,
                          ranks_per_gpu);
}

static const size_t MiB = (size_t)1 << 20;

/* One rank per GPU: every format from QCOLL_QUANT_MIN_BYTES (1M). */
static void quantised_from_the_min_bytes_on_separate_gpus(void **state) {
  (void)state;
  for (int q = QCOLL_QUANT_FP8; q <= QCOLL_QUANT_INT3; q++) {
    assert_false(quantises((qcoll_quant_t)q, MiB - 2, 1));
    assert_true(quantises((qcoll_quant_t)q, MiB, 1));
    assert_true(quantises((qcoll_quant_t)q, 1024 * MiB, 1));
  }
  assert_false(quantises(QCOLL_QUANT_NONE, 1024 * MiB, 1));
}

/* Every rank on one GPU: with two, INT4 from 32 MiB, INT8 from 256 MiB,
 * the others never; with three to eight, none ever (the measured floors).
 * Ranks on several GPUs keep QCOLL_QUANT_MIN_BYTES alone.
 * QCOLL_QUANT_MIN_BYTES still raises the floors, and
 * QCOLL_QUANT_SHARED_GPU_FLOORS=0 puts every format back on it. */
static void quantised_only_where_measured_to_pay_on_a_shared_gpu(void **state) {
  (void)state;
  assert_false(quantises(QCOLL_QUANT_INT4, 32 * MiB - 2, 2));
  assert_true(quantises(QCOLL_QUANT_INT4, 32 * MiB, 2));
  assert_false(quantises(QCOLL_QUANT_INT8, 256 * MiB - 2, 2));
  assert_true(quantises(QCOLL_QUANT_INT8, 256 * MiB, 2));
  for (int shared = 2; shared <= 8; shared++)
    for (int q = QCOLL_QUANT_FP8; q <= QCOLL_QUANT_INT3; q++) {
      bool measured_to_pay =
          shared == 2 && (q == QCOLL_QUANT_INT4 || q == QCOLL_QUANT_INT8);
      assert_int_equal(quantises((qcoll_quant_t)q, 4096 * MiB, shared),
                       measured_to_pay);
    }
  /* Ranks on several GPUs, two on each: bytes cross links, no floor. */
  for (int q = QCOLL_QUANT_FP8; q <= QCOLL_QUANT_INT3; q++) {
    assert_false(quantises_placed((qcoll_quant_t)q, MiB - 2, 4, 2));
    assert_true(quantises_placed((qcoll_quant_t)q, MiB, 4, 2));
  }
  setenv("QCOLL_QUANT_MIN_BYTES", "128M", 1);
  assert_false(quantises(QCOLL_QUANT_INT4, 64 * MiB, 2));
  assert_true(quantises(QCOLL_QUANT_INT4, 128 * MiB, 2));
  setenv("QCOLL_QUANT_MIN_BYTES", "0", 1);
  setenv("QCOLL_QUANT_SHARED_GPU_FLOORS", "0", 1);
  for (int q = QCOLL_QUANT_FP8; q <= QCOLL_QUANT_INT3; q++)
    assert_true(quantises((qcoll_quant_t)q, 16, 4));
  unsetenv("QCOLL_QUANT_SHARED_GPU_FLOORS");
  unsetenv("QCOLL_QUANT_MIN_BYTES");

  char buf[4096];
  assert_int_equal(qcoll_selection_table_format(buf, sizeof buf, NULL),
                   QCOLL_OK);
  assert_non_null(strstr(buf,
                         "from: 2 per GPU: fp8 never int8 268435456 "
                         "int6 never int4 33554432 int3 never; 3 or "
                         "more: fp8 never int8 never int6 never int4 "
                         "never int3 never (bytes)"));
}

/* Min and max are never quantised (rounded values could change the
 * winner), wherever the ranks are. */
static void min_and_max_are_never_quantised(void **state) {
  (void)state;
  qcoll__config_t config;
  qcoll__config_read(&config);
  for (int op = QCOLL_MIN; op <= QCOLL_MAX; op++) {
    qcoll__select_in_t in = gpu_call(QCOLL__COLL_ALL_REDUCE, QCOLL_BF16,
                                     (qcoll_op_t)op, 1024 * MiB, true, false);
    in.quant = QCOLL_QUANT_INT4;
    in.config = &config;
    assert_false(qcoll__select_quantises(&in));
  }
}

static void ipc_path_has_a_name(void **state) {
  (void)state;
  assert_string_equal(qcoll__path_name(QCOLL__PATH_IPC), "ipc");
  assert_string_equal(qcoll__path_name(QCOLL__PATH_STAGED), "staged");
  char buf[4096];
  assert_int_equal(qcoll_selection_table_format(buf, sizeof buf, NULL),
                   QCOLL_OK);
  assert_non_null(strstr(buf, "ipc "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(without_nccl_every_gpu_call_is_ipc),
      cmocka_unit_test(oneshot_gives_way_to_twoshot_by_rank_count),
      cmocka_unit_test(nccl_is_preferred_where_it_serves),
      cmocka_unit_test(shared_gpu_keeps_small_collectives_on_ipc),
      cmocka_unit_test(crowded_gpu_keeps_nccl_off_but_send_recv),
      cmocka_unit_test(staged_only_without_ipc),
      cmocka_unit_test(quantised_from_the_min_bytes_on_separate_gpus),
      cmocka_unit_test(quantised_only_where_measured_to_pay_on_a_shared_gpu),
      cmocka_unit_test(min_and_max_are_never_quantised),
      cmocka_unit_test(ipc_path_has_a_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
