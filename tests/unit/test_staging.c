/*
 * The host staging layout of GPU buffers (src/core/staging.c): every byte a
 * call reads or writes has room in its block, and buffers that overlap keep
 * their relative layout in one block.  Addresses are made up (nothing is
 * dereferenced): a fake "device" arena of 1 MiB at 0x10000000.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/staging.h"

#define DEV(off) ((const void *)(uintptr_t)(0x10000000u + (off)))

/* Whether both buffers share one block (they overlap). */
static bool one_block(qcoll__staging_t l) {
  return l.send_block >= 0 && l.send_block == l.recv_block;
}

/* The properties every layout must have, for any input. */
static void check_room(const void *send, size_t sb, const void *recv, size_t rb,
                       qcoll__staging_t l) {
  if (sb) {
    assert_in_range(l.send_block, 0, 1);
    assert_true(l.send_offset + sb <= l.block_bytes[l.send_block]);
  } else {
    assert_int_equal(l.send_block, -1);
  }
  if (rb) {
    assert_in_range(l.recv_block, 0, 1);
    assert_true(l.recv_offset + rb <= l.block_bytes[l.recv_block]);
  } else {
    assert_int_equal(l.recv_block, -1);
  }
  /* one block exactly when the device ranges overlap */
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  bool overlap = sb && rb && s < r + rb && r < s + sb;
  assert_int_equal(one_block(l), overlap);
  if (overlap) {
    /* same relative layout as on the device */
    assert_int_equal((intptr_t)l.recv_offset - (intptr_t)l.send_offset,
                     (intptr_t)(r - s));
    assert_int_equal(l.block_bytes[1], 0);
  }
}

/* The layout for these arguments, checked for the properties above. */
static qcoll__staging_t checked_layout(const void *send, size_t sb,
                                       const void *recv, size_t rb) {
  qcoll__staging_t l = qcoll__staging_layout(send, sb, recv, rb);
  check_room(send, sb, recv, rb, l);
  return l;
}

static void same_pointer_is_one_block_of_the_larger_size(void **state) {
  (void)state;
  /* all-reduce in place */
  qcoll__staging_t l = checked_layout(DEV(0), 4096, DEV(0), 4096);
  assert_true(one_block(l));
  assert_int_equal(l.block_bytes[0], 4096);
  /* all-gather in place on rank 0: sendbuf is the first of n blocks of
   * recvbuf, so the shared block must hold all of recvbuf */
  l = checked_layout(DEV(0), 100, DEV(0), 300);
  assert_true(one_block(l));
  assert_int_equal(l.block_bytes[0], 300);
  /* reduce-scatter in place on rank 0: the other way round */
  l = checked_layout(DEV(0), 300, DEV(0), 100);
  assert_int_equal(l.block_bytes[0], 300);
}

static void block_inside_the_other_buffer_keeps_its_offset(void **state) {
  (void)state;
  /* all-gather in place on rank 2 of 3: sendbuf = recvbuf + 2 * 100 */
  qcoll__staging_t l = checked_layout(DEV(200), 100, DEV(0), 300);
  assert_true(one_block(l));
  assert_int_equal(l.send_offset, 200);
  assert_int_equal(l.recv_offset, 0);
  /* reduce-scatter in place on rank 1 of 3: recvbuf = sendbuf + 100 */
  l = checked_layout(DEV(0), 300, DEV(100), 100);
  assert_int_equal(l.send_offset, 0);
  assert_int_equal(l.recv_offset, 100);
  assert_int_equal(l.block_bytes[0], 300);
}

static void separate_buffers_get_a_block_each(void **state) {
  (void)state;
  /* adjacent, not overlapping */
  qcoll__staging_t l = checked_layout(DEV(0), 100, DEV(100), 300);
  assert_false(one_block(l));
  assert_int_equal(l.block_bytes[0], 100);
  assert_int_equal(l.block_bytes[1], 300);
  assert_int_equal(l.send_offset, 0);
  assert_int_equal(l.recv_offset, 0);
}

static void a_side_without_bytes_gets_no_block(void **state) {
  (void)state;
  /* broadcast on a non-root: nothing read; reduce on a non-root: nothing
   * written; a call of no elements: nothing at all */
  qcoll__staging_t l = checked_layout(NULL, 0, DEV(0), 64);
  assert_int_equal(l.block_bytes[0], 0);
  assert_int_equal(l.block_bytes[1], 64);
  l = checked_layout(DEV(0), 64, DEV(0), 0);
  assert_false(one_block(l));
  assert_int_equal(l.block_bytes[1], 0);
  l = checked_layout(DEV(0), 0, DEV(0), 0);
  assert_int_equal(l.block_bytes[0] + l.block_bytes[1], 0);
}

/* Every placement of a 64-byte send range against a 192-byte recv range in
 * steps of 16 bytes, overlapping or not. */
static void every_relative_placement_has_room(void **state) {
  (void)state;
  for (int d = -256; d <= 256; d += 16) {
    const void *send = DEV(4096 + d), *recv = DEV(4096);
    checked_layout(send, 64, recv, 192);
    checked_layout(recv, 192, send, 64);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_pointer_is_one_block_of_the_larger_size),
      cmocka_unit_test(block_inside_the_other_buffer_keeps_its_offset),
      cmocka_unit_test(separate_buffers_get_a_block_each),
      cmocka_unit_test(a_side_without_bytes_gets_no_block),
      cmocka_unit_test(every_relative_placement_has_room),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
