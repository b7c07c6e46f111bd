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
 * After any failure the ring is shut down: neighbours see the connection
 * close and fail too (naming this rank), and the failure travels around the
 * ring instead of leaving ranks to wait for their deadline.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "message.h"
#include "socket.h"

/* Unauthenticated connections a rank's ring socket holds at once. */
#define RING_PENDING_MAX 16

struct qcoll__bootstrap {
  qcoll_comm_t comm;
  int rank, nranks;
  int next_fd, prev_fd; /* -1 in a world of one */
  int abort_pipe[2];    /* a byte in it unblocks every wait */
  atomic_bool aborted;
  bool broken; /* a collective failed: the ring's byte stream is lost */
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
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
  free(bs);
}

static qcoll__bootstrap_t *bs_new(qcoll_comm_t comm) {
  qcoll__bootstrap_t *bs = calloc(1, sizeof *bs);
  if (!bs) return NULL;
  bs->comm = comm;
  bs->rank = comm->rank;
  bs->nranks = comm->nranks;
  bs->next_fd = bs->prev_fd = -1;
  atomic_init(&bs->aborted, false);
  if (pipe2(bs->abort_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    bs->abort_pipe[0] = bs->abort_pipe[1] = -1;
    bs_free(bs);
    return NULL;
  }
  return bs;
}

/* ---- joining the rendezvous ----------------------------------------- */

typedef struct join {
  qcoll_comm_t comm;
  qcoll__io_t io;
  qcoll__boot_id_t id;
  char root_str[QCOLL__ADDRSTR_MAX];
  int root_fd;
  int listen_fd;
  qcoll__boot_addr_t listen; /* advertised ring address */
  qcoll__boot_addr_t next;   /* where rank+1 listens, once the root answered */
} join_t;

static qcoll_status_t join_error(join_t *j, qcoll__io_result_t r, int err,
                                 const char *doing, double waited) {
  qcoll_comm_t comm = j->comm;
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
  qcoll_comm_t comm = j->comm;
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
      &j->io, &j->id.root, qcoll__comm_deadline(comm), true, &j->root_fd, &err);
  if (r != QCOLL__IO_OK)
    return join_error(j, r, err, "connecting to the root", comm->timeout_s);
  return QCOLL_OK;
}

static qcoll_status_t join_send_hello(join_t *j) {
  qcoll_comm_t comm = j->comm;
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, j->id.secret, sizeof h.secret);
  h.rank = comm->rank;
  h.nranks = comm->nranks;
  h.listen = j->listen;
  uint8_t buf[QCOLL__BOOT_HELLO_BYTES];
  size_t n = qcoll__msg_encode_hello(&h, buf, sizeof buf);
  int err = 0;
  qcoll__io_result_t r = qcoll__io_send_all(&j->io, j->root_fd, buf, n,
                                            qcoll__comm_deadline(comm), &err);
  if (r != QCOLL__IO_OK)
    return join_error(j, r, err, "sending the hello to the root",
                      comm->timeout_s);
  return QCOLL_OK;
}

static qcoll_status_t join_read_reply(join_t *j) {
  qcoll_comm_t comm = j->comm;
  double wait_s = comm->timeout_s + QCOLL__BOOT_GRACE_S;
  qcoll__deadline_t deadline = qcoll__deadline_in(wait_s);
  const char *doing = "waiting for the root's answer";
  uint8_t head[4];
  int err = 0;
  qcoll__io_result_t r =
      qcoll__io_recv_all(&j->io, j->root_fd, head, 4, deadline, &err);
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
  qcoll_comm_t comm = bs->comm;
  qcoll__io_t io = bs_io(bs);
  int next = (bs->rank + 1) % bs->nranks, err = 0;
  char where[QCOLL__ADDRSTR_MAX];
  qcoll__addr_format(addr, where, sizeof where);
  qcoll__deadline_t deadline = qcoll__comm_deadline(comm);
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

/* Accept connections on listen_fd until rank-1 has authenticated. */
static qcoll_status_t ring_accept_prev(qcoll__bootstrap_t *bs, int listen_fd) {
  qcoll_comm_t comm = bs->comm;
  qcoll__io_t io = bs_io(bs);
  int prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
  double hello_s = QCOLL_MIN(comm->timeout_s, QCOLL__BOOT_HELLO_DEADLINE_S);
  qcoll__deadline_t deadline = qcoll__comm_deadline(comm);
  qcoll__pending_pool_t pool;
  if (!qcoll__pending_pool_init(&pool, RING_PENDING_MAX))
    return qcoll__error(comm, QCOLL_ERR_OUT_OF_MEMORY,
                        "bootstrap: cannot allocate the ring accept state");
  struct pollfd fds[1 + RING_PENDING_MAX + 1];
  qcoll_status_t st = QCOLL_OK;
  while (bs->prev_fd < 0) {
    nfds_t n = 0;
    fds[n++] = (struct pollfd){listen_fd, POLLIN, 0};
    for (int i = 0; i < pool.count; i++)
      fds[n++] = (struct pollfd){pool.items[i].fd, POLLIN, 0};
    qcoll__deadline_t wake = deadline;
    for (int i = 0; i < pool.count; i++)
      if (pool.items[i].deadline.at < wake.at) wake = pool.items[i].deadline;
    qcoll__io_result_t r = qcoll__io_poll(&io, fds, n, wake);
    if (r == QCOLL__IO_ABORTED) {
      st = qcoll__error(comm, QCOLL_ERR_ABORTED,
                        "bootstrap: aborted while waiting for rank %d to "
                        "connect",
                        prev);
      break;
    }
    if (r == QCOLL__IO_ERROR) {
      st = qcoll__error(comm, QCOLL_ERR_SYSTEM, "bootstrap: poll failed: %s",
                        strerror(errno));
      break;
    }
    for (int i = pool.count - 1; i >= 0 && r == QCOLL__IO_OK; i--) {
      qcoll__pending_t *p = &pool.items[i];
      char why[QCOLL__BOOT_WHY_MAX + 64];
      qcoll__pending_result_t res = QCOLL__PENDING_MORE;
      if (fds[1 + i].revents) res = qcoll__pending_read(p, why, sizeof why);
      if (res == QCOLL__PENDING_MORE && qcoll__deadline_passed(p->deadline)) {
        snprintf(why, sizeof why,
                 "sent %zu of the %zu bytes of a hello within "
                 "%.1f s",
                 p->have, p->need, hello_s);
        res = QCOLL__PENDING_DROP;
      }
      if (res == QCOLL__PENDING_MORE) continue;
      if (res == QCOLL__PENDING_DONE && ring_hello_ok(bs, p, why, sizeof why)) {
        bs->prev_fd = p->fd;
      } else {
        QLOG_WARN(comm, BOOT,
                  "bootstrap: ring socket dropped connection from "
                  "%s: %s",
                  p->peer, why);
        close(p->fd);
      }
      qcoll__pending_pool_remove(&pool, i);
    }
    /* Expire stale ones also when poll timed out on their deadline. */
    for (int i = pool.count - 1; i >= 0 && r != QCOLL__IO_OK; i--) {
      qcoll__pending_t *p = &pool.items[i];
      if (!qcoll__deadline_passed(p->deadline)) continue;
      QLOG_WARN(comm, BOOT,
                "bootstrap: ring socket dropped connection from "
                "%s: sent %zu of the %zu bytes of a hello within %.1f s",
                p->peer, p->have, p->need, hello_s);
      close(p->fd);
      qcoll__pending_pool_remove(&pool, i);
    }
    if (bs->prev_fd >= 0) break;
    if (r == QCOLL__IO_OK && fds[0].revents) {
      for (;;) {
        char peer[QCOLL__ADDRSTR_MAX];
        int fd = qcoll__sock_accept(listen_fd, peer, sizeof peer);
        if (fd < 0) break;
        if (!qcoll__pending_pool_add(&pool, fd, peer,
                                     QCOLL__BOOT_RING_HELLO_BYTES, hello_s)) {
          QLOG_WARN(comm, BOOT,
                    "bootstrap: ring socket dropped connection "
                    "from %s: too many connections waiting",
                    peer);
          close(fd);
        }
      }
    }
    if (qcoll__deadline_passed(deadline)) {
      st = qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                        "bootstrap: rank %d did not connect within %.1f s "
                        "(QCOLL_TIMEOUT)",
                        prev, comm->timeout_s);
      break;
    }
  }
  qcoll__pending_pool_free(&pool);
  return st;
}

static qcoll_status_t ring_build(qcoll__bootstrap_t *bs, join_t *j) {
  qcoll_status_t st = ring_connect_next(bs, &j->next);
  if (st != QCOLL_OK) return st;
  return ring_accept_prev(bs, j->listen_fd);
}

qcoll_status_t qcoll__bootstrap_init(qcoll_comm_t comm,
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
  int listen_port = 0;
  QCHECK(join_connect(&j, &listen_port));
  if (comm->nranks != 1) QCHECK(join_listen_address(&j, listen_port));
  QCHECK(join_send_hello(&j));
  QCHECK(join_read_reply(&j));
  close_fd(&j.root_fd);
  if (bs->nranks > 1) QCHECK(ring_build(bs, &j));
  QLOG_INFO(comm, BOOT, "bootstrap: rank %d of %d joined through root %s",
            comm->rank, comm->nranks, j.root_str);
out:
  close_fd(&j.root_fd);
  close_fd(&j.listen_fd);
  if (st != QCOLL_OK) {
    bs_free(bs);
    return st;
  }
  *out = bs;
  return QCOLL_OK;
}

/* ---- collectives over the ring --------------------------------------- */

/* Shut the ring after a failure: the byte stream cannot be trusted any
 * more, and neighbours blocked on us learn at once that we are gone. */
static qcoll_status_t ring_failed(qcoll__bootstrap_t *bs, qcoll_status_t st) {
  bs->broken = true;
  if (bs->next_fd >= 0) shutdown(bs->next_fd, SHUT_RDWR);
  if (bs->prev_fd >= 0) shutdown(bs->prev_fd, SHUT_RDWR);
  if (st != QCOLL_ERR_ABORTED) qcoll__comm_mark_broken(bs->comm);
  return st;
}

static qcoll_status_t ring_check_usable(qcoll__bootstrap_t *bs,
                                        const char *what) {
  if (atomic_load(&bs->aborted) || qcoll__comm_aborted(bs->comm))
    return qcoll__error(bs->comm, QCOLL_ERR_ABORTED,
                        "bootstrap %s: the communicator was aborted", what);
  if (bs->broken)
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_USAGE,
                        "bootstrap %s: the ring is broken by an earlier "
                        "failure",
                        what);
  return QCOLL_OK;
}

/* One step: send (kind, sarg, sbuf[0..bytes)) to rank+1 and receive
 * (kind, rarg, rbuf[0..bytes)) from rank-1, both at once.  Either side may
 * be skipped (do_send / do_recv false). */
typedef struct ring_step {
  bool do_send, do_recv;
  uint16_t kind;
  uint32_t sarg, rarg;
  const uint8_t *sbuf;
  uint8_t *rbuf;
  size_t bytes;
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

static qcoll_status_t check_header(qcoll__bootstrap_t *bs, const uint8_t *hdr,
                                   const ring_step_t *s, const char *what) {
  int prev = (bs->rank - 1 + bs->nranks) % bs->nranks;
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

static qcoll_status_t step_error(qcoll__bootstrap_t *bs, qcoll__io_result_t r,
                                 int err, bool sending, const char *what) {
  qcoll_comm_t comm = bs->comm;
  int peer = sending ? (bs->rank + 1) % bs->nranks
                     : (bs->rank - 1 + bs->nranks) % bs->nranks;
  switch (r) {
    case QCOLL__IO_ABORTED:
      return qcoll__error(comm, QCOLL_ERR_ABORTED, "bootstrap %s: aborted",
                          what);
    case QCOLL__IO_TIMEOUT:
      return qcoll__error(comm, QCOLL_ERR_TIMEOUT,
                          "bootstrap %s: %s rank %d within %.1f s "
                          "(QCOLL_TIMEOUT)",
                          what, sending ? "could not send to" : "nothing from",
                          peer, comm->timeout_s);
    case QCOLL__IO_CLOSED:
      return qcoll__error(comm, QCOLL_ERR_PEER_FAILURE,
                          "bootstrap %s: rank %d closed its connection (it "
                          "failed, aborted or exited)",
                          what, peer);
    default:
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
  for (;;) {
    qcoll__io_result_t res = QCOLL__IO_OK;
    int err = 0;
    if (soff < total && !step_send(bs, shdr, s, &soff, &res, &err))
      return step_error(bs, res, err, true, what);
    if (roff < total && !step_recv(bs, rhdr, s, &roff, &res, &err))
      return step_error(bs, res, err, false, what);
    if (!hdr_checked && roff >= QCOLL__BOOT_DATA_HDR_BYTES && s->do_recv) {
      qcoll_status_t st = check_header(bs, rhdr, s, what);
      if (st != QCOLL_OK) return st;
      hdr_checked = true;
      continue; /* read the payload right away */
    }
    if (soff >= total && roff >= total) return QCOLL_OK;
    struct pollfd fds[3] = {{soff < total ? bs->next_fd : -1, POLLOUT, 0},
                            {roff < total ? bs->prev_fd : -1, POLLIN, 0}};
    res = qcoll__io_poll(&io, fds, 2, deadline);
    if (res != QCOLL__IO_OK)
      return step_error(bs, res, errno, roff >= total, what);
  }
}

static qcoll_status_t ring_run(qcoll__bootstrap_t *bs, const ring_step_t *s,
                               qcoll__deadline_t deadline, const char *what) {
  qcoll_status_t st = ring_step_run(bs, s, deadline, what);
  return st == QCOLL_OK ? st : ring_failed(bs, st);
}

qcoll_status_t qcoll__bootstrap_allgather(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes) {
  const char *what = "all-gather";
  if (!bs || (!data && bytes))
    return qcoll__error(bs ? bs->comm : NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_allgather: %s is NULL",
                        !bs ? "bootstrap" : "data");
  qcoll_status_t st = ring_check_usable(bs, what);
  if (st != QCOLL_OK) return st;
  size_t total;
  if (!qcoll__mul_size(bytes, (size_t)bs->nranks, &total))
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap all-gather: %zu bytes x %d ranks overflows",
                        bytes, bs->nranks);
  int n = bs->nranks;
  uint8_t *base = data;
  qcoll__deadline_t deadline = qcoll__comm_deadline(bs->comm);
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
                     bytes};
    st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
  }
  return QCOLL_OK;
}

qcoll_status_t qcoll__bootstrap_broadcast(qcoll__bootstrap_t *bs, void *data,
                                          size_t bytes, int root) {
  const char *what = "broadcast";
  if (!bs || (!data && bytes))
    return qcoll__error(bs ? bs->comm : NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_broadcast: %s is NULL",
                        !bs ? "bootstrap" : "data");
  qcoll_status_t st = ring_check_usable(bs, what);
  if (st != QCOLL_OK) return st;
  int n = bs->nranks;
  if (root < 0 || root >= n)
    return qcoll__error(bs->comm, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap broadcast: root %d is out of range [0, %d)",
                        root, n);
  if (n == 1) return QCOLL_OK;
  qcoll__deadline_t deadline = qcoll__comm_deadline(bs->comm);
  ring_step_t s = {false,          false,          QCOLL__BOOT_DATA_BROADCAST,
                   (uint32_t)root, (uint32_t)root, data,
                   data,           bytes};
  /* Down the ring from root; the rank before root does not pass it on. */
  if (bs->rank != root) {
    s.do_recv = true;
    st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
    s.do_recv = false;
  }
  if ((bs->rank + 1) % n != root) {
    s.do_send = true;
    st = ring_run(bs, &s, deadline, what);
  }
  return st;
}

qcoll_status_t qcoll__bootstrap_barrier(qcoll__bootstrap_t *bs) {
  const char *what = "barrier";
  if (!bs)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_barrier: bootstrap is NULL");
  qcoll_status_t st = ring_check_usable(bs, what);
  if (st != QCOLL_OK) return st;
  /* An all-gather of nothing: after n-1 steps every rank has heard, through
   * the ring, from every other rank that entered the barrier. */
  int n = bs->nranks;
  qcoll__deadline_t deadline = qcoll__comm_deadline(bs->comm);
  for (int step = 0; step < n - 1; step++) {
    ring_step_t s = {true,
                     true,
                     QCOLL__BOOT_DATA_BARRIER,
                     (uint32_t)step,
                     (uint32_t)step,
                     NULL,
                     NULL,
                     0};
    st = ring_run(bs, &s, deadline, what);
    if (st != QCOLL_OK) return st;
  }
  return QCOLL_OK;
}

void qcoll__bootstrap_abort(qcoll__bootstrap_t *bs) {
  if (!bs) return;
  atomic_store(&bs->aborted, true);
  /* The byte stays in the pipe, so every later wait returns at once. */
  ssize_t rc;
  do rc = write(bs->abort_pipe[1], "x", 1);
  while (rc < 0 && errno == EINTR);
  /* Peers blocked on us see the connection close now, not at their
   * deadline.  shutdown (not close) keeps the fds valid for our waits. */
  if (bs->next_fd >= 0) shutdown(bs->next_fd, SHUT_RDWR);
  if (bs->prev_fd >= 0) shutdown(bs->prev_fd, SHUT_RDWR);
}

void qcoll__bootstrap_destroy(qcoll__bootstrap_t *bs) { bs_free(bs); }
