/* The local registry's range table (reg_table.h). */
#include "reg_table.h"

#include <string.h>

void qcoll__reg_table_init(qcoll__reg_table_t *t) {
  memset(t, 0, sizeof *t);
}

/* Index of the first range whose base is above p. */
static size_t upper(const qcoll__reg_table_t *t, uintptr_t p) {
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->ranges[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

qcoll__reg_range_t *qcoll__reg_find(qcoll__reg_table_t *t, uintptr_t p) {
  size_t i = upper(t, p);
  if (i == 0) return NULL;
  qcoll__reg_range_t *r = &t->ranges[i - 1];
  return p - r->base < r->bytes ? r : NULL;
}

qcoll__reg_range_t *qcoll__reg_slot(qcoll__reg_table_t *t, uint32_t slot) {
  for (size_t i = 0; i < t->count; i++)
    if (t->ranges[i].slot == slot) return &t->ranges[i];
  return NULL;
}

qcoll__reg_range_t *qcoll__reg_overlapping(qcoll__reg_table_t *t,
                                           uintptr_t base, size_t bytes) {
  for (size_t i = 0; i < t->count; i++) {
    const qcoll__reg_range_t *r = &t->ranges[i];
    if (bytes && r->base < base + bytes && base < r->base + r->bytes)
      return &t->ranges[i];
  }
  return NULL;
}

static bool slot_taken(const qcoll__reg_table_t *t, uint32_t slot) {
  for (size_t i = 0; i < t->count; i++)
    if (t->ranges[i].slot == slot) return true;
  return false;
}

qcoll__reg_range_t *qcoll__reg_insert(qcoll__reg_table_t *t, uintptr_t base,
                                      size_t bytes,
                                      const unsigned char *handle) {
  if (t->count == QCOLL_IPC_REG_SLOTS) return NULL;
  uint32_t slot = 0;
  while (slot_taken(t, slot)) slot++;
  size_t at = upper(t, base);
  memmove(&t->ranges[at + 1], &t->ranges[at],
          (t->count - at) * sizeof t->ranges[0]);
  t->count++;
  qcoll__reg_range_t *r = &t->ranges[at];
  memset(r, 0, sizeof *r);
  r->base = base;
  r->bytes = bytes;
  r->slot = slot;
  if (++t->last_gen == 0) t->last_gen = 1; /* 0 means "staged" */
  r->gen = t->last_gen;
  if (handle) memcpy(r->handle, handle, QCOLL_REG_HANDLE_BYTES);
  return r;
}

void qcoll__reg_remove(qcoll__reg_table_t *t, qcoll__reg_range_t *r) {
  size_t at = (size_t)(r - t->ranges);
  if (at >= t->count) return;
  memmove(&t->ranges[at], &t->ranges[at + 1],
          (t->count - at - 1) * sizeof t->ranges[0]);
  t->count--;
}

bool qcoll__reg_lookup(qcoll__reg_table_t *t, const void *p, size_t bytes,
                       bool explicit_only, qcoll__ipc_reg_ref_t *ref) {
  memset(ref, 0, sizeof *ref);
  uintptr_t a = (uintptr_t)p;
  qcoll__reg_range_t *r = qcoll__reg_find(t, a);
  if (!r || a % QCOLL_REG_ALIGN || (explicit_only && r->refs <= 0))
    return false;
  size_t whole = (bytes + QCOLL_REG_ALIGN - 1) / QCOLL_REG_ALIGN *
                 QCOLL_REG_ALIGN;
  size_t offset = a - r->base;
  if (whole < bytes || whole > r->bytes - offset) return false;
  ref->slot = r->slot;
  ref->gen = r->gen;
  ref->offset = offset;
  return true;
}

bool qcoll__reg_mapped_by_all(const uint32_t *failed, int nranks, int owner,
                              int index, int nbufs) {
  const uint32_t bit = 1u << (owner * nbufs + index);
  for (int q = 0; q < nranks; q++)
    if (failed[q] & bit) return false;
  return true;
}
