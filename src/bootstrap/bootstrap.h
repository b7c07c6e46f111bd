/*
 * TCP bootstrap.
 *
 * qcoll_get_unique_id() starts a root service (a detached thread listening on
 * a TCP port) and encodes its address and a random 256-bit secret in the
 * unique id.  Each rank connects to the root, presents the secret and its
 * (rank, nranks, listen address); the root checks world size, duplicates
 * and ranges, and once all nranks ranks are there sends each rank the
 * address of its ring successor, or an error message to every rank that is
 * up.  Ranks then
 * connect in a ring (rank -> rank+1) for all-gather, broadcast and barrier.
 * Every message is length-prefixed and bounded; every read and accept has
 * a deadline; a connection that does not present the secret is dropped and
 * logged.  A rank whose ring fails tells both neighbours why (a bounded
 * failure report, passed on around the ring) before it shuts its sockets,
 * so every rank reports the first failure rather than a closed connection.
 */
#ifndef QCOLL_BOOTSTRAP_H
#define QCOLL_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qcoll__bootstrap qcoll__bootstrap_t;

/* A rank waits for the root's answer timeout_s + this grace: the root gives
 * up on missing ranks timeout_s after the first rank arrived, so every rank
 * that is up hears the root's reason instead of timing out on its own. */
#define QCOLL__BOOT_GRACE_S 3.0
/* An unauthenticated connection (to the root or to a rank's ring socket)
 * must deliver its hello within min(timeout_s, this) or it is dropped. */
#define QCOLL__BOOT_HELLO_DEADLINE_S 5.0

/* Start a root service bound to addr:port (addr NULL = advertise the address
 * chosen as qcoll_get_unique_id documents; port 0 = any free port) using the
 * given secret (NULL = fresh random secret), and write the unique id.  The
 * root listens on the wildcard address, so the advertised address and
 * 127.0.0.1 both reach it.  Its thread exits after one rendezvous, or after
 * its deadline (timeout_s from the first rank's valid hello; before that it
 * waits without limit, since nobody is blocked on it). */
qcoll_status_t qcoll__bootstrap_root_start(const char *addr, int port,
                                           const uint8_t secret[32],
                                           double timeout_s,
                                           qcoll_unique_id_t *id);

/* Build a unique id without starting a root (env init: every rank computes
 * the same id; rank 0 then starts the root with the same values).  port
 * must be in [1, 65535]; secret NULL = random (useless for env init). */
qcoll_status_t qcoll__bootstrap_make_id(const char *addr, int port,
                                        const uint8_t secret[32],
                                        qcoll_unique_id_t *id);

/* Join the rendezvous as comm->rank of comm->nranks, then build the ring.
 * Errors are recorded on comm. */
qcoll_status_t qcoll__bootstrap_init(qcoll__ctx_t *comm,
                                     const qcoll_unique_id_t *id,
                                     qcoll__bootstrap_t **out);

/* data holds nranks blocks of `bytes`; this rank's block (at rank*bytes) is
 * sent, the others are filled in. */
qcoll_status_t qcoll__bootstrap_allgather(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes);
/* root's `bytes` at data reach every rank. */
qcoll_status_t qcoll__bootstrap_broadcast(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes, int root);
qcoll_status_t qcoll__bootstrap_barrier(qcoll__bootstrap_t *bs);

/* Unblock any wait in progress (called by abort, from any thread; never
 * blocks).  The neighbours get a failure report "rank R aborted" and then
 * see the ring close: from here when no collective is running, else from
 * the collective, which wakes at once. */
void qcoll__bootstrap_abort(qcoll__bootstrap_t *bs);
/* Close the ring.  When the communicator is broken (a failure outside the
 * ring) or aborted and the ring has not reported yet, the neighbours first
 * get a failure report carrying the communicator's last error. */
void qcoll__bootstrap_destroy(qcoll__bootstrap_t *bs);

#ifdef __cplusplus
}
#endif

#endif
