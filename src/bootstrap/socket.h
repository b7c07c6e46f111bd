/*
 * Socket helpers of the bootstrap: addresses, listening, and reads, writes
 * and connects that respect a deadline and can be interrupted.
 *
 * Every socket is non-blocking and close-on-exec; every wait is a poll()
 * of at most 100 ms, so a wait notices an abort (the communicator's state,
 * or a byte in the bootstrap's abort pipe) promptly.  Sends use
 * MSG_NOSIGNAL, so a peer that vanished is an error, not a SIGPIPE.
 */
#ifndef QCOLL_BOOTSTRAP_SOCKET_H
#define QCOLL_BOOTSTRAP_SOCKET_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "../base/context.h"
#include "message.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for "[ffff:...:ffff]:65535" and a NUL. */
#define QCOLL__ADDRSTR_MAX 64
/* Longest single poll(): waits re-check aborts at least this often. */
#define QCOLL__POLL_SLICE_MS 100

/* ---- addresses ---------------------------------------------------- */

bool qcoll__addr_to_sockaddr(const qcoll__boot_addr_t *a,
                             struct sockaddr_storage *ss, socklen_t *len);
bool qcoll__addr_from_sockaddr(const struct sockaddr *sa,
                               qcoll__boot_addr_t *a);
/* "1.2.3.4:5" or "[::1]:5"; port omitted when 0. */
void qcoll__addr_format(const qcoll__boot_addr_t *a, char *buf, size_t n);
void qcoll__sockaddr_format(const struct sockaddr *sa, char *buf, size_t n);
/* Resolve a host name or numeric address (IPv4 preferred); port 0. */
qcoll_status_t qcoll__addr_resolve(const char *host, qcoll__boot_addr_t *out);
/* The first IPv4 address of an interface that is up and not loopback. */
bool qcoll__addr_first_nonloopback(qcoll__boot_addr_t *out);

/* Listen on the wildcard address of family (4 or 6; 6 also takes IPv4) at
 * port (0: any free port).  Returns 0 or an errno; *bound_port is the port. */
int qcoll__sock_listen(int family, int port, int *fd, int *bound_port);

/* Accept one pending connection (non-blocking): the fd, or -1 with errno
 * (EAGAIN when none is waiting).  peer gets the peer's address as text. */
int qcoll__sock_accept(int listen_fd, char *peer, size_t peer_size);

/* ---- waits with a deadline ---------------------------------------- */

typedef struct qcoll__io {
  qcoll__ctx_t *comm; /* checked for abort; NULL in the root thread */
  int abort_fd;      /* readable once aborted; -1 for none */
} qcoll__io_t;

typedef enum qcoll__io_result {
  QCOLL__IO_OK = 0,
  QCOLL__IO_TIMEOUT,
  QCOLL__IO_ABORTED,
  QCOLL__IO_CLOSED, /* the peer closed or reset the connection */
  QCOLL__IO_ERROR   /* another socket error: see *err */
} qcoll__io_result_t;

bool qcoll__io_aborted(const qcoll__io_t *io);

/* Wait until one of fds[0..n) has an event, the deadline passes or the
 * wait is aborted.  fds must have room for n+1 entries: the last one is
 * used for the abort fd. */
qcoll__io_result_t qcoll__io_poll(const qcoll__io_t *io, struct pollfd *fds,
                                  nfds_t n, qcoll__deadline_t deadline);

qcoll__io_result_t qcoll__io_send_all(const qcoll__io_t *io, int fd,
                                      const void *buf, size_t len,
                                      qcoll__deadline_t deadline, int *err);
qcoll__io_result_t qcoll__io_recv_all(const qcoll__io_t *io, int fd, void *buf,
                                      size_t len, qcoll__deadline_t deadline,
                                      int *err);

/* Connect to addr.  With retry, a refused or unreachable peer is tried
 * again (with backoff) until the deadline: the root may not listen yet. */
qcoll__io_result_t qcoll__io_connect(const qcoll__io_t *io,
                                     const qcoll__boot_addr_t *addr,
                                     qcoll__deadline_t deadline, bool retry,
                                     int *fd, int *err);

/* ---- reading one fixed-size hello from an unauthenticated peer ------ */

/* A connection that has not yet proven it knows the secret.  It gets a
 * fixed buffer and its own deadline, so it can neither make us allocate
 * nor hold up other connections. */
typedef struct qcoll__pending {
  int fd;
  size_t need; /* the exact frame size expected */
  size_t have;
  qcoll__deadline_t deadline;
  char peer[QCOLL__ADDRSTR_MAX];
  bool ready; /* poll found it readable (qcoll__pending_service) */
  uint8_t buf[QCOLL__BOOT_HELLO_BYTES];
} qcoll__pending_t;

typedef enum qcoll__pending_result {
  QCOLL__PENDING_MORE = 0, /* nothing wrong so far; wait for more */
  QCOLL__PENDING_DONE,     /* buf holds `need` bytes */
  QCOLL__PENDING_DROP      /* why says why */
} qcoll__pending_result_t;

/* Read what is available without blocking. */
qcoll__pending_result_t qcoll__pending_read(qcoll__pending_t *p, char *why,
                                            size_t why_size);

/* A pool of pending connections, fixed capacity.  A full pool makes room
 * for a new connection by dropping the one that has waited longest: an
 * expected peer sends its hello as soon as it is connected, so it is never
 * the oldest for long, while a flood of stalled connections can only push
 * out each other. */
typedef struct qcoll__pending_pool {
  qcoll__pending_t *items;
  int count, cap;
  size_t need;    /* the hello size every connection must send */
  double hello_s; /* each connection's deadline to send it */
} qcoll__pending_pool_t;

/* What the owner of a pool does with a connection that finished: `done`
 * gets a complete hello and takes ownership of p->fd; `drop` only logs
 * (the pool closes the fd afterwards). */
typedef struct qcoll__pending_handler {
  void (*done)(void *ctx, qcoll__pending_t *p);
  void (*drop)(void *ctx, const qcoll__pending_t *p, const char *why);
  void *ctx;
} qcoll__pending_handler_t;

bool qcoll__pending_pool_init(qcoll__pending_pool_t *pool, int cap, size_t need,
                              double hello_s);
/* Close every connection and free the pool. */
void qcoll__pending_pool_free(qcoll__pending_pool_t *pool);
/* Accept the connections waiting on listen_fd (at most the pool's
 * capacity per call) and read what each already sent (a hello that is
 * complete is handed to h->done at once).  Returns 0,
 * or the errno of an accept that failed for another reason than "none
 * left". */
int qcoll__pending_accept(qcoll__pending_pool_t *pool, int listen_fd,
                          const qcoll__pending_handler_t *h);
/* Read from every item whose pollfd in pfds[0..count) has events, then
 * drop the items past their deadline.  pfds is read before any handler
 * runs, so a handler may reallocate the array it lies in. */
void qcoll__pending_service(qcoll__pending_pool_t *pool,
                            const struct pollfd *pfds,
                            const qcoll__pending_handler_t *h);
/* The earliest deadline of an item, or `at` if that is earlier. */
double qcoll__pending_next_deadline(const qcoll__pending_pool_t *pool,
                                    double at);

#ifdef __cplusplus
}
#endif

#endif
