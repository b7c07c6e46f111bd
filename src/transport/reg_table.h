/*
 * The local half of buffer registration: the allocations this rank
 * registered, as a table of address ranges sorted by base, each with its
 * registry slot and generation.  Pure bookkeeping with no CUDA call, so the
 * host-only build tests it (tests/unit/test_reg_table.c); transport/cuda_reg.c
 * does the exchange, the mapping and the device table.
 *
 * A slot is reused after its registration is removed; its generation never
 * is (a per-table counter), so a reference captured into a graph before a
 * deregistration never matches a later registration in the same slot.
 */
#ifndef QCOLL_TRANSPORT_REG_TABLE_H
#define QCOLL_TRANSPORT_REG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../coll/cuda/reg_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of an IPC handle (cudaIpcMemHandle_t), kept to tell a new
 * allocation at an old address from the old one. */
#define QCOLL_REG_HANDLE_BYTES 64
/* Registered pointers must be this aligned (the kernels read whole packs). */
#define QCOLL_REG_ALIGN 16

typedef struct qcoll__reg_range {
  uintptr_t base; /* the allocation */
  size_t bytes;
  uint32_t slot, gen;
  int refs;       /* explicit registrations holding it */
  bool automatic; /* registered by graph capture: kept until replaced */
  unsigned char handle[QCOLL_REG_HANDLE_BYTES];
} qcoll__reg_range_t;

typedef struct qcoll__reg_table {
  qcoll__reg_range_t ranges[QCOLL_IPC_REG_SLOTS]; /* [0, count), by base */
  size_t count;
  uint32_t last_gen;
} qcoll__reg_table_t;

/* What one registration call made of one buffer, on one rank. */
typedef enum qcoll__reg_status {
  QCOLL_REG_NONE = 0,   /* nothing to register (no buffer, or staged) */
  QCOLL_REG_NEW = 1,    /* a new registration, to be mapped by the peers */
  QCOLL_REG_KEPT = 2,   /* the allocation was already registered */
  QCOLL_REG_FAILED = 3, /* refused (why: the call's error) */
} qcoll__reg_status_t;

typedef struct qcoll__reg_result {
  int32_t status; /* qcoll__reg_status_t */
  uint32_t slot, gen;
} qcoll__reg_result_t;

void qcoll__reg_table_init(qcoll__reg_table_t *t);

/* The range that holds address p, or NULL. */
qcoll__reg_range_t *qcoll__reg_find(qcoll__reg_table_t *t, uintptr_t p);

/* The range registered in slot, or NULL. */
qcoll__reg_range_t *qcoll__reg_slot(qcoll__reg_table_t *t, uint32_t slot);

/* The first range that overlaps [base, base + bytes), or NULL. */
qcoll__reg_range_t *qcoll__reg_overlapping(qcoll__reg_table_t *t,
                                           uintptr_t base, size_t bytes);

/* Add [base, base + bytes) (overlapping no range) in the lowest free slot
 * with a new generation; NULL when every slot is taken. */
qcoll__reg_range_t *qcoll__reg_insert(qcoll__reg_table_t *t, uintptr_t base,
                                      size_t bytes,
                                      const unsigned char *handle);

/* Remove the range (a pointer the table returned). */
void qcoll__reg_remove(qcoll__reg_table_t *t, qcoll__reg_range_t *r);

/* The kernels' reference to `bytes` at p: true when p lies in a
 * registered range, is QCOLL_REG_ALIGN-aligned and the range holds every
 * whole 16-byte pack from p on; else false and *ref is "staged".
 * explicit_only: only ranges that qcoll_comm_register holds (an eager call
 * cannot tell a freed and reallocated buffer from the one capture
 * registered; a captured call has just checked its buffers' handles). */
bool qcoll__reg_lookup(qcoll__reg_table_t *t, const void *p, size_t bytes,
                       bool explicit_only, qcoll__ipc_reg_ref_t *ref);

/* Whether the registration of `owner`'s buffer `index` (of nbufs per rank)
 * was mapped by every rank, from each rank's mask of (owner, index) pairs
 * it failed to map (bit owner * nbufs + index). */
bool qcoll__reg_mapped_by_all(const uint32_t *failed, int nranks, int owner,
                              int index, int nbufs);

#ifdef __cplusplus
}
#endif

#endif
