/*
 * The rank side of the bootstrap: join the rendezvous, build the ring, and
 * run all-gather, broadcast and barrier over it.
 *
 * Join: open a ring listening socket (not for a world of one), connect to
 * the root (retrying until the deadline: the root may start after us),
 * send a hello with the secret, rank, world size and the ring address, and
 * wait timeout + QCOLL__BOOT_GRACE_S for the root's answer: the ring
 * address of rank+1, or an error that names the problem.
 *
 * Ring: connect to rank+1 and send it an authenticated ring hello, then
 * accept rank-1 on the listening socket (any other connection there is
 * dropped like the root drops intruders).  The connect completes through
 * the listen backlog, so doing the two in this order cannot deadlock.
 *
 * Collectives send a small header before each block (kind, block index or
 * root, bytes), so ranks that disagree about the call get a mismatch error
 * instead of misread bytes.  Sends and receives of a step progress together
 * in one poll loop, so large blocks cannot deadlock on full socket buffers.
 *
 * Failures: a rank whose ring fails (a timeout, an abort, a peer that
 * vanished or reported) first sends a short failure report to both
 * neighbours, best effort and bounded (RING_REPORT_SEND_S), and then shuts
 * its sockets.  Forwards, the report takes the place of the next data
 * header; backwards, it travels on the connection from rank-1, which
 * carries nothing else that way.  A rank that finds a report fails with
 * its text and passes it on unchanged, so the first failure travels around
 * the ring, in both directions, instead of each rank seeing only its
 * neighbour's connection close and blaming it.  A rank looks for a report
 * from rank+1 before every collective and whenever a send to rank+1 fails.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "message.h"
#include "socket.h"

/* Unauthenticated connections a rank's ring socket holds at once (a new one
 * beyond them pushes out the one that has waited longest). */
#define RING_PENDING_MAX 64
/* How long a failing rank tries to hand its report to neighbours whose
 * socket buffers are full: it is about to give up on them anyway. */
#define RING_REPORT_SEND_S 0.1
/* How long a rank waits for the rest of a report whose first bytes came
 * (the sender wrote it in one go just before it shut the connection). */
#define RING_REPORT_READ_S 0.5

struct qcoll__bootstrap {
  qcoll__ctx_t *comm;
  int rank, nranks;
  int next_fd, prev_fd; /* -1 in a world of one */
  int abort_pipe[2];    /* a byte in it unblocks every wait */
  atomic_bool aborted;
  bool broken;  /* a collective failed: the ring's byte stream is lost */
  bool ring_up; /* both ring connections are authenticated */
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];

  /* One writer at a time on the ring sockets: the thread in a collective
   * holds the lock throughout; abort only tries it (it never blocks) and
   * leaves the report to the collective when that holds it.  The fields
   * below are used under it. */
  pthread_mutex_t send_lock;
  bool reported;       /* the failure report went out (at most once) */
  bool next_mid_frame; /* a data frame to rank+1 was cut short */
  bool report_set;     /* report_* hold what to tell the neighbours */
  int report_reporter; /* the rank that failed first */
  int report_from;     /* the neighbour the report came from; -1: ours */
  char report_text[QCOLL__BOOT_RING_ERRTEXT_MAX + 1];
};

static qcoll__io_t bs_io(const qcoll__bootstrap_t *bs) {
  qcoll__io_t io = {bs->comm, bs->abort_pipe[0]};
  return io;
}

static const char *io_reason(qcoll__io_result_t r, int err) {
  switch (r) {
    case QCOLL__IO_OK: return "ok";
    case QCOLL__IO_TIMEOUT: return "timed out";
    case QCOLL__IO_ABORTED: return "aborted";
    case QCOLL__IO_CLOSED: return "connection closed";
    case QCOLL__IO_ERROR: return err ? strerror(err) : "socket error";
  }
  return "?";
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void bs_free(qcoll__bootstrap_t *bs) {
  if (!bs) return;
  close_fd(&bs->next_fd);
  close_fd(&bs->prev_fd);
  close_fd(&bs->abort_pipe[0]);
  close_fd(&bs->abort_pipe[1]);
  pthread_mutex_destroy(&bs->send_lock);
  free(bs);
}

static qcoll__bootstrap_t *bs_new(qcoll__ctx_t *comm) {
  qcoll__bootstrap_t *bs = calloc(1, sizeof *bs);
  if (!bs) return NULL;
  bs->comm = comm;
  bs->rank = comm->rank;
  bs->nranks = comm->nranks;
  bs->next_fd = bs->prev_fd = -1;
  bs->report_from = -1;
  atomic_init(&bs->aborted, false);
  pthread_mutex_init(&bs->send_lock, NULL);
  if (pipe2(bs->abort_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    bs->abort_pipe[0] = bs->abort_pipe[1] = -1;
    bs_free(bs);
    return NULL;
  }
  return bs;
}

/* ---- joining the rendezvous ----------------------------------------- */

typedef struct join {
  qcoll__ctx_t *comm;
  qcoll__io_t io;
  qcoll__boot_id_t id;
  char root_str[QCOLL__ADDRSTR_MAX];
  int root_fd;
  int listen_fd;
  qcoll__boot_addr_t listen; /* advertised ring address */
  qcoll__boot_addr_t next;   /* where rank+1 listens, once the root answered */
  qcoll__bootstrap_t *bs;
  qcoll__pending_pool_t pool; /* the ring socket's unauthenticated queue */
} join_t;

static qcoll_status_t join_error(join_t *j, qcoll__io_result_t r, int err,
                                 const char *doing, double waited) {
  qcoll__ctx_t *comm = j->comm;
  switch (r) {
    case QCOLL__IO_ABORTED:
      return qcoll__error(comm, QCOLL_ERR_ABORTED,
                          "bootstrap: aborted while %s", doing);
    case QCOLL__IO_TIMEOUT:
      return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                          "bootstrap: timed out after %.1f s %s (root %s; "
                          "QCOLL_TIMEOUT)%s%s",
                          waited, doing, j->root_str, err ? ": " : "",
                          err ? strerror(err) : "");
    case QCOLL__IO_CLOSED:
      return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                          "bootstrap: the root %s closed the connection while "
                          "%s (a wrong secret is refused: is the unique id "
                          "from this job?)",
                          j->root_str, doing);
    default:
      return qcoll__error(comm, QCOLL_ERR_SYSTEM, "bootstrap: %s %s: %s", doing,
                          j->root_str, io_reason(r, err));
  }
}

/* The ring address: our end of the connection to the root is an address
 * the network routes, and the listening socket has the port. */
static qcoll_status_t join_listen_address(join_t *j, int port) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(j->root_fd, (struct sockaddr *)&ss, &len) != 0 ||
      !qcoll__addr_from_sockaddr((struct sockaddr *)&ss, &j->listen))
    return qcoll__error(j->comm, QCOLL_ERR_SYSTEM,
                        "bootstrap: cannot read the local address of the "
                        "connection to the root: %s",
                        strerror(errno));
  j->listen.port = (uint16_t)port;
  return QCOLL_OK;
}

static qcoll_status_t join_connect(join_t *j, int *listen_port) {
  qcoll__ctx_t *comm = j->comm;
  if (comm->nranks != 1) {
    int err =
        qcoll__sock_listen(j->id.root.family, 0, &j->listen_fd, listen_port);
    if (err != 0)
      return qcoll__error(comm, QCOLL_ERR_SYSTEM,
                          "bootstrap: cannot open the ring listening socket: "
                          "%s",
                          strerror(err));
  }
  int err = 0;
  qcoll__io_result_t r = qcoll__io_connect(
      &j->io, &j->id.root, qcoll__ctx_deadline(comm), true, &j->root_fd, &err);
  if (r != QCOLL__IO_OK)
    return join_error(j, r, err, "connecting to the root", comm->timeout_s);
  return QCOLL_OK;
}

/* The deadline the hello tells the root, in ms (at least 1: 0 means none). */
static uint32_t hello_timeout_ms(double timeout_s) {
  double ms = timeout_s * 1000.0;
  if (ms >= (double)UINT32_MAX) return UINT32_MAX;
  return ms < 1.0 ? 1u : (uint32_t)ms;
}

static qcoll_status_t join_send_hello(join_t *j) {
  qcoll__ctx_t *comm = j->comm;
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, j->id.secret, sizeof h.secret);
  h.rank = comm->rank;
  h.nranks = comm->nranks;
  h.listen = j->listen;
  h.timeout_ms = hello_timeout_ms(comm->timeout_s);
  uint8_t buf[QCOLL__BOOT_HELLO_BYTES];
  size_t n = qcoll__msg_encode_hello(&h, buf, sizeof buf);
  int err = 0;
  qcoll__io_result_t r = qcoll__io_send_all(&j->io, j->root_fd, buf, n,
                                            qcoll__ctx_deadline(comm), &err);
  if (r != QCOLL__IO_OK)
    return join_error(j, r, err, "sending the hello to the root",
                      comm->timeout_s);
  return QCOLL_OK;
}

static qcoll__io_result_t ring_queue_step(qcoll__bootstrap_t *bs,
                                          qcoll__pending_pool_t *pool,
                                          int listen_fd, int other_fd,
                                          qcoll__deadline_t until,
                                          bool *other_ready);

/* Wait until the root's answer starts to arrive.  The ring socket's queue
 * keeps moving meanwhile: a connection gets its hello deadline from when it
 * came, not from when the root answers, and the kernel's backlog cannot
 * fill up during a long rendezvous.  (rank-1 may even authenticate now.) */
static qcoll__io_result_t join_wait_root(join_t *j,
                                         qcoll__deadline_t deadline) {
  for (;;) {
    bool ready = false;
    qcoll__io_result_t r = ring_queue_step(j->bs, &j->pool, j->listen_fd,
                                           j->root_fd, deadline, &ready);
    if (r == QCOLL__IO_ABORTED || r == QCOLL__IO_ERROR) return r;
    if (ready) return QCOLL__IO_OK;
    if (qcoll__deadline_passed(deadline)) return QCOLL__IO_TIMEOUT;
  }
}

static qcoll_status_t join_read_reply(join_t *j) {
  qcoll__ctx_t *comm = j->comm;
  double wait_s = comm->timeout_s + QCOLL__BOOT_GRACE_S;
  qcoll__deadline_t deadline = qcoll__deadline_in(wait_s);
  const char *doing = "waiting for the root's answer";
  uint8_t head[4];
  int err = 0;
  qcoll__io_result_t r = QCOLL__IO_OK;
  if (j->listen_fd >= 0) r = join_wait_root(j, deadline);
  if (r == QCOLL__IO_ERROR) err = errno;
  if (r == QCOLL__IO_OK)
    r = qcoll__io_recv_all(&j->io, j->root_fd, head, 4, deadline, &err);
  if (r != QCOLL__IO_OK) return join_error(j, r, err, doing, wait_s);

  /* Every answer has a fixed bound: the root cannot make us allocate. */
  size_t frame = 0;
  char why[QCOLL__BOOT_WHY_MAX];
  uint8_t buf[QCOLL__BOOT_REPLY_MAX_BYTES];
  if (qcoll__msg_peek_length(head, 4, QCOLL__BOOT_ERROR_MIN_BYTES,
                             QCOLL__BOOT_REPLY_MAX_BYTES, &frame,
                             why) != QCOLL__MSG_OK)
    return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap: the root %s answered with a malformed "
                        "message: %s",
                        j->root_str, why);
  memcpy(buf, head, 4);
  r = qcoll__io_recv_all(&j->io, j->root_fd, buf + 4, frame - 4, deadline,
                         &err);
  if (r != QCOLL__IO_OK) return join_error(j, r, err, doing, wait_s);
  qcoll__boot_reply_t reply;
  if (qcoll__msg_decode_reply(buf, frame, comm->rank, comm->nranks, &reply,
                              why) != QCOLL__MSG_OK)
    return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap: the root %s answered with a malformed "
                        "message: %s",
                        j->root_str, why);
  if (!qcoll__secret_equal(reply.secret, j->id.secret))
    return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap: the root %s does not know this job's "
                        "secret",
                        j->root_str);
  if (reply.type == QCOLL__BOOT_MSG_ERROR)
    return qcoll__error(comm, (qcoll_status_t)reply.status,
                        "bootstrap: rendezvous at %s failed: %s", j->root_str,
                        reply.text);
  j->next = reply.next;
  return QCOLL_OK;
}

/* ---- the ring ----------------------------------------------------- */

static qcoll_status_t ring_connect_next(qcoll__bootstrap_t *bs,
                                        const qcoll__boot_addr_t *addr) {
  qcoll__ctx_t *comm = bs->comm;
  qcoll__io_t io = bs_io(bs);
  int next = (bs->rank + 1) % bs->nranks, err = 0;
  char where[QCOLL__ADDRSTR_MAX];
  qcoll__addr_format(addr, where, sizeof where);
  qcoll__deadline_t deadline = qcoll__ctx_deadline(comm);
  /* The peer listened before it said hello to the root, so a refusal means
   * it is gone: no retry. */
  qcoll__io_result_t r =
      qcoll__io_connect(&io, addr, deadline, false, &bs->next_fd, &err);
  if (r == QCOLL__IO_OK) {
    qcoll__boot_ring_hello_t h;
    memcpy(h.secret, bs->secret, sizeof h.secret);
    h.rank = bs->rank;
    h.nranks = bs->nranks;
    uint8_t buf[QCOLL__BOOT_RING_HELLO_BYTES];
    size_t n = qcoll__msg_encode_ring_hello(&h, buf, sizeof buf);
    r = qcoll__io_send_all(&io, bs->next_fd, buf, n, deadline, &err);
  }
  if (r == QCOLL__IO_OK) return QCOLL_OK;
  if (r == QCOLL__IO_ABORTED)
    return qcoll__error(comm, QCOLL_ERR_ABORTED,
                        "bootstrap: aborted while connecting to rank %d", next);
  if (r == QCOLL__IO_TIMEOUT)
    return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                        "bootstrap: could not connect to rank %d at %s within "
                        "%.1f s (QCOLL_TIMEOUT)",
                        next, where, comm->timeout_s);
  return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                      "bootstrap: could not connect to rank %d at %s: %s", next,
                      where, io_reason(r, err));
}

/* Is this ring hello from our predecessor in this job?  Returns false with
 * the reason otherwise. */
static bool ring_hello_ok(const qcoll__bootstrap_t *bs,
                          const qcoll__pending_t *p, char *why,
                          size_t why_size) {
  qcoll__boot_ring_hello_t h;
  char msg[QCOLL__BOOT_WHY_MAX];
  int prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
  if (qcoll__msg_decode_ring_hello(p->buf, p->have, &h, msg) != QCOLL__MSG_OK) {
    snprintf(why, why_size, "%s", msg);
    return false;
  }
  if (!qcoll__secret_equal(h.secret, bs->secret)) {
    snprintf(why, why_size, "wrong secret");
    return false;
  }
  if (h.rank != prev || h.nranks != bs->nranks) {
    snprintf(why, why_size, "says it is rank %d of %d, expected rank %d of %d",
             h.rank, h.nranks, prev, bs->nranks);
    return false;
  }
  return true;
}

static void ring_pending_drop(void *ctx, const qcoll__pending_t *p,
                              const char *why) {
  const qcoll__bootstrap_t *bs = ctx;
  QLOG_WARN(bs->comm, BOOT,
            "bootstrap: ring socket dropped connection from %s: %s", p->peer,
            why);
}

/* A complete hello: rank-1's becomes the ring's connection, any other is
 * dropped. */
static void ring_pending_done(void *ctx, qcoll__pending_t *p) {
  qcoll__bootstrap_t *bs = ctx;
  char why[QCOLL__BOOT_WHY_MAX + 64];
  if (bs->prev_fd < 0 && ring_hello_ok(bs, p, why, sizeof why)) {
    bs->prev_fd = p->fd;
    return;
  }
  if (bs->prev_fd >= 0)
    snprintf(why, sizeof why, "rank %d is already here",
             (bs->rank - 1 + bs->nranks) % bs->nranks);
  ring_pending_drop(bs, p, why);
  close(p->fd);
}

/* One wait of the ring socket's queue: poll listen_fd, the pending
 * connections and other_fd (when not -1) until one has news or `until`
 * (or a pending deadline) passes, then read what came and accept what
 * waits.  *other_ready tells whether other_fd became readable. */
static qcoll__io_result_t ring_queue_step(qcoll__bootstrap_t *bs,
                                          qcoll__pending_pool_t *pool,
                                          int listen_fd, int other_fd,
                                          qcoll__deadline_t until,
                                          bool *other_ready) {
  const qcoll__pending_handler_t h = {ring_pending_done, ring_pending_drop, bs};
  qcoll__io_t io = bs_io(bs);
  struct pollfd fds[2 + RING_PENDING_MAX + 1];
  nfds_t n = 0;
  fds[n++] = (struct pollfd){other_fd, POLLIN, 0}; /* -1: ignored by poll */
  fds[n++] = (struct pollfd){listen_fd, POLLIN, 0};
  for (int i = 0; i < pool->count; i++)
    fds[n++] = (struct pollfd){pool->items[i].fd, POLLIN, 0};
  qcoll__deadline_t wake = {qcoll__pending_next_deadline(pool, until.at)};
  qcoll__io_result_t r = qcoll__io_poll(&io, fds, n, wake);
  if (r == QCOLL__IO_ABORTED || r == QCOLL__IO_ERROR) return r;
  if (r != QCOLL__IO_OK)
    for (nfds_t i = 0; i < n; i++) fds[i].revents = 0;
  *other_ready = other_fd >= 0 && fds[0].revents;
  qcoll__pending_service(pool, fds + 2, &h);
  if (bs->prev_fd < 0 && fds[1].revents) {
    int err = qcoll__pending_accept(pool, listen_fd, &h);
    if (err != 0)
      QLOG_WARN(bs->comm, BOOT, "bootstrap: ring socket accept failed: %s",
                strerror(err));
  }
  return QCOLL__IO_OK;
}

/* Accept connections on listen_fd until rank-1 has authenticated.  Others
 * (stalled, garbage, wrong secret) only take a slot of the pending pool,
 * each for at most the hello deadline, and a full pool drops the oldest of
 * them, so no flood can keep rank-1 out or hold it up. */
static qcoll_status_t ring_accept_prev(qcoll__bootstrap_t *bs,
                                       qcoll__pending_pool_t *pool,
                                       int listen_fd) {
  qcoll__ctx_t *comm = bs->comm;
  int prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
  qcoll__deadline_t deadline = qcoll__ctx_deadline(comm);
  while (bs->prev_fd < 0) {
    bool unused = false;
    qcoll__io_result_t r =
        ring_queue_step(bs, pool, listen_fd, -1, deadline, &unused);
    if (r == QCOLL__IO_ABORTED)
      return qcoll__error(comm, QCOLL_ERR_ABORTED,
                          "bootstrap: aborted while waiting for rank %d to "
                          "connect",
                          prev);
    if (r == QCOLL__IO_ERROR)
      return qcoll__error(comm, QCOLL_ERR_SYSTEM, "bootstrap: poll failed: %s",
                          strerror(errno));
    if (bs->prev_fd < 0 && qcoll__deadline_passed(deadline))
      return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                          "bootstrap: rank %d did not connect within %.1f s "
                          "(QCOLL_TIMEOUT)",
                          prev, comm->timeout_s);
  }
  return QCOLL_OK;
}

static qcoll_status_t ring_build(qcoll__bootstrap_t *bs, join_t *j) {
  qcoll_status_t st = ring_connect_next(bs, &j->next);
  if (st != QCOLL_OK) return st;
  return ring_accept_prev(bs, &j->pool, j->listen_fd);
}

qcoll_status_t qcoll__bootstrap_init(qcoll__ctx_t *comm,
                                     const qcoll_unique_id_t *id,
                                     qcoll__bootstrap_t **out) {
  if (!comm || !id || !out)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_init: %s is NULL",
                        !comm ? "comm"
                        : !id ? "id"
                              : "out");
  *out = NULL;
  if (!(comm->timeout_s > 0))
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: timeout %g s is not positive",
                        comm->timeout_s);
  join_t j;
  memset(&j, 0, sizeof j);
  j.comm = comm;
  j.root_fd = j.listen_fd = -1;
  char why[QCOLL__BOOT_WHY_MAX];
  if (qcoll__id_decode(id, &j.id, why) != QCOLL__MSG_OK)
    return qcoll__error(comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: the unique id is not valid: %s", why);
  qcoll__addr_format(&j.id.root, j.root_str, sizeof j.root_str);

  qcoll_status_t st = QCOLL_OK;
  qcoll__bootstrap_t *bs = bs_new(comm);
  if (!bs)
    return qcoll__error(comm, QCOLL_ERR_SYSTEM,
                        "bootstrap: cannot allocate its state or abort pipe: "
                        "%s",
                        strerror(errno));
  memcpy(bs->secret, j.id.secret, sizeof bs->secret);
  j.io = bs_io(bs);
  j.bs = bs;
  double hello_s = QCOLL_MIN(comm->timeout_s, QCOLL__BOOT_HELLO_DEADLINE_S);
  if (comm->nranks > 1 &&
      !qcoll__pending_pool_init(&j.pool, RING_PENDING_MAX,
                                QCOLL__BOOT_RING_HELLO_BYTES, hello_s)) {
    bs_free(bs);
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "bootstrap: cannot allocate the ring accept state");
  }
  int listen_port = 0;
  QCHECK(join_connect(&j, &listen_port));
  if (comm->nranks != 1) QCHECK(join_listen_address(&j, listen_port));
  QCHECK(join_send_hello(&j));
  QCHECK(join_read_reply(&j));
  close_fd(&j.root_fd);
  if (bs->nranks > 1) {
    QCHECK(ring_build(bs, &j));
    bs->ring_up = true;
  }
  QLOG_INFO(comm, BOOT, "bootstrap: rank %d of %d joined through root %s",
            comm->rank, comm->nranks, j.root_str);
out:
  if (j.pool.items) qcoll__pending_pool_free(&j.pool);
  close_fd(&j.root_fd);
  close_fd(&j.listen_fd);
  if (st != QCOLL_OK) {
    bs_free(bs);
    return st;
  }
  *out = bs;
  return QCOLL_OK;
}

/* ---- failure reports -------------------------------------------------- */

static int next_rank(const qcoll__bootstrap_t *bs) {
  return (bs->rank + 1) % bs->nranks;
}

static int prev_rank(const qcoll__bootstrap_t *bs) {
  return (bs->rank - 1 + bs->nranks) % bs->nranks;
}

static void copy_last_error(qcoll__ctx_t *comm, char *out, size_t n) {
  pthread_mutex_lock(&comm->error_lock);
  snprintf(out, n, "%s", comm->last_error);
  pthread_mutex_unlock(&comm->error_lock);
}

/* What this rank will tell its neighbours: its own reason (the first one
 * noted wins).  Under send_lock. */
static void note_failure(qcoll__bootstrap_t *bs, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_failure(qcoll__bootstrap_t *bs, const char *fmt, ...) {
  if (bs->report_set) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(bs->report_text, sizeof bs->report_text, fmt, ap);
  va_end(ap);
  bs->report_set = true;
  bs->report_reporter = bs->rank;
  bs->report_from = -1;
}

/* ... or a report that neighbour `from` sent, passed on unchanged. */
static void note_report(qcoll__bootstrap_t *bs,
                        const qcoll__boot_ring_error_t *r, int from) {
  if (bs->report_set) return;
  snprintf(bs->report_text, sizeof bs->report_text, "%s", r->text);
  bs->report_set = true;
  bs->report_reporter = r->reporter;
  bs->report_from = from;
}

/* Write frame to each of fds[0..2) (-1: skip), giving up on what does not
 * fit within wait_s (0: one attempt each, no waiting).  No abort check:
 * this runs because of one. */
static void send_report(const int fds[2], const uint8_t *frame, size_t len,
                        double wait_s) {
  size_t off[2] = {fds[0] < 0 ? len : 0, fds[1] < 0 ? len : 0};
  qcoll__deadline_t deadline = qcoll__deadline_in(wait_s);
  for (;;) {
    struct pollfd pfd[2];
    nfds_t np = 0;
    for (int i = 0; i < 2; i++) {
      while (off[i] < len) {
        ssize_t k = send(fds[i], frame + off[i], len - off[i],
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
          off[i] += (size_t)k;
          continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          pfd[np++] = (struct pollfd){fds[i], POLLOUT, 0};
        } else {
          off[i] = len; /* the peer is gone: nobody to tell */
        }
        break;
      }
    }
    double left = qcoll__deadline_left(deadline);
    if (np == 0 || left <= 0) return;
    int ms = (int)(left * 1000.0) + 1;
    if (poll(pfd, np, ms) < 0 && errno != EINTR) return;
  }
}

/* Send the failure report (once) to both neighbours, except the one it came
 * from, then shut the ring: the byte stream cannot be trusted any more, and
 * neighbours blocked on us learn at once that we are gone.  shutdown (not
 * close) keeps the fds valid for waits still in progress.  Under send_lock. */
static void ring_report_and_shut(qcoll__bootstrap_t *bs, double wait_s) {
  if (bs->ring_up && !bs->reported && bs->report_set) {
    bs->reported = true;
    uint8_t frame[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
    size_t len = qcoll__msg_encode_ring_error(
        bs->report_reporter, bs->report_text, frame, sizeof frame);
    /* Forwards only at a frame boundary: after a data frame cut short,
     * rank+1 would read the report as payload. */
    int fds[2] = {bs->next_mid_frame || bs->report_from == next_rank(bs)
                      ? -1
                      : bs->next_fd,
                  bs->report_from == prev_rank(bs) ? -1 : bs->prev_fd};
    if (len) send_report(fds, frame, len, wait_s);
  }
  if (bs->next_fd >= 0) shutdown(bs->next_fd, SHUT_RDWR);
  if (bs->prev_fd >= 0) shutdown(bs->prev_fd, SHUT_RDWR);
}

/* Under send_lock. */
static void report_abort(qcoll__bootstrap_t *bs, double wait_s) {
  note_failure(bs, "rank %d aborted", bs->rank);
  ring_report_and_shut(bs, wait_s);
}

/* After a failure: report, shut, and mark the communicator broken. */
static qcoll_status_t ring_failed(qcoll__bootstrap_t *bs, qcoll_status_t st) {
  bs->broken = true;
  if (!bs->report_set) {
    char last[QCOLL_ERRMSG_MAX];
    copy_last_error(bs->comm, last, sizeof last);
    note_failure(bs, "rank %d: %s", bs->rank, last);
  }
  ring_report_and_shut(bs, RING_REPORT_SEND_S);
  if (st != QCOLL_ERR_ABORTED) qcoll__ctx_mark_broken(bs->comm);
  return st;
}

/* A failure report from neighbour `peer` on fd, whose first `have` bytes
 * are in buf (room for the largest report).  Reads the rest within
 * RING_REPORT_READ_S and fails with its text; or says why it could not. */
static qcoll_status_t take_report(qcoll__bootstrap_t *bs, int fd, int peer,
                                  uint8_t *buf, size_t have, const char *what) {
  qcoll__ctx_t *comm = bs->comm;
  qcoll__io_t io = bs_io(bs);
  qcoll__deadline_t deadline = qcoll__deadline_in(RING_REPORT_READ_S);
  const size_t hdr = QCOLL__BOOT_RING_ERROR_MIN_BYTES;
  char why[QCOLL__BOOT_WHY_MAX];
  size_t frame = 0;
  int err = 0;
  qcoll__io_result_t r = QCOLL__IO_OK;
  if (have < hdr)
    r = qcoll__io_recv_all(&io, fd, buf + have, hdr - have, deadline, &err);
  if (r == QCOLL__IO_OK) {
    if (qcoll__msg_peek_ring_error(buf, hdr, &frame, why) != QCOLL__MSG_OK)
      return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                          "bootstrap %s: rank %d sent a malformed failure "
                          "report: %s",
                          what, peer, why);
    r = qcoll__io_recv_all(&io, fd, buf + hdr, frame - hdr, deadline, &err);
  }
  if (r == QCOLL__IO_ABORTED) {
    note_failure(bs, "rank %d aborted", bs->rank);
    return qcoll__error(comm, QCOLL_ERR_ABORTED, "bootstrap %s: aborted", what);
  }
  if (r != QCOLL__IO_OK)
    return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                        "bootstrap %s: rank %d failed, and its failure report "
                        "was cut short: %s",
                        what, peer, io_reason(r, err));
  qcoll__boot_ring_error_t rep;
  if (qcoll__msg_decode_ring_error(buf, frame, &rep, why) != QCOLL__MSG_OK)
    return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap %s: rank %d sent a malformed failure "
                        "report: %s",
                        what, peer, why);
  if (rep.reporter >= bs->nranks)
    return qcoll__error(comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap %s: rank %d sent a failure report from rank "
                        "%d of a world of %d",
                        what, peer, rep.reporter, bs->nranks);
  note_report(bs, &rep, peer);
  char via[48] = "";
  if (rep.reporter != peer)
    snprintf(via, sizeof via, " (passed on by rank %d)", peer);
  return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                      "bootstrap %s: rank %d failed: %s%s", what, rep.reporter,
                      rep.text, via);
}

/* Has rank+1 written to us?  It only ever does so to report a failure. */
static bool back_report_waiting(const qcoll__bootstrap_t *bs) {
  uint8_t b;
  ssize_t k;
  do k = recv(bs->next_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  while (k < 0 && errno == EINTR);
  return k > 0;
}

static qcoll_status_t take_back_report(qcoll__bootstrap_t *bs,
                                       const char *what) {
  uint8_t buf[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
  return take_report(bs, bs->next_fd, next_rank(bs), buf, 0, what);
}

/* ---- collectives over the ring --------------------------------------- */

static qcoll_status_t ring_check_usable(qcoll__bootstrap_t *bs,
                                        const char *what) {
  if (atomic_load(&bs->aborted) || qcoll__ctx_aborted(bs->comm))
    return qcoll__error(bs->comm, QCOLL_ERR_ABORTED,
                        "bootstrap %s: the communicator was aborted", what);
  if (bs->broken)
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_USAGE,
                        "bootstrap %s: the ring is broken by an earlier "
                        "failure",
                        what);
  return QCOLL_OK;
}

/* Start a collective: hold send_lock, check that the ring is usable and
 * that rank+1 did not report a failure while we were away (so a rank that
 * comes late learns at once why the others gave up).  A connection that
 * rank+1 closed is left to the sends to notice: rank+1 may have left after
 * a clean last barrier. */
static qcoll_status_t ring_enter(qcoll__bootstrap_t *bs, const char *what) {
  pthread_mutex_lock(&bs->send_lock);
  qcoll_status_t st = ring_check_usable(bs, what);
  if (st == QCOLL_OK && bs->nranks > 1 && back_report_waiting(bs))
    st = ring_failed(bs, take_back_report(bs, what));
  return st;
}

/* End a collective.  An abort that came while we held the lock (and so
 * left the report to us) is reported now, also when the collective itself
 * completed; one that came between our check and the unlock is caught by
 * the check after it. */
static qcoll_status_t ring_leave(qcoll__bootstrap_t *bs, qcoll_status_t st) {
  if (atomic_load(&bs->aborted)) report_abort(bs, RING_REPORT_SEND_S);
  pthread_mutex_unlock(&bs->send_lock);
  if (atomic_load(&bs->aborted) && pthread_mutex_trylock(&bs->send_lock) == 0) {
    report_abort(bs, RING_REPORT_SEND_S);
    pthread_mutex_unlock(&bs->send_lock);
  }
  return st;
}

/* One step: send (kind, sarg, sbuf[0..bytes)) to rank+1 and receive
 * (kind, rarg, rbuf[0..bytes)) from rank-1, both at once.  Either side may
 * be skipped (do_send / do_recv false).  origin is the rank whose
 * contribution the receive brings (rank-1 relays it), for messages. */
typedef struct ring_step {
  bool do_send, do_recv;
  uint16_t kind;
  uint32_t sarg, rarg;
  const uint8_t *sbuf;
  uint8_t *rbuf;
  size_t bytes;
  int origin;
} ring_step_t;

/* Move what the socket takes now; false with *res on failure. */
static bool step_send(qcoll__bootstrap_t *bs, const uint8_t *hdr,
                      const ring_step_t *s, size_t *off,
                      qcoll__io_result_t *res, int *err) {
  size_t total = QCOLL__BOOT_DATA_HDR_BYTES + s->bytes;
  while (*off < total) {
    const uint8_t *p = *off < QCOLL__BOOT_DATA_HDR_BYTES
                           ? hdr + *off
                           : s->sbuf + (*off - QCOLL__BOOT_DATA_HDR_BYTES);
    size_t len = *off < QCOLL__BOOT_DATA_HDR_BYTES
                     ? QCOLL__BOOT_DATA_HDR_BYTES - *off
                     : total - *off;
    ssize_t k = send(bs->next_fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      *off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    *err = k < 0 ? errno : EPIPE;
    *res = (*err == EPIPE || *err == ECONNRESET || *err == ENOTCONN)
               ? QCOLL__IO_CLOSED
               : QCOLL__IO_ERROR;
    return false;
  }
  return true;
}

static bool step_recv(qcoll__bootstrap_t *bs, uint8_t *hdr,
                      const ring_step_t *s, size_t *off,
                      qcoll__io_result_t *res, int *err) {
  size_t total = QCOLL__BOOT_DATA_HDR_BYTES + s->bytes;
  while (*off < total) {
    uint8_t *p = *off < QCOLL__BOOT_DATA_HDR_BYTES
                     ? hdr + *off
                     : s->rbuf + (*off - QCOLL__BOOT_DATA_HDR_BYTES);
    size_t len = *off < QCOLL__BOOT_DATA_HDR_BYTES
                     ? QCOLL__BOOT_DATA_HDR_BYTES - *off
                     : total - *off;
    ssize_t k = recv(bs->prev_fd, p, len, MSG_DONTWAIT);
    if (k > 0) {
      bool had_hdr = *off >= QCOLL__BOOT_DATA_HDR_BYTES;
      *off += (size_t)k;
      /* Check the header before a single payload byte lands. */
      if (!had_hdr && *off >= QCOLL__BOOT_DATA_HDR_BYTES) return true;
      continue;
    }
    if (k == 0) {
      *res = QCOLL__IO_CLOSED;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    *err = errno;
    *res = (*err == ECONNRESET || *err == ENOTCONN) ? QCOLL__IO_CLOSED
                                                    : QCOLL__IO_ERROR;
    return false;
  }
  return true;
}

/* The header from rank-1: the data this step expects, or a failure report
 * where the data header would be. */
static qcoll_status_t check_header(qcoll__bootstrap_t *bs, const uint8_t *hdr,
                                   const ring_step_t *s, const char *what) {
  int prev = prev_rank(bs);
  if (qcoll__msg_is_ring_error(hdr, QCOLL__BOOT_DATA_HDR_BYTES)) {
    uint8_t buf[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
    memcpy(buf, hdr, QCOLL__BOOT_DATA_HDR_BYTES);
    return take_report(bs, bs->prev_fd, prev, buf, QCOLL__BOOT_DATA_HDR_BYTES,
                       what);
  }
  qcoll__boot_data_hdr_t h;
  char why[QCOLL__BOOT_WHY_MAX];
  if (qcoll__msg_decode_data_hdr(hdr, QCOLL__BOOT_DATA_HDR_BYTES, &h, why) !=
      QCOLL__MSG_OK)
    return qcoll__error(bs->comm, QCOLL_ERR_BOOTSTRAP,
                        "bootstrap %s: rank %d sent a malformed header: %s",
                        what, prev, why);
  if (h.kind != s->kind || h.arg != s->rarg || h.bytes != s->bytes) {
    const char *argname =
        s->kind == QCOLL__BOOT_DATA_BROADCAST ? "root" : "block";
    return qcoll__error(bs->comm, QCOLL_ERR_MISMATCH,
                        "bootstrap %s: rank %d sent %s (%s %u, %llu bytes) "
                        "but this rank expected %s (%s %u, %zu bytes)",
                        what, prev, qcoll__msg_data_kind_name(h.kind), argname,
                        h.arg, (unsigned long long)h.bytes,
                        qcoll__msg_data_kind_name(s->kind), argname, s->rarg,
                        s->bytes);
  }
  return QCOLL_OK;
}

/* Nothing arrived in time.  Name the rank whose contribution is missing,
 * not merely rank-1, which only relays it: having heard from rank-1 in the
 * earlier steps proves that the relays between entered the collective. */
static qcoll_status_t recv_timeout(qcoll__bootstrap_t *bs, const ring_step_t *s,
                                   const char *what) {
  qcoll__ctx_t *comm = bs->comm;
  int prev = prev_rank(bs), origin = s->origin;
  char relay[96] = "";
  if (s->kind == QCOLL__BOOT_DATA_BROADCAST && origin == prev)
    snprintf(relay, sizeof relay, " (the root)");
  else if (s->kind == QCOLL__BOOT_DATA_BROADCAST)
    /* Any rank from the root to rank-1 may be the one missing. */
    snprintf(relay, sizeof relay,
             " (the root, whose data reaches this rank through rank %d)", prev);
  else if (origin != prev)
    snprintf(relay, sizeof relay, " (its %s is relayed by rank %d)",
             s->kind == QCOLL__BOOT_DATA_ALLGATHER ? "block" : "arrival", prev);
  note_failure(bs,
               "rank %d timed out after %.1f s waiting for rank %d in the "
               "bootstrap %s",
               bs->rank, comm->timeout_s, origin, what);
  return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                      "bootstrap %s: nothing from rank %d%s within %.1f s "
                      "(QCOLL_TIMEOUT)",
                      what, origin, relay, comm->timeout_s);
}

static qcoll_status_t step_error(qcoll__bootstrap_t *bs, const ring_step_t *s,
                                 qcoll__io_result_t r, int err, bool sending,
                                 const char *what) {
  qcoll__ctx_t *comm = bs->comm;
  int peer = sending ? next_rank(bs) : prev_rank(bs);
  switch (r) {
    case QCOLL__IO_ABORTED:
      note_failure(bs, "rank %d aborted", bs->rank);
      return qcoll__error(comm, QCOLL_ERR_ABORTED, "bootstrap %s: aborted",
                          what);
    case QCOLL__IO_TIMEOUT:
      if (!sending) return recv_timeout(bs, s, what);
      note_failure(bs,
                   "rank %d timed out after %.1f s sending to rank %d in the "
                   "bootstrap %s",
                   bs->rank, comm->timeout_s, peer, what);
      return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                          "bootstrap %s: could not send to rank %d within "
                          "%.1f s (QCOLL_TIMEOUT)",
                          what, peer, comm->timeout_s);
    case QCOLL__IO_CLOSED:
      /* rank+1 may have said why before it closed. */
      if (sending && back_report_waiting(bs)) return take_back_report(bs, what);
      note_failure(bs,
                   "rank %d: rank %d closed its connection during the "
                   "bootstrap %s (it died, exited or failed)",
                   bs->rank, peer, what);
      return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                          "bootstrap %s: rank %d closed its connection (it "
                          "failed, aborted or exited)",
                          what, peer);
    default:
      note_failure(bs,
                   "rank %d lost its connection %s rank %d in the "
                   "bootstrap %s: %s",
                   bs->rank, sending ? "to" : "from", peer, what,
                   io_reason(r, err));
      return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                          "bootstrap %s: connection to rank %d failed: %s",
                          what, peer, io_reason(r, err));
  }
}

static qcoll_status_t ring_step_run(qcoll__bootstrap_t *bs,
                                    const ring_step_t *s,
                                    qcoll__deadline_t deadline,
                                    const char *what) {
  uint8_t shdr[QCOLL__BOOT_DATA_HDR_BYTES], rhdr[QCOLL__BOOT_DATA_HDR_BYTES];
  qcoll__boot_data_hdr_t h = {s->kind, s->sarg, s->bytes};
  qcoll__msg_encode_data_hdr(&h, shdr);
  size_t total = QCOLL__BOOT_DATA_HDR_BYTES + s->bytes;
  size_t soff = s->do_send ? 0 : total, roff = s->do_recv ? 0 : total;
  bool hdr_checked = false;
  qcoll__io_t io = bs_io(bs);
  qcoll_status_t st = QCOLL_OK;
  for (;;) {
    qcoll__io_result_t res = QCOLL__IO_OK;
    int err = 0;
    if (soff < total && !step_send(bs, shdr, s, &soff, &res, &err)) {
      st = step_error(bs, s, res, err, true, what);
      break;
    }
    if (roff < total && !step_recv(bs, rhdr, s, &roff, &res, &err)) {
      st = step_error(bs, s, res, err, false, what);
      break;
    }
    if (!hdr_checked && roff >= QCOLL__BOOT_DATA_HDR_BYTES && s->do_recv) {
      st = check_header(bs, rhdr, s, what);
      if (st != QCOLL_OK) break;
      hdr_checked = true;
      continue; /* read the payload right away */
    }
    if (soff >= total && roff >= total) break;
    struct pollfd fds[3] = {{soff < total ? bs->next_fd : -1, POLLOUT, 0},
                            {roff < total ? bs->prev_fd : -1, POLLIN, 0}};
    res = qcoll__io_poll(&io, fds, 2, deadline);
    if (res != QCOLL__IO_OK) {
      st = step_error(bs, s, res, errno, roff >= total, what);
      break;
    }
  }
  /* A report must not follow a data frame cut short. */
  bs->next_mid_frame = soff > 0 && soff < total;
  return st;
}

static qcoll_status_t ring_run(qcoll__bootstrap_t *bs, const ring_step_t *s,
                               qcoll__deadline_t deadline, const char *what) {
  qcoll_status_t st = ring_step_run(bs, s, deadline, what);
  return st == QCOLL_OK ? st : ring_failed(bs, st);
}

static qcoll_status_t allgather_steps(qcoll__bootstrap_t *bs, uint8_t *base,
                                      size_t bytes, const char *what) {
  int n = bs->nranks;
  qcoll__deadline_t deadline = qcoll__ctx_deadline(bs->comm);
  /* Step s passes on the block that arrived at step s-1 (our own first). */
  for (int step = 0; step < n - 1; step++) {
    int send_block = (bs->rank - step + n) % n;
    int recv_block = (bs->rank - step - 1 + n) % n;
    ring_step_t s = {true,
                     true,
                     QCOLL__BOOT_DATA_ALLGATHER,
                     (uint32_t)send_block,
                     (uint32_t)recv_block,
                     base + (size_t)send_block * bytes,
                     base + (size_t)recv_block * bytes,
                     bytes,
                     recv_block};
    qcoll_status_t st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
  }
  return QCOLL_OK;
}

qcoll_status_t qcoll__bootstrap_allgather(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes) {
  const char *what = "all-gather";
  if (!bs || (!data && bytes))
    return qcoll__error(bs ? bs->comm : NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_allgather: %s is NULL",
                        !bs ? "bootstrap" : "data");
  size_t total;
  if (!qcoll__mul_size(bytes, (size_t)bs->nranks, &total))
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap all-gather: %zu bytes x %d ranks overflows",
                        bytes, bs->nranks);
  qcoll_status_t st = ring_enter(bs, what);
  if (st == QCOLL_OK) st = allgather_steps(bs, data, bytes, what);
  return ring_leave(bs, st);
}

static qcoll_status_t broadcast_steps(qcoll__bootstrap_t *bs, void *data,
                                      size_t bytes, int root,
                                      const char *what) {
  int n = bs->nranks;
  qcoll__deadline_t deadline = qcoll__ctx_deadline(bs->comm);
  ring_step_t s = {false,          false,          QCOLL__BOOT_DATA_BROADCAST,
                   (uint32_t)root, (uint32_t)root, data,
                   data,           bytes,          root};
  /* Down the ring from root; the rank before root does not pass it on. */
  if (bs->rank != root) {
    s.do_recv = true;
    qcoll_status_t st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
    s.do_recv = false;
  }
  if ((bs->rank + 1) % n == root) return QCOLL_OK;
  s.do_send = true;
  return ring_run(bs, &s, deadline, what);
}

qcoll_status_t qcoll__bootstrap_broadcast(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes, int root) {
  const char *what = "broadcast";
  if (!bs || (!data && bytes))
    return qcoll__error(bs ? bs->comm : NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_broadcast: %s is NULL",
                        !bs ? "bootstrap" : "data");
  int n = bs->nranks;
  if (root < 0 || root >= n)
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap broadcast: root %d is out of range [0, %d)",
                        root, n);
  qcoll_status_t st = ring_enter(bs, what);
  if (st == QCOLL_OK && n > 1)
    st = broadcast_steps(bs, data, bytes, root, what);
  return ring_leave(bs, st);
}

static qcoll_status_t barrier_steps(qcoll__bootstrap_t *bs, const char *what) {
  /* An all-gather of nothing: after n-1 steps every rank has heard, through
   * the ring, from every other rank that entered the barrier.  Step s
   * brings the arrival of rank - s - 1. */
  int n = bs->nranks;
  qcoll__deadline_t deadline = qcoll__ctx_deadline(bs->comm);
  for (int step = 0; step < n - 1; step++) {
    ring_step_t s = {true,
                     true,
                     QCOLL__BOOT_DATA_BARRIER,
                     (uint32_t)step,
                     (uint32_t)step,
                     NULL,
                     NULL,
                     0,
                     (bs->rank - step - 1 + n) % n};
    qcoll_status_t st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
  }
  return QCOLL_OK;
}

qcoll_status_t qcoll__bootstrap_barrier(qcoll__bootstrap_t *bs) {
  const char *what = "barrier";
  if (!bs)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_barrier: bootstrap is NULL");
  qcoll_status_t st = ring_enter(bs, what);
  if (st == QCOLL_OK) st = barrier_steps(bs, what);
  return ring_leave(bs, st);
}

void qcoll__bootstrap_abort(qcoll__bootstrap_t *bs) {
  if (!bs) return;
  atomic_store(&bs->aborted, true);
  /* The byte stays in the pipe, so every later wait returns at once. */
  ssize_t rc;
  do rc = write(bs->abort_pipe[1], "x", 1);
  while (rc < 0 && errno == EINTR);
  /* A collective in progress wakes on the pipe and reports the abort itself
   * (its stream may be in the middle of a frame).  Otherwise report here,
   * without waiting: whatever fits in the socket buffers now. */
  if (pthread_mutex_trylock(&bs->send_lock) == 0) {
    report_abort(bs, 0.0);
    pthread_mutex_unlock(&bs->send_lock);
  }
}

/* A communicator that failed outside the ring (shared memory saw a peer
 * die, a wait there timed out) or was aborted tells the ring before it
 * goes, so peers still waiting on it learn why instead of seeing only the
 * connection close.  A clean destroy says nothing.  Under send_lock. */
static void report_on_destroy(qcoll__bootstrap_t *bs) {
  if (!bs->ring_up || bs->reported) return;
  int state = atomic_load(&bs->comm->state);
  if (atomic_load(&bs->aborted) || state == QCOLL_COMM_ABORTED) {
    report_abort(bs, RING_REPORT_SEND_S);
  } else if (state == QCOLL_COMM_BROKEN) {
    char last[QCOLL_ERRMSG_MAX];
    copy_last_error(bs->comm, last, sizeof last);
    note_failure(bs,
                 "rank %d closed its connection after a failure outside the "
                 "bootstrap (its last error: %s)",
                 bs->rank, last);
    ring_report_and_shut(bs, RING_REPORT_SEND_S);
  }
}

void qcoll__bootstrap_destroy(qcoll__bootstrap_t *bs) {
  if (!bs) return;
  pthread_mutex_lock(&bs->send_lock);
  report_on_destroy(bs);
  pthread_mutex_unlock(&bs->send_lock);
  bs_free(bs);
}
