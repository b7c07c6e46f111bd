/*
 * The registry's shapes shared by host code (transport/reg_table.c,
 * transport/cuda_reg.c) and the all-reduce kernels (allreduce.cu): plain C
 * with no CUDA header, so host-only builds and their unit tests use it.
 */
#ifndef QCOLL_COLL_CUDA_REG_LAYOUT_H
#define QCOLL_COLL_CUDA_REG_LAYOUT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A rank's registration `slot` is one device allocation of its own that
 * every peer has mapped.  Each rank keeps, in device memory, a table of
 * QCOLL_IPC_MAX_RANKS rows of QCOLL_IPC_REG_SLOTS entries: row p, entry k is
 * rank p's registration k as mapped in this process (this rank's own row:
 * its own allocations).  An entry with gen 0 is empty; a rank's own entry
 * is valid only while every peer holds the mapping, so a kernel that finds
 * its own entry valid may let peers read (or write) the buffer directly. */
#define QCOLL_IPC_REG_SLOTS 256

typedef struct qcoll__ipc_reg_entry {
  unsigned long long base;  /* the allocation, mapped in this process */
  unsigned long long bytes; /* its size */
  uint32_t gen;             /* registration generation; 0: empty */
  uint32_t pad;
} qcoll__ipc_reg_entry_t;

/* Where a buffer of one launch lies in the registry: this rank's slot, the
 * generation the host found there at enqueue time, and the buffer's byte
 * offset in the allocation.  gen 0: not registered (staged). */
typedef struct qcoll__ipc_reg_ref {
  uint32_t slot;
  uint32_t gen;
  unsigned long long offset;
} qcoll__ipc_reg_ref_t;

/* What a launch publishes to its peers before barrier 0: its send and recv
 * references after its own check (gen 0: staged). */
typedef struct qcoll__ipc_reg_desc {
  qcoll__ipc_reg_ref_t send, recv;
} qcoll__ipc_reg_desc_t;

#ifdef __cplusplus
}
#endif

#endif
