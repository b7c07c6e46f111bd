/*
 * Launchers of the CUDA IPC kernels for every collective other than the
 * fp32-accumulating all-reduce of allreduce.cu (defined by collectives.cu),
 * callable from C, and the layout of the send/recv channels in a rank's IPC
 * buffer.  The buffer layout, the view and the flag/epoch protocol are those
 * of launch.h and allreduce.cu; this header only adds to them.
 *
 * Additions to the IPC buffer of launch.h:
 *
 *   [P2P_FLAGS_OFFSET, +P2P_FLAGS_BYTES)   inside the zeroed header, after
 *       the epochs: four uint32 arrays [peer][lane] for send/recv:
 *         ready     written by the sender `peer` into this (receiving)
 *                   rank's buffer: the last step it has put in the inbox
 *         consumed  written by the receiver `peer` into this (sending)
 *                   rank's buffer: the last step it has taken out
 *         send_seq  local: steps this rank has sent to `peer`, per lane
 *         recv_seq  local: steps this rank has received from `peer`
 *   [p2p_offset, +nranks * pair_bytes)     after the two data regions:
 *       one inbox per sender; an inbox is QCOLL_IPC_P2P_LANES lanes of two
 *       slots of slot_bytes each.
 *
 * Every offset depends only on the buffer size, the world size and
 * QCOLL_IPC_P2P_BYTES: never on a message or a grid.
 */
#ifndef QCOLL_COLL_CUDA_COLLECTIVES_H
#define QCOLL_COLL_CUDA_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- collectives -------------------------------------------------------- */

typedef enum qcoll__ipc_coll {
  QCOLL_IPC_COLL_ALL_REDUCE = 0, /* any dtype and op (rank-order reduction) */
  QCOLL_IPC_COLL_REDUCE = 1,
  QCOLL_IPC_COLL_BROADCAST = 2,
  QCOLL_IPC_COLL_ALL_GATHER = 3,
  QCOLL_IPC_COLL_REDUCE_SCATTER = 4,
  QCOLL_IPC_COLL_ALL_TO_ALL = 5,
  QCOLL_IPC_COLL_BARRIER = 6,
  QCOLL_IPC_COLL_COUNT = 7
} qcoll__ipc_coll_t;

/* One launch: `len` elements starting at element `offset` of the call.  For
 * all_gather, reduce_scatter and all_to_all, count/offset/len are within
 * each rank's block of the call (block q of a buffer starts at q * count).
 * Every field is the same on every rank except the buffers (and send on
 * the ranks that do not read it). */
typedef struct qcoll__ipc_coll_args {
  qcoll__ipc_coll_t kind;
  const void *send; /* the call's sendbuf, not offset */
  void *recv;       /* the call's recvbuf, not offset */
  size_t count;
  size_t offset;
  size_t len;
  qcoll_dtype_t dtype;
  qcoll_op_t op; /* reductions */
  int root;      /* reduce, broadcast */
} qcoll__ipc_coll_args_t;

/* Whether the kernels serve this collective, dtype and op (op is ignored
 * for collectives that do not reduce). */
int qcoll__cuda_coll_supported(qcoll__ipc_coll_t kind, qcoll_dtype_t dtype,
                               qcoll_op_t op);

/* Reduce and broadcast launches carry at most this many bytes summed over
 * the ranks: with 2 ranks on one H200, launches of 16 MiB per rank took
 * 5-7x longer per byte than launches of 6 MiB, with 4 ranks 8 MiB ones
 * likewise against 3 MiB (docs/results/2026-11-h200-collectives-mps.md,
 * "Launch size"); all-gather, reduce-scatter and all-to-all showed no
 * such step. */
#define QCOLL_IPC_ROOTED_LAUNCH_BYTES ((size_t)12 << 20)

/* Largest `len` of one launch: one data region per rank (all_reduce,
 * all_gather; reduce and broadcast also at most
 * QCOLL_IPC_ROOTED_LAUNCH_BYTES / nranks, in whole 4 KiB), or one
 * nranks-th of it (reduce_scatter, all_to_all, which keep one sub-block
 * per destination). */
size_t qcoll__cuda_coll_chunk_elems(const qcoll__ipc_view_t *view,
                                    qcoll__ipc_coll_t kind,
                                    qcoll_dtype_t dtype);

/* Grid of one launch: a function of the arguments only (never of the
 * rank), at most view->max_grid and QCOLL_IPC_MAX_BLOCKS. */
int qcoll__cuda_coll_grid(const qcoll__ipc_view_t *view,
                          const qcoll__ipc_coll_args_t *args);

/* Enqueue one launch on stream.  Every rank must make the same launches
 * (kind, count, offset, len, dtype, op, root) in the same order, ordered
 * with every other launch of the view's kernels (the all-reduce included)
 * the same way on every rank.  A BARRIER launch ignores everything but
 * kind.  Returns the launch error (cudaSuccess once enqueued; also for
 * len 0, which enqueues nothing). */
cudaError_t qcoll__cuda_coll_launch(const qcoll__ipc_view_t *view,
                                    const qcoll__ipc_coll_args_t *args,
                                    cudaStream_t stream);

/* Blocks of these kernels (send/recv included) that one GPU, the current
 * device, keeps resident at once: SMs x the smallest occupancy of any of
 * them.  Ranks that share a GPU split it (view->max_grid). */
cudaError_t qcoll__cuda_coll_resident_blocks(int *blocks);

/* ---- send / recv ---------------------------------------------------------
 * A channel per ordered pair (sender, receiver): the receiver's inbox for
 * that sender, and per lane a `ready` and a `consumed` counter.  A message
 * of N bytes is cut into steps of pair_bytes / 2 bytes; in every step lane
 * b carries the bytes [b * slot, (b + 1) * slot) of the step, through slot
 * (seq & 1) of its lane, where seq counts the lane's steps on that channel
 * since init.  The sender waits until the receiver has consumed step
 * seq - 2 (the last use of that slot), copies, and publishes ready = seq;
 * the receiver waits for ready >= seq, copies out, and publishes consumed =
 * seq.  The counters live in device memory and are advanced by the kernels,
 * so send and recv can be captured into graphs.
 *
 * Ordering rules:
 *  - the n-th send from S to R is matched with the n-th recv on R from S,
 *    in the order the kernels run: keep all sends S->R in one stream (or
 *    ordered by events), likewise all recvs on R from S, and give matching
 *    calls the same byte count;
 *  - a send of at most pair_bytes whose channel's earlier messages have
 *    been received completes without waiting for its recv; a larger one
 *    waits for the receiver step by step (so on one stream, "send then
 *    recv" on every rank of a ring deadlocks, and times out, for large
 *    messages: alternate the order by rank parity or use two streams);
 *  - channels are independent of each other and of the collectives: a
 *    send to R and a recv from R, or send/recv and a collective, may run
 *    at the same time on different streams, as long as the GPU keeps all
 *    their blocks resident together (each send/recv uses at most
 *    QCOLL_IPC_P2P_LANES blocks).
 */

/* Lanes (blocks) of one channel. */
#define QCOLL_IPC_P2P_LANES 8
/* Phases reported in the error word by a failed send/recv wait. */
#define QCOLL_IPC_PHASE_SEND 8 /* sender waiting for a free slot */
#define QCOLL_IPC_PHASE_RECV 9 /* receiver waiting for data */

#define QCOLL_IPC_P2P_FLAGS_OFFSET \
  ((QCOLL_IPC_EPOCHS_OFFSET + QCOLL_IPC_EPOCHS_BYTES + 1023) / 1024 * 1024)
#define QCOLL_IPC_P2P_ARRAY_WORDS (QCOLL_IPC_MAX_RANKS * QCOLL_IPC_P2P_LANES)
#define QCOLL_IPC_P2P_FLAGS_BYTES (4 * QCOLL_IPC_P2P_ARRAY_WORDS * 4)
enum {
  QCOLL_IPC_P2P_READY = 0,
  QCOLL_IPC_P2P_CONSUMED = 1,
  QCOLL_IPC_P2P_SEND_SEQ = 2,
  QCOLL_IPC_P2P_RECV_SEQ = 3
};
/* Granularity of pair_bytes: two slots of a multiple of 256 bytes per lane,
 * so every slot keeps 16-byte alignment. */
#define QCOLL_IPC_P2P_ALIGN (2 * QCOLL_IPC_P2P_LANES * 256)

/* Word index of array `which`, peer, lane in the send/recv flag area. */
static inline QCOLL_IPC_HD size_t qcoll__ipc_p2p_word(int which, int peer,
                                                      int lane) {
  return ((size_t)which * QCOLL_IPC_MAX_RANKS + (size_t)peer) *
             QCOLL_IPC_P2P_LANES +
         (size_t)lane;
}

/* Inbox bytes per ordered pair for a requested size: rounded down to
 * QCOLL_IPC_P2P_ALIGN, at least QCOLL_IPC_P2P_ALIGN. */
static inline size_t qcoll__ipc_p2p_pair_bytes(size_t requested) {
  size_t b = requested / QCOLL_IPC_P2P_ALIGN * QCOLL_IPC_P2P_ALIGN;
  return b < QCOLL_IPC_P2P_ALIGN ? QCOLL_IPC_P2P_ALIGN : b;
}

/* Where the inboxes start in an IPC buffer of buffer_bytes: right after
 * the data regions. */
static inline size_t qcoll__ipc_p2p_offset(size_t buffer_bytes) {
  return qcoll__ipc_layout_bytes(buffer_bytes);
}

/* Bytes to allocate for a rank's IPC buffer of buffer_bytes (launch.h
 * layout) followed by the inboxes of nranks senders. */
static inline size_t qcoll__ipc_alloc_bytes(size_t buffer_bytes, int nranks,
                                            size_t pair_bytes) {
  return qcoll__ipc_p2p_offset(buffer_bytes) +
         (size_t)nranks * pair_bytes;
}

/* Where the inboxes are; the same on every rank. */
typedef struct qcoll__ipc_p2p {
  size_t offset;     /* of the first inbox, in every rank's buffer */
  size_t pair_bytes; /* one inbox */
} qcoll__ipc_p2p_t;

/* Enqueue the send of `bytes` bytes of sendbuf to `peer` (recv: from
 * `peer` into recvbuf) on stream.  bytes 0 enqueues nothing. */
cudaError_t qcoll__cuda_send_launch(const qcoll__ipc_view_t *view,
                                    const qcoll__ipc_p2p_t *p2p,
                                    const void *sendbuf, size_t bytes, int peer,
                                    cudaStream_t stream);
cudaError_t qcoll__cuda_recv_launch(const qcoll__ipc_view_t *view,
                                    const qcoll__ipc_p2p_t *p2p, void *recvbuf,
                                    size_t bytes, int peer,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
