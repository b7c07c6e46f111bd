/*
 * Host shared-memory transport: one POSIX shm segment per host, mapped by
 * every rank of that host and unlinked as soon as all of them have mapped
 * it (so a crash leaves nothing behind).  It holds a control area (a barrier
 * word, per-rank pids and abort flags), staging slots for collectives and
 * one buffer per ordered pair of ranks for send/recv.
 *
 * Waits spin for QCOLL_SPIN_US, then sleep on a futex in slices, checking
 * on every wake-up the deadline, this communicator's abort flag, the shared
 * abort flag (a peer failed) and whether each peer process is still alive.
 */
#ifndef QCOLL_TRANSPORT_SHM_H
#define QCOLL_TRANSPORT_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qcoll__shm qcoll__shm_t;

/* Collective over the ranks of this host (uses comm->bootstrap): create or
 * map the segment, then unlink it.  Sets comm->shm. */
qcoll_status_t qcoll__shm_init(qcoll__ctx_t *comm);
/* Unmap (after a closing barrier when the communicator is healthy). */
void qcoll__shm_destroy(qcoll__ctx_t *comm);
/* Tell the local peers this rank failed or aborted, and wake them. */
void qcoll__shm_signal_abort(qcoll__ctx_t *comm);

/* Barrier over the ranks of this host, with deadline. */
qcoll_status_t qcoll__shm_barrier(qcoll__ctx_t *comm);

/* Wait until *word >= target (wrap-safe 32-bit compare), with the checks
 * listed above.  `what` names the wait in the error message. */
qcoll_status_t qcoll__shm_wait_geq(qcoll__ctx_t *comm, _Atomic uint32_t *word,
                                   uint32_t target, const char *what);
/* Store with release and wake every waiter on word. */
void qcoll__shm_post(_Atomic uint32_t *word, uint32_t value);

/* ---- staging for the host collectives ------------------------------
 * The staging area has two halves (parities); each holds one slot of
 * slot_bytes per local rank, contiguous in local-rank order.  A collective
 * is a sequence of phases, and every phase follows one pattern:
 *
 *   uint8_t *stage = qcoll__shm_stage(comm);  // this phase's half
 *   ... write this rank's part of stage ...
 *   qcoll__shm_phase_sync(comm);              // barrier, then flip parity
 *   ... read any part of stage ...
 *
 * Reads of phase k end before this rank enters the barrier of phase k+1,
 * and nobody writes the same half again before that barrier has completed
 * (phase k+2), so one barrier per phase suffices and nothing needs a
 * closing barrier.  The layout is the creator's and the same on every
 * local rank, so every rank takes the same one-shot/chunked decisions. */
typedef struct qcoll__shm_layout {
  size_t slot_bytes;    /* one rank's slot in one half: a multiple of 4 KiB,
                           at least 64 bytes per local rank */
  size_t oneshot_bytes; /* largest message reduced one-shot (<= slot_bytes) */
  size_t pair_bytes;    /* data bytes of one ordered pair's send/recv buffer */
} qcoll__shm_layout_t;

const qcoll__shm_layout_t *qcoll__shm_layout(qcoll__ctx_t *comm);
/* The current phase's half: local_size * slot_bytes bytes. */
uint8_t *qcoll__shm_stage(qcoll__ctx_t *comm);
/* End the writes of the current phase: barrier over the local ranks, then
 * advance to the other half. */
qcoll_status_t qcoll__shm_phase_sync(qcoll__ctx_t *comm);

/* Point-to-point through the ordered pair's buffer (peer is a local rank
 * index).  The buffer is two halves used in turn, so a message of at most
 * pair_bytes returns from send at once when the pair is idle; larger ones
 * stream piece by piece.  Both sides must pass the same byte count (checked:
 * QCOLL_ERR_MISMATCH). */
qcoll_status_t qcoll__shm_send(qcoll__ctx_t *comm, int peer_local,
                               const void *buf, size_t bytes);
qcoll_status_t qcoll__shm_recv(qcoll__ctx_t *comm, int peer_local, void *buf,
                               size_t bytes);

/* Name the collective in progress (a static string), for error messages;
 * NULL when none. */
void qcoll__shm_set_activity(qcoll__ctx_t *comm, const char *name);

/* Name the segment had before it was unlinked (tests check it is gone). */
const char *qcoll__shm_name(qcoll__ctx_t *comm);

#ifdef __cplusplus
}
#endif

#endif
