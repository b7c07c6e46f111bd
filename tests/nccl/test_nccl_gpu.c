/*
 * The NCCL path on real GPUs (label "gpu").  Exits 77, saying why, when the
 * build has no CUDA back end, there are too few GPUs, or NCCL is missing.
 *
 *   test_nccl_gpu single       one rank on device 0: every collective at
 *                              world size 1, exact, in and out of place
 *   test_nccl_gpu multi        under qcoll-run -n N, rank r on device r
 *                              (needs N GPUs): every collective, all-reduce
 *                              for every dtype x op, against exact host
 *                              results; point-to-point; graph replay; the
 *                              caller's current device is left alone
 *   test_nccl_gpu shared       under qcoll-run -n N, every rank on device
 *                              0: NCCL is refused, identically on every
 *                              rank, before NCCL is even asked
 *   test_nccl_gpu shared_nccl  the same with NCCL_MULTI_RANK_GPU_ENABLE=1,
 *                              so NCCL itself decides; the ranks still agree
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef QCOLL_HAVE_CUDA
int main(void) {
  printf(
      "skipped: this build has no CUDA back end (QCOLL_WITH_CUDA off or "
      "no CUDA compiler)\n");
  return 77;
}
#else

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../check.h"
#include "base/dtype.h"
#include "qcoll.h"
#include "core/comm.h"
#include "transport/nccl.h"

#define SKIP 77
#define COUNT 1031 /* odd, so no path can assume alignment */
#define REASON_BYTES 512

static int rank = 0, nranks = 1, device = 0, foreign = -1;
static qcoll_comm_t comm;
static cudaStream_t stream;

#define QOK(call) CHECK((call) == QCOLL_OK, "%s", qcoll_comm_last_error(comm))

/* ---- typed host values ----------------------------------------------- */

static bool is_float(qcoll_dtype_t t) {
  return t == QCOLL_F16 || t == QCOLL_BF16 || t == QCOLL_F32 || t == QCOLL_F64;
}
static bool is_signed(qcoll_dtype_t t) {
  return is_float(t) || t == QCOLL_I8 || t == QCOLL_I32 || t == QCOLL_I64;
}

static void put(qcoll_dtype_t t, void *buf, size_t i, double v) {
  switch (t) {
    case QCOLL_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case QCOLL_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case QCOLL_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case QCOLL_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case QCOLL_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case QCOLL_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case QCOLL_F16: ((uint16_t *)buf)[i] = qcoll__f32_to_f16((float)v); break;
    case QCOLL_BF16: ((uint16_t *)buf)[i] = qcoll__f32_to_bf16((float)v); break;
    case QCOLL_F32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
  }
}

static double get(qcoll_dtype_t t, const void *buf, size_t i) {
  switch (t) {
    case QCOLL_I8: return ((const int8_t *)buf)[i];
    case QCOLL_U8: return ((const uint8_t *)buf)[i];
    case QCOLL_I32: return ((const int32_t *)buf)[i];
    case QCOLL_U32: return ((const uint32_t *)buf)[i];
    case QCOLL_I64: return (double)((const int64_t *)buf)[i];
    case QCOLL_U64: return (double)((const uint64_t *)buf)[i];
    case QCOLL_F16: return qcoll__f16_to_f32(((const uint16_t *)buf)[i]);
    case QCOLL_BF16: return qcoll__bf16_to_f32(((const uint16_t *)buf)[i]);
    case QCOLL_F32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
  }
}

/* Rank r's element i: small integers, so sums are exact in every dtype;
 * signed types get negatives (integer AVG must truncate toward zero);
 * PROD gets only 2, 1 and -1 so products stay small. */
static double value(int r, size_t i, qcoll_dtype_t t, qcoll_op_t op) {
  if (op == QCOLL_PROD) {
    int k = (int)((i + (size_t)r) % 3);
    return k == 0 ? 2 : (k == 1 || !is_signed(t)) ? 1 : -1;
  }
  int v = (int)((i * 7 + (size_t)r * 3) % 9);
  return is_signed(t) ? v - 4 : v;
}

static double reduce_expected(size_t i, qcoll_dtype_t t, qcoll_op_t op) {
  double acc = value(0, i, t, op);
  for (int r = 1; r < nranks; r++) {
    double v = value(r, i, t, op);
    switch (op) {
      case QCOLL_PROD: acc *= v; break;
      case QCOLL_MIN: acc = v < acc ? v : acc; break;
      case QCOLL_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (op != QCOLL_AVG) return acc;
  if (is_float(t)) return acc / nranks;
  return (double)((long long)acc / nranks); /* C division: toward zero */
}

/* Float AVG is pre-multiplied by 1/nranks in the element type, so it may
 * round; everything else must be exact. */
static double tolerance(qcoll_dtype_t t, qcoll_op_t op) {
  if (op != QCOLL_AVG || !is_float(t)) return 0;
  double ulp = t == QCOLL_F16    ? 0x1p-10
               : t == QCOLL_BF16 ? 0x1p-7
               : t == QCOLL_F32  ? 0x1p-23
                                 : 0x1p-52;
  return (nranks + 1) * ulp * 8; /* |values| <= 4, two roundings each */
}

/* ---- device buffers -------------------------------------------------- */

typedef struct dbuf {
  void *dev;
  void *host;
  size_t bytes;
} dbuf_t;

static dbuf_t dbuf_alloc(size_t bytes) {
  dbuf_t b = {NULL, calloc(1, bytes ? bytes : 1), bytes};
  CHECK(b.host != NULL, "out of host memory");
  int cur;
  CHECK_CUDA(cudaGetDevice(&cur));
  CHECK_CUDA(cudaSetDevice(device));
  CHECK_CUDA(cudaMalloc(&b.dev, bytes ? bytes : 1));
  CHECK_CUDA(cudaMemset(b.dev, 0xff, bytes ? bytes : 1));
  CHECK_CUDA(cudaSetDevice(cur));
  return b;
}
static void dbuf_free(dbuf_t *b) {
  cudaFree(b->dev);
  free(b->host);
}
static void upload(dbuf_t *b) {
  CHECK_CUDA(cudaMemcpy(b->dev, b->host, b->bytes, cudaMemcpyHostToDevice));
}
static void download(dbuf_t *b) {
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaMemcpy(b->host, b->dev, b->bytes, cudaMemcpyDeviceToHost));
}

/* After every qcoll call: the caller's current device is untouched. */
static void check_current_device(const char *what) {
  int cur = -1;
  CHECK_CUDA(cudaGetDevice(&cur));
  int want = foreign >= 0 ? foreign : device;
  CHECK(cur == want, "%s changed the current device from %d to %d", what, want,
        cur);
}

/* ---- the checks ------------------------------------------------------- */

static void check_all_reduce(qcoll_dtype_t t, qcoll_op_t op, bool in_place) {
  size_t elem = qcoll_dtype_size(t);
  dbuf_t send = dbuf_alloc(COUNT * elem), recv = dbuf_alloc(COUNT * elem);
  for (size_t i = 0; i < COUNT; i++)
    put(t, send.host, i, value(rank, i, t, op));
  upload(&send);
  dbuf_t *out = in_place ? &send : &recv;
  QOK(qcoll__nccl_all_reduce(&comm->ctx, send.dev, out->dev, COUNT, t, op,
                             stream));
  check_current_device("qcoll__nccl_all_reduce");
  download(out);
  double tol = tolerance(t, op);
  for (size_t i = 0; i < COUNT; i++) {
    double want = reduce_expected(i, t, op), got = get(t, out->host, i);
    if (tol == 0) {
      char w[8];
      put(t, w, 0, want);
      want = get(t, w, 0);
    }
    CHECK(fabs(got - want) <= tol,
          "all_reduce %s/%s%s [%zu]: got %g, want %g (tolerance %g)",
          qcoll_dtype_name(t), qcoll_op_name(op), in_place ? " in place" : "",
          i, got, want, tol);
  }
  dbuf_free(&send);
  dbuf_free(&recv);
}

/* Element i of rank r's contribution to the data-moving collectives. */
static int32_t code(int r, size_t i) {
  return (int32_t)(r * 100000 + (int)i);
}

static void check_rooted(void) {
  int root = nranks - 1;
  dbuf_t send = dbuf_alloc(COUNT * 4), recv = dbuf_alloc(COUNT * 4);
  for (size_t i = 0; i < COUNT; i++)
    ((int32_t *)send.host)[i] = (int32_t)value(rank, i, QCOLL_I32, QCOLL_SUM);
  upload(&send);
  /* reduce: only root's recvbuf, which may be NULL elsewhere */
  QOK(qcoll__nccl_reduce(&comm->ctx, send.dev, rank == root ? recv.dev : NULL,
                         COUNT, QCOLL_I32, QCOLL_SUM, root, stream));
  check_current_device("qcoll__nccl_reduce");
  download(&recv);
  if (rank == root)
    for (size_t i = 0; i < COUNT; i++)
      CHECK(((int32_t *)recv.host)[i] ==
                (int32_t)reduce_expected(i, QCOLL_I32, QCOLL_SUM),
            "reduce [%zu]: %d", i, ((int32_t *)recv.host)[i]);
  /* broadcast from root, sendbuf NULL elsewhere */
  for (size_t i = 0; i < COUNT; i++) ((int32_t *)send.host)[i] = code(rank, i);
  upload(&send);
  QOK(qcoll__nccl_broadcast(&comm->ctx, rank == root ? send.dev : NULL,
                            recv.dev, COUNT, QCOLL_I32, root, stream));
  check_current_device("qcoll__nccl_broadcast");
  download(&recv);
  for (size_t i = 0; i < COUNT; i++)
    CHECK(((int32_t *)recv.host)[i] == code(root, i), "broadcast [%zu]: %d", i,
          ((int32_t *)recv.host)[i]);
  dbuf_free(&send);
  dbuf_free(&recv);
}

static void check_gather_scatter(bool in_place) {
  size_t n = (size_t)nranks, wide = n * COUNT;
  dbuf_t big = dbuf_alloc(wide * 4), small = dbuf_alloc(COUNT * 4);
  /* all_gather: recv[r*COUNT+i] = code(r, i); in place from our slot */
  int32_t *h = big.host;
  memset(h, 0, wide * 4);
  for (size_t i = 0; i < COUNT; i++) {
    ((int32_t *)small.host)[i] = code(rank, i);
    h[(size_t)rank * COUNT + i] = code(rank, i);
  }
  upload(&small);
  upload(&big);
  const void *send =
      in_place ? (const char *)big.dev + (size_t)rank * COUNT * 4 : small.dev;
  QOK(qcoll__nccl_all_gather(&comm->ctx, send, big.dev, COUNT, QCOLL_I32,
                             stream));
  check_current_device("qcoll__nccl_all_gather");
  download(&big);
  for (size_t r = 0; r < n; r++)
    for (size_t i = 0; i < COUNT; i++)
      CHECK(h[r * COUNT + i] == code((int)r, i), "all_gather%s [%zu][%zu]: %d",
            in_place ? " in place" : "", r, i, h[r * COUNT + i]);
  /* reduce_scatter SUM: recv[i] = sum over ranks of send[rank*COUNT+i] */
  for (size_t j = 0; j < wide; j++)
    h[j] = (int32_t)value(rank, j, QCOLL_I32, QCOLL_SUM);
  upload(&big);
  void *recv =
      in_place ? (char *)big.dev + (size_t)rank * COUNT * 4 : small.dev;
  QOK(qcoll__nccl_reduce_scatter(&comm->ctx, big.dev, recv, COUNT, QCOLL_I32,
                                 QCOLL_SUM, stream));
  check_current_device("qcoll__nccl_reduce_scatter");
  CHECK_CUDA(cudaStreamSynchronize(stream));
  int32_t *got = small.host;
  CHECK_CUDA(cudaMemcpy(got, recv, COUNT * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < COUNT; i++)
    CHECK(got[i] == (int32_t)reduce_expected((size_t)rank * COUNT + i,
                                             QCOLL_I32, QCOLL_SUM),
          "reduce_scatter%s [%zu]: %d", in_place ? " in place" : "", i, got[i]);
  dbuf_free(&big);
  dbuf_free(&small);
}

static void check_all_to_all(void) {
  size_t n = (size_t)nranks, wide = n * COUNT;
  dbuf_t send = dbuf_alloc(wide * 4), recv = dbuf_alloc(wide * 4);
  /* block q of rank p's sendbuf goes to rank q */
  for (size_t q = 0; q < n; q++)
    for (size_t i = 0; i < COUNT; i++)
      ((int32_t *)send.host)[q * COUNT + i] = code(rank, q * COUNT + i);
  upload(&send);
  QOK(qcoll__nccl_all_to_all(&comm->ctx, send.dev, recv.dev, COUNT, QCOLL_I32,
                             stream));
  check_current_device("qcoll__nccl_all_to_all");
  download(&recv);
  for (size_t p = 0; p < n; p++)
    for (size_t i = 0; i < COUNT; i++)
      CHECK(((int32_t *)recv.host)[p * COUNT + i] ==
                code((int)p, (size_t)rank * COUNT + i),
            "all_to_all [%zu][%zu]: %d", p, i,
            ((int32_t *)recv.host)[p * COUNT + i]);
  dbuf_free(&send);
  dbuf_free(&recv);
}

/* Rank 0 sends to rank 1, which answers; the others look on. */
static void check_send_recv(void) {
  if (nranks < 2 || rank > 1) return;
  dbuf_t b = dbuf_alloc(COUNT * 8);
  int peer = 1 - rank;
  for (size_t i = 0; i < COUNT; i++)
    ((double *)b.host)[i] = code(rank, i) + 0.5;
  upload(&b);
  if (rank == 0) {
    QOK(qcoll__nccl_send(&comm->ctx, b.dev, COUNT, QCOLL_F64, peer, stream));
    QOK(qcoll__nccl_recv(&comm->ctx, b.dev, COUNT, QCOLL_F64, peer, stream));
  } else {
    QOK(qcoll__nccl_recv(&comm->ctx, b.dev, COUNT, QCOLL_F64, peer, stream));
    QOK(qcoll__nccl_send(&comm->ctx, b.dev, COUNT, QCOLL_F64, peer, stream));
  }
  check_current_device("qcoll__nccl_send/recv");
  download(&b);
  /* Rank 1 received rank 0's data and sent it back unchanged. */
  for (size_t i = 0; i < COUNT; i++)
    CHECK(((double *)b.host)[i] == code(0, i) + 0.5, "send/recv [%zu]: %g", i,
          ((double *)b.host)[i]);
  dbuf_free(&b);
}

/* An all-reduce captured once into a CUDA graph and replayed with new
 * input each time gives exact results every time. */
static void check_graph_replay(void) {
  dbuf_t b = dbuf_alloc(COUNT * 4);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  QOK(qcoll__nccl_all_reduce(&comm->ctx, b.dev, b.dev, COUNT, QCOLL_F32,
                             QCOLL_SUM, stream));
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; replay++) {
    for (size_t i = 0; i < COUNT; i++)
      ((float *)b.host)[i] =
          (float)(value(rank, i + (size_t)replay, QCOLL_F32, QCOLL_SUM));
    upload(&b);
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    download(&b);
    for (size_t i = 0; i < COUNT; i++)
      CHECK(
          ((float *)b.host)[i] ==
              (float)reduce_expected(i + (size_t)replay, QCOLL_F32, QCOLL_SUM),
          "graph replay %d [%zu]: %g", replay, i, ((float *)b.host)[i]);
  }
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  dbuf_free(&b);
}

/* ---- setup ------------------------------------------------------------ */

static int device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

static void init_comm(bool from_env, int dev) {
  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = dev;
  cfg.timeout_s = 120;
  if (from_env) {
    CHECK(qcoll_comm_init_env(&comm, &cfg) == QCOLL_OK, "%s",
          qcoll_last_error());
  } else {
    qcoll_unique_id_t id;
    CHECK(qcoll_get_unique_id(&id) == QCOLL_OK, "%s", qcoll_last_error());
    CHECK(qcoll_comm_init_rank(&comm, 1, &id, 0, &cfg) == QCOLL_OK, "%s",
          qcoll_last_error());
  }
  qcoll_comm_rank(comm, &rank);
  check_rank = rank;
  qcoll_comm_size(comm, &nranks);
  int got = -3;
  qcoll_comm_device(comm, &got);
  CHECK(got == dev, "communicator on device %d, asked for %d", got, dev);
}

/* Every rank has the same reason, byte for byte (host all-gather). */
static void check_same_everywhere(const char *text) {
  char *all = calloc((size_t)nranks, REASON_BYTES);
  char mine[REASON_BYTES] = {0};
  CHECK(all != NULL, "out of memory");
  snprintf(mine, sizeof mine, "%s", text);
  QOK(qcoll_all_gather(mine, all, REASON_BYTES, QCOLL_U8, comm, NULL));
  for (int r = 0; r < nranks; r++)
    CHECK(!memcmp(all + (size_t)r * REASON_BYTES, mine, REASON_BYTES),
          "rank %d says '%s', I say '%s'", r, all + (size_t)r * REASON_BYTES,
          mine);
  free(all);
}

static int finish(int code) {
  qcoll__nccl_comm_destroy(&comm->ctx);
  CHECK(qcoll__nccl_comm_state(&comm->ctx) == QCOLL__NCCL_UNTRIED,
        "after destroy");
  CHECK(qcoll_comm_destroy(comm) == QCOLL_OK, "%s", qcoll_last_error());
  return code;
}

/* Create the NCCL communicator; 77 when NCCL is not installed. */
static int get_nccl_or_skip(void) {
  void *nccl = NULL;
  qcoll_status_t st = qcoll__nccl_comm_get(&comm->ctx, &nccl);
  char why[2048];
  if (st == QCOLL_ERR_UNSUPPORTED && !qcoll__nccl_available(why, sizeof why)) {
    printf("skipped: %s\n", why);
    return SKIP;
  }
  CHECK(st == QCOLL_OK, "%s", qcoll_comm_last_error(comm));
  CHECK(nccl != NULL, "no NCCL communicator");
  CHECK(qcoll__nccl_comm_state(&comm->ctx) == QCOLL__NCCL_READY, "state");
  printf("rank %d: NCCL %d from %s on device %d\n", rank, qcoll__nccl_version(),
         qcoll__nccl_library_path(), device);
  return 0;
}

/* The first NCCL collective cannot run inside graph capture (NCCL's init
 * allocates memory): it is declined, the capture stays valid, and nothing
 * is remembered, so the next uncaptured call creates the communicator. */
static void check_first_call_not_captured(void) {
  CHECK_CUDA(cudaSetDevice(device));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  dbuf_t b = dbuf_alloc(COUNT * 4);
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  qcoll_status_t st = qcoll__nccl_all_reduce(&comm->ctx, b.dev, b.dev, COUNT,
                                             QCOLL_F32, QCOLL_SUM, s);
  CHECK_CUDA(cudaStreamEndCapture(s, &graph));
  CHECK(st == QCOLL_ERR_UNSUPPORTED, "status %d", (int)st);
  CHECK(strstr(qcoll_comm_last_error(comm), "captured") != NULL, "%s",
        qcoll_comm_last_error(comm));
  CHECK(qcoll__nccl_comm_state(&comm->ctx) == QCOLL__NCCL_UNTRIED, "state %d",
        (int)qcoll__nccl_comm_state(&comm->ctx));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(s));
  dbuf_free(&b);
}

static void run_collectives(void) {
  CHECK_CUDA(cudaSetDevice(device));
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  /* Call from another device when there is one: the library must run on
   * the buffers' device and leave ours current. */
  int ndev = device_count();
  foreign = ndev > 1 ? (device + 1) % ndev : -1;
  if (foreign >= 0) CHECK_CUDA(cudaSetDevice(foreign));
  for (int t = 0; t < QCOLL_DTYPE_COUNT; t++)
    for (int op = 0; op < QCOLL_OP_COUNT; op++)
      for (int in_place = 0; in_place < 2; in_place++)
        check_all_reduce((qcoll_dtype_t)t, (qcoll_op_t)op, in_place);
  check_rooted();
  check_gather_scatter(false);
  check_gather_scatter(true);
  check_all_to_all();
  check_send_recv();
  check_graph_replay();
  QOK(qcoll__nccl_poll_async_error(&comm->ctx));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaStreamDestroy(stream));
  if (foreign >= 0) CHECK_CUDA(cudaSetDevice(device));
  foreign = -1;
}

static int run_single(void) {
  if (device_count() < 1) {
    printf("skipped: no GPU\n");
    return SKIP;
  }
  device = 0;
  init_comm(false, device);
  check_first_call_not_captured();
  int skip = get_nccl_or_skip();
  if (skip) return finish(skip);
  run_collectives();
  return finish(0);
}

static int run_multi(void) {
  const char *size = getenv("QCOLL_WORLD_SIZE");
  const char *local = getenv("QCOLL_LOCAL_RANK");
  CHECK(size && local, "run me under qcoll-run");
  int want = atoi(size), have = device_count();
  if (have < want) {
    printf("skipped: %d ranks need %d GPUs, %d visible\n", want, want, have);
    return SKIP;
  }
  device = atoi(local);
  init_comm(true, device);
  /* Point-to-point before any collective cannot create the NCCL
   * communicator, on both peers alike. */
  int x = 0;
  if (nranks >= 2 && rank <= 1)
    CHECK(qcoll__nccl_send(&comm->ctx, &x, 1, QCOLL_I32, 1 - rank, NULL) ==
              QCOLL_ERR_UNSUPPORTED,
          "p2p before the first collective");
  int skip = get_nccl_or_skip();
  if (skip) return finish(skip);
  run_collectives();
  return finish(0);
}

static int run_shared(bool let_nccl_decide) {
  if (device_count() < 1) {
    printf("skipped: no GPU\n");
    return SKIP;
  }
  if (let_nccl_decide) setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  device = 0;
  init_comm(true, device);
  char why[2048];
  if (!qcoll__nccl_available(why, sizeof why)) {
    /* Still collective: every rank must take part in the refusal. */
    void *nccl;
    CHECK(qcoll__nccl_comm_get(&comm->ctx, &nccl) == QCOLL_ERR_UNSUPPORTED,
          "refuse");
    printf("skipped: %s\n", why);
    return finish(SKIP);
  }
  void *nccl = NULL;
  double t0 = qcoll__now();
  qcoll_status_t st = qcoll__nccl_comm_get(&comm->ctx, &nccl);
  double took = qcoll__now() - t0;
  const char *verdict =
      st == QCOLL_OK ? "accepted" : qcoll__nccl_comm_refusal(&comm->ctx);
  printf("rank %d: NCCL with %d ranks on one GPU: %s (%.2f s)\n", rank, nranks,
         verdict, took);
  check_same_everywhere(verdict);
  if (!let_nccl_decide) {
    CHECK(st == QCOLL_ERR_UNSUPPORTED, "status %d", (int)st);
    CHECK(strstr(verdict, "share the GPU") != NULL, "%s", verdict);
    CHECK(took < 5, "refusing took %.2f s", took); /* before NCCL init */
  } else if (st != QCOLL_OK) {
    CHECK(st == QCOLL_ERR_UNSUPPORTED, "status %d", (int)st);
    CHECK(strstr(verdict, "ncclCommInitRankConfig") != NULL, "%s", verdict);
  } else {
    /* This NCCL accepts several ranks per GPU: then it must be right. */
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamCreate(&stream));
    check_all_reduce(QCOLL_I32, QCOLL_SUM, false);
    CHECK_CUDA(cudaStreamDestroy(stream));
  }
  /* The refusal leaves the communicator serving other paths. */
  QOK(qcoll_barrier(comm, NULL));
  return finish(0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "single";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(mode, "single")) return run_single();
  if (!strcmp(mode, "multi")) return run_multi();
  if (!strcmp(mode, "shared")) return run_shared(false);
  if (!strcmp(mode, "shared_nccl")) return run_shared(true);
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
#endif
