/*
 * The TCP bootstrap with ranks as threads of this process: rendezvous,
 * ring collectives, the root's checks, deadlines, aborts and intruders.
 *
 * Run one group with `test_bootstrap <group>` (see main); no argument runs
 * them all.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* cmocka needs setjmp.h, stdarg.h and stddef.h first. */
#include <cmocka.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/message.h"
#include "base/context.h"
#include "../reliability/proc_readings.h"
#include "qcoll.h"

/* ---- ranks as threads ------------------------------------------------ */

typedef struct rank_ctx rank_ctx_t;
typedef void (*rank_body_t)(rank_ctx_t *);

struct rank_ctx {
  qcoll__ctx_t ctx; /* what the bootstrap sees of a communicator */
  qcoll_unique_id_t id;
  qcoll__bootstrap_t *bs;
  qcoll_status_t init_st;
  double init_s;    /* seconds qcoll__bootstrap_init took */
  rank_body_t body; /* run after a successful init */
  qcoll_status_t body_st;
  int checked; /* values the body verified */
  int wrong;   /* values the body found wrong */
  void *shared;
};

static void ctx_setup(qcoll__ctx_t *ctx, int rank, int nranks,
                      double timeout_s) {
  memset(ctx, 0, sizeof *ctx);
  ctx->rank = rank;
  ctx->nranks = nranks;
  ctx->device = QCOLL_DEVICE_NONE;
  ctx->timeout_s = timeout_s;
  atomic_init(&ctx->state, QCOLL_COMM_LIVE);
  pthread_mutex_init(&ctx->error_lock, NULL);
}

static void *rank_main(void *arg) {
  rank_ctx_t *c = arg;
  double t0 = qcoll__now();
  c->init_st = qcoll__bootstrap_init(&c->ctx, &c->id, &c->bs);
  c->init_s = qcoll__now() - t0;
  if (c->init_st == QCOLL_OK && c->body) c->body(c);
  return NULL;
}

/* Start one thread per entry of ranks[] (rank numbers may repeat or be out
 * of range on purpose), all claiming world size nranks except where
 * claim[] says otherwise, and wait for them. */
static rank_ctx_t *run_ranks(const qcoll_unique_id_t *id, int count,
                             const int *ranks, int nranks, const int *claim,
                             double timeout_s, rank_body_t body, void *shared) {
  rank_ctx_t *c = calloc((size_t)count, sizeof *c);
  pthread_t *t = calloc((size_t)count, sizeof *t);
  assert_non_null(c);
  assert_non_null(t);
  for (int i = 0; i < count; i++) {
    int r = ranks ? ranks[i] : i;
    ctx_setup(&c[i].ctx, r, claim ? claim[i] : nranks, timeout_s);
    c[i].id = *id;
    c[i].body = body;
    c[i].shared = shared;
    assert_int_equal(pthread_create(&t[i], NULL, rank_main, &c[i]), 0);
  }
  for (int i = 0; i < count; i++) pthread_join(t[i], NULL);
  free(t);
  return c;
}

static void free_ranks(rank_ctx_t *c, int count) {
  for (int i = 0; i < count; i++) {
    qcoll__bootstrap_destroy(c[i].bs);
    pthread_mutex_destroy(&c[i].ctx.error_lock);
  }
  free(c);
}

static qcoll_unique_id_t start_root(double timeout_s) {
  qcoll_unique_id_t id;
  assert_int_equal(
      qcoll__bootstrap_root_start("127.0.0.1", 0, NULL, timeout_s, &id),
      QCOLL_OK);
  return id;
}

/* ---- collective bodies ----------------------------------------------- */

static uint8_t pattern(int rank, size_t i, int salt) {
  return (uint8_t)(rank * 31 + (int)(i * 7) + salt * 13 + 1);
}

static void check_byte(rank_ctx_t *c, uint8_t got, uint8_t want) {
  c->checked++;
  if (got != want) c->wrong++;
}

#define SMALL_BLOCK 13
#define BCAST_BYTES 1000

/* All-gather of 13-byte blocks, broadcasts from three roots, and a barrier
 * that must not let anyone through before everyone arrived. */
static void body_collectives(rank_ctx_t *c) {
  int n = c->ctx.nranks, me = c->ctx.rank;
  atomic_int *arrived = c->shared;
  qcoll_status_t st = QCOLL_OK;

  uint8_t *all = malloc((size_t)n * SMALL_BLOCK);
  memset(all, 0xEE, (size_t)n * SMALL_BLOCK);
  for (size_t i = 0; i < SMALL_BLOCK; i++)
    all[(size_t)me * SMALL_BLOCK + i] = pattern(me, i, 0);
  st = qcoll__bootstrap_allgather(c->bs, all, SMALL_BLOCK);
  if (st == QCOLL_OK)
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < SMALL_BLOCK; i++)
        check_byte(c, all[(size_t)r * SMALL_BLOCK + i], pattern(r, i, 0));
  free(all);

  int roots[3] = {0, n - 1, n / 2};
  uint8_t buf[BCAST_BYTES];
  for (int k = 0; k < 3 && st == QCOLL_OK; k++) {
    int root = roots[k];
    for (size_t i = 0; i < BCAST_BYTES; i++)
      buf[i] = me == root ? pattern(root, i, k + 1) : 0xEE;
    st = qcoll__bootstrap_broadcast(c->bs, buf, BCAST_BYTES, root);
    if (st == QCOLL_OK)
      for (size_t i = 0; i < BCAST_BYTES; i++)
        check_byte(c, buf[i], pattern(root, i, k + 1));
  }

  if (st == QCOLL_OK) {
    atomic_fetch_add(arrived, 1);
    st = qcoll__bootstrap_barrier(c->bs);
    /* Everyone incremented before entering, so after the barrier the
     * counter must be complete on every rank. */
    check_byte(c, (uint8_t)atomic_load(arrived), (uint8_t)n);
  }
  /* A last barrier so nobody tears down while others still read. */
  if (st == QCOLL_OK) st = qcoll__bootstrap_barrier(c->bs);
  c->body_st = st;
}

static void run_collectives(int n) {
  qcoll_unique_id_t id = start_root(10.0);
  atomic_int arrived;
  atomic_init(&arrived, 0);
  double t0 = qcoll__now();
  rank_ctx_t *c =
      run_ranks(&id, n, NULL, n, NULL, 10.0, body_collectives, &arrived);
  int checked = 0;
  for (int i = 0; i < n; i++) {
    if (c[i].init_st != QCOLL_OK || c[i].body_st != QCOLL_OK)
      print_message("rank %d: init %d body %d: %s\n", i, c[i].init_st,
                    c[i].body_st, c[i].ctx.last_error);
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_int_equal(c[i].wrong, 0);
    assert_int_equal(c[i].checked, n * SMALL_BLOCK + 3 * BCAST_BYTES + 1);
    checked += c[i].checked;
  }
  print_message(
      "%d rank(s): rendezvous + all-gather + 3 broadcasts + barriers "
      "in %.3f s, %d bytes checked\n",
      n, qcoll__now() - t0, checked);
  free_ranks(c, n);
}

/* ---- success cases --------------------------------------------------- */

static int count_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k > 0) {
      target[k] = '\0';
      if (strncmp(target, "socket:", 7) == 0) n++;
    }
  }
  closedir(d);
  return n;
}

static void one_rank_works_without_ring_sockets(void **state) {
  int before = count_sockets();
  assert_true(before >= 0);
  run_collectives(1);

  /* And explicitly: after the rendezvous (the root thread hangs up once it
   * answered), a live world of one holds no socket at all. */
  qcoll_unique_id_t id = start_root(5.0);
  rank_ctx_t c;
  ctx_setup(&c.ctx, 0, 1, 5.0);
  assert_int_equal(qcoll__bootstrap_init(&c.ctx, &id, &c.bs), QCOLL_OK);
  int now = count_sockets();
  for (int i = 0; i < 100 && now > before; i++) {
    usleep(10000);
    now = count_sockets();
  }
  assert_int_equal(now, before);
  uint8_t x[4] = {1, 2, 3, 4};
  assert_int_equal(qcoll__bootstrap_allgather(c.bs, x, 4), QCOLL_OK);
  assert_int_equal(qcoll__bootstrap_broadcast(c.bs, x, 4, 0), QCOLL_OK);
  assert_int_equal(qcoll__bootstrap_barrier(c.bs), QCOLL_OK);
  assert_int_equal(x[3], 4);
  assert_int_equal(qcoll__bootstrap_broadcast(c.bs, x, 4, 1),
                   QCOLL_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(c.ctx.last_error, "root 1 is out of range [0, 1)"));
  qcoll__bootstrap_destroy(c.bs);
}

static void two_ranks(void **state) {
  run_collectives(2);
}
static void eight_ranks(void **state) {
  run_collectives(8);
}
static void sixty_four_ranks(void **state) {
  run_collectives(64);
}

#define BIG_BLOCK (256 * 1024)

/* Blocks larger than socket buffers: sends and receives must progress
 * together or the ring deadlocks. */
static void body_big_allgather(rank_ctx_t *c) {
  int n = c->ctx.nranks, me = c->ctx.rank;
  uint8_t *all = malloc((size_t)n * BIG_BLOCK);
  memset(all, 0, (size_t)n * BIG_BLOCK);
  for (size_t i = 0; i < BIG_BLOCK; i++)
    all[(size_t)me * BIG_BLOCK + i] = pattern(me, i, 5);
  c->body_st = qcoll__bootstrap_allgather(c->bs, all, BIG_BLOCK);
  if (c->body_st == QCOLL_OK)
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < BIG_BLOCK; i++)
        check_byte(c, all[(size_t)r * BIG_BLOCK + i], pattern(r, i, 5));
  free(all);
  if (c->body_st == QCOLL_OK) c->body_st = qcoll__bootstrap_barrier(c->bs);
}

static void large_allgather(void **state) {
  enum { N = 8 };
  qcoll_unique_id_t id = start_root(20.0);
  double t0 = qcoll__now();
  rank_ctx_t *c =
      run_ranks(&id, N, NULL, N, NULL, 20.0, body_big_allgather, NULL);
  for (int i = 0; i < N; i++) {
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_int_equal(c[i].wrong, 0);
    assert_int_equal(c[i].checked, N * BIG_BLOCK);
  }
  print_message("8 ranks x 256 KiB all-gather: exact, %.3f s\n",
                qcoll__now() - t0);
  free_ranks(c, N);
}

/* The default advertised address (QCOLL_ROOT_ADDR unset: the first
 * non-loopback IPv4, else 127.0.0.1) must be reachable from this host. */
static void default_address_and_hex_round_trip(void **state) {
  unsetenv("QCOLL_ROOT_ADDR");
  qcoll_unique_id_t id, back;
  assert_int_equal(qcoll__bootstrap_root_start(NULL, 0, NULL, 10.0, &id),
                   QCOLL_OK);
  char hex[2 * QCOLL_UNIQUE_ID_BYTES + 1];
  assert_int_equal(qcoll_unique_id_to_hex(&id, hex), QCOLL_OK);
  assert_int_equal(strlen(hex), 2 * QCOLL_UNIQUE_ID_BYTES);
  assert_int_equal(qcoll_unique_id_from_hex(hex, &back), QCOLL_OK);
  assert_memory_equal(id.bytes, back.bytes, QCOLL_UNIQUE_ID_BYTES);
  qcoll__boot_id_t bid;
  assert_int_equal(qcoll__id_decode(&back, &bid, NULL), QCOLL__MSG_OK);
  assert_true(bid.root.port > 0);
  char ip[INET6_ADDRSTRLEN];
  inet_ntop(bid.root.family == 4 ? AF_INET : AF_INET6, bid.root.ip, ip,
            sizeof ip);
  print_message("default root address %s port %u\n", ip, bid.root.port);

  /* Ranks join with the id that went through hex. */
  atomic_int arrived;
  atomic_init(&arrived, 0);
  rank_ctx_t *c =
      run_ranks(&back, 3, NULL, 3, NULL, 10.0, body_collectives, &arrived);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_int_equal(c[i].wrong, 0);
  }
  free_ranks(c, 3);

  /* make_id writes exactly the given address, port and secret. */
  uint8_t secret[32];
  for (int i = 0; i < 32; i++) secret[i] = (uint8_t)(200 - i);
  assert_int_equal(qcoll__bootstrap_make_id("127.0.0.1", 29501, secret, &id),
                   QCOLL_OK);
  assert_int_equal(qcoll__id_decode(&id, &bid, NULL), QCOLL__MSG_OK);
  assert_int_equal(bid.root.family, 4);
  assert_int_equal(bid.root.port, 29501);
  assert_int_equal(bid.root.ip[0], 127);
  assert_int_equal(bid.root.ip[3], 1);
  assert_memory_equal(bid.secret, secret, 32);
  assert_int_equal(qcoll__bootstrap_make_id("127.0.0.1", 0, secret, &id),
                   QCOLL_ERR_INVALID_ARGUMENT);
}

/* ---- the root's checks ----------------------------------------------- */

#define CHECK_TIMEOUT 2.0

/* Every rank failed with `want`, its message names the problem, and it
 * failed within the deadline (plus the grace ranks give the root). */
static void expect_all_fail(rank_ctx_t *c, int count, qcoll_status_t want,
                            const char *needle, double max_s) {
  for (int i = 0; i < count; i++) {
    print_message("  rank %d (claims %d of %d): status %d after %.2f s: %s\n",
                  c[i].ctx.rank, c[i].ctx.rank, c[i].ctx.nranks, c[i].init_st,
                  c[i].init_s, c[i].ctx.last_error);
    assert_int_equal(c[i].init_st, want);
    assert_non_null(strstr(c[i].ctx.last_error, needle));
    assert_true(c[i].init_s <= max_s);
    assert_null(c[i].bs);
  }
}

static void wrong_world_size(void **state) {
  qcoll_unique_id_t id = start_root(CHECK_TIMEOUT);
  int claim[4] = {4, 4, 4, 5};
  rank_ctx_t *c = run_ranks(&id, 4, NULL, 4, claim, CHECK_TIMEOUT, NULL, NULL);
  /* Which rank the root heard first decides the wording, not the facts. */
  expect_all_fail(c, 4, QCOLL_ERR_MISMATCH, "claims world size",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  for (int i = 0; i < 4; i++) {
    assert_non_null(strstr(c[i].ctx.last_error, "5"));
    assert_non_null(strstr(c[i].ctx.last_error, "said"));
  }
  free_ranks(c, 4);
}

static void duplicate_rank(void **state) {
  qcoll_unique_id_t id = start_root(CHECK_TIMEOUT);
  int ranks[4] = {0, 1, 2, 2};
  rank_ctx_t *c = run_ranks(&id, 4, ranks, 4, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 4, QCOLL_ERR_MISMATCH, "rank 2 joined twice",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  free_ranks(c, 4);
}

static void rank_out_of_range(void **state) {
  qcoll_unique_id_t id = start_root(CHECK_TIMEOUT);
  int ranks[4] = {0, 1, 2, 5};
  rank_ctx_t *c = run_ranks(&id, 4, ranks, 4, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 4, QCOLL_ERR_INVALID_ARGUMENT,
                  "rank 5 is out of range [0, 4)",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  free_ranks(c, 4);

  id = start_root(CHECK_TIMEOUT);
  int negative[2] = {0, -1};
  c = run_ranks(&id, 2, negative, 2, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 2, QCOLL_ERR_INVALID_ARGUMENT,
                  "rank -1 is out of range [0, 2)",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  free_ranks(c, 2);
}

static void missing_ranks_time_out_everywhere(void **state) {
  qcoll_unique_id_t id = start_root(CHECK_TIMEOUT);
  rank_ctx_t *c = run_ranks(&id, 3, NULL, 4, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 3, QCOLL_ERR_TIMEOUT,
                  "rank 3 never arrived within 2.0 s (QCOLL_TIMEOUT)",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  /* The root, not each rank's own deadline, ended the wait: at the
   * deadline, not at deadline + grace. */
  for (int i = 0; i < 3; i++) {
    assert_true(c[i].init_s >= CHECK_TIMEOUT - 0.5);
    assert_true(c[i].init_s <= CHECK_TIMEOUT + 1.0);
  }
  free_ranks(c, 3);

  id = start_root(CHECK_TIMEOUT);
  int ranks[2] = {0, 2};
  c = run_ranks(&id, 2, ranks, 4, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 2, QCOLL_ERR_TIMEOUT, "ranks 1, 3 never arrived",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  free_ranks(c, 2);
}

/* A root started with the default deadline (as qcoll_get_unique_id does
 * without QCOLL_TIMEOUT) takes the ranks' shorter one from their hellos, so
 * it names the missing rank before the ranks' own waits end. */
static void root_takes_the_ranks_deadline(void **state) {
  qcoll_unique_id_t id = start_root(300.0);
  rank_ctx_t *c = run_ranks(&id, 2, NULL, 3, NULL, CHECK_TIMEOUT, NULL, NULL);
  expect_all_fail(c, 2, QCOLL_ERR_TIMEOUT,
                  "rank 2 never arrived within 2.0 s (QCOLL_TIMEOUT)",
                  CHECK_TIMEOUT + QCOLL__BOOT_GRACE_S);
  for (int i = 0; i < 2; i++) assert_true(c[i].init_s <= CHECK_TIMEOUT + 1.0);
  free_ranks(c, 2);
}

static void unreachable_root_times_out(void **state) {
  /* A port nobody listens on: bind one, note it, close it. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in in = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof in;
  assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof in), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
  int port = ntohs(in.sin_port);
  close(fd);
  qcoll_unique_id_t id;
  assert_int_equal(qcoll__bootstrap_make_id("127.0.0.1", port, NULL, &id),
                   QCOLL_OK);
  rank_ctx_t *c = run_ranks(&id, 1, NULL, 2, NULL, 1.0, NULL, NULL);
  expect_all_fail(c, 1, QCOLL_ERR_TIMEOUT, "connecting to the root", 1.0 + 0.5);
  assert_true(c[0].init_s >= 0.9);
  free_ranks(c, 1);

  /* A zeroed id is refused at once. */
  memset(&id, 0, sizeof id);
  c = run_ranks(&id, 1, NULL, 2, NULL, 1.0, NULL, NULL);
  expect_all_fail(c, 1, QCOLL_ERR_INVALID_ARGUMENT, "unique id is not valid",
                  0.5);
  free_ranks(c, 1);
}

/* ---- intruders ------------------------------------------------------- */

static int raw_connect(const qcoll_unique_id_t *id, qcoll__boot_id_t *bid) {
  assert_int_equal(qcoll__id_decode(id, bid, NULL), QCOLL__MSG_OK);
  struct sockaddr_in in = {.sin_family = AF_INET,
                           .sin_port = htons(bid->root.port)};
  memcpy(&in.sin_addr, bid->root.ip, 4);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof in), 0);
  return fd;
}

static void raw_send(int fd, const void *buf, size_t len) {
  assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Seconds until the peer hangs up on fd (EOF or reset), or -1 if it did
 * not within max_s. */
static double wait_hangup(int fd, double max_s) {
  double t0 = qcoll__now();
  while (qcoll__now() - t0 < max_s) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char b[256];
      ssize_t k = recv(fd, b, sizeof b, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno == ECONNRESET)) return qcoll__now() - t0;
      assert_true(k < 0); /* an intruder must never be told anything */
    }
  }
  return -1;
}

static size_t valid_hello(const qcoll__boot_id_t *bid, int rank, int nranks,
                          uint8_t *buf) {
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bid->secret, sizeof h.secret);
  h.rank = rank;
  h.nranks = nranks;
  h.listen.family = 4;
  h.listen.port = 9;
  h.listen.ip[0] = 127, h.listen.ip[3] = 1;
  return qcoll__msg_encode_hello(&h, buf, QCOLL__BOOT_HELLO_BYTES);
}

static void body_allgather_check(rank_ctx_t *c) {
  int n = c->ctx.nranks, me = c->ctx.rank;
  uint8_t all[64 * 8];
  for (int i = 0; i < 8; i++) all[me * 8 + i] = pattern(me, (size_t)i, 9);
  c->body_st = qcoll__bootstrap_allgather(c->bs, all, 8);
  for (int r = 0; r < n && c->body_st == QCOLL_OK; r++)
    for (int i = 0; i < 8; i++)
      check_byte(c, all[r * 8 + i], pattern(r, (size_t)i, 9));
  if (c->body_st == QCOLL_OK) c->body_st = qcoll__bootstrap_barrier(c->bs);
}

static void intruders_are_dropped_and_rendezvous_completes(void **state) {
  const double T = 3.0;
  qcoll_unique_id_t id = start_root(T);
  qcoll__boot_id_t bid;
  uint8_t hello[QCOLL__BOOT_HELLO_BYTES];

  /* Garbage: an HTTP request (its first 4 bytes read as a 1.2 GB length). */
  int garbage = raw_connect(&id, &bid);
  const char http[] = "GET / HTTP/1.1\r\nHost: qcoll\r\n\r\n";
  raw_send(garbage, http, sizeof http - 1);
  /* Right length, random content (bad magic). */
  int badmagic = raw_connect(&id, &bid);
  valid_hello(&bid, 0, 4, hello);
  for (size_t i = 4; i < sizeof hello; i++) hello[i] = (uint8_t)(i * 37 + 11);
  raw_send(badmagic, hello, sizeof hello);
  /* A well-formed hello with the wrong secret. */
  int wrong = raw_connect(&id, &bid);
  valid_hello(&bid, 0, 4, hello);
  hello[QCOLL__BOOT_FRAME_HDR_BYTES + 31] ^= 1;
  raw_send(wrong, hello, sizeof hello);
  /* Half a valid hello, then it hangs up. */
  int half_closed = raw_connect(&id, &bid);
  valid_hello(&bid, 1, 4, hello);
  raw_send(half_closed, hello, sizeof hello / 2);
  close(half_closed);

  /* The root drops the bad ones at once, before any rank arrived. */
  double t;
  assert_true((t = wait_hangup(garbage, 2.0)) >= 0);
  print_message("garbage dropped after %.3f s\n", t);
  assert_true((t = wait_hangup(badmagic, 2.0)) >= 0);
  print_message("bad magic dropped after %.3f s\n", t);
  assert_true((t = wait_hangup(wrong, 2.0)) >= 0);
  print_message("wrong secret dropped after %.3f s\n", t);

  /* Two that stay: half a hello (with the right secret inside), and one
   * that sends nothing.  Neither may hold up the real ranks. */
  int half = raw_connect(&id, &bid);
  valid_hello(&bid, 3, 4, hello);
  raw_send(half, hello, sizeof hello / 2);
  int staller = raw_connect(&id, &bid);

  double t0 = qcoll__now();
  rank_ctx_t *c =
      run_ranks(&id, 4, NULL, 4, NULL, T, body_allgather_check, NULL);
  double took = qcoll__now() - t0;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_int_equal(c[i].wrong, 0);
    assert_int_equal(c[i].checked, 4 * 8);
  }
  print_message(
      "4 ranks completed in %.3f s with 2 stalled intruders "
      "connected\n",
      took);
  /* Faster than the intruders' own deadline: they did not block anyone. */
  assert_true(took < QCOLL_MIN(T, QCOLL__BOOT_HELLO_DEADLINE_S));
  free_ranks(c, 4);

  /* The root finished and hung up on the stallers too. */
  assert_true(wait_hangup(half, 2.0) >= 0);
  assert_true(wait_hangup(staller, 2.0) >= 0);
  close(garbage);
  close(badmagic);
  close(wrong);
  close(half);
  close(staller);
}

/* More stalled connections than the root's pool holds, made before any
 * rank: the ranks still get in at once (the oldest stallers make room). */
static void full_root_pool_drops_the_oldest(void **state) {
  enum { STALLERS = 300 };
  qcoll_unique_id_t id = start_root(CHECK_TIMEOUT);
  qcoll__boot_id_t bid;
  int stallers[STALLERS];
  for (int i = 0; i < STALLERS; i++) stallers[i] = raw_connect(&id, &bid);
  rank_ctx_t *c = run_ranks(&id, 3, NULL, 3, NULL, CHECK_TIMEOUT,
                            body_allgather_check, NULL);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_true(c[i].init_s < 1.0);
  }
  free_ranks(c, 3);
  for (int i = 0; i < STALLERS; i++) close(stallers[i]);
}

static int connect_addr(const qcoll__boot_addr_t *a);

/* Rank 0 of a world of 2 joining in a thread of its own. */
static pthread_t start_rank0_of_2(rank_ctx_t *r0, const qcoll_unique_id_t *id,
                                  double timeout_s) {
  memset(r0, 0, sizeof *r0);
  ctx_setup(&r0->ctx, 0, 2, timeout_s);
  r0->id = *id;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, rank_main, r0), 0);
  return t;
}

/* A rank's ring socket keeps its queue moving while the rank waits for the
 * root: a connection that sends nothing is dropped at its hello deadline,
 * before the rendezvous ends, not queued until rank-1 is expected. */
static void ring_socket_drops_stallers_during_rendezvous(void **state) {
  /* The hello deadline is min(T, 5 s): with T = 8 s a staller goes at 5 s,
   * while the rendezvous still waits for rank 1. */
  const double T = 8.0, H = QCOLL__BOOT_HELLO_DEADLINE_S;
  int before[64];
  int nbefore = proc_listen_ports(getpid(), before, 64);
  qcoll_unique_id_t id = start_root(T);
  rank_ctx_t r0;
  pthread_t t = start_rank0_of_2(&r0, &id, T);
  /* Rank 0's ring port: the one new listener that is not the root's. */
  qcoll__boot_id_t bid;
  assert_int_equal(qcoll__id_decode(&id, &bid, NULL), QCOLL__MSG_OK);
  int ring_port = 0;
  for (int tries = 0; tries < 2000 && !ring_port; tries++) {
    int now[64];
    int n = proc_listen_ports(getpid(), now, 64);
    for (int i = 0; i < n && !ring_port; i++) {
      bool old = now[i] == bid.root.port;
      for (int k = 0; k < nbefore; k++) old = old || now[i] == before[k];
      if (!old) ring_port = now[i];
    }
    if (!ring_port) usleep(1000);
  }
  assert_true(ring_port > 0);
  qcoll__boot_addr_t a = {.family = 4, .port = (uint16_t)ring_port};
  a.ip[0] = 127, a.ip[3] = 1;
  int staller = connect_addr(&a);
  double hung_up = wait_hangup(staller, H + 2.0);
  printf(
      "staller at rank 0's ring socket dropped after %.2f s, rank 1 not "
      "yet started (hello deadline %.1f s)\n",
      hung_up, H);
  assert_true(hung_up >= H - 0.5 && hung_up <= H + 1.0);
  close(staller);
  /* Now rank 1: the rendezvous completes. */
  rank_ctx_t r1;
  memset(&r1, 0, sizeof r1);
  ctx_setup(&r1.ctx, 1, 2, T);
  r1.id = id;
  rank_main(&r1);
  pthread_join(t, NULL);
  assert_int_equal(r0.init_st, QCOLL_OK);
  assert_int_equal(r1.init_st, QCOLL_OK);
  qcoll__bootstrap_destroy(r0.bs);
  qcoll__bootstrap_destroy(r1.bs);
  pthread_mutex_destroy(&r0.ctx.error_lock);
  pthread_mutex_destroy(&r1.ctx.error_lock);
}

static void staller_is_dropped_at_its_deadline(void **state) {
  const double T = 2.0; /* hello deadline = min(T, 5 s) = 2 s */
  qcoll_unique_id_t id = start_root(T);
  qcoll__boot_id_t bid;
  int staller = raw_connect(&id, &bid);
  uint8_t hello[QCOLL__BOOT_HELLO_BYTES];
  int half = raw_connect(&id, &bid);
  valid_hello(&bid, 0, 2, hello);
  raw_send(half, hello, 40);
  double t_stall = wait_hangup(staller, 5.0);
  double t_half = wait_hangup(half, 5.0);
  print_message(
      "staller dropped after %.2f s, half hello after %.2f s "
      "(deadline %.1f s)\n",
      t_stall, t_half, T);
  assert_true(t_stall >= T - 0.3 && t_stall <= T + 1.0);
  assert_true(t_half >= 0 && t_half <= 1.0); /* measured after the staller */
  close(staller);
  close(half);

  /* The root is still serving: a real rendezvous works afterwards. */
  rank_ctx_t *c =
      run_ranks(&id, 2, NULL, 2, NULL, T, body_allgather_check, NULL);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(c[i].init_st, QCOLL_OK);
    assert_int_equal(c[i].body_st, QCOLL_OK);
    assert_int_equal(c[i].wrong, 0);
  }
  free_ranks(c, 2);
}

/* ---- failures after init: abort, peers that leave, mismatches ---------- */

/* Bring up n ranks and hand back their contexts (init only). */
static rank_ctx_t *bring_up(int n, double timeout_s) {
  qcoll_unique_id_t id = start_root(timeout_s);
  rank_ctx_t *c = run_ranks(&id, n, NULL, n, NULL, timeout_s, NULL, NULL);
  for (int i = 0; i < n; i++) assert_int_equal(c[i].init_st, QCOLL_OK);
  return c;
}

typedef struct op_thread {
  rank_ctx_t *c;
  int op; /* 0 barrier, 1 allgather of `bytes` */
  size_t bytes;
  qcoll_status_t st;
  double took;
} op_thread_t;

static void *op_main(void *arg) {
  op_thread_t *o = arg;
  double t0 = qcoll__now();
  if (o->op == 0) {
    o->st = qcoll__bootstrap_barrier(o->c->bs);
  } else {
    uint8_t *buf = calloc((size_t)o->c->ctx.nranks, o->bytes);
    o->st = qcoll__bootstrap_allgather(o->c->bs, buf, o->bytes);
    free(buf);
  }
  o->took = qcoll__now() - t0;
  return NULL;
}

/* The ring socket of a rank authenticates its predecessor like the root
 * authenticates ranks.  This process plays rank 1 of 2 by hand (raw
 * sockets, the same wire format), learns rank 0's ring address from the
 * root, and sends intruders there before it connects properly. */
static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in in = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof in;
  assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof in), 0);
  assert_int_equal(listen(fd, 8), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
  *port = ntohs(in.sin_port);
  return fd;
}

static int connect_addr(const qcoll__boot_addr_t *a) {
  assert_int_equal(a->family, 4);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(a->port)};
  memcpy(&in.sin_addr, a->ip, 4);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof in), 0);
  return fd;
}

static void recv_exact(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len) {
    struct pollfd pf = {fd, POLLIN, 0};
    assert_true(poll(&pf, 1, 5000) == 1);
    ssize_t k = recv(fd, p, len, 0);
    assert_true(k > 0);
    p += k;
    len -= (size_t)k;
  }
}

static size_t ring_hello(const qcoll__boot_id_t *bid, int rank, int nranks,
                         uint8_t *buf) {
  qcoll__boot_ring_hello_t h;
  memcpy(h.secret, bid->secret, sizeof h.secret);
  h.rank = rank;
  h.nranks = nranks;
  return qcoll__msg_encode_ring_hello(&h, buf, QCOLL__BOOT_RING_HELLO_BYTES);
}

static void ring_socket_drops_intruders(void **state) {
  const double T = 3.0;
  qcoll_unique_id_t id = start_root(T);
  qcoll__boot_id_t bid;
  assert_int_equal(qcoll__id_decode(&id, &bid, NULL), QCOLL__MSG_OK);

  rank_ctx_t r0;
  pthread_t t = start_rank0_of_2(&r0, &id, T);

  /* Join the rendezvous as rank 1. */
  int lport;
  int lfd = listen_loopback(&lport);
  int root = raw_connect(&id, &bid);
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bid.secret, sizeof h.secret);
  h.rank = 1;
  h.nranks = 2;
  h.listen.family = 4;
  h.listen.port = (uint16_t)lport;
  h.listen.ip[0] = 127, h.listen.ip[3] = 1;
  uint8_t buf[QCOLL__BOOT_ERROR_MAX_BYTES];
  raw_send(root, buf, qcoll__msg_encode_hello(&h, buf, sizeof buf));
  recv_exact(root, buf, QCOLL__BOOT_NEXT_BYTES);
  qcoll__boot_reply_t reply;
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(
      qcoll__msg_decode_reply(buf, QCOLL__BOOT_NEXT_BYTES, 1, 2, &reply, why),
      QCOLL__MSG_OK);
  assert_int_equal(reply.type, QCOLL__BOOT_MSG_NEXT);
  close(root);
  /* Our successor is rank 0: the root told us where it listens. */
  const qcoll__boot_addr_t r0_addr = reply.next;

  /* Intruders at rank 0's ring socket. */
  uint8_t rh[QCOLL__BOOT_RING_HELLO_BYTES];
  int garbage = connect_addr(&r0_addr);
  raw_send(garbage, "hello there, rank 0!", 20);
  int wrong_secret = connect_addr(&r0_addr);
  ring_hello(&bid, 1, 2, rh);
  rh[QCOLL__BOOT_FRAME_HDR_BYTES] ^= 0x40;
  raw_send(wrong_secret, rh, sizeof rh);
  int wrong_rank = connect_addr(&r0_addr);
  ring_hello(&bid, 0, 2,
             rh); /* right secret, but rank 0 is not its own predecessor */
  raw_send(wrong_rank, rh, sizeof rh);
  int rendezvous_hello =
      connect_addr(&r0_addr); /* right secret, wrong message */
  raw_send(rendezvous_hello, buf, qcoll__msg_encode_hello(&h, buf, sizeof buf));
  int staller = connect_addr(&r0_addr);
  /* More stallers than the ring socket's pool holds: they push out each
   * other, never the real rank 1 below. */
  enum { STALLERS = 100 };
  int stallers[STALLERS];
  for (int i = 0; i < STALLERS; i++) stallers[i] = connect_addr(&r0_addr);
  assert_true(wait_hangup(garbage, 2.0) >= 0);
  assert_true(wait_hangup(wrong_secret, 2.0) >= 0);
  assert_true(wait_hangup(wrong_rank, 2.0) >= 0);
  assert_true(wait_hangup(rendezvous_hello, 2.0) >= 0);

  /* Now the real rank 1. */
  int to_r0 = connect_addr(&r0_addr);
  raw_send(to_r0, rh, ring_hello(&bid, 1, 2, rh));
  struct pollfd pf = {lfd, POLLIN, 0};
  assert_int_equal(poll(&pf, 1, 5000), 1);
  int from_r0 = accept(lfd, NULL, NULL);
  assert_true(from_r0 >= 0);
  recv_exact(from_r0, rh, sizeof rh);
  qcoll__boot_ring_hello_t got;
  assert_int_equal(qcoll__msg_decode_ring_hello(rh, sizeof rh, &got, why),
                   QCOLL__MSG_OK);
  assert_int_equal(got.rank, 0);
  assert_true(qcoll__secret_equal(got.secret, bid.secret));
  pthread_join(t, NULL);
  assert_int_equal(r0.init_st, QCOLL_OK);
  /* The staller was still connected: it did not hold up rank 0. */
  assert_true(r0.init_s < QCOLL_MIN(T, QCOLL__BOOT_HELLO_DEADLINE_S));
  for (int i = 0; i < STALLERS; i++) close(stallers[i]);

  /* A barrier between the real rank 0 and this hand-made rank 1. */
  op_thread_t o = {&r0, 0, 0, QCOLL_OK, 0};
  pthread_create(&t, NULL, op_main, &o);
  uint8_t hdr[QCOLL__BOOT_DATA_HDR_BYTES];
  qcoll__boot_data_hdr_t dh = {QCOLL__BOOT_DATA_BARRIER, 0, 0};
  qcoll__msg_encode_data_hdr(&dh, hdr);
  raw_send(to_r0, hdr, sizeof hdr);
  recv_exact(from_r0, hdr, sizeof hdr);
  assert_int_equal(qcoll__msg_decode_data_hdr(hdr, sizeof hdr, &dh, why),
                   QCOLL__MSG_OK);
  assert_int_equal(dh.kind, QCOLL__BOOT_DATA_BARRIER);
  pthread_join(t, NULL);
  assert_int_equal(o.st, QCOLL_OK);

  /* A failure report from the hand-made rank 1 where rank 0 expects data:
   * rank 0 fails with its text (an unprintable byte shown as '?'), sends
   * nothing back to the rank it came from, and shuts its connections. */
  uint8_t rep[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
  raw_send(to_r0, rep,
           qcoll__msg_encode_ring_error(1, "rank 1 ran out of\x01 patience",
                                        rep, sizeof rep));
  o = (op_thread_t){&r0, 1, 8, QCOLL_OK, 0};
  op_main(&o);
  assert_int_equal(o.st, QCOLL_ERR_PEER_FAILURE);
  assert_string_equal(r0.ctx.last_error,
                      "bootstrap all-gather: rank 1 failed: rank 1 ran out "
                      "of? patience");
  /* Rank 0 had sent its block before it read the report; then nothing. */
  recv_exact(from_r0, hdr, sizeof hdr);
  assert_int_equal(qcoll__msg_decode_data_hdr(hdr, sizeof hdr, &dh, why),
                   QCOLL__MSG_OK);
  assert_int_equal(dh.kind, QCOLL__BOOT_DATA_ALLGATHER);
  assert_int_equal(dh.arg, 0);
  assert_true(dh.bytes == 8);
  uint8_t block[8];
  recv_exact(from_r0, block, sizeof block);
  assert_true(wait_hangup(from_r0, 2.0) >= 0);
  assert_true(wait_hangup(to_r0, 2.0) >= 0);

  qcoll__bootstrap_destroy(r0.bs);
  pthread_mutex_destroy(&r0.ctx.error_lock);
  int fds[] = {garbage, wrong_secret, wrong_rank, rendezvous_hello,
               staller, to_r0,        from_r0,    lfd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) close(fds[i]);
}

static void abort_unblocks_and_peer_sees_failure(void **state) {
  rank_ctx_t *c = bring_up(2, 10.0);
  op_thread_t o = {&c[0], 1, 8, QCOLL_OK, 0};
  pthread_t t;
  pthread_create(&t, NULL, op_main, &o);
  usleep(300 * 1000); /* rank 0 is now waiting for rank 1 */
  qcoll__bootstrap_abort(c[0].bs);
  pthread_join(t, NULL);
  print_message("aborted all-gather returned %d after %.2f s: %s\n", o.st,
                o.took, c[0].ctx.last_error);
  assert_int_equal(o.st, QCOLL_ERR_ABORTED);
  assert_true(o.took < 0.3 + 0.5);
  /* Later calls fail at once. */
  assert_int_equal(qcoll__bootstrap_barrier(c[0].bs), QCOLL_ERR_ABORTED);

  /* Rank 1 learns that rank 0 is gone without waiting for its deadline. */
  op_thread_t o1 = {&c[1], 1, 8, QCOLL_OK, 0};
  op_main(&o1);
  print_message("peer of the aborted rank: %d after %.2f s: %s\n", o1.st,
                o1.took, c[1].ctx.last_error);
  assert_int_equal(o1.st, QCOLL_ERR_PEER_FAILURE);
  /* Rank 0 said why before it shut its connections. */
  assert_string_equal(c[1].ctx.last_error,
                      "bootstrap all-gather: rank 0 failed: rank 0 aborted");
  assert_true(o1.took < 1.0);
  /* The failure marked the communicator broken. */
  assert_int_equal(atomic_load(&c[1].ctx.state), QCOLL_COMM_BROKEN);
  free_ranks(c, 2);
}

/* An abort while no collective runs reports at once, to both neighbours:
 * rank 2 finds the report where the next data header would be, rank 0 on
 * its connection to rank 1, before it sends anything. */
static void idle_abort_is_reported_both_ways(void **state) {
  rank_ctx_t *c = bring_up(3, 10.0);
  qcoll__bootstrap_abort(c[1].bs);
  op_thread_t o[2] = {{&c[0], 0, 0, QCOLL_OK, 0}, {&c[2], 0, 0, QCOLL_OK, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, op_main, &o[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    rank_ctx_t *r = o[i].c;
    print_message("rank %d barrier: %d after %.3f s: %s\n", r->ctx.rank,
                  o[i].st, o[i].took, r->ctx.last_error);
    assert_int_equal(o[i].st, QCOLL_ERR_PEER_FAILURE);
    /* From rank 1 directly, or passed on by the other rank if that one
     * heard first. */
    const char *want = "bootstrap barrier: rank 1 failed: rank 1 aborted";
    char via[128];
    snprintf(via, sizeof via, "%s (passed on by rank %d)", want,
             2 - r->ctx.rank);
    if (strcmp(r->ctx.last_error, want) != 0)
      assert_string_equal(r->ctx.last_error, via);
    assert_true(o[i].took < 0.3);
  }
  assert_int_equal(qcoll__bootstrap_barrier(c[1].bs), QCOLL_ERR_ABORTED);
  free_ranks(c, 3);
}

static void comm_abort_unblocks_init(void **state) {
  qcoll_unique_id_t id = start_root(10.0);
  rank_ctx_t c;
  memset(&c, 0, sizeof c);
  ctx_setup(&c.ctx, 0, 2, 10.0);
  c.id = id;
  pthread_t t;
  pthread_create(&t, NULL, rank_main, &c);
  usleep(300 * 1000); /* waiting for the root's answer: rank 1 never comes */
  double t0 = qcoll__now();
  atomic_store(&c.ctx.state, QCOLL_COMM_ABORTED);
  pthread_join(t, NULL);
  double after = qcoll__now() - t0;
  print_message("init aborted %.3f s after the abort: %s\n", after,
                c.ctx.last_error);
  assert_int_equal(c.init_st, QCOLL_ERR_ABORTED);
  assert_true(after < 0.5);
  pthread_mutex_destroy(&c.ctx.error_lock);
}

static void peer_that_leaves_fails_the_ring(void **state) {
  rank_ctx_t *c = bring_up(3, 10.0);
  /* Rank 2 leaves without a word. */
  qcoll__bootstrap_destroy(c[2].bs);
  c[2].bs = NULL;
  op_thread_t o[2] = {{&c[0], 0, 0, QCOLL_OK, 0}, {&c[1], 0, 0, QCOLL_OK, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, op_main, &o[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    print_message("rank %d barrier: %d after %.2f s: %s\n", i, o[i].st,
                  o[i].took, c[i].ctx.last_error);
    assert_int_equal(o[i].st, QCOLL_ERR_PEER_FAILURE);
    assert_true(o[i].took < 2.0);
  }
  /* Rank 0 receives from rank 2: it names rank 2. */
  assert_non_null(strstr(c[0].ctx.last_error, "rank 2"));
  free_ranks(c, 3);
}

static void collective_mismatch_is_reported(void **state) {
  rank_ctx_t *c = bring_up(2, 5.0);
  op_thread_t o[2] = {{&c[0], 1, 8, QCOLL_OK, 0}, {&c[1], 1, 16, QCOLL_OK, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, op_main, &o[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    print_message("rank %d: %d: %s\n", i, o[i].st, c[i].ctx.last_error);
    assert_int_equal(o[i].st, QCOLL_ERR_MISMATCH);
  }
  assert_non_null(strstr(c[0].ctx.last_error,
                         "rank 1 sent all-gather (block 1, 16 bytes) but this "
                         "rank expected all-gather (block 1, 8 bytes)"));
  free_ranks(c, 2);
}

static void collective_times_out(void **state) {
  rank_ctx_t *c = bring_up(2, 1.0);
  op_thread_t o = {&c[0], 0, 0, QCOLL_OK, 0};
  op_main(&o); /* rank 1 never enters */
  print_message("lonely barrier: %d after %.2f s: %s\n", o.st, o.took,
                c[0].ctx.last_error);
  assert_int_equal(o.st, QCOLL_ERR_TIMEOUT);
  assert_true(o.took >= 0.9 && o.took < 1.6);
  assert_non_null(strstr(c[0].ctx.last_error, "nothing from rank 1"));
  free_ranks(c, 2);
}

/* ---- failure reports -------------------------------------------------- */

/* A collective started delay_s after the others. */
typedef struct late_op {
  op_thread_t op;
  double delay_s;
} late_op_t;

static void *late_op_main(void *arg) {
  late_op_t *l = arg;
  usleep((useconds_t)(l->delay_s * 1e6));
  return op_main(&l->op);
}

/* Run op on ranks[0..count) of c, rank ranks[i] starting delays[i] s late;
 * the results land in out[0..count). */
static void run_late_ops(rank_ctx_t *c, int count, const int *ranks,
                         const double *delays, int op, late_op_t *out) {
  pthread_t t[8];
  assert_true(count <= 8);
  for (int i = 0; i < count; i++) {
    out[i] = (late_op_t){{&c[ranks[i]], op, 8, QCOLL_OK, 0}, delays[i]};
    pthread_create(&t[i], NULL, late_op_main, &out[i]);
  }
  for (int i = 0; i < count; i++) {
    pthread_join(t[i], NULL);
    print_message("rank %d (%.1f s late): %d after %.3f s: %s\n", ranks[i],
                  delays[i], out[i].op.st, out[i].op.took,
                  c[ranks[i]].ctx.last_error);
  }
}

#define REPORT_TIMEOUT 1.0

/* Rank 3 of 4 never comes.  Rank 0, waiting on it directly, times out
 * first; ranks 1 and 2 (which started later, so their own deadlines are
 * further) learn rank 0's reason from the ring instead of blaming rank 0,
 * and rank 3, arriving after everyone gave up, learns it at once. */
static void timeout_report_travels_the_ring(void **state) {
  rank_ctx_t *c = bring_up(4, REPORT_TIMEOUT);
  int ranks[3] = {0, 1, 2};
  double delays[3] = {0, 0.4, 0.8};
  late_op_t o[3];
  run_late_ops(c, 3, ranks, delays, 1, o);
  const char *why =
      "rank 0 failed: rank 0 timed out after 1.0 s waiting for rank 3 in the "
      "bootstrap all-gather";
  char want[256];
  assert_int_equal(o[0].op.st, QCOLL_ERR_TIMEOUT);
  assert_string_equal(c[0].ctx.last_error,
                      "bootstrap all-gather: nothing from rank 3 within 1.0 s "
                      "(QCOLL_TIMEOUT)");
  assert_true(o[0].op.took >= REPORT_TIMEOUT - 0.05 &&
              o[0].op.took < REPORT_TIMEOUT + 0.3);
  assert_int_equal(o[1].op.st, QCOLL_ERR_PEER_FAILURE);
  snprintf(want, sizeof want, "bootstrap all-gather: %s", why);
  assert_string_equal(c[1].ctx.last_error, want);
  assert_int_equal(o[2].op.st, QCOLL_ERR_PEER_FAILURE);
  snprintf(want, sizeof want, "bootstrap all-gather: %s (passed on by rank 1)",
           why);
  assert_string_equal(c[2].ctx.last_error, want);
  /* Both heard before their own deadlines, when rank 0 gave up. */
  for (int i = 1; i < 3; i++)
    assert_true(delays[i] + o[i].op.took < REPORT_TIMEOUT + 0.3);

  /* The latecomer: rank 0 reported backwards too. */
  late_op_t late;
  run_late_ops(c, 1, (int[]){3}, (double[]){0}, 1, &late);
  assert_int_equal(late.op.st, QCOLL_ERR_PEER_FAILURE);
  snprintf(want, sizeof want, "bootstrap all-gather: %s", why);
  assert_string_equal(c[3].ctx.last_error, want);
  assert_true(late.op.took < 0.3);
  for (int i = 0; i < 4; i++)
    assert_int_equal(atomic_load(&c[i].ctx.state), QCOLL_COMM_BROKEN);
  /* And the ring stays refused. */
  assert_int_equal(qcoll__bootstrap_barrier(c[3].bs), QCOLL_ERR_INVALID_USAGE);
  free_ranks(c, 4);
}

/* A timeout names the rank whose contribution is missing, not the
 * neighbour that would relay it. */
static void timeout_names_the_missing_rank(void **state) {
  static const struct {
    int op; /* as op_thread_t */
    const char *relayed;
  } cases[] = {
      {1,
       "bootstrap all-gather: nothing from rank 2 (its block is relayed by "
       "rank 0) within 1.0 s (QCOLL_TIMEOUT)"},
      {0,
       "bootstrap barrier: nothing from rank 2 (its arrival is relayed by "
       "rank 0) within 1.0 s (QCOLL_TIMEOUT)"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    /* Rank 1 starts first, so it is the first to time out: rank 0 is
     * there, rank 2 is not. */
    rank_ctx_t *c = bring_up(3, REPORT_TIMEOUT);
    late_op_t o[2];
    run_late_ops(c, 2, (int[]){1, 0}, (double[]){0, 0.4}, cases[k].op, o);
    assert_int_equal(o[0].op.st, QCOLL_ERR_TIMEOUT);
    assert_string_equal(c[1].ctx.last_error, cases[k].relayed);
    /* Rank 0 waits on rank 2 itself (it does not read rank 1's report
     * while it waits on rank 2): its own deadline. */
    assert_int_equal(o[1].op.st, QCOLL_ERR_TIMEOUT);
    assert_non_null(
        strstr(c[0].ctx.last_error, ": nothing from rank 2 within 1.0 s"));
    free_ranks(c, 3);
  }

  /* A broadcast names the root; any rank on the way may be the one
   * missing, so it says through whom the data would come. */
  rank_ctx_t *c = bring_up(3, REPORT_TIMEOUT);
  uint8_t buf[8] = {0};
  assert_int_equal(qcoll__bootstrap_broadcast(c[2].bs, buf, sizeof buf, 0),
                   QCOLL_ERR_TIMEOUT);
  assert_string_equal(c[2].ctx.last_error,
                      "bootstrap broadcast: nothing from rank 0 (the root, "
                      "whose data reaches this rank through rank 1) within "
                      "1.0 s (QCOLL_TIMEOUT)");
  assert_int_equal(qcoll__bootstrap_broadcast(c[1].bs, buf, sizeof buf, 0),
                   QCOLL_ERR_PEER_FAILURE);
  assert_string_equal(c[1].ctx.last_error,
                      "bootstrap broadcast: rank 2 failed: rank 2 timed out "
                      "after 1.0 s waiting for rank 0 in the bootstrap "
                      "broadcast");
  free_ranks(c, 3);
}

/* A communicator broken outside the ring (as shared memory does when a
 * peer dies) says so on destroy; a peer waiting in a barrier hears why. */
static void broken_comm_reports_on_destroy(void **state) {
  rank_ctx_t *c = bring_up(2, 10.0);
  qcoll__error(&c[0].ctx, QCOLL_ERR_PEER_FAILURE,
               "host shared memory: rank 5 (pid 4242) died");
  qcoll__ctx_mark_broken(&c[0].ctx);
  op_thread_t o = {&c[1], 0, 0, QCOLL_OK, 0};
  pthread_t t;
  pthread_create(&t, NULL, op_main, &o);
  usleep(200 * 1000); /* rank 1 is waiting in the barrier */
  qcoll__bootstrap_destroy(c[0].bs);
  c[0].bs = NULL;
  pthread_join(t, NULL);
  print_message("barrier: %d after %.3f s: %s\n", o.st, o.took,
                c[1].ctx.last_error);
  assert_int_equal(o.st, QCOLL_ERR_PEER_FAILURE);
  assert_string_equal(c[1].ctx.last_error,
                      "bootstrap barrier: rank 0 failed: rank 0 closed its "
                      "connection after a failure outside the bootstrap (its "
                      "last error: host shared memory: rank 5 (pid 4242) "
                      "died)");
  assert_true(o.took < 0.2 + 0.3);
  free_ranks(c, 2);
}

/* ---- main ------------------------------------------------------------ */

int main(int argc, char **argv) {
  static const struct {
    const char *group;
    struct CMUnitTest test;
  } all[] = {
      {"ring", cmocka_unit_test(one_rank_works_without_ring_sockets)},
      {"ring", cmocka_unit_test(two_ranks)},
      {"ring", cmocka_unit_test(eight_ranks)},
      {"ring", cmocka_unit_test(sixty_four_ranks)},
      {"ring", cmocka_unit_test(large_allgather)},
      {"ring", cmocka_unit_test(default_address_and_hex_round_trip)},
      {"checks", cmocka_unit_test(wrong_world_size)},
      {"checks", cmocka_unit_test(duplicate_rank)},
      {"checks", cmocka_unit_test(rank_out_of_range)},
      {"timeouts", cmocka_unit_test(missing_ranks_time_out_everywhere)},
      {"timeouts", cmocka_unit_test(root_takes_the_ranks_deadline)},
      {"timeouts", cmocka_unit_test(unreachable_root_times_out)},
      {"timeouts", cmocka_unit_test(collective_times_out)},
      {"intruders",
       cmocka_unit_test(intruders_are_dropped_and_rendezvous_completes)},
      {"intruders", cmocka_unit_test(staller_is_dropped_at_its_deadline)},
      {"intruders", cmocka_unit_test(full_root_pool_drops_the_oldest)},
      {"intruders",
       cmocka_unit_test(ring_socket_drops_stallers_during_rendezvous)},
      {"intruders", cmocka_unit_test(ring_socket_drops_intruders)},
      {"failures", cmocka_unit_test(abort_unblocks_and_peer_sees_failure)},
      {"failures", cmocka_unit_test(comm_abort_unblocks_init)},
      {"failures", cmocka_unit_test(peer_that_leaves_fails_the_ring)},
      {"failures", cmocka_unit_test(collective_mismatch_is_reported)},
      {"failures", cmocka_unit_test(idle_abort_is_reported_both_ways)},
      {"failures", cmocka_unit_test(broken_comm_reports_on_destroy)},
      {"reports", cmocka_unit_test(timeout_report_travels_the_ring)},
      {"reports", cmocka_unit_test(timeout_names_the_missing_rank)},
  };
  enum { N = sizeof all / sizeof all[0] };
  /* An optional argument picks one group, so CTest can run the groups that
   * wait for deadlines in parallel. */
  const char *group = argc > 1 ? argv[1] : NULL;
  struct CMUnitTest tests[N];
  size_t n = 0;
  for (size_t i = 0; i < N; i++)
    if (!group || strcmp(group, all[i].group) == 0) tests[n++] = all[i].test;
  if (n == 0) {
    fprintf(stderr, "no test group named '%s'\n", group);
    return 2;
  }
  return _cmocka_run_group_tests(group ? group : "bootstrap", tests, n, NULL,
                                 NULL);
}
