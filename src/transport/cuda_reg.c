/*
 * Buffer registration over CUDA IPC (cuda_reg.h).  Each call is two
 * all-gathers over the bootstrap:
 *
 *  1. every rank's records: for each of its buffers, "none", "failed",
 *     "kept (slot, gen)" or "new (slot, gen, allocation base, size, IPC
 *     handle)", and the slots it dropped (an allocation at the same address
 *     with another handle or size: the old one was freed and the address
 *     reused).  Each rank closes its mappings of dropped slots, opens the
 *     new handles (once per process, through the handle cache) and writes
 *     the mappings into its device table.
 *  2. every rank's mask of the new registrations it failed to map.  A
 *     registration that every rank mapped becomes valid in its owner's own
 *     table row; otherwise every rank closes its mapping and the owner
 *     forgets it.
 *
 * Both tables (local ranges, device table) are written only here, with the
 * device table copied whole from a host mirror on a private stream and
 * waited for before the next all-gather, so an owner's own entry is valid
 * only after every peer's mapping is in place.
 */
#ifdef QCOLL_HAVE_CUDA /* the whole file: CUDA builds only */

#include "cuda_reg.h"

#include <cuda.h> /* driver types only: the entry point comes through cudart */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bootstrap/bootstrap.h"
#include "../runtime/runtime.h"
#include "cuda_ipc_comm.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == QCOLL_REG_HANDLE_BYTES,
               "an IPC handle is 64 bytes");

typedef CUresult (*address_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

#define DROP_WORDS (QCOLL_IPC_REG_SLOTS / 32)

/* What one rank says of one of its buffers (all-gather 1). */
typedef struct reg_record {
  cudaIpcMemHandle_t handle;
  uint64_t base, bytes;
  int32_t status; /* qcoll__reg_status_t */
  uint32_t slot, gen;
  uint32_t drop[DROP_WORDS]; /* slots the rank dropped (first record only) */
} reg_record_t;

typedef struct peer_map {
  void *ptr;   /* the peer's allocation, mapped here */
  bool opened; /* through the handle cache (else: same process) */
} peer_map_t;

struct qcoll__cuda_reg {
  qcoll__reg_table_t local;
  qcoll__ipc_reg_entry_t host[QCOLL_IPC_MAX_RANKS][QCOLL_IPC_REG_SLOTS];
  qcoll__ipc_reg_entry_t *dev; /* the kernels' copy of host */
  peer_map_t peers[QCOLL_IPC_MAX_RANKS][QCOLL_IPC_REG_SLOTS];
  address_range_fn address_range;
  bool active; /* some registration of some rank is (or was) usable */
};

qcoll_status_t qcoll__cuda_reg_init(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  struct qcoll__cuda_reg *cr = calloc(1, sizeof *cr);
  if (!cr)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate the buffer registry");
  qcoll__reg_table_init(&cr->local);
  cudaError_t err = cudaMalloc((void **)&cr->dev, sizeof cr->host);
  if (err == cudaSuccess) err = cudaMemset(cr->dev, 0, sizeof cr->host);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (cr->dev) (void)cudaFree(cr->dev);
    free(cr);
    return qcoll__error(comm, QCOLL_ERR_CUDA,
                        "allocating the buffer registry table (%zu bytes) on "
                        "device %d failed: %s",
                        sizeof cr->host, comm->device, cudaGetErrorString(err));
  }
  cr->address_range =
      (address_range_fn)qcoll__cuda_driver_entry("cuMemGetAddressRange", 3020);
  cc->reg = cr;
  cc->view.reg_table = cr->dev;
  cc->view.desc_offset = cc->desc_offset;
  return QCOLL_OK;
}

/* Forget peer p's slot k here (its mapping closed, its entry empty). */
static void unmap_peer(qcoll__ctx_t *comm, int p, uint32_t k) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  peer_map_t *m = &cr->peers[p][k];
  if (m->opened) qcoll__ipc_handle_close(comm, comm->device, m->ptr);
  memset(m, 0, sizeof *m);
  memset(&cr->host[p][k], 0, sizeof cr->host[p][k]);
}

void qcoll__cuda_reg_destroy(qcoll__ctx_t *comm) {
  struct qcoll__cuda_reg *cr = comm->cuda ? comm->cuda->reg : NULL;
  if (!cr) return;
  for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++)
    for (uint32_t k = 0; k < QCOLL_IPC_REG_SLOTS; k++)
      if (cr->peers[p][k].ptr) unmap_peer(comm, p, k);
  if (cudaFree(cr->dev) != cudaSuccess) (void)cudaGetLastError();
  free(cr);
  comm->cuda->reg = NULL;
}

/* The device table made equal to the host mirror, waited for. */
static qcoll_status_t publish_table(qcoll__ctx_t *comm) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  cudaStream_t s = NULL;
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err == cudaSuccess)
    err = cudaMemcpyAsync(cr->dev, cr->host, sizeof cr->host,
                          cudaMemcpyHostToDevice, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (s && cudaStreamDestroy(s) != cudaSuccess) (void)cudaGetLastError();
  if (err == cudaSuccess) return QCOLL_OK;
  (void)cudaGetLastError();
  return qcoll__error(comm, QCOLL_ERR_CUDA,
                      "writing the buffer registry table on device %d "
                      "failed: %s",
                      comm->device, cudaGetErrorString(err));
}

/* Drop a local range: its own entry empty (kernels stage it from now on)
 * and the slot announced to the peers in `drop`. */
static void drop_range(struct qcoll__cuda_reg *cr, int rank,
                       qcoll__reg_range_t *r, uint32_t *drop) {
  memset(&cr->host[rank][r->slot], 0, sizeof cr->host[rank][r->slot]);
  drop[r->slot / 32] |= 1u << (r->slot % 32);
  qcoll__reg_remove(&cr->local, r);
}

/* The allocation holding [buf, buf + bytes): its base, size and handle,
 * or the reason it cannot be registered (status returned, nothing set). */
static qcoll_status_t describe_buffer(qcoll__ctx_t *comm, const void *buf,
                                      size_t bytes, reg_record_t *rec,
                                      char *why, size_t why_len) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  struct cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, buf);
  if (err != cudaSuccess) (void)cudaGetLastError();
  if (err != cudaSuccess || attr.type != cudaMemoryTypeDevice) {
    snprintf(why, why_len, "buffer %p is %s, not device memory of cudaMalloc",
             buf,
             err != cudaSuccess                    ? "unknown to CUDA"
             : attr.type == cudaMemoryTypeManaged ? "managed memory"
                                                  : "host memory");
    return err == cudaSuccess && attr.type == cudaMemoryTypeManaged
               ? QCOLL_ERR_UNSUPPORTED
               : QCOLL_ERR_INVALID_ARGUMENT;
  }
  if (attr.device != comm->device) {
    snprintf(why, why_len,
             "buffer %p is on device %d but the communicator's device is %d",
             buf, attr.device, comm->device);
    return QCOLL_ERR_INVALID_ARGUMENT;
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!cr->address_range ||
      cr->address_range(&base, &size, (CUdeviceptr)(uintptr_t)buf) !=
          CUDA_SUCCESS) {
    snprintf(why, why_len, "the driver does not give the allocation of %p",
             buf);
    return QCOLL_ERR_UNSUPPORTED;
  }
  if ((uintptr_t)buf - (uintptr_t)base > size - bytes || bytes > size) {
    snprintf(why, why_len,
             "buffer %p of %zu bytes runs past the end of its allocation "
             "(%zu bytes at 0x%llx)",
             buf, bytes, size, (unsigned long long)base);
    return QCOLL_ERR_INVALID_ARGUMENT;
  }
  err = cudaIpcGetMemHandle(&rec->handle, (void *)(uintptr_t)base);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, why_len,
             "the allocation of %p cannot be shared with other processes "
             "(cudaIpcGetMemHandle: %s; memory of cuMemCreate, of "
             "cudaMallocAsync pools or of expandable segments has no IPC "
             "handle)",
             buf, cudaGetErrorString(err));
    return QCOLL_ERR_UNSUPPORTED;
  }
  rec->base = (uint64_t)base;
  rec->bytes = size;
  return QCOLL_OK;
}

/* This rank's record of one buffer: kept when its allocation is the one
 * registered at that address, else new (stale ranges it overlaps dropped
 * first). */
static qcoll_status_t prepare_record(qcoll__ctx_t *comm, const void *buf,
                                     size_t bytes, bool automatic,
                                     reg_record_t *rec, uint32_t *drop,
                                     char *why, size_t why_len) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  rec->status = QCOLL_REG_NONE;
  if (!buf) return QCOLL_OK;
  qcoll_status_t st = describe_buffer(comm, buf, bytes, rec, why, why_len);
  if (st != QCOLL_OK) {
    rec->status = QCOLL_REG_FAILED;
    return st;
  }
  qcoll__reg_range_t *r = qcoll__reg_find(&cr->local, (uintptr_t)rec->base);
  if (r && r->base == rec->base && r->bytes == rec->bytes &&
      !memcmp(r->handle, &rec->handle, sizeof rec->handle)) {
    if (automatic)
      r->automatic = true;
    else
      r->refs++;
    rec->status = QCOLL_REG_KEPT;
    rec->slot = r->slot;
    rec->gen = r->gen;
    return QCOLL_OK;
  }
  while ((r = qcoll__reg_overlapping(&cr->local, (uintptr_t)rec->base,
                                     (size_t)rec->bytes)))
    drop_range(cr, comm->rank, r, drop);
  r = qcoll__reg_insert(&cr->local, (uintptr_t)rec->base, (size_t)rec->bytes,
                        (const unsigned char *)&rec->handle);
  if (!r) {
    snprintf(why, why_len,
             "all %d registration slots of this communicator are taken "
             "(qcoll_comm_deregister some buffers)",
             QCOLL_IPC_REG_SLOTS);
    rec->status = QCOLL_REG_FAILED;
    return QCOLL_ERR_UNSUPPORTED;
  }
  r->automatic = automatic;
  r->refs = automatic ? 0 : 1;
  rec->status = QCOLL_REG_NEW;
  rec->slot = r->slot;
  rec->gen = r->gen;
  return QCOLL_OK;
}

/* Peer p's mapping of its new registration rec, here. */
static bool map_record(qcoll__ctx_t *comm, int p, const reg_record_t *rec) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  struct qcoll__cuda_reg *cr = cc->reg;
  if (rec->slot >= QCOLL_IPC_REG_SLOTS) return false;
  unmap_peer(comm, p, rec->slot);
  void *ptr = (void *)(uintptr_t)rec->base;
  bool opened = false;
  if (!cc->peer_same_process[p]) {
    if (qcoll__ipc_handle_open(comm->device, &rec->handle, &ptr) !=
        cudaSuccess) {
      QLOG_WARN(comm, CUDA,
                "cannot open rank %d's registered allocation (slot %u): it "
                "stays staged",
                p, rec->slot);
      return false;
    }
    opened = true;
  }
  cr->peers[p][rec->slot] = (peer_map_t){ptr, opened};
  cr->host[p][rec->slot] = (qcoll__ipc_reg_entry_t){
      (unsigned long long)(uintptr_t)ptr, rec->bytes, rec->gen, 0};
  return true;
}

/* Every peer's drops and new registrations, mapped here; the mask of
 * those that failed (bit p * nbufs + i). */
static uint32_t apply_peers(qcoll__ctx_t *comm, const reg_record_t *recs,
                            int nbufs) {
  uint32_t failed = 0;
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) continue;
    const reg_record_t *first = &recs[(size_t)p * (size_t)nbufs];
    for (uint32_t k = 0; k < QCOLL_IPC_REG_SLOTS; k++)
      if (first->drop[k / 32] & (1u << (k % 32))) unmap_peer(comm, p, k);
    for (int i = 0; i < nbufs; i++)
      if (first[i].status == QCOLL_REG_NEW && !map_record(comm, p, &first[i]))
        failed |= 1u << (p * nbufs + i);
  }
  return failed;
}

/* After every rank's verdict: the registrations all mapped become valid in
 * their owner's own row; the others are forgotten everywhere. */
static void settle(qcoll__ctx_t *comm, const reg_record_t *recs,
                   const uint32_t *failed, int nbufs,
                   qcoll__reg_result_t *out) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  for (int p = 0; p < comm->nranks; p++)
    for (int i = 0; i < nbufs; i++) {
      const reg_record_t *rec = &recs[(size_t)p * (size_t)nbufs + (size_t)i];
      bool ok = rec->status == QCOLL_REG_KEPT ||
                (rec->status == QCOLL_REG_NEW &&
                 qcoll__reg_mapped_by_all(failed, comm->nranks, p, i, nbufs));
      if (ok) cr->active = true;
      if (rec->status != QCOLL_REG_NEW) continue;
      if (p != comm->rank) {
        if (!ok) unmap_peer(comm, p, rec->slot);
        continue;
      }
      qcoll__reg_range_t *r = qcoll__reg_slot(&cr->local, rec->slot);
      if (ok && r) {
        cr->host[p][rec->slot] = (qcoll__ipc_reg_entry_t){
            (unsigned long long)r->base, r->bytes, r->gen, 0};
      } else if (r) {
        uint32_t ignored[DROP_WORDS];
        drop_range(cr, p, r, ignored);
        out[i].status = QCOLL_REG_FAILED;
      }
    }
}

qcoll_status_t qcoll__cuda_reg_register(qcoll__ctx_t *comm,
                                        const void *const *bufs,
                                        const size_t *bytes, int nbufs,
                                        bool automatic,
                                        qcoll__reg_result_t *out) {
  const size_t n = (size_t)comm->nranks * (size_t)nbufs;
  reg_record_t *recs = calloc(n, sizeof *recs);
  uint32_t *failed = calloc((size_t)comm->nranks, sizeof *failed);
  if (!recs || !failed || nbufs < 1 || nbufs * comm->nranks > 32) {
    free(recs);
    free(failed);
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate the registration records");
  }
  qcoll__runtime()->relaxed_begin();
  qcoll_status_t local = QCOLL_OK, st;
  char why[256] = "";
  reg_record_t *mine = &recs[(size_t)comm->rank * (size_t)nbufs];
  for (int i = 0; i < nbufs; i++) {
    char w[256] = "";
    qcoll_status_t s = prepare_record(comm, bufs[i], bytes[i], automatic,
                                      &mine[i], mine[0].drop, w, sizeof w);
    if (s != QCOLL_OK && local == QCOLL_OK) {
      local = s;
      snprintf(why, sizeof why, "%s", w);
    }
  }
  /* Own entries of dropped slots are empty before any peer closes them. */
  if ((st = publish_table(comm)) != QCOLL_OK ||
      (st = qcoll__bootstrap_allgather(comm->bootstrap, recs,
                                       (size_t)nbufs * sizeof *recs)) !=
          QCOLL_OK)
    goto out;
  failed[comm->rank] = apply_peers(comm, recs, nbufs);
  if ((st = publish_table(comm)) != QCOLL_OK ||
      (st = qcoll__bootstrap_allgather(comm->bootstrap, failed,
                                       sizeof *failed)) != QCOLL_OK)
    goto out;
  for (int i = 0; i < nbufs; i++)
    out[i] = (qcoll__reg_result_t){mine[i].status, mine[i].slot, mine[i].gen};
  settle(comm, recs, failed, nbufs, out);
  st = publish_table(comm);
  for (int i = 0; i < nbufs && st == QCOLL_OK && local == QCOLL_OK; i++)
    if (out[i].status == QCOLL_REG_FAILED) {
      local = QCOLL_ERR_UNSUPPORTED;
      snprintf(why, sizeof why,
               "a peer could not map the allocation of buffer %p (see the "
               "peers' warnings)",
               bufs[i]);
    }
out:
  qcoll__runtime()->relaxed_end();
  free(recs);
  free(failed);
  if (st != QCOLL_OK) return st;
  if (local == QCOLL_OK) return QCOLL_OK;
  if (automatic) {
    QLOG_INFO(comm, CUDA, "captured all-reduce: buffer staged, not "
                          "registered: %s", why);
    for (int i = 0; i < nbufs; i++)
      if (out[i].status == QCOLL_REG_FAILED) out[i].status = QCOLL_REG_NONE;
    return QCOLL_OK;
  }
  return qcoll__error(comm, local, "qcoll_comm_register on rank %d: %s",
                      comm->rank, why);
}

qcoll_status_t qcoll__cuda_reg_deregister(qcoll__ctx_t *comm,
                                          const qcoll__reg_result_t *reg) {
  struct qcoll__cuda_reg *cr = comm->cuda->reg;
  const size_t n = (size_t)comm->nranks;
  reg_record_t *recs = calloc(n, sizeof *recs);
  if (!recs)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate the deregistration records");
  qcoll__runtime()->relaxed_begin();
  /* Every kernel that may read this rank's buffer, or that reads peers'
   * buffers through this rank's mappings, is done before the all-gather
   * below, on every rank. */
  qcoll_status_t local = QCOLL_OK, st;
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    local = qcoll__error(comm, QCOLL_ERR_CUDA,
                         "qcoll_comm_deregister: cudaDeviceSynchronize on "
                         "device %d failed: %s",
                         comm->device, cudaGetErrorString(err));
  }
  reg_record_t *mine = &recs[comm->rank];
  qcoll__reg_range_t *r = reg ? qcoll__reg_slot(&cr->local, reg->slot) : NULL;
  if (r && r->gen == reg->gen && --r->refs <= 0 && !r->automatic)
    drop_range(cr, comm->rank, r, mine->drop);
  if ((st = publish_table(comm)) != QCOLL_OK ||
      (st = qcoll__bootstrap_allgather(comm->bootstrap, recs, sizeof *recs)) !=
          QCOLL_OK)
    goto out;
  (void)apply_peers(comm, recs, 1);
  if ((st = publish_table(comm)) != QCOLL_OK) goto out;
  /* Every rank closed its mappings before any returns (and may free). */
  st = qcoll__bootstrap_barrier(comm->bootstrap);
out:
  qcoll__runtime()->relaxed_end();
  free(recs);
  return st != QCOLL_OK ? st : local;
}

bool qcoll__cuda_reg_refs(qcoll__ctx_t *comm, const void *send, void *recv,
                          size_t bytes, bool captured,
                          qcoll__ipc_reg_ref_t *send_ref,
                          qcoll__ipc_reg_ref_t *recv_ref) {
  struct qcoll__cuda_reg *cr = comm->cuda ? comm->cuda->reg : NULL;
  if (!cr || !cr->active) return false;
  (void)qcoll__reg_lookup(&cr->local, send, bytes, !captured, send_ref);
  (void)qcoll__reg_lookup(&cr->local, recv, bytes, !captured, recv_ref);
  return true;
}

#endif /* QCOLL_HAVE_CUDA */
