/*
 * The local registry (src/transport/reg_table.c): lookups of ranges and
 * offsets, the alignment and whole-pack checks, slot reuse with fresh
 * generations (a freed and reallocated buffer), and the agreement of ranks
 * that disagree on whether a registration could be mapped.  Addresses are
 * made up; nothing is dereferenced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/reg_table.h"

#define A(off) ((uintptr_t)0x10000000u + (off))

static qcoll__reg_table_t table;

static int setup(void **state) {
  (void)state;
  qcoll__reg_table_init(&table);
  return 0;
}

static void handle_of(unsigned char *h, int id) {
  memset(h, 0, QCOLL_REG_HANDLE_BYTES);
  h[0] = (unsigned char)id;
}

static qcoll__reg_range_t *add(uintptr_t base, size_t bytes, int id) {
  unsigned char h[QCOLL_REG_HANDLE_BYTES];
  handle_of(h, id);
  return qcoll__reg_insert(&table, base, bytes, h);
}

/* Ranges inserted out of order are found by any address inside them and
 * by none outside; offsets are from the allocation's base. */
static void test_ranges_and_offsets(void **state) {
  (void)state;
  assert_non_null(add(A(0x4000), 0x1000, 1));
  assert_non_null(add(A(0x0000), 0x1000, 2));
  assert_non_null(add(A(0x2000), 0x1000, 3));
  assert_int_equal(table.count, 3);
  assert_null(qcoll__reg_find(&table, A(0x1000)));
  assert_null(qcoll__reg_find(&table, A(0x5000)));
  assert_null(qcoll__reg_find(&table, A(0) - 1));
  assert_int_equal(qcoll__reg_find(&table, A(0x2fff))->base, A(0x2000));
  qcoll__ipc_reg_ref_t ref;
  assert_true(qcoll__reg_lookup(&table, (void *)A(0x4100), 0x200, false, &ref));
  qcoll__reg_range_t *r = qcoll__reg_find(&table, A(0x4000));
  assert_int_equal(ref.slot, r->slot);
  assert_int_equal(ref.gen, r->gen);
  assert_int_equal(ref.offset, 0x100);
  /* the whole last pack must lie in the allocation */
  assert_true(qcoll__reg_lookup(&table, (void *)A(0x4ff0), 16, false, &ref));
  assert_true(qcoll__reg_lookup(&table, (void *)A(0x4ff0), 9, false, &ref));
  assert_false(qcoll__reg_lookup(&table, (void *)A(0x4ff0), 17, false, &ref));
  assert_int_equal(ref.gen, 0); /* refused: staged */
  /* capture's registrations serve eager calls only once registered
   * explicitly */
  assert_false(qcoll__reg_lookup(&table, (void *)A(0x4100), 16, true, &ref));
  r->refs = 1;
  assert_true(qcoll__reg_lookup(&table, (void *)A(0x4100), 16, true, &ref));
  /* unaligned pointers stage */
  assert_false(qcoll__reg_lookup(&table, (void *)A(0x4008), 16, false, &ref));
  /* a buffer running past its allocation stages */
  assert_false(qcoll__reg_lookup(&table, (void *)A(0x0f00), 0x200, false, &ref));
  assert_false(qcoll__reg_lookup(&table, (void *)A(0x1000), 16, false, &ref));
}

/* Every slot distinct; a full table refuses; a removed slot is reused with
 * a generation never seen before, so an old reference never matches. */
static void test_slots_and_generations(void **state) {
  (void)state;
  uint32_t seen[QCOLL_IPC_REG_SLOTS] = {0};
  for (int i = 0; i < QCOLL_IPC_REG_SLOTS; i++) {
    qcoll__reg_range_t *r = add(A((uintptr_t)i * 0x1000), 0x1000, i);
    assert_non_null(r);
    assert_true(r->slot < QCOLL_IPC_REG_SLOTS);
    assert_int_equal(seen[r->slot], 0);
    seen[r->slot] = r->gen;
    assert_int_not_equal(r->gen, 0);
  }
  assert_null(add(A(0x800000), 0x1000, 999));
  qcoll__reg_range_t *r = qcoll__reg_find(&table, A(0x7000));
  uint32_t slot = r->slot, old_gen = r->gen;
  qcoll__reg_remove(&table, r);
  assert_null(qcoll__reg_find(&table, A(0x7000)));
  assert_null(qcoll__reg_slot(&table, slot));
  /* the same address again (freed and reallocated): same slot, new gen */
  r = add(A(0x7000), 0x1000, 1000);
  assert_non_null(r);
  assert_int_equal(r->slot, slot);
  assert_true(r->gen > old_gen);
  assert_int_equal(r->handle[0], (unsigned char)1000);
  qcoll__ipc_reg_ref_t ref;
  assert_true(qcoll__reg_lookup(&table, (void *)A(0x7000), 64, false, &ref));
  assert_int_not_equal(ref.gen, old_gen);
}

/* A reallocation of another size at an old address overlaps the stale
 * range, which the caller finds and removes before inserting. */
static void test_overlap(void **state) {
  (void)state;
  add(A(0x1000), 0x1000, 1);
  add(A(0x3000), 0x1000, 2);
  assert_null(qcoll__reg_overlapping(&table, A(0x2000), 0x1000));
  assert_int_equal(qcoll__reg_overlapping(&table, A(0x2000), 0x1001)->base,
                   A(0x3000));
  assert_int_equal(qcoll__reg_overlapping(&table, A(0x1800), 16)->base,
                   A(0x1000));
  assert_null(qcoll__reg_overlapping(&table, A(0x1800), 0));
}

/* Ranks that disagree: a registration counts only when every rank mapped
 * it; one rank's failure for (owner, buffer) leaves the others alone. */
static void test_disagreeing_ranks(void **state) {
  (void)state;
  const int nranks = 4, nbufs = 2;
  uint32_t failed[4] = {0, 0, 0, 0};
  for (int o = 0; o < nranks; o++)
    for (int b = 0; b < nbufs; b++)
      assert_true(qcoll__reg_mapped_by_all(failed, nranks, o, b, nbufs));
  failed[2] = 1u << (1 * nbufs + 0); /* rank 2 could not map rank 1's send */
  for (int o = 0; o < nranks; o++)
    for (int b = 0; b < nbufs; b++)
      assert_int_equal(qcoll__reg_mapped_by_all(failed, nranks, o, b, nbufs),
                       !(o == 1 && b == 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_ranges_and_offsets, setup),
      cmocka_unit_test_setup(test_slots_and_generations, setup),
      cmocka_unit_test_setup(test_overlap, setup),
      cmocka_unit_test_setup(test_disagreeing_ranks, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
