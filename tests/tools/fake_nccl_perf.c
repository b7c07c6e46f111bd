/*
 * A stand-in for libnccl.so.2 for qcoll-perf's NCCL side, so that loading,
 * the unique-id exchange, a refusal and the argument mapping can be tested
 * without a GPU.  Buffers are host memory and streams are ignored;
 * collectives run on a one-rank communicator only (each is then a copy).
 *
 *   FAKE_NCCL_REFUSE=all|<rank>   ncclCommInitRank fails on those ranks
 *                                 with "Duplicate GPU detected", as NCCL
 *                                 does for two ranks on one GPU
 *
 * What the caller did is readable through fake_nccl_last_call() and
 * fake_nccl_counts().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_nccl_perf.h"

#define ID_BYTES 128
#define OK 0
#define INVALID_ARGUMENT 4
#define INVALID_USAGE 5

typedef struct {
  char internal[ID_BYTES];
} fake_id_t;

struct fake_comm {
  int nranks, rank;
};

static struct fake_nccl_call last;
static int total_calls, inits, destroys, aborts;
static char last_error[256];
static const char id_magic[] = "fake-nccl-id";

/* Pending point-to-point calls of the open group (one rank: to itself). */
static struct {
  int open;
  const void *send;
  void *recv;
  size_t send_bytes, recv_bytes;
} group;

const struct fake_nccl_call *fake_nccl_last_call(void) {
  return &last;
}

void fake_nccl_counts(int *n_init, int *n_destroy, int *n_abort) {
  *n_init = inits;
  *n_destroy = destroys;
  *n_abort = aborts;
}

static size_t elem_size(int dt) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return dt >= 0 && dt < 10 ? sizes[dt] : 0;
}

static void record(const char *fn, const void *send, void *recv, size_t count,
                   int dt, int op, int root, int peer) {
  memset(&last, 0, sizeof last);
  snprintf(last.fn, sizeof last.fn, "%s", fn);
  last.send = send;
  last.recv = recv;
  last.count = count;
  last.dtype = dt;
  last.op = op;
  last.root = root;
  last.peer = peer;
  last.calls = ++total_calls;
}

int ncclGetVersion(int *version) {
  *version = 22803;
  return OK;
}

const char *ncclGetErrorString(int r) {
  switch (r) {
    case OK: return "no error";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage";
    default: return "unknown result code";
  }
}

const char *ncclGetLastError(struct fake_comm *comm) {
  (void)comm;
  return last_error;
}

int ncclGetUniqueId(fake_id_t *id) {
  memset(id, 0, sizeof *id);
  memcpy(id->internal, id_magic, sizeof id_magic);
  return OK;
}

static int refused(int rank) {
  const char *v = getenv("FAKE_NCCL_REFUSE");
  if (!v || !*v) return 0;
  return strcmp(v, "all") == 0 || atoi(v) == rank;
}

int ncclCommInitRank(struct fake_comm **comm, int nranks, fake_id_t id,
                     int rank) {
  *comm = NULL;
  if (memcmp(id.internal, id_magic, sizeof id_magic) != 0) {
    snprintf(last_error, sizeof last_error,
             "fake NCCL: the unique id was not rank 0's");
    return INVALID_ARGUMENT;
  }
  if (refused(rank)) {
    snprintf(
        last_error, sizeof last_error,
        "Duplicate GPU detected : rank %d and rank %d both on CUDA device 0\n",
        rank, rank ? 0 : 1);
    return INVALID_USAGE;
  }
  *comm = calloc(1, sizeof **comm);
  (*comm)->nranks = nranks;
  (*comm)->rank = rank;
  inits++;
  return OK;
}

int ncclCommDestroy(struct fake_comm *comm) {
  free(comm);
  destroys++;
  return OK;
}

int ncclCommAbort(struct fake_comm *comm) {
  free(comm);
  aborts++;
  return OK;
}

static int one_rank(const struct fake_comm *comm) {
  if (comm && comm->nranks == 1) return 1;
  snprintf(last_error, sizeof last_error,
           "fake NCCL runs collectives on one rank only");
  return 0;
}

static int copy(const char *fn, const void *send, void *recv, size_t count,
                int dt, int op, int root, const struct fake_comm *comm) {
  record(fn, send, recv, count, dt, op, root, -1);
  if (!one_rank(comm) || !elem_size(dt)) return INVALID_USAGE;
  memmove(recv, send, count * elem_size(dt));
  return OK;
}

int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op,
                  struct fake_comm *c, void *stream) {
  (void)stream;
  return copy("ncclAllReduce", s, r, n, dt, op, -1, c);
}

int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root,
               struct fake_comm *c, void *stream) {
  (void)stream;
  return copy("ncclReduce", s, r, n, dt, op, root, c);
}

int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root,
                  struct fake_comm *c, void *stream) {
  (void)stream;
  return copy("ncclBroadcast", s, r, n, dt, -1, root, c);
}

int ncclAllGather(const void *s, void *r, size_t n, int dt, struct fake_comm *c,
                  void *stream) {
  (void)stream;
  return copy("ncclAllGather", s, r, n, dt, -1, -1, c);
}

int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op,
                      struct fake_comm *c, void *stream) {
  (void)stream;
  return copy("ncclReduceScatter", s, r, n, dt, op, -1, c);
}

int ncclGroupStart(void) {
  memset(&group, 0, sizeof group);
  group.open = 1;
  return OK;
}

int ncclSend(const void *s, size_t n, int dt, int peer, struct fake_comm *c,
             void *stream) {
  (void)stream;
  record("ncclSend", s, NULL, n, dt, -1, -1, peer);
  if (!group.open || !one_rank(c) || peer != 0) return INVALID_USAGE;
  group.send = s;
  group.send_bytes = n * elem_size(dt);
  return OK;
}

int ncclRecv(void *r, size_t n, int dt, int peer, struct fake_comm *c,
             void *stream) {
  (void)stream;
  record("ncclRecv", NULL, r, n, dt, -1, -1, peer);
  if (!group.open || !one_rank(c) || peer != 0) return INVALID_USAGE;
  group.recv = r;
  group.recv_bytes = n * elem_size(dt);
  return OK;
}

int ncclGroupEnd(void) {
  int ok = group.open && group.send_bytes == group.recv_bytes;
  if (ok && group.send_bytes) memmove(group.recv, group.send, group.send_bytes);
  group.open = 0;
  return ok ? OK : INVALID_USAGE;
}
