/*
 * Host shared-memory transport.
 *
 * Segment.  The lowest local rank creates an anonymous memory file
 * (memfd_create: it never has a name in /dev/shm, so a rank killed at any
 * moment, even during init, leaves nothing behind), sizes it, reserves its
 * pages (posix_fallocate, so a lack of memory is an error at init and not a
 * SIGBUS in the middle of a collective), writes the header and publishes
 * /proc/<its pid>/fd/<fd> through the bootstrap.  The other local ranks
 * open that path (same user, same pid namespace) and map it; after a second
 * bootstrap exchange (everyone has mapped it, or failed) the creator closes
 * its descriptor.  The memory lives as long as a mapping does.  The name
 * "/qcoll-<128 random bits>" only labels the segment in logs and in
 * /proc/<pid>/maps.  Layout, all offsets in the header:
 *
 *   control     header, abort word, barrier counter, sleeper count
 *   ranks       one cache line per local rank: pid, pid namespace, barrier
 *               arrivals (for timeout messages), the word it sleeps on
 *   stage       2 halves x local_size slots of slot_bytes (4 KiB aligned)
 *   pairs       local_size^2 ordered-pair buffers for send/recv: a
 *               128-byte header (sender's line, receiver's line) then
 *               pair_bytes of data in two halves
 *
 * Sizes come from QCOLL_SHM_BYTES: three quarters for staging (slots capped
 * at SLOT_MAX_BYTES, which keeps chunks cache-sized and the segment small
 * for few ranks), one quarter for the pair buffers (each at most
 * QCOLL_P2P_BYTES), so 64 ranks fit in about QCOLL_SHM_BYTES.
 *
 * Waits.  A wait polls for QCOLL_SPIN_US, then sleeps on a shared futex in
 * slices of SLEEP_SLICE_NS.  It polls busily only for its first BUSY_POLL_S
 * and only when the host has at least as many CPUs as local ranks; then (and
 * from the start with up to YIELD_RANKS_PER_CPU ranks per CPU) it yields the
 * CPU between polls; beyond that it does not poll.  Counting CPUs does not
 * tell whether they are free: on a host shared with other work, a rank that
 * busy-polls for the whole spin holds a CPU that the awaited rank (or the
 * other work) needs, and the awaited rank, once preempted, comes back only a
 * time slice later; a yield on an idle CPU returns at once, so an idle host
 * loses almost nothing (docs/results/host-vs-mpi.md).  Before each sleep it
 * checks, in order: this communicator's abort flag, the shared abort word
 * (set by a failing peer), every LIVENESS_PERIOD_S whether a peer process
 * has exited (pidfd, else kill(pid, 0)), and the deadline.  Timeouts and
 * peer failures mark the communicator broken and set the shared abort word,
 * so every other local rank fails promptly too.
 *
 * Posting.  A post stores with release and calls FUTEX_WAKE only when some
 * rank sleeps: a waiter increments the sleeper count before re-reading the
 * word and sleeping, a poster stores the word before reading the count,
 * both sequentially consistent, so one of them always sees the other.
 *
 * Barrier.  A monotonic counter: barrier k of a rank completes when the
 * counter reaches k * local_size (32-bit, compared wrap-safe).  The last
 * arriver wakes the sleepers.  Each rank also stores k in its own line, so a
 * timeout can name the ranks that never arrived.
 */
#define _GNU_SOURCE
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../bootstrap/bootstrap.h"
#include "../base/config.h"

#define SHM_MAGIC 0x6d68736c6c6f6371ull /* "qcollshm" */
#define SHM_VERSION 1u
#define LINE 64
#define PAGE 4096
#define SLOT_MAX_BYTES ((size_t)2 << 20)
#define PAIR_HEADER 128
#define PAIR_MIN_BYTES 256
#define SLEEP_SLICE_NS 10000000L /* 10 ms */
#define BUSY_POLL_S 2e-6         /* the busy head of a wait's polling */
#define LIVENESS_PERIOD_S 0.05
#define NAME_MAX_LEN 48

/* Why the abort word was set, in its top byte. */
enum { ABORT_FAILED = 0, ABORT_DIED = 1, ABORT_TIMEOUT = 2 };

/* ---- shared layout ------------------------------------------------- */

typedef struct shm_header {
  uint64_t magic;
  uint32_t version;
  uint32_t nlocal;
  uint64_t total_bytes;
  uint64_t slot_bytes, oneshot_bytes, pair_bytes, pair_stride;
  uint64_t ranks_offset, stage_offset, pairs_offset;
} shm_header_t;

typedef struct shm_ctl {
  shm_header_t hdr;
  /* 0, or the first failure: (ABORT_* << 24) | (1 + local rank). */
  _Alignas(LINE) _Atomic uint32_t abort_word;
  _Alignas(LINE) _Atomic uint32_t barrier_count;
  /* Ranks currently inside (or about to enter) a futex wait. */
  _Alignas(LINE) _Atomic uint32_t sleepers;
} shm_ctl_t;

typedef struct shm_rank {
  _Alignas(LINE) _Atomic int32_t pid;
  _Atomic uint32_t left;            /* 1 once it destroyed its communicator */
  _Atomic uint32_t barrier_arrived; /* number of the last barrier entered */
  uint32_t unused;
  _Atomic uint64_t pidns;       /* inode of its pid namespace (0: unknown) */
  _Atomic uint64_t sleeping_on; /* 1 + offset of the word it sleeps on */
} shm_rank_t;

typedef struct shm_pair {
  /* sender's line */
  _Alignas(LINE) _Atomic uint32_t sent; /* pieces posted */
  uint32_t unused;
  uint64_t msg_bytes[2]; /* size of the message each half's piece is of */
  /* receiver's line */
  _Alignas(LINE) _Atomic uint32_t acked; /* pieces consumed */
} shm_pair_t;

_Static_assert(sizeof(shm_rank_t) == LINE, "one line per rank");
_Static_assert(sizeof(shm_pair_t) == PAIR_HEADER, "pair header size");

/* ---- process-local state ------------------------------------------- */

/* How a wait polls before it sleeps, from the host's CPU count (not this
 * process's affinity mask: ranks pinned one per core must still spin). */
typedef enum poll_mode {
  POLL_BUSY,  /* a CPU per rank: a short busy head, then yield (below) */
  POLL_YIELD, /* a few ranks per CPU: yield, so the awaited rank runs now */
  POLL_NONE   /* many ranks per CPU: polling would only delay the workers */
} poll_mode_t;

struct qcoll__shm {
  uint8_t *base;
  size_t bytes;
  shm_ctl_t *ctl;
  shm_rank_t *ranks;
  uint8_t *stage;
  uint8_t *pairs;
  size_t pair_stride;
  qcoll__shm_layout_t layout;
  int me, n;
  unsigned parity;
  uint32_t barrier_seq;
  uint32_t *send_seq;    /* per local peer: next piece this rank sends it */
  uint32_t *recv_seq;    /* per local peer: next piece expected from it */
  struct pollfd *pidfds; /* per local peer; fd -1 when not watched that way */
  uint64_t my_pidns;
  double spin_s; /* how long a wait polls before it sleeps */
  int poll;      /* poll_mode_t: how a wait polls before it sleeps */
  double next_liveness;
  const char *activity; /* the collective in progress, for messages */
  char name[NAME_MAX_LEN];
  int creator_fd; /* the memfd, held by the creator until all have mapped */
};

/* What a wait is for, described only when it fails. */
typedef void (*describe_fn)(qcoll__ctx_t *comm, const void *ctx, char *buf,
                            size_t len);

static inline bool reached(uint32_t value, uint32_t target) {
  return (int32_t)(value - target) >= 0;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static size_t align_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}
static size_t align_down(size_t x, size_t a) {
  return x / a * a;
}

static int global_rank(qcoll__ctx_t *comm, int local) {
  return comm->local_ranks ? comm->local_ranks[local] : local;
}

/* ---- futex --------------------------------------------------------- */

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_slice(_Atomic uint32_t *word, uint32_t seen) {
  struct timespec ts = {0, SLEEP_SLICE_NS};
  /* Shared (not FUTEX_PRIVATE): the word lives in memory other processes
   * map.  EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look
   * again". */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Store and wake the sleepers, if any (see "Posting" above). */
static void post(qcoll__shm_t *shm, _Atomic uint32_t *word, uint32_t value) {
  atomic_store_explicit(word, value, memory_order_seq_cst);
  if (atomic_load_explicit(&shm->ctl->sleepers, memory_order_seq_cst))
    futex_wake_all(word);
}

void qcoll__shm_post(_Atomic uint32_t *word, uint32_t value) {
  atomic_store_explicit(word, value, memory_order_seq_cst);
  futex_wake_all(word);
}

/* ---- failures ------------------------------------------------------ */

/* Publish the first failure of this host's ranks: local rank l, for the
 * reason `why` (the first one set stays). */
static void signal_failure(qcoll__shm_t *shm, int l, unsigned why) {
  uint32_t none = 0;
  atomic_compare_exchange_strong(&shm->ctl->abort_word, &none,
                                 (uint32_t)why << 24 | (uint32_t)(l + 1));
  /* Wake whoever sleeps now; a rank about to sleep sees the word within a
   * slice. */
  for (int k = 0; k < shm->n; k++) {
    uint64_t off = atomic_load(&shm->ranks[k].sleeping_on);
    if (off && off - 1 + sizeof(uint32_t) <= shm->bytes)
      futex_wake_all((_Atomic uint32_t *)(shm->base + off - 1));
  }
}

void qcoll__shm_signal_abort(qcoll__ctx_t *comm) {
  qcoll__shm_t *shm = comm->shm;
  if (shm) signal_failure(shm, shm->me, ABORT_FAILED);
}

/* Record the error, mark the communicator broken and tell the peers that
 * local rank `who` failed for reason `why`. */
static qcoll_status_t fail(qcoll__ctx_t *comm, int who, unsigned why,
                           qcoll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static qcoll_status_t fail(qcoll__ctx_t *comm, int who, unsigned why,
                           qcoll_status_t status, const char *fmt, ...) {
  char msg[QCOLL_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  qcoll__error(comm, status, "%s", msg);
  qcoll__ctx_mark_broken(comm);
  signal_failure(comm->shm, who, why);
  return status;
}

static bool peer_watchable(const qcoll__shm_t *shm, int l) {
  return l != shm->me && atomic_load(&shm->ranks[l].pid) > 0 &&
         atomic_load(&shm->ranks[l].pidns) == shm->my_pidns;
}

static const char *activity(const qcoll__shm_t *shm) {
  return shm->activity ? shm->activity : "host shared memory";
}

static void describe_start(qcoll__ctx_t *comm, const void *ctx, char *buf,
                           size_t len);

/* "while waiting for <what>", or "when the call started". */
static void describe_when(qcoll__ctx_t *comm, describe_fn describe,
                          const void *ctx, char *buf, size_t len) {
  if (describe == describe_start) {
    snprintf(buf, len, "when the call started");
    return;
  }
  int used = snprintf(buf, len, "while waiting for ");
  if (used > 0 && (size_t)used < len)
    describe(comm, ctx, buf + used, len - (size_t)used);
}

/* Whether the word a wait is for has been posted after all (word may be
 * NULL).  Checked again just before reporting a peer failure or a timeout:
 * a peer may post and then exit, and what it posted still counts. */
static bool posted_meanwhile(_Atomic uint32_t *word, uint32_t target) {
  return word &&
         reached(atomic_load_explicit(word, memory_order_acquire), target);
}

/* QCOLL_OK while the wait for *word >= target may go on (or the word has
 * been posted); otherwise the error, recorded. */
/* Whether local peer l's process has exited.  A pidfd also reports a
 * process that exited but was not yet reaped by its parent, which
 * kill(pid, 0) still reports alive. */
static bool peer_dead(qcoll__shm_t *shm, int l) {
  if (shm->pidfds[l].fd >= 0) {
    struct pollfd p = {shm->pidfds[l].fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
  }
  return peer_watchable(shm, l) &&
         kill(atomic_load(&shm->ranks[l].pid), 0) == -1 && errno == ESRCH;
}

/* A peer that died without destroying its communicator, or -1. */
static int peer_died_unexpectedly(qcoll__shm_t *shm) {
  for (int l = 0; l < shm->n; l++)
    if (l != shm->me && !atomic_load(&shm->ranks[l].left) && peer_dead(shm, l))
      return l;
  return -1;
}

/* The peer to blame when one has gone: one that died unexpectedly, else one
 * that destroyed its communicator (and may have exited since).  A rank
 * usually destroys its communicator because another one died, and a dying
 * process closes its sockets (which that rank saw) before the kernel
 * reports its exit (which a pidfd sees): so a departure is blamed only when
 * no death appears within a short grace period. */
#define DEPARTURE_GRACE_S 0.25
static int gone_peer(qcoll__shm_t *shm) {
  int died = peer_died_unexpectedly(shm);
  if (died >= 0) return died;
  int left = -1;
  for (int l = 0; left < 0 && l < shm->n; l++)
    if (l != shm->me && atomic_load(&shm->ranks[l].left)) left = l;
  if (left < 0) return -1;
  double until = qcoll__now() + DEPARTURE_GRACE_S;
  do {
    struct timespec nap = {0, 5 * 1000 * 1000};
    nanosleep(&nap, NULL);
    died = peer_died_unexpectedly(shm);
    if (died >= 0) return died;
  } while (qcoll__now() < until);
  return left;
}

static qcoll_status_t check_health(qcoll__ctx_t *comm,
                                   qcoll__deadline_t deadline,
                                   _Atomic uint32_t *word, uint32_t target,
                                   describe_fn describe, const void *ctx) {
  qcoll__shm_t *shm = comm->shm;
  char what[512];
  if (qcoll__ctx_aborted(comm)) {
    qcoll__shm_signal_abort(comm);
    describe_when(comm, describe, ctx, what, sizeof what);
    return qcoll__error(comm, QCOLL_ERR_ABORTED, "%s: communicator aborted %s",
                        activity(shm), what);
  }
  uint32_t failed =
      atomic_load_explicit(&shm->ctl->abort_word, memory_order_acquire);
  if (failed) {
    if (posted_meanwhile(word, target)) return QCOLL_OK;
    describe_when(comm, describe, ctx, what, sizeof what);
    int l = (int)(failed & 0xffffffu) - 1;
    unsigned why = failed >> 24;
    char who[96];
    if (why == ABORT_DIED)
      snprintf(who, sizeof who, "rank %d (pid %d) died", global_rank(comm, l),
               (int)atomic_load(&shm->ranks[l].pid));
    else if (why == ABORT_TIMEOUT)
      snprintf(who, sizeof who, "rank %d timed out waiting for its peers",
               global_rank(comm, l));
    else
      snprintf(who, sizeof who, "rank %d aborted or failed",
               global_rank(comm, l));
    return fail(comm, l, why, QCOLL_ERR_PEER_FAILURE,
                "%s: %s; rank %d noticed it %s", activity(shm), who, comm->rank,
                what);
  }
  double now = qcoll__now();
  if (now >= shm->next_liveness) {
    shm->next_liveness = now + LIVENESS_PERIOD_S;
    int dead = gone_peer(shm);
    if (dead >= 0) {
      if (posted_meanwhile(word, target)) return QCOLL_OK;
      describe_when(comm, describe, ctx, what, sizeof what);
      bool left = atomic_load(&shm->ranks[dead].left);
      return fail(
          comm, dead, left ? ABORT_FAILED : ABORT_DIED, QCOLL_ERR_PEER_FAILURE,
          "%s: rank %d (pid %d) %s; rank %d noticed it %s", activity(shm),
          global_rank(comm, dead), (int)atomic_load(&shm->ranks[dead].pid),
          left ? "destroyed its communicator" : "died", comm->rank, what);
    }
  }
  if (now >= deadline.at) {
    if (posted_meanwhile(word, target)) return QCOLL_OK;
    describe_when(comm, describe, ctx, what, sizeof what);
    return fail(comm, shm->me, ABORT_TIMEOUT, QCOLL_ERR_TIMEOUT,
                "%s: timed out after %.1f s (QCOLL_TIMEOUT) on rank %d %s",
                activity(shm), comm->timeout_s, comm->rank, what);
  }
  return QCOLL_OK;
}

static bool failure_flagged(qcoll__ctx_t *comm) {
  return qcoll__ctx_aborted(comm) ||
         atomic_load_explicit(&comm->shm->ctl->abort_word,
                              memory_order_relaxed) != 0;
}

static void sleep_on(qcoll__shm_t *shm, _Atomic uint32_t *word,
                     uint32_t target) {
  uint8_t *p = (uint8_t *)word;
  bool inside = p >= shm->base && p + sizeof *word <= shm->base + shm->bytes;
  _Atomic uint64_t *mark = &shm->ranks[shm->me].sleeping_on;
  if (inside)
    atomic_store_explicit(mark, (uint64_t)(p - shm->base) + 1,
                          memory_order_relaxed);
  atomic_fetch_add_explicit(&shm->ctl->sleepers, 1, memory_order_seq_cst);
  uint32_t seen = atomic_load_explicit(word, memory_order_seq_cst);
  if (!reached(seen, target)) futex_wait_slice(word, seen);
  atomic_fetch_sub_explicit(&shm->ctl->sleepers, 1, memory_order_seq_cst);
  if (inside) atomic_store_explicit(mark, 0, memory_order_relaxed);
}

static qcoll_status_t wait_word(qcoll__ctx_t *comm, _Atomic uint32_t *word,
                                uint32_t target, describe_fn describe,
                                const void *ctx) {
  if (reached(atomic_load_explicit(word, memory_order_acquire), target))
    return QCOLL_OK;
  qcoll__shm_t *shm = comm->shm;
  double start = qcoll__now();
  qcoll__deadline_t deadline = {start + comm->timeout_s};
  /* Poll before sleeping: a futex round trip costs tens of microseconds. */
  if (shm->spin_s > 0 && shm->poll != POLL_NONE) {
    double spin_end = start + shm->spin_s;
    double busy_end =
        shm->poll == POLL_BUSY ? start + QCOLL_MIN(shm->spin_s, BUSY_POLL_S) : 0;
    for (;;) {
      if (qcoll__now() < busy_end) {
        for (int i = 0; i < 64; i++) {
          if (reached(atomic_load_explicit(word, memory_order_acquire), target))
            return QCOLL_OK;
          cpu_relax();
        }
      } else {
        if (reached(atomic_load_explicit(word, memory_order_acquire), target))
          return QCOLL_OK;
        sched_yield(); /* one yield may last a time slice: check the clock */
      }
      if (failure_flagged(comm) || qcoll__now() >= spin_end) break;
    }
  }
  for (;;) {
    if (reached(atomic_load_explicit(word, memory_order_acquire), target))
      return QCOLL_OK;
    qcoll_status_t st =
        check_health(comm, deadline, word, target, describe, ctx);
    if (st != QCOLL_OK) return st;
    sleep_on(shm, word, target);
  }
}

/* Used when a failure is found before a call waits for anything. */
static void describe_start(qcoll__ctx_t *comm, const void *ctx, char *buf,
                           size_t len) {
  snprintf(buf, len, "(nothing yet)");
}

/* A call must not start, let alone complete, once a local rank has failed
 * or this communicator was aborted: a barrier that the failed rank had
 * already entered would otherwise still complete. */
static qcoll_status_t check_start(qcoll__ctx_t *comm) {
  if (!failure_flagged(comm)) return QCOLL_OK;
  qcoll__deadline_t never = {1e300};
  return check_health(comm, never, NULL, 0, describe_start, NULL);
}

typedef struct plain_what {
  const char *what;
  uint32_t target;
  _Atomic uint32_t *word;
} plain_what_t;

static void describe_plain(qcoll__ctx_t *comm, const void *ctx, char *buf,
                           size_t len) {
  const plain_what_t *w = ctx;
  snprintf(buf, len, "%s (word at %u, waiting for %u)", w->what,
           atomic_load(w->word), w->target);
}

qcoll_status_t qcoll__shm_wait_geq(qcoll__ctx_t *comm, _Atomic uint32_t *word,
                                   uint32_t target, const char *what) {
  plain_what_t w = {what ? what : "a shared-memory flag", target, word};
  return wait_word(comm, word, target, describe_plain, &w);
}

/* ---- barrier ------------------------------------------------------- */

static void describe_barrier(qcoll__ctx_t *comm, const void *ctx, char *buf,
                             size_t len) {
  const qcoll__shm_t *shm = comm->shm;
  uint32_t k = *(const uint32_t *)ctx;
  int used = snprintf(buf, len,
                      "barrier #%u of the %d local ranks; ranks not "
                      "arrived:",
                      k, shm->n);
  int late = 0;
  for (int l = 0; l < shm->n && used > 0 && (size_t)used < len; l++) {
    uint32_t arrived = atomic_load(&shm->ranks[l].barrier_arrived);
    if (reached(arrived, k)) continue;
    if (++late <= 16)
      used +=
          snprintf(buf + used, len - (size_t)used, " %d", global_rank(comm, l));
  }
  if (used > 0 && (size_t)used < len) {
    if (late > 16)
      snprintf(buf + used, len - (size_t)used, " ... (%d in all)", late);
    else if (late == 0)
      snprintf(buf + used, len - (size_t)used, " none (all arrived)");
  }
}

qcoll_status_t qcoll__shm_barrier(qcoll__ctx_t *comm) {
  qcoll__shm_t *shm = comm->shm;
  if (shm->n == 1) return QCOLL_OK;
  qcoll_status_t st = check_start(comm);
  if (st != QCOLL_OK) return st;
  uint32_t k = ++shm->barrier_seq;
  atomic_store_explicit(&shm->ranks[shm->me].barrier_arrived, k,
                        memory_order_relaxed);
  uint32_t target = k * (uint32_t)shm->n;
  uint32_t prev = atomic_fetch_add_explicit(&shm->ctl->barrier_count, 1,
                                            memory_order_seq_cst);
  if (prev + 1 == target) {
    if (atomic_load_explicit(&shm->ctl->sleepers, memory_order_seq_cst))
      futex_wake_all(&shm->ctl->barrier_count);
    return QCOLL_OK;
  }
  return wait_word(comm, &shm->ctl->barrier_count, target, describe_barrier,
                   &k);
}

/* ---- staging ------------------------------------------------------- */

const qcoll__shm_layout_t *qcoll__shm_layout(qcoll__ctx_t *comm) {
  return &comm->shm->layout;
}

uint8_t *qcoll__shm_stage(qcoll__ctx_t *comm) {
  qcoll__shm_t *shm = comm->shm;
  return shm->stage +
         (size_t)shm->parity * (size_t)shm->n * shm->layout.slot_bytes;
}

qcoll_status_t qcoll__shm_phase_sync(qcoll__ctx_t *comm) {
  qcoll_status_t st = qcoll__shm_barrier(comm);
  comm->shm->parity ^= 1u;
  return st;
}

void qcoll__shm_set_activity(qcoll__ctx_t *comm, const char *name) {
  if (comm->shm) comm->shm->activity = name;
}

const char *qcoll__shm_name(qcoll__ctx_t *comm) {
  return comm->shm ? comm->shm->name : "";
}

/* ---- send / recv --------------------------------------------------- */

static shm_pair_t *pair_at(qcoll__shm_t *shm, int src, int dst) {
  return (shm_pair_t *)(shm->pairs +
                        ((size_t)src * (size_t)shm->n + (size_t)dst) *
                            shm->pair_stride);
}

typedef struct p2p_what {
  bool sending;
  int peer;
  uint32_t piece;
  size_t bytes;
} p2p_what_t;

static void describe_p2p(qcoll__ctx_t *comm, const void *ctx, char *buf,
                         size_t len) {
  const p2p_what_t *w = ctx;
  if (w->sending)
    snprintf(buf, len,
             "rank %d to take piece %u of a %zu-byte message from its buffer "
             "(rank %d has not called recv, or not enough)",
             global_rank(comm, w->peer), w->piece, w->bytes,
             global_rank(comm, w->peer));
  else
    snprintf(buf, len,
             "piece %u of a %zu-byte message from rank %d (rank %d has not "
             "called send, or not enough)",
             w->piece, w->bytes, global_rank(comm, w->peer),
             global_rank(comm, w->peer));
}

qcoll_status_t qcoll__shm_send(qcoll__ctx_t *comm, int peer, const void *buf,
                               size_t bytes) {
  qcoll__shm_t *shm = comm->shm;
  shm_pair_t *pair = pair_at(shm, shm->me, peer);
  uint8_t *data = (uint8_t *)pair + PAIR_HEADER;
  size_t half = shm->layout.pair_bytes / 2;
  qcoll_status_t st = check_start(comm);
  if (st != QCOLL_OK) return st;
  for (size_t off = 0; off < bytes; off += half) {
    uint32_t seq = shm->send_seq[peer];
    /* At most two pieces in flight: piece seq reuses the half of seq-2. */
    p2p_what_t w = {true, peer, seq, bytes};
    st = wait_word(comm, &pair->acked, seq - 1, describe_p2p, &w);
    if (st != QCOLL_OK) return st;
    size_t len = QCOLL_MIN(half, bytes - off);
    memcpy(data + (seq & 1u) * half, (const uint8_t *)buf + off, len);
    pair->msg_bytes[seq & 1u] = bytes;
    post(shm, &pair->sent, seq + 1);
    shm->send_seq[peer] = seq + 1;
  }
  return QCOLL_OK;
}

qcoll_status_t qcoll__shm_recv(qcoll__ctx_t *comm, int peer, void *buf,
                               size_t bytes) {
  qcoll__shm_t *shm = comm->shm;
  shm_pair_t *pair = pair_at(shm, peer, shm->me);
  const uint8_t *data = (const uint8_t *)pair + PAIR_HEADER;
  size_t half = shm->layout.pair_bytes / 2;
  qcoll_status_t st = check_start(comm);
  if (st != QCOLL_OK) return st;
  for (size_t off = 0; off < bytes; off += half) {
    uint32_t seq = shm->recv_seq[peer];
    p2p_what_t w = {false, peer, seq, bytes};
    st = wait_word(comm, &pair->sent, seq + 1, describe_p2p, &w);
    if (st != QCOLL_OK) return st;
    uint64_t sent_bytes = pair->msg_bytes[seq & 1u];
    if (sent_bytes != bytes)
      return fail(comm, shm->me, ABORT_FAILED, QCOLL_ERR_MISMATCH,
                  "qcoll_recv: rank %d sent a message of %llu bytes but rank "
                  "%d receives %zu bytes (count x dtype size must match)",
                  global_rank(comm, peer), (unsigned long long)sent_bytes,
                  comm->rank, bytes);
    size_t len = QCOLL_MIN(half, bytes - off);
    memcpy((uint8_t *)buf + off, data + (seq & 1u) * half, len);
    post(shm, &pair->acked, seq + 1);
    shm->recv_seq[peer] = seq + 1;
  }
  return QCOLL_OK;
}

/* ---- setup --------------------------------------------------------- */

typedef struct plan {
  qcoll__shm_layout_t layout;
  size_t pair_stride, ranks_offset, stage_offset, pairs_offset, total;
} plan_t;

static bool plan_layout(const qcoll__config_t *config, int n, plan_t *p) {
  size_t nn = (size_t)n;
  size_t budget = config->shm_bytes;
  size_t slot = align_down(budget / 4 * 3 / (2 * nn), PAGE);
  /* Every rank gets at least one 64-byte sub-slot per peer (all-to-all and
   * reduce-scatter split a slot that way). */
  size_t slot_min = align_up(QCOLL_MAX((size_t)PAGE, 64 * nn), PAGE);
  slot = QCOLL_MIN(slot, SLOT_MAX_BYTES);
  slot = QCOLL_MAX(slot, slot_min);
  p->layout.slot_bytes = slot;
  p->layout.oneshot_bytes = QCOLL_MIN(config->shm_oneshot_bytes, slot);
  size_t per_pair = budget / 4 / (nn * nn);
  size_t pair =
      per_pair > PAIR_HEADER ? align_down(per_pair - PAIR_HEADER, 128) : 0;
  pair = QCOLL_MIN(pair, align_down(config->p2p_bytes, 128));
  p->layout.pair_bytes = QCOLL_MAX(pair, (size_t)PAIR_MIN_BYTES);
  p->pair_stride = PAIR_HEADER + p->layout.pair_bytes;

  size_t stage_bytes, pairs_bytes;
  p->ranks_offset = align_up(sizeof(shm_ctl_t), LINE);
  p->stage_offset = align_up(p->ranks_offset + nn * sizeof(shm_rank_t), PAGE);
  if (!qcoll__mul_size(2 * nn, slot, &stage_bytes) ||
      !qcoll__mul_size(nn * nn, p->pair_stride, &pairs_bytes))
    return false;
  p->pairs_offset = align_up(p->stage_offset + stage_bytes, PAGE);
  p->total = align_up(p->pairs_offset + pairs_bytes, PAGE);
  return true;
}

static void random_name(char *name, size_t len) {
  unsigned char r[16];
  if (qcoll__random_bytes(r, sizeof r) != QCOLL_OK) {
    /* getrandom failing is near impossible; O_EXCL still protects us. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    memcpy(r, &x, 8);
    memcpy(r + 8, &ts.tv_sec, 8);
  }
  int used = snprintf(name, len, "/qcoll-");
  for (size_t i = 0; i < sizeof r && (size_t)used + 2 < len; i++)
    used += snprintf(name + used, len - (size_t)used, "%02x", r[i]);
}

static qcoll_status_t map_fd(qcoll__ctx_t *comm, qcoll__shm_t *shm, int fd,
                             size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return qcoll__error(comm, QCOLL_ERR_SYSTEM,
                        "mmap of %zu bytes of shared memory %s failed: %s",
                        bytes, shm->name, strerror(errno));
  shm->base = p;
  shm->bytes = bytes;
  return QCOLL_OK;
}

static qcoll_status_t create_segment(qcoll__ctx_t *comm, qcoll__shm_t *shm,
                                     char *path, size_t path_len) {
  plan_t plan;
  if (!plan_layout(&comm->config, comm->local_size, &plan))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "host shared memory for %d local ranks overflows",
                        comm->local_size);
  random_name(shm->name, sizeof shm->name);
  int fd = memfd_create(shm->name + 1, MFD_CLOEXEC);
  if (fd < 0)
    return qcoll__error(comm, QCOLL_ERR_SYSTEM,
                        "memfd_create(%s) for host shared memory failed: %s",
                        shm->name, strerror(errno));
  snprintf(path, path_len, "/proc/%d/fd/%d", (int)getpid(), fd);
  qcoll_status_t st = QCOLL_OK;
  if (ftruncate(fd, (off_t)plan.total) != 0) {
    st = qcoll__error(comm, QCOLL_ERR_SYSTEM,
                      "ftruncate of shared memory %s to %zu bytes failed: %s",
                      shm->name, plan.total, strerror(errno));
    goto out;
  }
  int err = posix_fallocate(fd, 0, (off_t)plan.total);
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL && err != ENOSYS) {
    st = qcoll__error(comm, QCOLL_ERR_SYSTEM,
                      "cannot reserve %zu bytes of shared memory for %d local "
                      "ranks (%s): is /dev/shm too small? Lower "
                      "QCOLL_SHM_BYTES or QCOLL_P2P_BYTES",
                      plan.total, comm->local_size, strerror(err));
    goto out;
  }
  QCHECK(map_fd(comm, shm, fd, plan.total));
  shm_header_t *h = &((shm_ctl_t *)shm->base)->hdr;
  h->version = SHM_VERSION;
  h->nlocal = (uint32_t)comm->local_size;
  h->total_bytes = plan.total;
  h->slot_bytes = plan.layout.slot_bytes;
  h->oneshot_bytes = plan.layout.oneshot_bytes;
  h->pair_bytes = plan.layout.pair_bytes;
  h->pair_stride = plan.pair_stride;
  h->ranks_offset = plan.ranks_offset;
  h->stage_offset = plan.stage_offset;
  h->pairs_offset = plan.pairs_offset;
  h->magic = SHM_MAGIC;
out:
  if (st == QCOLL_OK)
    shm->creator_fd = fd;
  else
    close(fd);
  return st;
}

static qcoll_status_t open_segment(qcoll__ctx_t *comm, qcoll__shm_t *shm,
                                   const char *name, const char *path) {
  snprintf(shm->name, sizeof shm->name, "%s", name);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return qcoll__error(comm, QCOLL_ERR_SYSTEM,
                        "opening local rank 0's shared memory %s at %s failed: "
                        "%s (ranks of one host must run as the same user in "
                        "the same pid namespace, or set QCOLL_HOST_ID apart)",
                        shm->name, path, strerror(errno));
  struct stat sb;
  qcoll_status_t st = QCOLL_OK;
  if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(shm_ctl_t)) {
    st = qcoll__error(comm, QCOLL_ERR_SYSTEM,
                      "shared memory %s is missing or too small", shm->name);
    goto out;
  }
  QCHECK(map_fd(comm, shm, fd, (size_t)sb.st_size));
  const shm_header_t *h = &((shm_ctl_t *)shm->base)->hdr;
  if (h->magic != SHM_MAGIC || h->version != SHM_VERSION ||
      h->nlocal != (uint32_t)comm->local_size || h->total_bytes != shm->bytes) {
    st = qcoll__error(comm, QCOLL_ERR_INTERNAL,
                      "shared memory %s has an unexpected header (magic %llx, "
                      "version %u, %u ranks, %llu bytes; expected %d ranks)",
                      shm->name, (unsigned long long)h->magic, h->version,
                      h->nlocal, (unsigned long long)h->total_bytes,
                      comm->local_size);
    goto out;
  }
out:
  close(fd);
  return st;
}

static uint64_t pid_namespace(void) {
  struct stat sb;
  return stat("/proc/self/ns/pid", &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

#define YIELD_RANKS_PER_CPU 4

static poll_mode_t poll_mode(int local_size) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus <= 0 || local_size <= cpus) return POLL_BUSY;
  return local_size <= YIELD_RANKS_PER_CPU * cpus ? POLL_YIELD : POLL_NONE;
}

static double spin_seconds(const qcoll__config_t *config) {
  long long us = config->spin_us;
  return us > 0 ? (double)us * 1e-6 : 0;
}

/* Fill the process-local view from the (validated) header. */
static qcoll_status_t attach(qcoll__ctx_t *comm, qcoll__shm_t *shm) {
  const shm_header_t *h = &((shm_ctl_t *)shm->base)->hdr;
  shm->ctl = (shm_ctl_t *)shm->base;
  shm->ranks = (shm_rank_t *)(shm->base + h->ranks_offset);
  shm->stage = shm->base + h->stage_offset;
  shm->pairs = shm->base + h->pairs_offset;
  shm->pair_stride = h->pair_stride;
  shm->layout.slot_bytes = h->slot_bytes;
  shm->layout.oneshot_bytes = h->oneshot_bytes;
  shm->layout.pair_bytes = h->pair_bytes;
  shm->me = comm->local_rank;
  shm->n = comm->local_size;
  shm->my_pidns = pid_namespace();
  shm->spin_s = spin_seconds(&comm->config);
  shm->poll = poll_mode(shm->n);
  shm->send_seq = calloc((size_t)shm->n, sizeof *shm->send_seq);
  shm->recv_seq = calloc((size_t)shm->n, sizeof *shm->recv_seq);
  shm->pidfds = calloc((size_t)shm->n, sizeof *shm->pidfds);
  if (!shm->send_seq || !shm->recv_seq || !shm->pidfds)
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "cannot allocate shared-memory state for %d ranks",
                        shm->n);
  for (int l = 0; l < shm->n; l++) shm->pidfds[l].fd = -1;
  shm_rank_t *mine = &shm->ranks[shm->me];
  atomic_store(&mine->pidns, shm->my_pidns);
  atomic_store(&mine->pid, (int32_t)getpid());
  return QCOLL_OK;
}

/* After every local rank has attached: watch the peers' processes. */
static void watch_peers(qcoll__shm_t *shm) {
  for (int l = 0; l < shm->n; l++) {
    shm->pidfds[l].fd = -1;
    shm->pidfds[l].events = POLLIN;
    if (!peer_watchable(shm, l)) continue;
#ifdef SYS_pidfd_open
    int fd =
        (int)syscall(SYS_pidfd_open, (pid_t)atomic_load(&shm->ranks[l].pid), 0);
    if (fd >= 0) {
      (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
      shm->pidfds[l].fd = fd;
    }
#endif
  }
}

static void free_shm(qcoll__shm_t *shm) {
  if (!shm) return;
  if (shm->pidfds)
    for (int l = 0; l < shm->n; l++)
      if (shm->pidfds[l].fd >= 0) close(shm->pidfds[l].fd);
  if (shm->base) munmap(shm->base, shm->bytes);
  free(shm->pidfds);
  free(shm->send_seq);
  free(shm->recv_seq);
  free(shm);
}

/* Every local rank has mapped the segment (or failed): the creator's
 * descriptor, the only way in, can go. */
static void release_creator_fd(qcoll__shm_t *shm) {
  if (!shm || shm->creator_fd < 0) return;
  close(shm->creator_fd);
  shm->creator_fd = -1;
}

/* What each rank tells the others during setup (bootstrap all-gather). */
typedef struct offer {
  int32_t ok;
  int32_t unused;
  char name[NAME_MAX_LEN];
  char path[NAME_MAX_LEN];
} offer_t;

qcoll_status_t qcoll__shm_init(qcoll__ctx_t *comm) {
  qcoll_status_t st = QCOLL_OK, local = QCOLL_OK;
  qcoll__shm_t *shm = calloc(1, sizeof *shm);
  if (shm) shm->creator_fd = -1;
  offer_t *offers = calloc((size_t)comm->nranks, sizeof *offers);
  if (!shm || !offers) {
    /* Without offers this rank cannot take part in the exchange; the
     * peers' bootstrap then fails or times out.  Otherwise it still takes
     * part, so the peers fail cleanly. */
    local = qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                         "cannot allocate shared-memory state");
  }
  offer_t *mine = offers ? &offers[comm->rank] : NULL;
  bool creator = comm->local_rank == 0;

  if (local == QCOLL_OK && creator) {
    local = create_segment(comm, shm, mine->path, sizeof mine->path);
    mine->ok = local == QCOLL_OK;
    snprintf(mine->name, sizeof mine->name, "%s", shm->name);
  }
  if (!offers) { /* cannot even exchange; peers time out */
    release_creator_fd(shm);
    free_shm(shm);
    return local;
  }
  QCHECK(qcoll__bootstrap_allgather(comm->bootstrap, offers, sizeof *offers));
  if (local == QCOLL_OK && !creator) {
    const offer_t *o = &offers[comm->local_ranks[0]];
    if (o->ok)
      local = open_segment(comm, shm, o->name, o->path);
    else
      local = qcoll__error(comm, QCOLL_ERR_SYSTEM,
                           "rank %d could not create the host's shared "
                           "memory (see its error)",
                           comm->local_ranks[0]);
  }
  if (local == QCOLL_OK) local = attach(comm, shm);

  /* Second exchange: everyone has mapped the segment (or failed), so the
   * name can go. */
  memset(offers, 0, (size_t)comm->nranks * sizeof *offers);
  offers[comm->rank].ok = local == QCOLL_OK;
  st = qcoll__bootstrap_allgather(comm->bootstrap, offers, sizeof *offers);
  release_creator_fd(shm);
  if (st != QCOLL_OK) goto out;
  if (local != QCOLL_OK) {
    st = local;
    goto out;
  }
  for (int r = 0; r < comm->nranks; r++) {
    if (offers[r].ok) continue;
    st = qcoll__error(comm, QCOLL_ERR_SYSTEM,
                      "rank %d could not set up host shared memory (see its "
                      "error)",
                      r);
    goto out;
  }
  watch_peers(shm);
  QLOG_INFO(comm, SHM,
            "shared memory %s: %zu bytes, %d local ranks, slots of %zu bytes, "
            "one-shot up to %zu bytes, pair buffers of %zu bytes, spin %.0f us",
            shm->name, shm->bytes, shm->n, shm->layout.slot_bytes,
            shm->layout.oneshot_bytes, shm->layout.pair_bytes,
            shm->spin_s * 1e6);
  comm->shm = shm;
  shm = NULL;
out:
  if (st == QCOLL_OK && local != QCOLL_OK) st = local;
  release_creator_fd(shm);
  free_shm(shm);
  free(offers);
  return st;
}

void qcoll__shm_destroy(qcoll__ctx_t *comm) {
  qcoll__shm_t *shm = comm->shm;
  if (!shm) return;
  /* Core's destroy has already synchronised the ranks when the
   * communicator was healthy.  Mark this rank gone, so a peer that still
   * waits on it fails with a clear reason instead of timing out. */
  atomic_store_explicit(&shm->ranks[shm->me].left, 1, memory_order_release);
  comm->shm = NULL;
  free_shm(shm);
}
