/*
 * Socket helpers of the bootstrap (see socket.h).
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- addresses ---------------------------------------------------- */

bool qcoll__addr_to_sockaddr(const qcoll__boot_addr_t *a,
                             struct sockaddr_storage *ss, socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  if (a->family == 4) {
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    in->sin_family = AF_INET;
    in->sin_port = htons(a->port);
    memcpy(&in->sin_addr, a->ip, 4);
    *len = sizeof *in;
    return true;
  }
  if (a->family == 6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(a->port);
    memcpy(&in6->sin6_addr, a->ip, 16);
    *len = sizeof *in6;
    return true;
  }
  return false;
}

bool qcoll__addr_from_sockaddr(const struct sockaddr *sa,
                               qcoll__boot_addr_t *a) {
  memset(a, 0, sizeof *a);
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    a->family = 4;
    a->port = ntohs(in->sin_port);
    memcpy(a->ip, &in->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    a->family = 6;
    a->port = ntohs(in6->sin6_port);
    memcpy(a->ip, &in6->sin6_addr, 16);
    return true;
  }
  return false;
}

void qcoll__addr_format(const qcoll__boot_addr_t *a, char *buf, size_t n) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (a->family == 4)
    inet_ntop(AF_INET, a->ip, ip, sizeof ip);
  else if (a->family == 6)
    inet_ntop(AF_INET6, a->ip, ip, sizeof ip);
  else {
    snprintf(buf, n, "(none)");
    return;
  }
  if (a->port == 0)
    snprintf(buf, n, "%s", ip);
  else if (a->family == 6)
    snprintf(buf, n, "[%s]:%u", ip, a->port);
  else
    snprintf(buf, n, "%s:%u", ip, a->port);
}

void qcoll__sockaddr_format(const struct sockaddr *sa, char *buf, size_t n) {
  qcoll__boot_addr_t a;
  if (qcoll__addr_from_sockaddr(sa, &a))
    qcoll__addr_format(&a, buf, n);
  else
    snprintf(buf, n, "(unknown address family %d)", sa->sa_family);
}

qcoll_status_t qcoll__addr_resolve(const char *host, qcoll__boot_addr_t *out) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: cannot resolve root address '%s': %s", host,
                        gai_strerror(rc));
  /* IPv4 first: it is what most clusters route between hosts. */
  const struct addrinfo *pick = NULL;
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  for (const struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next)
    if (ai->ai_family == AF_INET6) pick = ai;
  bool ok = pick && qcoll__addr_from_sockaddr(pick->ai_addr, out);
  freeaddrinfo(res);
  if (!ok)
    return qcoll__error(NULL, QCOLL_ERR_INVALID_ARGUMENT,
                        "bootstrap: root address '%s' has no IPv4 or IPv6 "
                        "address",
                        host);
  out->port = 0;
  return QCOLL_OK;
}

bool qcoll__addr_first_nonloopback(qcoll__boot_addr_t *out) {
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    found = qcoll__addr_from_sockaddr(i->ifa_addr, out);
  }
  freeifaddrs(ifs);
  if (found) out->port = 0;
  return found;
}

/* ---- sockets ------------------------------------------------------ */

static void set_nodelay(int fd) {
  int one = 1;
  /* Small messages go out at once; failure only costs latency. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int qcoll__sock_listen(int family, int port, int *fd_out, int *bound_port) {
  int af = family == 6 ? AF_INET6 : AF_INET;
  int fd = socket(af, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int one = 1, zero = 0;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (af == AF_INET6) {
    /* Dual stack, so IPv4 peers reach an IPv6 root too. */
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    in6->sin6_port = htons((uint16_t)port);
    len = sizeof *in6;
  } else {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    in->sin_port = htons((uint16_t)port);
    len = sizeof *in;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  qcoll__boot_addr_t bound;
  qcoll__addr_from_sockaddr((struct sockaddr *)&ss, &bound);
  *bound_port = bound.port;
  *fd_out = fd;
  return 0;
}

int qcoll__sock_accept(int listen_fd, char *peer, size_t peer_size) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept4(listen_fd, (struct sockaddr *)&ss, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      qcoll__sockaddr_format((struct sockaddr *)&ss, peer, peer_size);
      return fd;
    }
    /* A connection that was reset while queued is not our error. */
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return -1;
  }
}

/* ---- waits -------------------------------------------------------- */

bool qcoll__io_aborted(const qcoll__io_t *io) {
  if (io->comm && qcoll__ctx_aborted(io->comm)) return true;
  if (io->abort_fd >= 0) {
    struct pollfd p = {io->abort_fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) return true;
  }
  return false;
}

qcoll__io_result_t qcoll__io_poll(const qcoll__io_t *io, struct pollfd *fds,
                                  nfds_t n, qcoll__deadline_t deadline) {
  fds[n].fd = io->abort_fd;
  fds[n].events = POLLIN;
  for (;;) {
    fds[n].revents = 0;
    if (io->comm && qcoll__ctx_aborted(io->comm)) return QCOLL__IO_ABORTED;
    double left = qcoll__deadline_left(deadline);
    if (left <= 0) return QCOLL__IO_TIMEOUT;
    int ms = (int)(left * 1000.0) + 1;
    if (ms > QCOLL__POLL_SLICE_MS) ms = QCOLL__POLL_SLICE_MS;
    int rc = poll(fds, n + 1, ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      /* poll only fails for bad arguments or no memory: treat as an
       * error the caller reports as a timeout-free failure. */
      return QCOLL__IO_ERROR;
    }
    if (fds[n].revents & POLLIN) return QCOLL__IO_ABORTED;
    if (rc > 0) return QCOLL__IO_OK;
  }
}

static bool is_reset(int e) {
  return e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ESHUTDOWN;
}

qcoll__io_result_t qcoll__io_send_all(const qcoll__io_t *io, int fd,
                                      const void *buf, size_t len,
                                      qcoll__deadline_t deadline, int *err) {
  const uint8_t *p = buf;
  *err = 0;
  if (qcoll__io_aborted(io)) return QCOLL__IO_ABORTED;
  while (len > 0) {
    ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      len -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd fds[2] = {{fd, POLLOUT, 0}};
      qcoll__io_result_t r = qcoll__io_poll(io, fds, 1, deadline);
      if (r != QCOLL__IO_OK) return r;
      continue;
    }
    *err = k < 0 ? errno : EPIPE;
    return is_reset(*err) ? QCOLL__IO_CLOSED : QCOLL__IO_ERROR;
  }
  return QCOLL__IO_OK;
}

qcoll__io_result_t qcoll__io_recv_all(const qcoll__io_t *io, int fd, void *buf,
                                      size_t len, qcoll__deadline_t deadline,
                                      int *err) {
  uint8_t *p = buf;
  *err = 0;
  if (qcoll__io_aborted(io)) return QCOLL__IO_ABORTED;
  while (len > 0) {
    ssize_t k = recv(fd, p, len, 0);
    if (k > 0) {
      p += k;
      len -= (size_t)k;
      continue;
    }
    if (k == 0) return QCOLL__IO_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      struct pollfd fds[2] = {{fd, POLLIN, 0}};
      qcoll__io_result_t r = qcoll__io_poll(io, fds, 1, deadline);
      if (r != QCOLL__IO_OK) return r;
      continue;
    }
    *err = errno;
    return is_reset(*err) ? QCOLL__IO_CLOSED : QCOLL__IO_ERROR;
  }
  return QCOLL__IO_OK;
}

/* Errors after which a later attempt may succeed (the listener is not up
 * yet, or the network is briefly unhappy). */
static bool is_retryable(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH ||
         e == EHOSTUNREACH || e == ECONNRESET || e == EAGAIN ||
         e == EADDRNOTAVAIL;
}

/* One connection attempt; 0 on success or an errno. */
static qcoll__io_result_t connect_once(const qcoll__io_t *io,
                                       const qcoll__boot_addr_t *addr,
                                       qcoll__deadline_t deadline, int *fd_out,
                                       int *err) {
  struct sockaddr_storage ss;
  socklen_t len;
  if (!qcoll__addr_to_sockaddr(addr, &ss, &len)) {
    *err = EAFNOSUPPORT;
    return QCOLL__IO_ERROR;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return QCOLL__IO_ERROR;
  }
  int rc;
  do rc = connect(fd, (struct sockaddr *)&ss, len);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    *err = errno;
    close(fd);
    return QCOLL__IO_ERROR;
  }
  if (rc != 0) {
    struct pollfd fds[2] = {{fd, POLLOUT, 0}};
    qcoll__io_result_t r = qcoll__io_poll(io, fds, 1, deadline);
    if (r != QCOLL__IO_OK) {
      *err = r == QCOLL__IO_TIMEOUT ? ETIMEDOUT : 0;
      close(fd);
      return r;
    }
    int soerr = 0;
    socklen_t slen = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0) soerr = errno;
    if (soerr != 0) {
      *err = soerr;
      close(fd);
      return QCOLL__IO_ERROR;
    }
  }
  set_nodelay(fd);
  *fd_out = fd;
  return QCOLL__IO_OK;
}

qcoll__io_result_t qcoll__io_connect(const qcoll__io_t *io,
                                     const qcoll__boot_addr_t *addr,
                                     qcoll__deadline_t deadline, bool retry,
                                     int *fd, int *err) {
  double backoff = 0.01;
  int last = 0; /* the last refusal, to report instead of "timed out" */
  *err = 0;
  for (;;) {
    if (qcoll__io_aborted(io)) return QCOLL__IO_ABORTED;
    qcoll__io_result_t r = connect_once(io, addr, deadline, fd, err);
    if (r == QCOLL__IO_TIMEOUT && last) *err = last;
    if (r != QCOLL__IO_ERROR || !retry || !is_retryable(*err)) return r;
    last = *err;
    if (qcoll__deadline_passed(deadline)) return QCOLL__IO_TIMEOUT;
    /* Sleep (abortably) before the next attempt. */
    double nap = QCOLL_MIN(backoff, qcoll__deadline_left(deadline));
    struct pollfd none[1];
    r = qcoll__io_poll(io, none, 0, qcoll__deadline_in(nap));
    if (r == QCOLL__IO_ABORTED) return r;
    backoff = QCOLL_MIN(backoff * 2, 0.5);
  }
}

/* ---- pending hellos ----------------------------------------------- */

qcoll__pending_result_t qcoll__pending_read(qcoll__pending_t *p, char *why,
                                            size_t why_size) {
  while (p->have < p->need) {
    /* Read only up to the expected frame: the peer cannot make us read
     * (or buffer) more than one hello. */
    ssize_t k = recv(p->fd, p->buf + p->have, p->need - p->have, 0);
    if (k > 0) {
      size_t before = p->have;
      p->have += (size_t)k;
      if (before < 4 && p->have >= 4) {
        size_t frame = 0;
        char msg[QCOLL__BOOT_WHY_MAX];
        if (qcoll__msg_peek_length(p->buf, p->have, p->need, p->need, &frame,
                                   msg) != QCOLL__MSG_OK) {
          snprintf(why, why_size, "%s", msg);
          return QCOLL__PENDING_DROP;
        }
      }
      continue;
    }
    if (k == 0) {
      snprintf(why, why_size, "closed the connection after %zu of %zu bytes",
               p->have, p->need);
      return QCOLL__PENDING_DROP;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return QCOLL__PENDING_MORE;
    snprintf(why, why_size, "read failed after %zu of %zu bytes: %s", p->have,
             p->need, strerror(errno));
    return QCOLL__PENDING_DROP;
  }
  return QCOLL__PENDING_DONE;
}

bool qcoll__pending_pool_init(qcoll__pending_pool_t *pool, int cap, size_t need,
                              double hello_s) {
  pool->items = need <= sizeof pool->items[0].buf
                    ? calloc((size_t)cap, sizeof *pool->items)
                    : NULL;
  pool->count = 0;
  pool->cap = pool->items ? cap : 0;
  pool->need = need;
  pool->hello_s = hello_s;
  return pool->items != NULL;
}

void qcoll__pending_pool_free(qcoll__pending_pool_t *pool) {
  for (int i = 0; i < pool->count; i++) close(pool->items[i].fd);
  free(pool->items);
  pool->items = NULL;
  pool->count = pool->cap = 0;
}

/* Item i leaves the pool (the last item moves into its slot). */
static void pending_remove(qcoll__pending_pool_t *pool, int i) {
  pool->items[i] = pool->items[--pool->count];
}

static void pending_drop(qcoll__pending_pool_t *pool, int i,
                         const qcoll__pending_handler_t *h, const char *why) {
  h->drop(h->ctx, &pool->items[i], why);
  close(pool->items[i].fd);
  pending_remove(pool, i);
}

/* Read what item i has sent; hand it on and remove it once it is done. */
static void pending_progress(qcoll__pending_pool_t *pool, int i,
                             const qcoll__pending_handler_t *h) {
  char why[QCOLL__BOOT_WHY_MAX + 64];
  qcoll__pending_result_t res =
      qcoll__pending_read(&pool->items[i], why, sizeof why);
  if (res == QCOLL__PENDING_MORE) return;
  if (res == QCOLL__PENDING_DROP) {
    pending_drop(pool, i, h, why);
    return;
  }
  h->done(h->ctx, &pool->items[i]);
  pending_remove(pool, i);
}

/* Make room by dropping the connection that has waited longest. */
static void pending_evict_oldest(qcoll__pending_pool_t *pool,
                                 const qcoll__pending_handler_t *h) {
  int oldest = 0;
  for (int i = 1; i < pool->count; i++)
    if (pool->items[i].deadline.at < pool->items[oldest].deadline.at)
      oldest = i;
  char why[96];
  snprintf(why, sizeof why,
           "%d connections were waiting to authenticate; dropped the oldest "
           "(%zu of %zu bytes sent)",
           pool->count, pool->items[oldest].have, pool->need);
  pending_drop(pool, oldest, h, why);
}

int qcoll__pending_accept(qcoll__pending_pool_t *pool, int listen_fd,
                          const qcoll__pending_handler_t *h) {
  /* At most a pool's worth per call, so a flood that connects as fast as
   * this accepts cannot keep the caller from looking at what it has. */
  for (int taken = 0; taken < pool->cap; taken++) {
    char peer[QCOLL__ADDRSTR_MAX];
    int fd = qcoll__sock_accept(listen_fd, peer, sizeof peer);
    if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
    if (pool->count >= pool->cap) pending_evict_oldest(pool, h);
    qcoll__pending_t *p = &pool->items[pool->count++];
    p->fd = fd;
    p->need = pool->need;
    p->have = 0;
    p->deadline = qcoll__deadline_in(pool->hello_s);
    snprintf(p->peer, sizeof p->peer, "%s", peer);
    /* A peer that knows the secret wrote its hello right after connecting:
     * it is usually here already, so it never has to wait in the pool. */
    pending_progress(pool, pool->count - 1, h);
  }
  return 0;
}

void qcoll__pending_service(qcoll__pending_pool_t *pool,
                            const struct pollfd *pfds,
                            const qcoll__pending_handler_t *h) {
  /* Which items poll found readable, noted before any handler runs: a
   * handler may move the caller's poll array (the root's grows when the
   * first hello tells it the world's size), so pfds is not read after. */
  for (int i = 0; i < pool->count; i++)
    pool->items[i].ready = pfds[i].revents != 0;
  /* Downward, so removing item i (the last one, already visited, moves
   * into its slot) leaves the items still to visit in place. */
  for (int i = pool->count - 1; i >= 0; i--)
    if (pool->items[i].ready) pending_progress(pool, i, h);
  for (int i = pool->count - 1; i >= 0; i--) {
    qcoll__pending_t *p = &pool->items[i];
    if (!qcoll__deadline_passed(p->deadline)) continue;
    char why[96];
    snprintf(why, sizeof why,
             "sent %zu of the %zu bytes of a hello within "
             "%.1f s",
             p->have, p->need, pool->hello_s);
    pending_drop(pool, i, h, why);
  }
}

double qcoll__pending_next_deadline(const qcoll__pending_pool_t *pool,
                                    double at) {
  for (int i = 0; i < pool->count; i++)
    at = QCOLL_MIN(at, pool->items[i].deadline.at);
  return at;
}
