/*
 * The rendezvous root: a detached thread that serves one communicator's
 * initialisation.
 *
 * It accepts connections on one listening socket and polls all of them at
 * once.  A connection is unauthenticated until it delivers a complete,
 * fixed-size hello that carries the id's secret; until then it owns only a
 * fixed buffer and a short deadline of its own, so a peer that sends
 * garbage, a wrong secret, half a hello or nothing at all is dropped (and
 * logged with its address and the reason) without holding up anyone else.
 *
 * The first valid hello fixes the world size and starts the deadline
 * (timeout_s).  Each later hello is checked against it: same world size,
 * rank in range, rank not seen before.  When all ranks are there the root
 * sends each rank the ring address of its successor (all a rank needs, so
 * the root sends O(nranks) bytes, not a table to everyone) and exits.  On the
 * first failure (a check, a rank that left, or the deadline) it sends every
 * rank that is connected an error naming the problem, then keeps answering
 * ranks that arrive later with the same error until each rank has heard it or
 * the deadline passes, so every rank that is up learns why.
 *
 * Before the first valid hello the root waits without a deadline: nobody
 * is blocked on it, and the process that made the id may take its time to
 * hand the id out.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/config.h"
#include "bootstrap.h"
#include "message.h"
#include "socket.h"

/* Unauthenticated connections held at once; a new one beyond them pushes
 * out the one that has waited longest. */
#define ROOT_PENDING_MAX 256
/* How long the root tries to deliver its answer to one rank. */
#define ROOT_SEND_DEADLINE_S 5.0

typedef struct root_rank {
  int fd; /* -1 until this rank's hello arrived (and again once answered) */
  qcoll__boot_addr_t listen;
  char peer[QCOLL__ADDRSTR_MAX];
} root_rank_t;

typedef struct root {
  int listen_fd;
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  double timeout_s;
  char where[QCOLL__ADDRSTR_MAX];
  qcoll__pending_pool_t pending;

  bool started; /* a valid hello arrived: the deadline runs */
  double started_at;
  qcoll__deadline_t deadline;
  int nranks; /* 0 until a valid world size is known */
  int ref_rank;
  root_rank_t *ranks;
  int joined;

  bool failed;
  qcoll_status_t fail_status;
  char fail_text[QCOLL__BOOT_ERRTEXT_MAX + 1];
  uint8_t *answered; /* per rank: told about the failure */
  int nanswered;
  bool done;

  struct pollfd *pfds;
  int *pfd_rank; /* rank of each registered fd in pfds */
} root_t;

static void root_free(root_t *r) {
  qcoll__pending_pool_free(&r->pending);
  if (r->ranks)
    for (int k = 0; k < r->nranks; k++)
      if (r->ranks[k].fd >= 0) close(r->ranks[k].fd);
  if (r->listen_fd >= 0) close(r->listen_fd);
  free(r->ranks);
  free(r->answered);
  free(r->pfds);
  free(r->pfd_rank);
  free(r);
}

/* ---- answering ---------------------------------------------------- */

static void root_send(root_t *r, int fd, const uint8_t *buf, size_t len,
                      const char *peer, const char *what) {
  const qcoll__io_t io = {NULL, -1};
  int err = 0;
  qcoll__deadline_t d =
      qcoll__deadline_in(QCOLL_MIN(r->timeout_s, ROOT_SEND_DEADLINE_S));
  qcoll__io_result_t res = qcoll__io_send_all(&io, fd, buf, len, d, &err);
  if (res != QCOLL__IO_OK)
    QLOG_WARN(NULL, BOOT, "bootstrap root %s: could not send the %s to %s: %s",
              r->where, what, peer,
              res == QCOLL__IO_TIMEOUT  ? "timed out"
              : res == QCOLL__IO_CLOSED ? "connection closed"
                                        : strerror(err));
}

/* Tell one rank why the rendezvous failed, then hang up. */
static void root_answer_error(root_t *r, int fd, const char *peer, int rank) {
  uint8_t buf[QCOLL__BOOT_ERROR_MAX_BYTES];
  size_t n = qcoll__msg_encode_error(r->secret, r->fail_status, r->fail_text,
                                     buf, sizeof buf);
  root_send(r, fd, buf, n, peer, "error");
  close(fd);
  if (r->answered && rank >= 0 && rank < r->nranks && !r->answered[rank]) {
    r->answered[rank] = 1;
    r->nanswered++;
  }
}

static void root_fail(root_t *r, qcoll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void root_fail(root_t *r, qcoll_status_t status, const char *fmt, ...) {
  if (r->failed) return;
  r->failed = true;
  r->fail_status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->fail_text, sizeof r->fail_text, fmt, ap);
  va_end(ap);
  QLOG_WARN(NULL, BOOT, "bootstrap root %s: rendezvous failed: %s", r->where,
            r->fail_text);
  for (int k = 0; k < r->nranks; k++)
    if (r->ranks[k].fd >= 0) {
      root_answer_error(r, r->ranks[k].fd, r->ranks[k].peer, k);
      r->ranks[k].fd = -1;
    }
}

/* Everyone is here: tell each rank where its successor listens. */
static void root_send_ring(root_t *r) {
  for (int k = 0; k < r->nranks; k++) {
    uint8_t buf[QCOLL__BOOT_NEXT_BYTES];
    size_t n = qcoll__msg_encode_next(r->secret, k, r->nranks,
                                      &r->ranks[(k + 1) % r->nranks].listen,
                                      buf, sizeof buf);
    root_send(r, r->ranks[k].fd, buf, n, r->ranks[k].peer, "ring address");
    close(r->ranks[k].fd);
    r->ranks[k].fd = -1;
  }
  QLOG_INFO(NULL, BOOT, "bootstrap root %s: all %d ranks arrived", r->where,
            r->nranks);
}

/* "rank 3" / "ranks 3, 7" (bounded), for the deadline's message. */
static void format_missing(const root_t *r, char *buf, size_t size) {
  int missing = r->nranks - r->joined, listed = 0;
  size_t used =
      (size_t)snprintf(buf, size, "%s", missing == 1 ? "rank" : "ranks");
  for (int k = 0; k < r->nranks && used < size; k++) {
    if (r->ranks[k].fd >= 0) continue;
    if (used > size - 32) {
      snprintf(buf + used, size - used, " and %d more", missing - listed);
      return;
    }
    used += (size_t)snprintf(buf + used, size - used, "%s %d",
                             listed ? "," : "", k);
    listed++;
  }
}

/* ---- hellos ------------------------------------------------------- */

static bool root_set_world(root_t *r, int rank, int nranks) {
  r->ranks = malloc((size_t)nranks * sizeof *r->ranks);
  r->answered = calloc((size_t)nranks, 1);
  r->pfd_rank = malloc((size_t)nranks * sizeof *r->pfd_rank);
  struct pollfd *p =
      realloc(r->pfds, (size_t)(1 + r->pending.cap + nranks + 1) * sizeof *p);
  if (p) r->pfds = p;
  if (!r->ranks || !r->answered || !r->pfd_rank || !p) {
    free(r->ranks);
    free(r->answered);
    r->ranks = NULL;
    r->answered = NULL;
    return false;
  }
  for (int k = 0; k < nranks; k++) r->ranks[k].fd = -1;
  r->nranks = nranks;
  r->ref_rank = rank;
  return true;
}

/* The deadline runs from the first valid hello and is the smallest one any
 * rank has declared (else the root's own): each rank waits for the answer
 * its own deadline plus a grace from its hello, which is never before the
 * first one, so every rank hears the root name the missing ranks. */
static void root_adopt_timeout(root_t *r, uint32_t timeout_ms) {
  if (!r->started) {
    r->started = true;
    r->started_at = qcoll__now();
    if (timeout_ms > 0) r->timeout_s = timeout_ms / 1000.0;
  } else if (timeout_ms > 0 && timeout_ms / 1000.0 < r->timeout_s) {
    r->timeout_s = timeout_ms / 1000.0;
  }
  r->deadline.at = r->started_at + r->timeout_s;
}

/* A complete hello arrived on p.  Takes ownership of p->fd. */
static void root_handle_hello(root_t *r, qcoll__pending_t *p) {
  qcoll__boot_hello_t h;
  char why[QCOLL__BOOT_WHY_MAX];
  if (qcoll__msg_decode_hello(p->buf, p->have, &h, why) != QCOLL__MSG_OK) {
    QLOG_WARN(NULL, BOOT, "bootstrap root %s: dropped connection from %s: %s",
              r->where, p->peer, why);
    close(p->fd);
    return;
  }
  if (!qcoll__secret_equal(h.secret, r->secret)) {
    QLOG_WARN(NULL, BOOT,
              "bootstrap root %s: dropped connection from %s: wrong secret "
              "(a unique id of another job?)",
              r->where, p->peer);
    close(p->fd);
    return;
  }
  QLOG_TRACE(NULL, BOOT, "bootstrap root %s: hello from rank %d of %d at %s",
             r->where, h.rank, h.nranks, p->peer);
  root_adopt_timeout(r, h.timeout_ms);
  if (r->failed) {
    root_answer_error(r, p->fd, p->peer, h.rank);
    return;
  }
  if (r->nranks == 0) {
    if (h.nranks < 1 || h.nranks > QCOLL__BOOT_MAX_RANKS) {
      root_fail(r, QCOLL_ERR_INVALID_ARGUMENT,
                "rank %d claims world size %d, which is not in [1, %d]", h.rank,
                h.nranks, QCOLL__BOOT_MAX_RANKS);
      root_answer_error(r, p->fd, p->peer, h.rank);
      return;
    }
    if (!root_set_world(r, h.rank, h.nranks)) {
      root_fail(r, QCOLL_ERR_OUT_OF_MEMORY,
                "the root could not allocate state for %d ranks", h.nranks);
      root_answer_error(r, p->fd, p->peer, h.rank);
      return;
    }
  }
  if (h.nranks != r->nranks)
    root_fail(r, QCOLL_ERR_MISMATCH,
              "rank %d claims world size %d but rank %d said %d", h.rank,
              h.nranks, r->ref_rank, r->nranks);
  else if (h.rank < 0 || h.rank >= r->nranks)
    root_fail(r, QCOLL_ERR_INVALID_ARGUMENT, "rank %d is out of range [0, %d)",
              h.rank, r->nranks);
  else if (r->ranks[h.rank].fd >= 0)
    root_fail(r, QCOLL_ERR_MISMATCH, "rank %d joined twice (from %s and %s)",
              h.rank, r->ranks[h.rank].peer, p->peer);
  else if (r->nranks > 1 && h.listen.family == 0)
    root_fail(r, QCOLL_ERR_BOOTSTRAP, "rank %d sent no ring address", h.rank);
  if (r->failed) {
    root_answer_error(r, p->fd, p->peer, h.rank);
    return;
  }
  root_rank_t *rr = &r->ranks[h.rank];
  rr->fd = p->fd;
  rr->listen = h.listen;
  snprintf(rr->peer, sizeof rr->peer, "%s", p->peer);
  r->joined++;
}

/* A registered rank's socket became readable: it has nothing more to say,
 * so this means it left (or misbehaves). */
static void root_check_rank(root_t *r, int k) {
  uint8_t byte;
  ssize_t n = recv(r->ranks[k].fd, &byte, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  close(r->ranks[k].fd);
  r->ranks[k].fd = -1;
  r->joined--;
  if (n > 0)
    root_fail(r, QCOLL_ERR_BOOTSTRAP,
              "rank %d (%s) sent unexpected bytes after its hello", k,
              r->ranks[k].peer);
  else
    root_fail(r, QCOLL_ERR_PEER_FAILURE,
              "rank %d (%s) left before every rank arrived (its connection "
              "closed)",
              k, r->ranks[k].peer);
}

/* ---- the loop ----------------------------------------------------- */

static void root_pending_done(void *ctx, qcoll__pending_t *p) {
  root_handle_hello(ctx, p);
}

static void root_pending_drop(void *ctx, const qcoll__pending_t *p,
                              const char *why) {
  const root_t *r = ctx;
  QLOG_WARN(NULL, BOOT, "bootstrap root %s: dropped connection from %s: %s",
            r->where, p->peer, why);
}

static qcoll__pending_handler_t root_handler(root_t *r) {
  qcoll__pending_handler_t h = {root_pending_done, root_pending_drop, r};
  return h;
}

static void root_accept(root_t *r) {
  qcoll__pending_handler_t h = root_handler(r);
  int err = qcoll__pending_accept(&r->pending, r->listen_fd, &h);
  if (err != 0)
    QLOG_WARN(NULL, BOOT, "bootstrap root %s: accept failed: %s", r->where,
              strerror(err));
}

static int poll_timeout_ms(const root_t *r) {
  double wake = qcoll__pending_next_deadline(&r->pending, qcoll__now() + 1.0);
  if (r->started) wake = QCOLL_MIN(wake, r->deadline.at);
  double left = wake - qcoll__now();
  return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

static void root_step(root_t *r) {
  nfds_t n = 0;
  r->pfds[n++] = (struct pollfd){r->listen_fd, POLLIN, 0};
  for (int i = 0; i < r->pending.count; i++)
    r->pfds[n++] = (struct pollfd){r->pending.items[i].fd, POLLIN, 0};
  nfds_t rank_base = n;
  int nreg = 0;
  for (int k = 0; k < r->nranks; k++)
    if (r->ranks[k].fd >= 0) {
      r->pfd_rank[nreg++] = k;
      r->pfds[n++] = (struct pollfd){r->ranks[k].fd, POLLIN, 0};
    }
  int rc = poll(r->pfds, n, poll_timeout_ms(r));
  if (rc < 0 && errno != EINTR) {
    QLOG_WARN(NULL, BOOT, "bootstrap root %s: poll failed: %s", r->where,
              strerror(errno));
    root_fail(r, QCOLL_ERR_SYSTEM, "the root's poll failed: %s",
              strerror(errno));
    r->done = true;
    return;
  }
  if (rc <= 0)
    for (nfds_t i = 0; i < n; i++) r->pfds[i].revents = 0;
  for (int j = 0; j < nreg; j++)
    if (r->pfds[rank_base + j].revents && r->ranks[r->pfd_rank[j]].fd >= 0)
      root_check_rank(r, r->pfd_rank[j]);
  qcoll__pending_handler_t h = root_handler(r);
  qcoll__pending_service(&r->pending, r->pfds + 1, &h);
  if (r->pfds[0].revents) root_accept(r);
}

static void root_check_done(root_t *r) {
  if (r->done) return;
  if (r->failed) {
    /* Linger so late ranks hear the reason too, until all have. */
    if ((r->nranks > 0 && r->nanswered == r->nranks) ||
        qcoll__deadline_passed(r->deadline))
      r->done = true;
    return;
  }
  if (r->nranks > 0 && r->joined == r->nranks) {
    root_send_ring(r);
    r->done = true;
    return;
  }
  if (r->started && qcoll__deadline_passed(r->deadline)) {
    char missing[320];
    format_missing(r, missing, sizeof missing);
    root_fail(r, QCOLL_ERR_TIMEOUT,
              "%s never arrived within %.1f s (QCOLL_TIMEOUT); %d of %d ranks "
              "joined",
              missing, r->timeout_s, r->joined, r->nranks);
    r->done = true;
  }
}

static void *root_main(void *arg) {
  root_t *r = arg;
  QLOG_INFO(NULL, BOOT, "bootstrap root listening, advertised as %s", r->where);
  while (!r->done) {
    root_step(r);
    root_check_done(r);
  }
  root_free(r);
  return NULL;
}

/* ---- ids and start ------------------------------------------------ */

/* The address to advertise: addr, else QCOLL_ROOT_ADDR, else the first
 * non-loopback IPv4 address, else 127.0.0.1. */
static qcoll_status_t choose_address(const char *addr,
                                     qcoll__boot_addr_t *out) {
  if (!addr || !*addr) addr = qcoll__env_str("QCOLL_ROOT_ADDR");
  if (addr && *addr) return qcoll__addr_resolve(addr, out);
  if (qcoll__addr_first_nonloopback(out)) return QCOLL_OK;
  return qcoll__addr_resolve("127.0.0.1", out);
}

static qcoll_status_t fill_secret(const uint8_t *secret, uint8_t *out) {
  if (secret) {
    memcpy(out, secret, QCOLL__BOOT_SECRET_BYTES);
    return QCOLL_OK;
  }
  return qcoll__random_bytes(out, QCOLL__BOOT_SECRET_BYTES);
}

qcoll_status_t qcoll__bootstrap_make_id(const char *addr, int port,
                                        const uint8_t secret[32],
                                        qcoll_unique_id_t *id) {
  if (!id)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_make_id: id is NULL");
  if (port < 1 || port > 65535)
    return qcoll__error(
        NULL, QCOLL_ERR_INVALID_ARGUMENT,
        "qcoll__bootstrap_make_id: port %d is not in [1, 65535]", port);
  qcoll__boot_id_t bid;
  memset(&bid, 0, sizeof bid);
  qcoll_status_t st = choose_address(addr, &bid.root);
  if (st != QCOLL_OK) return st;
  bid.root.port = (uint16_t)port;
  st = fill_secret(secret, bid.secret);
  if (st != QCOLL_OK) return st;
  qcoll__id_encode(&bid, id);
  return QCOLL_OK;
}

static qcoll_status_t start_thread(root_t *r) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* Signals are for the application's threads, not this one. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = pthread_create(&t, &attr, root_main, r);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return qcoll__error(NULL, QCOLL_ERR_SYSTEM,
                        "bootstrap: cannot start the root thread: %s",
                        strerror(rc));
  return QCOLL_OK;
}

qcoll_status_t qcoll__bootstrap_root_start(const char *addr, int port,
                                           const uint8_t secret[32],
                                           double timeout_s,
                                           qcoll_unique_id_t *id) {
  if (!id)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "qcoll__bootstrap_root_start: id is NULL");
  if (port < 0 || port > 65535)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: root port %d is not in [0, 65535]", port);
  if (!(timeout_s > 0))
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: root timeout %g s is not positive",
                        timeout_s);
  qcoll__boot_id_t bid;
  memset(&bid, 0, sizeof bid);
  qcoll_status_t st = choose_address(addr, &bid.root);
  if (st != QCOLL_OK) return st;
  st = fill_secret(secret, bid.secret);
  if (st != QCOLL_OK) return st;

  double hello_s = QCOLL_MIN(timeout_s, QCOLL__BOOT_HELLO_DEADLINE_S);
  root_t *r = calloc(1, sizeof *r);
  if (!r ||
      !qcoll__pending_pool_init(&r->pending, ROOT_PENDING_MAX,
                                QCOLL__BOOT_HELLO_BYTES, hello_s) ||
      !(r->pfds =
            malloc((size_t)(1 + ROOT_PENDING_MAX + 1) * sizeof *r->pfds))) {
    if (r) {
      r->listen_fd = -1;
      root_free(r);
    }
    return qcoll__error(NULL, QCOLL_ERR_OUT_OF_MEMORY,
                        "bootstrap: cannot allocate the root's state");
  }
  int bound = 0;
  int err = qcoll__sock_listen(bid.root.family, port, &r->listen_fd, &bound);
  if (err != 0) {
    r->listen_fd = -1;
    root_free(r);
    return qcoll__error(NULL, QCOLL_ERR_SYSTEM,
                        "bootstrap: the root cannot listen on port %d: %s%s",
                        port, strerror(err),
                        err == EADDRINUSE ? " (QCOLL_ROOT_PORT / MASTER_PORT+1 "
                                            "is taken)"
                                          : "");
  }
  bid.root.port = (uint16_t)bound;
  memcpy(r->secret, bid.secret, sizeof r->secret);
  r->timeout_s = timeout_s;
  qcoll__addr_format(&bid.root, r->where, sizeof r->where);
  qcoll__id_encode(&bid, id);
  st = start_thread(r);
  if (st != QCOLL_OK) root_free(r);
  return st;
}
