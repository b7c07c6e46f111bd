/*
 * CUDA IPC transport: each rank allocates one IPC buffer on the
 * communicator's device (layout in src/coll/cuda/launch.h), the ranks
 * exchange handles through the bootstrap, map each other's buffers and
 * check every mapping by writing through it.  The all-reduce kernels then
 * read and write peers' buffers directly.
 *
 * Every step of init is collective and taken by every rank, also after a
 * local failure (a rank that cannot allocate says so in its record instead
 * of leaving), so the ranks always agree on whether IPC is usable and never
 * wait for one another in vain.  When it is not usable, comm->cuda stays
 * set with the reason, and core uses another path.
 *
 * All calls here run under the device guard (comm->device is current).
 */
#ifdef QCOLL_HAVE_CUDA /* the whole file: CUDA builds only */

#include "cuda_ipc.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bootstrap/bootstrap.h"
#include "../coll/cuda/collectives.h"
#include "cuda_push.h"
#include "../coll/cuda/launch.h"
#include "../base/config.h"
#include "../runtime/runtime.h"
#include "cuda_ipc_comm.h"
#include "cuda_reg.h"

/* What each rank tells the others at init. */
typedef struct ipc_record {
  cudaIpcMemHandle_t handle;
  uint64_t process_token; /* random per process: same token = same process */
  uint64_t base;          /* the buffer's address in the owner's process */
  uint64_t buffer_bytes;
  int64_t pid;
  unsigned char uuid[16]; /* physical GPU */
  int32_t host_index;
  int32_t device;
  int32_t ready; /* buffer allocated and exported */
  int32_t
      resident_blocks; /* all-reduce blocks the owner's GPU keeps resident */
  uint32_t probe_seed;
  int32_t coll_resident_blocks; /* the same for the kernels of collectives.cu */
  int32_t max_blocks;           /* QCOLL_MAX_BLOCKS of the owner, 0: none */
  uint64_t p2p_pair_bytes;      /* send/recv inbox per sender */
  uint64_t push_slot_bytes;     /* push one-shot slot, 0: off */
  int32_t push_block_packs;     /* QCOLL_IPC_PUSH_BLOCK_PACKS of the owner */
  uint64_t quant_round_bytes;   /* QCOLL_QUANT_ROUND_BYTES of the owner */
  int32_t quant_pipeline;      /* QCOLL_QUANT_PIPELINE of the owner */
  char reason[REASON_MAX];      /* why not ready */
} ipc_record_t;

/* Each rank's verdict after opening and checking its mappings. */
typedef struct ipc_verdict {
  int32_t ok;
  char reason[REASON_MAX];
} ipc_verdict_t;

static void set_reason(char *dst, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(char *dst, const char *fmt, ...) {
  if (dst[0]) return; /* keep the first reason */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, REASON_MAX, fmt, ap);
  va_end(ap);
}

/* ---- process-wide registry of opened IPC handles ------------------------ */
/* A handle is opened once per (device, handle) in a process; communicators
 * and ranks of one process that need the same peer buffer share the
 * mapping, which is closed when the last of them lets go. */

typedef struct opened_handle {
  int device;
  cudaIpcMemHandle_t handle;
  void *ptr;
  int refs;
  struct opened_handle *next;
} opened_handle_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static opened_handle_t *registry;

cudaError_t qcoll__ipc_handle_open(int device, const cudaIpcMemHandle_t *handle,
                                   void **ptr) {
  cudaError_t err = cudaSuccess;
  pthread_mutex_lock(&registry_lock);
  for (opened_handle_t *h = registry; h; h = h->next) {
    if (h->device == device && !memcmp(&h->handle, handle, sizeof *handle)) {
      h->refs++;
      *ptr = h->ptr;
      goto out;
    }
  }
  opened_handle_t *h = calloc(1, sizeof *h);
  if (!h) {
    err = cudaErrorMemoryAllocation;
    goto out;
  }
  err = cudaIpcOpenMemHandle(&h->ptr, *handle, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    free(h);
    goto out;
  }
  h->device = device;
  h->handle = *handle;
  h->refs = 1;
  h->next = registry;
  registry = h;
  *ptr = h->ptr;
out:
  pthread_mutex_unlock(&registry_lock);
  return err;
}

void qcoll__ipc_handle_close(qcoll__ctx_t *comm, int device, void *ptr) {
  pthread_mutex_lock(&registry_lock);
  for (opened_handle_t **p = &registry; *p; p = &(*p)->next) {
    opened_handle_t *h = *p;
    if (h->device != device || h->ptr != ptr) continue;
    if (--h->refs == 0) {
      cudaError_t err = cudaIpcCloseMemHandle(h->ptr);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        QLOG_WARN(comm, CUDA, "cudaIpcCloseMemHandle(%p) failed: %s", h->ptr,
                  cudaGetErrorString(err));
      }
      *p = h->next;
      free(h);
    }
    break;
  }
  pthread_mutex_unlock(&registry_lock);
}

/* ---- helpers --------------------------------------------------------------
 */

static uint64_t process_token_value;
static pthread_once_t process_token_once = PTHREAD_ONCE_INIT;
static void make_process_token(void) {
  if (qcoll__random_bytes(&process_token_value, sizeof process_token_value) !=
      QCOLL_OK)
    process_token_value = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
                          (uint64_t)(qcoll__now() * 1e9);
}
static uint64_t process_token(void) {
  pthread_once(&process_token_once, make_process_token);
  return process_token_value;
}

static bool same_process(const ipc_record_t *a, const ipc_record_t *b) {
  return a->process_token == b->process_token && a->pid == b->pid &&
         a->host_index == b->host_index;
}

/* Seed of the pattern `writer` writes into `target`'s buffer. */
static uint32_t probe_seed_for(const ipc_record_t *writer, int target) {
  return writer->probe_seed ^ ((uint32_t)(target + 1) * 0x85ebca6bu);
}

static uint32_t *probe_slot(char *base, int writer) {
  return (uint32_t *)(base + QCOLL_IPC_PROBE_OFFSET) +
         (size_t)writer * QCOLL_IPC_PROBE_WORDS;
}

static void mark_unusable(qcoll__ctx_t *comm, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mark_unusable(qcoll__ctx_t *comm, bool warn, const char *fmt, ...) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  cc->usable = false;
  if (!cc->reason[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cc->reason, sizeof cc->reason, fmt, ap);
    va_end(ap);
  }
  if (warn)
    QLOG_WARN(comm, CUDA, "CUDA IPC disabled for this communicator: %s",
              cc->reason);
  else
    QLOG_INFO(comm, CUDA, "CUDA IPC not used: %s", cc->reason);
}

/* ---- init steps ------------------------------------------------------------
 */

/* Allocate and export this rank's buffer and the host-mapped words.  A
 * failure is recorded in rec (ready = 0, reason) rather than returned: the
 * exchange that follows must still happen. */
static void setup_local(qcoll__ctx_t *comm, cudaStream_t s, ipc_record_t *rec) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  cudaError_t err;
  const char *what = NULL;
  rec->pid = (int64_t)getpid();
  rec->process_token = process_token();
  rec->host_index = comm->host_index;
  rec->device = comm->device;
  if (qcoll__random_bytes(&rec->probe_seed, sizeof rec->probe_seed) != QCOLL_OK)
    rec->probe_seed = (uint32_t)rec->pid * 2654435761u + (uint32_t)comm->rank;

  struct cudaDeviceProp prop;
  if ((err = cudaGetDeviceProperties(&prop, comm->device)) != cudaSuccess) {
    what = "cudaGetDeviceProperties";
    goto fail;
  }
  memcpy(rec->uuid, prop.uuid.bytes, sizeof rec->uuid);
  int resident = 0;
  if ((err = qcoll__cuda_all_reduce_resident_blocks(&resident)) !=
      cudaSuccess) {
    what = "occupancy query of the all-reduce kernels";
    goto fail;
  }
  rec->resident_blocks = resident;
  if ((err = qcoll__cuda_coll_resident_blocks(&resident)) != cudaSuccess) {
    what = "occupancy query of the collective kernels";
    goto fail;
  }
  rec->coll_resident_blocks = resident;
  if ((err = qcoll__push_resident_blocks(comm->device, &resident)) !=
      cudaSuccess) {
    what = "occupancy query of the push all-reduce kernel";
    goto fail;
  }
  rec->resident_blocks = QCOLL_MIN(rec->resident_blocks, resident);
  long long cap = comm->config.max_blocks;
  rec->max_blocks =
      cap <= 0 ? 0 : (int32_t)QCOLL_MIN(cap, QCOLL_IPC_MAX_BLOCKS);

  cc->buffer_bytes = comm->config.ipc_bytes;
  rec->buffer_bytes = cc->buffer_bytes;
  if (qcoll__ipc_region_bytes(cc->buffer_bytes) == 0) {
    set_reason(rec->reason,
               "QCOLL_IPC_BYTES=%zu on rank %d is too small (at least %d)",
               cc->buffer_bytes, comm->rank, QCOLL_IPC_MIN_BUFFER_BYTES);
    return;
  }
  /* The send/recv inboxes follow the data regions, so the regions (and the
   * all-reduce chunks) are what QCOLL_IPC_BYTES alone makes them. */
  cc->p2p.pair_bytes = qcoll__ipc_p2p_pair_bytes(comm->config.ipc_p2p_bytes);
  cc->p2p.offset = qcoll__ipc_p2p_offset(cc->buffer_bytes);
  rec->p2p_pair_bytes = cc->p2p.pair_bytes;
  /* No push slots beyond QCOLL_IPC_PUSH_MAX_RANKS: every rank sees the same
   * nranks and setting, so all agree that the push kernel is off. */
  rec->push_slot_bytes =
      comm->nranks <= comm->config.ipc_push_max_ranks
          ? qcoll__push_slot_bytes(comm->config.ipc_push_bytes)
          : 0;
  rec->push_block_packs = (int32_t)comm->config.ipc_push_block_packs;
  rec->quant_round_bytes = comm->config.quant_round_bytes;
  rec->quant_pipeline = comm->config.quant_pipeline;
  /* The registration descriptors follow the inboxes, then the push area:
   * every rank computes the same offsets (the push slots may differ). */
  cc->desc_offset = qcoll__push_area_offset(qcoll__ipc_alloc_bytes(
      cc->buffer_bytes, comm->nranks, cc->p2p.pair_bytes));
  cc->push_area_offset =
      qcoll__push_area_offset(cc->desc_offset + QCOLL_IPC_DESC_BYTES);
  const size_t push_area =
      qcoll__push_area_bytes(comm->nranks, rec->push_slot_bytes);
  if ((err = cudaMalloc((void **)&cc->buffer,
                        cc->push_area_offset + push_area)) != cudaSuccess) {
    cc->buffer = NULL;
    what = "cudaMalloc of the IPC buffer (QCOLL_IPC_BYTES)";
    goto fail;
  }
  /* Zero flags, epochs, abort word and scratch: zeroed flags never match an
   * epoch, since kernels skip epoch 0. */
  if ((err = cudaMemsetAsync(cc->buffer, 0, QCOLL_IPC_HEADER_BYTES, s)) !=
          cudaSuccess ||
      (err = cudaMemsetAsync(cc->buffer + cc->desc_offset, 0,
                             QCOLL_IPC_DESC_BYTES, s)) != cudaSuccess ||
      (err = qcoll__push_area_init(cc->buffer + cc->push_area_offset,
                                   push_area, s)) != cudaSuccess ||
      (err = cudaStreamSynchronize(s)) != cudaSuccess) {
    what = "zeroing the IPC flags";
    goto fail;
  }
  void *words = NULL;
  if ((err = cudaHostAlloc(&words, 2 * sizeof(unsigned long long),
                           cudaHostAllocMapped | cudaHostAllocPortable)) !=
      cudaSuccess) {
    what = "cudaHostAlloc of the error word";
    goto fail;
  }
  cc->host_words = words;
  cc->host_words[0] = 0;
  cc->host_words[1] = 0;
  if ((err = cudaHostGetDevicePointer((void **)&cc->host_words_dev, words,
                                      0)) != cudaSuccess) {
    what = "cudaHostGetDevicePointer of the error word";
    goto fail;
  }
  if ((err = cudaIpcGetMemHandle(&rec->handle, cc->buffer)) != cudaSuccess) {
    what = "cudaIpcGetMemHandle";
    goto fail;
  }
  rec->base = (uint64_t)(uintptr_t)cc->buffer;
  rec->ready = 1;
  return;
fail:
  (void)cudaGetLastError();
  set_reason(rec->reason, "rank %d: %s on device %d failed: %s (%s)",
             comm->rank, what, comm->device, cudaGetErrorName(err),
             cudaGetErrorString(err));
}

/* Map peer p's buffer.  Same process: its address is valid here (peer
 * access enabled when it is another device); else open its IPC handle. */
static bool map_peer(qcoll__ctx_t *comm, const ipc_record_t *recs, int p,
                     char *why) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  const ipc_record_t *me = &recs[comm->rank], *peer = &recs[p];
  cudaError_t err;
  if (same_process(me, peer)) {
    cc->peer_same_process[p] = true;
    if (peer->device != comm->device) {
      int can = 0;
      err = cudaDeviceCanAccessPeer(&can, comm->device, peer->device);
      if (err != cudaSuccess || !can) {
        (void)cudaGetLastError();
        set_reason(why,
                   "rank %d (device %d) cannot access rank %d's device %d "
                   "(same process): no peer access",
                   comm->rank, comm->device, p, peer->device);
        return false;
      }
      err = cudaDeviceEnablePeerAccess(peer->device, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else if (err != cudaSuccess) {
        (void)cudaGetLastError();
        set_reason(why, "rank %d: cudaDeviceEnablePeerAccess(%d) failed: %s",
                   comm->rank, peer->device, cudaGetErrorString(err));
        return false;
      }
    }
    cc->peers[p] = (char *)(uintptr_t)peer->base;
    return true;
  }
  void *ptr = NULL;
  err = qcoll__ipc_handle_open(comm->device, &peer->handle, &ptr);
  if (err != cudaSuccess) {
    set_reason(why,
               "rank %d (pid %lld) could not open rank %d's IPC handle "
               "(pid %lld, device %d): %s (%s)",
               comm->rank, (long long)me->pid, p, (long long)peer->pid,
               peer->device, cudaGetErrorName(err), cudaGetErrorString(err));
    return false;
  }
  cc->peers[p] = ptr;
  cc->peer_opened[p] = true;
  return true;
}

/* Write a pattern into every mapped peer's slot for this rank and read it
 * back through the mapping.  Failures go to why. */
static bool probe_peers(qcoll__ctx_t *comm, const ipc_record_t *recs,
                        cudaStream_t s, char *why) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  unsigned *scratch = (unsigned *)(cc->buffer + QCOLL_IPC_SCRATCH_OFFSET);
  unsigned mismatches[QCOLL_IPC_MAX_RANKS] = {0};
  cudaError_t err = cudaMemsetAsync(scratch, 0, sizeof mismatches, s);
  for (int p = 0; p < comm->nranks && err == cudaSuccess; p++) {
    if (p == comm->rank || !cc->peers[p]) continue;
    err = qcoll__cuda_ipc_probe_launch(probe_slot(cc->peers[p], comm->rank),
                                       probe_seed_for(&recs[comm->rank], p),
                                       scratch + p, s);
  }
  if (err == cudaSuccess)
    err = cudaMemcpyAsync(mismatches, scratch, sizeof mismatches,
                          cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    set_reason(why,
               "rank %d: writing the check pattern into peers' buffers "
               "failed: %s (%s)",
               comm->rank, cudaGetErrorName(err), cudaGetErrorString(err));
    return false;
  }
  bool ok = true;
  for (int p = 0; p < comm->nranks; p++) {
    if (mismatches[p] == 0) continue;
    set_reason(why,
               "rank %d wrote %d words into rank %d's buffer through the "
               "mapping and read back %u different ones: peer writes are lost",
               comm->rank, QCOLL_IPC_PROBE_WORDS, p, mismatches[p]);
    ok = false;
  }
  return ok;
}

/* After every rank has probed: check what each peer wrote into this
 * rank's own buffer. */
static bool check_arrivals(qcoll__ctx_t *comm, const ipc_record_t *recs,
                           const bool *peer_mapped_by_all, cudaStream_t s,
                           char *why) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  uint32_t got[QCOLL_IPC_MAX_RANKS][QCOLL_IPC_PROBE_WORDS];
  cudaError_t err = cudaMemcpyAsync(got, cc->buffer + QCOLL_IPC_PROBE_OFFSET,
                                    sizeof got, cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    set_reason(why, "rank %d: reading its check slots failed: %s", comm->rank,
               cudaGetErrorString(err));
    return false;
  }
  bool ok = true;
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank || !peer_mapped_by_all[p]) continue;
    uint32_t seed = probe_seed_for(&recs[p], comm->rank);
    for (uint32_t i = 0; i < QCOLL_IPC_PROBE_WORDS; i++) {
      uint32_t want = qcoll__ipc_probe_word(seed, i);
      if (got[p][i] == want) continue;
      set_reason(why,
                 "rank %d: word %u that rank %d wrote into this rank's "
                 "buffer is 0x%08x, expected 0x%08x: peer writes are lost",
                 comm->rank, i, p, got[p][i], want);
      ok = false;
      break;
    }
  }
  return ok;
}

static void release_peers(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  for (int p = 0; p < QCOLL_IPC_MAX_RANKS; p++) {
    if (cc->peer_opened[p]) qcoll__ipc_handle_close(comm, cc->device, cc->peers[p]);
    cc->peer_opened[p] = false;
    cc->peers[p] = NULL;
  }
}

static void free_local(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (cc->buffer) {
    cudaError_t err = cudaFree(cc->buffer);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      QLOG_WARN(comm, CUDA, "cudaFree of the IPC buffer failed: %s",
                cudaGetErrorString(err));
    }
    cc->buffer = NULL;
  }
  if (cc->host_words) {
    if (cudaFreeHost((void *)cc->host_words) != cudaSuccess)
      (void)cudaGetLastError();
    cc->host_words = NULL;
    cc->host_words_dev = NULL;
  }
}

/* Grid limit for every rank: all blocks of all ranks sharing a GPU must be
 * resident together, so each rank gets its GPU's resident blocks (of the
 * kernels whose count `coll` selects) divided by the ranks on that GPU, and
 * no more than any rank's QCOLL_MAX_BLOCKS.  Ranks sharing a GPU get half
 * of that: with the whole GPU taken by spinning blocks, a block that other
 * work kept from being scheduled waited for peers that never gave way (seen
 * with two PyTorch processes on one H200 under MPS: the full share hung, a
 * cap of 64 blocks did not).  Half of the share also leaves room for the
 * rank's next grid, which programmatic dependent launch makes resident
 * while this one runs.  Long launches (`long_run`, ipc_sync.cuh
 * long_launch) have no such neighbour and get the whole share.  Computed
 * from the exchanged records, so every rank gets the same answer. */
static int agreed_max_grid(qcoll__ctx_t *comm, const ipc_record_t *recs,
                           bool coll, bool long_run, int *ranks_on_my_gpu,
                           int *most_sharing) {
  int limit = QCOLL_IPC_MAX_BLOCKS;
  for (int r = 0; r < comm->nranks; r++) {
    int sharing = 0;
    for (int q = 0; q < comm->nranks; q++)
      if (recs[q].host_index == recs[r].host_index &&
          !memcmp(recs[q].uuid, recs[r].uuid, sizeof recs[r].uuid))
        sharing++;
    if (r == comm->rank && ranks_on_my_gpu) *ranks_on_my_gpu = sharing;
    if (most_sharing && sharing > *most_sharing) *most_sharing = sharing;
    int resident =
        coll ? recs[r].coll_resident_blocks : recs[r].resident_blocks;
    int share = sharing == 1 || long_run ? resident / sharing
                                         : resident / (2 * sharing);
    if (share < 1) share = resident / sharing;
    if (share < limit) limit = share;
    if (recs[r].max_blocks > 0 && recs[r].max_blocks < limit)
      limit = recs[r].max_blocks;
  }
  return limit;
}

/* The smallest QCOLL_QUANT_ROUND_BYTES of the ranks (0, no limit, counts
 * as the largest), so that every rank plans the same rounds. */
static size_t agreed_round_bytes(const qcoll__ctx_t *comm,
                                 const ipc_record_t *recs) {
  uint64_t least = 0;
  for (int r = 0; r < comm->nranks; r++)
    if (recs[r].quant_round_bytes &&
        (!least || recs[r].quant_round_bytes < least))
      least = recs[r].quant_round_bytes;
  return (size_t)least;
}

/* The smallest QCOLL_QUANT_PIPELINE of the ranks (it changes where a
 * round's groups lie, so all must agree). */
static int agreed_quant_pipeline(const qcoll__ctx_t *comm,
                                 const ipc_record_t *recs) {
  int least = 2;
  for (int r = 0; r < comm->nranks; r++)
    if (recs[r].quant_pipeline < least) least = recs[r].quant_pipeline;
  return least;
}

/* The push one-shot serves when every rank asked for the same slots (the
 * records are the same on every rank, so all decide alike); else the
 * one-shot stays on the flag-barrier kernel.  Its grid must be the same on
 * every rank, so the packs per block are the smallest any rank asked for. */
static void setup_push(qcoll__ctx_t *comm, const ipc_record_t *recs) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  size_t slot = (size_t)recs[0].push_slot_bytes;
  int block_packs = recs[0].push_block_packs;
  for (int r = 1; r < comm->nranks; r++) {
    if (recs[r].push_slot_bytes != recs[0].push_slot_bytes) slot = 0;
    if (recs[r].push_block_packs < block_packs)
      block_packs = recs[r].push_block_packs;
  }
  cc->push = qcoll__push_view_make(&cc->view, cc->push_area_offset, slot,
                                   block_packs);
  QLOG_INFO(comm, CUDA,
            "push one-shot: %s (slots of %zu KiB, %d packs per block); "
            "programmatic dependent launch %s",
            slot ? "on" : "off (QCOLL_IPC_PUSH_BYTES is 0 or differs between "
                          "ranks)",
            slot >> 10, block_packs, cc->view.pdl ? "on" : "off");
}

/* ---- public entry points ------------------------------------------------- */

qcoll_status_t qcoll__cuda_comm_init(qcoll__ctx_t *comm) {
  qcoll_status_t st = QCOLL_OK;
  struct qcoll__cuda_comm *cc = calloc(1, sizeof *cc);
  if (!cc)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate the CUDA state of the communicator");
  cc->device = comm->device;
  comm->cuda = cc;

  /* Decisions every rank makes alike from what it already shares. */
  if (comm->nhosts > 1) {
    mark_unusable(comm, false, "the communicator spans %d hosts", comm->nhosts);
    return QCOLL_OK;
  }
  if (comm->nranks < 1 || comm->nranks > QCOLL_IPC_MAX_RANKS) {
    mark_unusable(comm, false,
                  "world size %d is outside the IPC kernels' 1..%d",
                  comm->nranks, QCOLL_IPC_MAX_RANKS);
    return QCOLL_OK;
  }
  const size_t nranks = (size_t)comm->nranks;

  /* Relaxed capture mode while this allocates and frees, so a capture
   * running in another thread neither breaks these calls nor is
   * invalidated by them. */
  qcoll__runtime()->relaxed_begin();
  cudaStream_t s = NULL;
  ipc_record_t *recs = calloc(nranks, sizeof *recs);
  ipc_verdict_t *verdicts = calloc(nranks, sizeof *verdicts);
  bool mapped_by_all[QCOLL_IPC_MAX_RANKS] = {false};
  if (!recs || !verdicts) {
    st = qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                      "cannot allocate the CUDA IPC exchange records");
    goto out;
  }
  /* A private non-blocking stream: init work neither waits for nor delays
   * the application's (or another rank's) kernels. */
  cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    s = NULL;
    set_reason(recs[comm->rank].reason, "rank %d: cudaStreamCreate failed: %s",
               comm->rank, cudaGetErrorString(err));
  } else {
    setup_local(comm, s, &recs[comm->rank]);
  }
  QCHECK(qcoll__bootstrap_allgather(comm->bootstrap, recs, sizeof *recs));

  for (int r = 0; r < comm->nranks; r++) {
    if (!recs[r].ready) {
      mark_unusable(
          comm, true, "%s",
          recs[r].reason[0] ? recs[r].reason : "a rank could not set up IPC");
      goto unusable_unmapped;
    }
    if (recs[r].buffer_bytes != recs[0].buffer_bytes) {
      mark_unusable(comm, true,
                    "QCOLL_IPC_BYTES differs between ranks (%llu on rank 0, "
                    "%llu on rank %d)",
                    (unsigned long long)recs[0].buffer_bytes,
                    (unsigned long long)recs[r].buffer_bytes, r);
      goto unusable_unmapped;
    }
    if (recs[r].p2p_pair_bytes != recs[0].p2p_pair_bytes) {
      mark_unusable(comm, true,
                    "QCOLL_IPC_P2P_BYTES differs between ranks (inboxes of "
                    "%llu bytes on rank 0, %llu on rank %d)",
                    (unsigned long long)recs[0].p2p_pair_bytes,
                    (unsigned long long)recs[r].p2p_pair_bytes, r);
      goto unusable_unmapped;
    }
  }
  cc->most_ranks_per_gpu = 1;
  int max_grid = agreed_max_grid(comm, recs, false, false, &cc->ranks_on_gpu,
                                 &cc->most_ranks_per_gpu);
  /* The larger grid of long launches where two ranks at most share a GPU:
   * with 4 and 8 ranks on one H200 it was slower (8 ranks, unquantised
   * 64 MiB: 731-740 against 674-675 us). */
  int max_grid_long = cc->most_ranks_per_gpu <= 2
                          ? agreed_max_grid(comm, recs, false, true, NULL, NULL)
                          : max_grid;
  int coll_max_grid = agreed_max_grid(comm, recs, true, false, NULL, NULL);
  if (max_grid >= 1 && coll_max_grid < 1) {
    mark_unusable(comm, true,
                  "too many ranks share a GPU (%d on this one) for "
                  "every rank to keep one collective block resident",
                  cc->ranks_on_gpu);
    goto unusable_unmapped;
  }
  if (max_grid < 1) {
    mark_unusable(comm, true,
                  "too many ranks share a GPU (%d on this one) for "
                  "every rank to keep one all-reduce block resident",
                  cc->ranks_on_gpu);
    goto unusable_unmapped;
  }

  /* Map every peer, check each mapping, then agree. */
  ipc_verdict_t *mine = &verdicts[comm->rank];
  mine->ok = 1;
  cc->peers[comm->rank] = cc->buffer;
  for (int p = 0; p < comm->nranks; p++)
    if (p != comm->rank && !map_peer(comm, recs, p, mine->reason)) mine->ok = 0;
  if (!probe_peers(comm, recs, s, mine->reason)) mine->ok = 0;
  /* Which ranks mapped everyone (and so wrote their pattern to us): a rank
   * whose mapping failed wrote nothing, and is reported by itself. */
  {
    int32_t *mapped = calloc(nranks, sizeof *mapped);
    if (!mapped) {
      st = qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY, "out of memory");
      goto out;
    }
    bool all = true;
    for (int p = 0; p < comm->nranks; p++)
      if (p != comm->rank && !cc->peers[p]) all = false;
    mapped[comm->rank] = all;
    st = qcoll__bootstrap_allgather(comm->bootstrap, mapped, sizeof *mapped);
    for (int p = 0; p < comm->nranks && st == QCOLL_OK; p++)
      mapped_by_all[p] = mapped[p] != 0;
    free(mapped);
    if (st != QCOLL_OK) goto out;
  }
  /* The allgather above is also the barrier after which every pattern has
   * been written (each rank synchronised its probes before joining it). */
  if (!check_arrivals(comm, recs, mapped_by_all, s, mine->reason)) mine->ok = 0;
  QCHECK(
      qcoll__bootstrap_allgather(comm->bootstrap, verdicts, sizeof *verdicts));

  for (int r = 0; r < comm->nranks; r++) {
    if (verdicts[r].ok) continue;
    mark_unusable(comm, true, "%s", verdicts[r].reason);
    for (int q = r + 1; q < comm->nranks; q++)
      if (!verdicts[q].ok)
        QLOG_WARN(comm, CUDA, "CUDA IPC check also failed: %s",
                  verdicts[q].reason);
    /* Nobody touches another rank's buffer any more; close our mappings,
     * and free our buffer once everyone has closed theirs. */
    release_peers(comm);
    QCHECK(qcoll__bootstrap_barrier(comm->bootstrap));
    free_local(comm);
    goto out;
  }

  qcoll__ipc_view_t *v = &cc->view;
  memset(v, 0, sizeof *v);
  for (int p = 0; p < comm->nranks; p++) v->bases[p] = cc->peers[p];
  v->error_word = cc->host_words_dev;
  v->host_abort = cc->host_words_dev + 1;
  qcoll__ipc_view_set_layout(v, cc->buffer_bytes);
  /* timeout_s may be huge ("never"): clamp rather than overflow. */
  v->timeout_ns = comm->timeout_s >= 1.8e10
                      ? 18000000000000000000ull
                      : (unsigned long long)(comm->timeout_s * 1e9);
  v->rank = comm->rank;
  v->nranks = comm->nranks;
  v->max_grid = max_grid;
  v->max_grid_long = max_grid_long;
  v->pdl = qcoll__cuda_pdl_enabled(comm->device, comm->config.pdl);
  /* Every rank counts the same ranks on its GPU, so all agree. */
  v->flags_gpu_scope = cc->ranks_on_gpu == comm->nranks;
  v->quant_round_bytes = agreed_round_bytes(comm, recs);
  v->quant_pipeline = agreed_quant_pipeline(comm, recs);
  cc->oneshot_max_bytes =
      qcoll__config_oneshot_max_bytes(&comm->config, comm->nranks);
  /* Without a registry every buffer is staged, as before it existed. */
  st = qcoll__cuda_reg_init(comm);
  if (st != QCOLL_OK) goto out;
  cc->coll_view = *v;
  cc->coll_view.max_grid = coll_max_grid;
  cc->coll_view.max_grid_long = 0; /* the collectives make no long launches */
  setup_push(comm, recs);
  cc->usable = true;
  QLOG_INFO(comm, CUDA,
            "CUDA IPC collectives: grid <= %d blocks; send/recv inboxes of "
            "%zu KiB per sender",
            coll_max_grid, cc->p2p.pair_bytes >> 10);
  QLOG_INFO(comm, CUDA,
            "CUDA IPC ready: %d ranks, %d on this GPU, grid <= %d blocks "
            "(%d for long launches), "
            "2 regions of %zu KiB and 2 one-shot regions of %zu KiB, "
            "one-shot up to %zu bytes; the write-and-verify probe passed "
            "with all %d peers",
            comm->nranks, cc->ranks_on_gpu, max_grid, max_grid_long,
            v->region_bytes >> 10, v->oneshot_bytes >> 10,
            cc->oneshot_max_bytes, comm->nranks - 1);
  goto out;

unusable_unmapped:
  /* Nobody opened anything: every rank took this branch on the same data. */
  free_local(comm);
out:
  if (s && cudaStreamDestroy(s) != cudaSuccess) (void)cudaGetLastError();
  qcoll__runtime()->relaxed_end();
  free(recs);
  free(verdicts);
  return st;
}

void qcoll__cuda_comm_destroy(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (!cc) return;
  /* Relaxed capture mode while this allocates and frees, so a capture
   * running in another thread neither breaks these calls nor is
   * invalidated by them. */
  qcoll__runtime()->relaxed_begin();
  if (cc->buffer) {
    /* Our kernels may still run on the caller's streams; they finish
     * within the deadline (every device wait has one) or promptly after an
     * abort.  Once they are done, no peer reads or writes our buffer any
     * more: every access a peer makes to it precedes a flag we waited for.
     * Graphs captured earlier hold no pending work, so nothing here waits on
     * a captured stream. */
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      QLOG_WARN(comm, CUDA,
                "cudaDeviceSynchronize before freeing the IPC "
                "buffer failed: %s",
                cudaGetErrorString(err));
    }
  }
  qcoll__cuda_reg_destroy(comm);
  release_peers(comm);
  free_local(comm);
  qcoll__runtime()->relaxed_end();
  free(cc);
  comm->cuda = NULL;
}

bool qcoll__cuda_ipc_usable(qcoll__ctx_t *comm) {
  return comm->cuda && comm->cuda->usable;
}

int qcoll__cuda_ipc_most_ranks_per_gpu(qcoll__ctx_t *comm) {
  return qcoll__cuda_ipc_usable(comm) ? comm->cuda->most_ranks_per_gpu : 0;
}

void qcoll__cuda_signal_abort(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (cc && cc->host_words) cc->host_words[1] = 1;
}

/* Where a failed device-side wait was, from the phase of its error word. */
static const char *wait_site(int phase, char *buf, size_t len) {
  if (phase == QCOLL_IPC_PHASE_SEND)
    return "in a send, waiting for the receiver to free a slot";
  if (phase == QCOLL_IPC_PHASE_RECV)
    return "in a recv, waiting for the sender's data";
  if (phase == QCOLL_IPC_PHASE_PUSH)
    return "in a push one-shot all-reduce, waiting for the peer's data";
  snprintf(buf, len, "at barrier %d", phase);
  return buf;
}

qcoll_status_t qcoll__cuda_poll_async_error(qcoll__ctx_t *comm) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (!cc || !cc->host_words) return QCOLL_OK;
  uint64_t w = __atomic_load_n((const unsigned long long *)&cc->host_words[0],
                               __ATOMIC_ACQUIRE);
  if (w == 0) return QCOLL_OK;
  unsigned kind = qcoll__ipc_err_kind(w);
  int block = qcoll__ipc_err_block(w), phase = qcoll__ipc_err_phase(w);
  int peer = qcoll__ipc_err_peer(w), rank = qcoll__ipc_err_rank(w);
  char buf[32];
  const char *site = wait_site(phase, buf, sizeof buf);
  switch (kind) {
    case QCOLL_IPC_ERR_TIMEOUT: {
      unsigned want = qcoll__ipc_err_awaited(w), seen = qcoll__ipc_err_seen(w);
      /* One behind: the peer's block has not arrived (the peer is slow,
       * gone, or its block cannot be scheduled).  Further apart: the peer is
       * several steps behind, or the ranks did not make the same launches. */
      const char *hint =
          ((want - seen) & 0xffu) == 1u
              ? "the peer's block has not arrived"
              : "the peer is several steps behind, or the ranks' sequences "
                "of GPU collectives differ";
      return qcoll__error(
          comm, QCOLL_ERR_TIMEOUT,
          "GPU collective on rank %d: block %d waited more than "
          "%.1f s (QCOLL_TIMEOUT) for rank %d %s (flag ..%02x, awaited "
          "..%02x: %s)",
          rank, block, comm->timeout_s, peer, site, seen, want, hint);
    }
    case QCOLL_IPC_ERR_PEER_ABORTED:
      return qcoll__error(
          comm, QCOLL_ERR_PEER_FAILURE,
          "GPU collective on rank %d: block %d stopped %s because rank %d "
          "gave up (its wait timed out or it was aborted)",
          rank, block, site, peer);
    case QCOLL_IPC_ERR_ABORTED:
      return qcoll__error(
          comm, QCOLL_ERR_ABORTED,
          "GPU collective on rank %d: block %d stopped %s (waiting for rank "
          "%d): the communicator was aborted",
          rank, block, site, peer);
    case QCOLL_IPC_ERR_REGISTRY:
      return qcoll__error(
          comm, QCOLL_ERR_INTERNAL,
          "GPU all-reduce on rank %d: block %d: rank %d published a "
          "registered buffer that this rank has not mapped (the ranks' "
          "buffer registrations disagree: were qcoll_comm_register and "
          "qcoll_comm_deregister called by every rank in the same order?)",
          rank, block, peer);
    default:
      return qcoll__error(
          comm, QCOLL_ERR_INTERNAL,
          "GPU collective reported an unknown error word 0x%016llx",
          (unsigned long long)w);
  }
}

#endif /* QCOLL_HAVE_CUDA */
