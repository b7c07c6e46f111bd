/*
 * Launchers of the CUDA IPC kernels, callable from C (defined by the .cu
 * files beside this header), and the layout of a rank's IPC buffer, which host
 * code (the transport) and device code (the kernels) must agree on.
 *
 * Layout of one rank's IPC buffer (every offset fixed at init; nothing
 * depends on the message size or the grid size):
 *
 *   [0, 4 KiB)        header: the abort word (a peer that gave up writes
 *                     its rank + 1 here), scratch words for init checks,
 *                     the one-shot launch counter, and the verification
 *                     slots written by peers at init (one per writer rank)
 *   [4 KiB, +flags)   flag slots [block][writer rank][phase], uint32 each,
 *                     written by peers (release, system scope)
 *   [.., +epochs)     per-block epoch counters, uint32, local to this rank
 *   [64 KiB, ...)     two one-shot regions of oneshot_bytes each (the
 *                     one-shot all-reduce alternates between them, so it
 *                     needs no closing barrier: see allreduce.cu)
 *   [.., ...)         QCOLL_IPC_REGIONS data regions of region_bytes each
 *                     (region 0: inputs; region 1: two-shot results; the
 *                     quantised two-shot cuts each into one slot per rank,
 *                     see quant_layout.h)
 *
 * qcoll__ipc_oneshot_bytes and qcoll__ipc_region_bytes give the sizes, and
 * qcoll__ipc_region_offset / qcoll__ipc_oneshot_offset the offsets, as
 * functions of the buffer size alone.
 */
#ifndef QCOLL_COLL_CUDA_LAUNCH_H
#define QCOLL_COLL_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "qcoll.h"
#include "quant_layout.h"
#include "reg_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Helpers below are shared by host code and kernels. */
#ifdef __CUDACC__
#define QCOLL_IPC_HD __host__ __device__
#else
#define QCOLL_IPC_HD
#endif

/* Largest world size of the IPC kernels. */
#define QCOLL_IPC_MAX_RANKS 8
/* Flag slots exist for this many blocks: the grid never exceeds it. */
#define QCOLL_IPC_MAX_BLOCKS 256
/* Barrier phases per launch (one-shot uses 2, two-shot 2; room to grow). */
#define QCOLL_IPC_PHASES 4
/* Data regions: inputs, two-shot results. */
#define QCOLL_IPC_REGIONS 2

#define QCOLL_IPC_ABORT_OFFSET 0
#define QCOLL_IPC_SCRATCH_OFFSET 64 /* QCOLL_IPC_MAX_RANKS uint32, local */
/* One-shot launch counter: [0] blocks of the running launch that have
 * finished, [1] one-shot launches completed (its parity picks the region). */
#define QCOLL_IPC_ONESHOT_COUNTER_OFFSET 128
#define QCOLL_IPC_PROBE_OFFSET 256
#define QCOLL_IPC_PROBE_WORDS 32 /* uint32 words written by each writer */
#define QCOLL_IPC_PROBE_BYTES (QCOLL_IPC_MAX_RANKS * QCOLL_IPC_PROBE_WORDS * 4)
#define QCOLL_IPC_FLAGS_OFFSET 4096
#define QCOLL_IPC_FLAGS_BYTES \
  (QCOLL_IPC_MAX_BLOCKS * QCOLL_IPC_MAX_RANKS * QCOLL_IPC_PHASES * 4)
#define QCOLL_IPC_EPOCHS_OFFSET (QCOLL_IPC_FLAGS_OFFSET + QCOLL_IPC_FLAGS_BYTES)
#define QCOLL_IPC_EPOCHS_BYTES (QCOLL_IPC_MAX_BLOCKS * 4)
/* Everything above is zeroed at init; data regions start here. */
#define QCOLL_IPC_HEADER_BYTES (64 * 1024)
/* Region sizes are multiples of this, so chunk boundaries keep the user
 * pointers' alignment. */
#define QCOLL_IPC_REGION_ALIGN 4096

/* Index of the flag slot that `writer`'s block `block` sets for `phase`. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_flag_index(int block, int writer,
                                                        int phase) {
  return ((size_t)block * QCOLL_IPC_MAX_RANKS + (size_t)writer) *
             QCOLL_IPC_PHASES +
         (size_t)phase;
}

/* One-shot regions: an eighth of the data space, at most this much (a
 * larger one-shot message is cut into launches of this size). */
#define QCOLL_IPC_ONESHOT_MAX_REGION (4u * 1024u * 1024u)
/* What each one-shot region takes out of the buffer: at most this much.
 * The rest of a larger one-shot region lies beyond the buffer's size
 * (qcoll__ipc_layout_bytes), so the data regions, and with them the
 * two-shot's launches, are what they were with one-shot regions of 2 MiB:
 * taken from the data regions instead, a 256 MiB two-shot made 10 launches
 * where it had made 9, and took 795 us against 734 on one H200. */
#define QCOLL_IPC_ONESHOT_CARVE (2u * 1024u * 1024u)

/* Size of each of the two one-shot regions for an IPC buffer of
 * `buffer_bytes`; 0 when the buffer is too small (see region_bytes). */
static inline QCOLL_IPC_HD size_t qcoll__ipc_oneshot_bytes(size_t buffer_bytes) {
  if (buffer_bytes < QCOLL_IPC_HEADER_BYTES + 4 * QCOLL_IPC_REGION_ALIGN)
    return 0;
  size_t o = (buffer_bytes - QCOLL_IPC_HEADER_BYTES) / 8 /
             QCOLL_IPC_REGION_ALIGN * QCOLL_IPC_REGION_ALIGN;
  if (o < QCOLL_IPC_REGION_ALIGN) o = QCOLL_IPC_REGION_ALIGN;
  return o > QCOLL_IPC_ONESHOT_MAX_REGION ? QCOLL_IPC_ONESHOT_MAX_REGION : o;
}

/* Smallest IPC buffer that holds a header, two one-shot regions and
 * QCOLL_IPC_REGIONS data regions. */
#define QCOLL_IPC_MIN_BUFFER_BYTES \
  (QCOLL_IPC_HEADER_BYTES + 4 * QCOLL_IPC_REGION_ALIGN)

/* Size of each data region for an IPC buffer of `buffer_bytes`; 0 when the
 * buffer is smaller than QCOLL_IPC_MIN_BUFFER_BYTES. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_region_bytes(size_t buffer_bytes) {
  size_t o = qcoll__ipc_oneshot_bytes(buffer_bytes);
  if (o == 0) return 0;
  if (o > QCOLL_IPC_ONESHOT_CARVE) o = QCOLL_IPC_ONESHOT_CARVE;
  size_t r = (buffer_bytes - QCOLL_IPC_HEADER_BYTES - 2 * o) / QCOLL_IPC_REGIONS;
  return r / QCOLL_IPC_REGION_ALIGN * QCOLL_IPC_REGION_ALIGN;
}

/* Offset of one-shot region `parity` (0 or 1) in every rank's buffer. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_oneshot_offset(
    size_t oneshot_bytes, unsigned parity) {
  return QCOLL_IPC_HEADER_BYTES + (size_t)(parity & 1u) * oneshot_bytes;
}

/* Offset of data region `index` (0 .. QCOLL_IPC_REGIONS; the last value is
 * where the data regions end) in every rank's buffer. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_region_offset(size_t oneshot_bytes,
                                                           size_t region_bytes,
                                                           int index) {
  return QCOLL_IPC_HEADER_BYTES + 2 * oneshot_bytes +
         (size_t)index * region_bytes;
}

/* Bytes the layout of a buffer of `buffer_bytes` spans (header, one-shot
 * and data regions): more than buffer_bytes when the one-shot regions are
 * larger than their carve.  What a rank allocates before the inboxes. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_layout_bytes(size_t buffer_bytes) {
  return qcoll__ipc_region_offset(qcoll__ipc_oneshot_bytes(buffer_bytes),
                                  qcoll__ipc_region_bytes(buffer_bytes),
                                  QCOLL_IPC_REGIONS);
}

/* The asynchronous error word (host-mapped pinned memory) that a kernel
 * sets when a wait fails.  One 64-bit store, so the host never reads half
 * of it:  bits 56..63 kind, 40..55 block, 32..39 phase, 24..31 the low
 * byte of the flag value last read, 16..23 peer, 8..15 the low byte of the
 * value awaited (both timeouts only), 0..7 rank.  0 means no error. */
#define QCOLL_IPC_ERR_TIMEOUT 1u      /* a peer's flag did not arrive */
#define QCOLL_IPC_ERR_PEER_ABORTED 2u /* a peer gave up and told us */
#define QCOLL_IPC_ERR_ABORTED 3u      /* this rank's host asked to stop */
/* A peer published a registered buffer this rank has no mapping of (the
 * ranks' registries disagree: a bug, never a guess at an address). */
#define QCOLL_IPC_ERR_REGISTRY 4u

static inline QCOLL_IPC_HD uint64_t qcoll__ipc_err_encode(unsigned kind,
                                                          int rank, int peer,
                                                          int block,
                                                          int phase) {
  return ((uint64_t)(kind & 0xffu) << 56) |
         ((uint64_t)((unsigned)block & 0xffffu) << 40) |
         ((uint64_t)((unsigned)phase & 0xffu) << 32) |
         ((uint64_t)((unsigned)peer & 0xffu) << 16) |
         (uint64_t)((unsigned)rank & 0xffu);
}

/* The flag bytes of a timeout's error word: what the block waited for and
 * what it last saw (their low bytes tell "not arrived yet", one behind,
 * from "the ranks' launch sequences differ"). */
static inline QCOLL_IPC_HD uint64_t qcoll__ipc_err_flags(uint32_t want,
                                                         uint32_t seen) {
  return ((uint64_t)(seen & 0xffu) << 24) | ((uint64_t)(want & 0xffu) << 8);
}

/* The fields of an error word, for whoever reads one. */
static inline QCOLL_IPC_HD unsigned qcoll__ipc_err_kind(uint64_t w) {
  return (unsigned)(w >> 56) & 0xffu;
}
static inline QCOLL_IPC_HD int qcoll__ipc_err_block(uint64_t w) {
  return (int)((w >> 40) & 0xffffu);
}
static inline QCOLL_IPC_HD int qcoll__ipc_err_phase(uint64_t w) {
  return (int)((w >> 32) & 0xffu);
}
static inline QCOLL_IPC_HD int qcoll__ipc_err_peer(uint64_t w) {
  return (int)((w >> 16) & 0xffu);
}
static inline QCOLL_IPC_HD int qcoll__ipc_err_rank(uint64_t w) {
  return (int)(w & 0xffu);
}
/* Low bytes of the flag value a timed-out block awaited and last saw. */
static inline QCOLL_IPC_HD unsigned qcoll__ipc_err_awaited(uint64_t w) {
  return (unsigned)(w >> 8) & 0xffu;
}
static inline QCOLL_IPC_HD unsigned qcoll__ipc_err_seen(uint64_t w) {
  return (unsigned)(w >> 24) & 0xffu;
}

/* The arguments of one launch of the one-shot or two-shot kernel beside
 * the view: what the host legitimately knows per call (pointers, count,
 * the registry references it looked up at enqueue time).  `exchange`: the
 * ranks publish descriptors before barrier 0 (set once any registration of
 * the communicator succeeded; it changes only at collective registration
 * calls, so every rank passes the same value for the same call). */
typedef struct qcoll__ipc_ar_args {
  const void *send;
  void *recv;
  size_t count;
  qcoll__ipc_reg_ref_t send_ref, recv_ref;
  int exchange;
} qcoll__ipc_ar_args_t;

/* Descriptor area of a rank's IPC allocation: [block][epoch parity][writer]
 * descriptors written by the writer (a peer) into this rank's area.  It
 * follows the send/recv inboxes, before the push area, at an offset every
 * rank computes alike. */
#define QCOLL_IPC_DESC_BYTES                                     \
  ((size_t)QCOLL_IPC_MAX_BLOCKS * 2 * QCOLL_IPC_MAX_RANKS *      \
   sizeof(qcoll__ipc_reg_desc_t))

static inline QCOLL_IPC_HD size_t qcoll__ipc_desc_index(int block,
                                                        uint32_t epoch,
                                                        int writer) {
  return ((size_t)block * 2 + (size_t)(epoch & 1u)) * QCOLL_IPC_MAX_RANKS +
         (size_t)writer;
}

/* What a kernel needs to know about the communicator.  Passed by value, so
 * a captured graph holds only these constants: all state that changes from
 * one call to the next lives in device memory. */
/* A two-shot launch of more bytes than this per rank, and a quantised one
 * of more than QCOLL_IPC_LONG_QUANT_BYTES, is long (ipc_sync.cuh
 * long_launch says what that changes). */
#define QCOLL_IPC_LONG_TWOSHOT_BYTES ((size_t)16 << 20)
#define QCOLL_IPC_LONG_QUANT_BYTES ((size_t)4 << 20)

typedef struct qcoll__ipc_view {
  char *bases[QCOLL_IPC_MAX_RANKS]; /* every rank's IPC buffer, mapped here */
  unsigned long long *error_word;   /* device alias of the host-mapped word */
  const unsigned long long
      *host_abort;               /* host-mapped; non-zero: stop waiting */
  size_t region_bytes;           /* size of each data region */
  size_t oneshot_bytes;          /* size of each one-shot region */
  unsigned long long timeout_ns; /* deadline of every device-side wait */
  int rank;
  int nranks;
  int max_grid; /* grid limit (residency, flag slots) */
  int max_grid_long; /* grid limit of long launches that take the larger
                        grid, which no other grid of their rank is resident
                        beside (ipc_sync.cuh long_launch); 0: max_grid */
  int pdl;      /* launch with programmatic dependent launch (the kernels
                   wait on their grid dependency in block_begin / p2p_begin
                   before touching data) */
  int flags_gpu_scope; /* every rank runs on this GPU: flags between ranks
                          need only GPU scope (ipc_sync.cuh flag_store) */
  size_t quant_round_bytes; /* the most message bytes per round of a
                               quantised launch (quant_layout.h "rounds");
                               0: what the regions hold */
  int quant_pipeline; /* a quantised launch of several rounds runs them as
                         a pipeline (quant_layout.h "ring" 2): 1 INT4
                         where its rounds are limited (allreduce_quant.cu
                         pipelined), 2 always, 0 never */
  /* The registry table (device memory, QCOLL_IPC_MAX_RANKS x
   * QCOLL_IPC_REG_SLOTS entries) and the offset of the descriptor area in
   * every rank's buffer; NULL / 0: no registry, every buffer is staged. */
  const qcoll__ipc_reg_entry_t *reg_table;
  size_t desc_offset;
} qcoll__ipc_view_t;

typedef enum qcoll__ipc_algo {
  QCOLL_IPC_ONESHOT = 0,
  QCOLL_IPC_TWOSHOT = 1,
} qcoll__ipc_algo_t;

/* The view's region sizes for an IPC buffer of `buffer_bytes`: the one
 * place that derives them, for the transport and the tests alike. */
static inline void qcoll__ipc_view_set_layout(qcoll__ipc_view_t *v,
                                              size_t buffer_bytes) {
  v->region_bytes = qcoll__ipc_region_bytes(buffer_bytes);
  v->oneshot_bytes = qcoll__ipc_oneshot_bytes(buffer_bytes);
}

/* Whether the all-reduce kernels support this dtype and op. */
int qcoll__cuda_all_reduce_supported(qcoll_dtype_t dtype, qcoll_op_t op);

/* Largest number of elements one launch of `algo` handles (one one-shot
 * region, or one data region for the two-shot). */
size_t qcoll__cuda_all_reduce_chunk_elems(const qcoll__ipc_view_t *view,
                                          qcoll__ipc_algo_t algo,
                                          qcoll_dtype_t dtype);

/* Grid used for one launch of `count` elements: a function of the
 * arguments only, so every rank picks the same grid for the same call. */
int qcoll__cuda_all_reduce_grid(const qcoll__ipc_view_t *view,
                                qcoll__ipc_algo_t algo, size_t count,
                                qcoll_dtype_t dtype);

/* Enqueue one all-reduce of count <= chunk_elems elements on stream.  Every
 * rank must make the same call (same count, dtype, op, algo) in the same
 * order.  Returns the launch error (cudaSuccess once enqueued). */
cudaError_t qcoll__cuda_all_reduce_launch(const qcoll__ipc_view_t *view,
                                          qcoll__ipc_algo_t algo,
                                          const void *sendbuf, void *recvbuf,
                                          size_t count, qcoll_dtype_t dtype,
                                          qcoll_op_t op, cudaStream_t stream);

/* The same with the registry references of this launch's send and recv
 * buffers (NULL or gen 0: staged), found by the host at enqueue time; the
 * kernel checks them against this rank's table row before it relies on
 * them, so a reference that went stale (deregistered before a graph
 * replay) only makes the launch stage its buffers. */
cudaError_t qcoll__cuda_all_reduce_launch_reg(
    const qcoll__ipc_view_t *view, qcoll__ipc_algo_t algo, const void *sendbuf,
    void *recvbuf, size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
    const qcoll__ipc_reg_ref_t *send_ref, const qcoll__ipc_reg_ref_t *recv_ref,
    cudaStream_t stream);

/* How many all-reduce blocks one GPU (the current device) keeps resident at
 * once: SMs x the smallest occupancy of any all-reduce kernel (quantised
 * ones included).  Ranks that share a GPU split this between them. */
cudaError_t qcoll__cuda_all_reduce_resident_blocks(int *blocks);

/* ---- quantised two-shot all-reduce (allreduce_quant.cu) ----------------
 * Sum only; f16, bf16, f32; quant one of FP8, INT8, INT6, INT4, INT3.
 * Results are the CPU model of tests/codec/ref_scheme.c (qcoll's scheme)
 * rounded once to the element type, bit for bit, on every rank. */

/* Whether the quantised kernel supports this dtype, op and format. */
int qcoll__cuda_all_reduce_quant_supported(qcoll_dtype_t dtype, qcoll_op_t op,
                                           qcoll_quant_t quant);

/* Elements of one chunk of a quantised launch: a launch of more streams
 * through the data regions chunk by chunk (0: a format that is not
 * quantised, or regions that hold no group). */
size_t qcoll__cuda_all_reduce_quant_chunk_elems(const qcoll__ipc_view_t *view,
                                                qcoll_quant_t quant);

/* Grid of one quantised launch of count elements (0: the regions hold no
 * group) and, when round_elems is not NULL, the elements of its rounds
 * (count when it takes one): functions of the arguments only, the same on
 * every rank. */
int qcoll__cuda_all_reduce_quant_grid(const qcoll__ipc_view_t *view,
                                      size_t count, qcoll_dtype_t dtype,
                                      qcoll_quant_t quant, size_t *round_elems);

/* Enqueue one quantised sum all-reduce of count elements (any count: the
 * kernel takes the chunks in turn) on stream; rotate != 0: over rotated
 * groups (codec.h).  Every rank must make the same call in the same order,
 * interleaved with the unquantised launches the same way on every rank. */
cudaError_t qcoll__cuda_all_reduce_quant_launch(const qcoll__ipc_view_t *view,
                                                const void *sendbuf,
                                                void *recvbuf, size_t count,
                                                qcoll_dtype_t dtype,
                                                qcoll_quant_t quant,
                                                int rotate,
                                                cudaStream_t stream);

/* Smallest number of blocks per SM that any quantised kernel keeps
 * resident on the current device. */
cudaError_t qcoll__cuda_all_reduce_quant_blocks_per_sm(int *per_sm);

/* Init-time check of one peer mapping: write QCOLL_IPC_PROBE_WORDS words of
 * pattern(seed) to dst through the mapping, read them back and store the
 * number of words that differ at *mismatches (device memory). */
cudaError_t qcoll__cuda_ipc_probe_launch(uint32_t *dst, uint32_t seed,
                                         unsigned *mismatches,
                                         cudaStream_t stream);

/* The pattern word i that qcoll__cuda_ipc_probe_launch writes. */
static inline QCOLL_IPC_HD uint32_t qcoll__ipc_probe_word(uint32_t seed,
                                                          uint32_t i) {
  uint32_t x = seed ^ (i * 0x9e3779b9u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x | 1u; /* never zero, so a zeroed slot never passes */
}

#ifdef __cplusplus
}
#endif

#endif
