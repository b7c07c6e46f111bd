/*
 * The ipc backend's launches: dispatch, chunking and launch of the three
 * kernel families behind their extern "C" launchers (allreduce.cu one-shot
 * and two-shot, allreduce_quant.cu quantised two-shot, collectives.cu every
 * other collective and send/recv) on the buffers that the CUDA IPC
 * transport (transport/cuda_ipc.c) set up.  Called by backend/ipc.c under
 * the device guard, after validation (buffers and stream on comm->device),
 * with the path already chosen.
 */
#ifdef QCOLL_HAVE_CUDA /* the whole file: CUDA builds only */

#include "cuda_ipc_launch.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "../transport/cuda_ipc.h"
#include "../transport/cuda_ipc_comm.h"
#include "../transport/cuda_reg.h"

/* The quantised two-shot (allreduce_quant.cu): sum of f16/bf16/f32 only.
 * Min and max are refused rather than quantised (the extreme of decoded
 * values is not the extreme of the inputs), and so is a forced one-shot
 * (quantisation exists in the two-shot kernel only): a forced choice that
 * cannot be served is an error, never a silent detour. */
static qcoll_status_t quant_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                       void *recvbuf, size_t count,
                                       qcoll_dtype_t dtype, qcoll_op_t op,
                                       void *stream, qcoll_algo_t algo,
                                       qcoll_quant_t quant, bool rotate) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  const char *qname = qcoll_quant_name(quant);
  if (op != QCOLL_SUM)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "quantised all-reduce (%s) supports sum only, not %s: "
                        "call it with quant none",
                        qname, qcoll_op_name(op));
  if (!qcoll__cuda_all_reduce_quant_supported(dtype, op, quant))
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "quantised all-reduce supports f16, bf16 and f32 with "
                        "fp8, int8, int6, int4 or int3, not %s with %s",
                        qcoll_dtype_name(dtype), qname);
  if (algo != QCOLL_ALGO_AUTO && algo != QCOLL_ALGO_TWOSHOT)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "quantised all-reduce (%s) runs two-shot only, not "
                        "the forced algorithm %s",
                        qname, qcoll_algo_name(algo));
  const size_t chunk =
      qcoll__cuda_all_reduce_quant_chunk_elems(&cc->view, quant);
  if (chunk == 0)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "quantised all-reduce (%s): data regions of %zu bytes "
                        "hold no %s group per rank for %d ranks "
                        "(QCOLL_IPC_BYTES too small)",
                        qname, cc->view.region_bytes, qname, comm->nranks);
  /* As for the unquantised kernels: a kernel that gave up leaves the flags
   * disagreeing, so launching more would only time out again. */
  qcoll_status_t st = qcoll__cuda_poll_async_error(comm);
  if (st != QCOLL_OK) return st;
  if (count == 0) return QCOLL_OK;

  /* One launch: the kernel takes a message larger than the data regions
   * through them in rounds of whole groups (at most `chunk` elements each,
   * a multiple of 32), so every group is the one a single round of the
   * whole message forms. */
  cudaError_t err = qcoll__cuda_all_reduce_quant_launch(
      &cc->view, sendbuf, recvbuf, count, dtype, quant, rotate,
      (cudaStream_t)stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return qcoll__error(comm, QCOLL_ERR_CUDA,
                        "launching the %s two-shot all-reduce kernel (%zu %s "
                        "elements) on device %d failed: %s (%s)",
                        qname, count, qcoll_dtype_name(dtype), comm->device,
                        cudaGetErrorName(err), cudaGetErrorString(err));
  }
  QLOG_TRACE(comm, COLL,
             "all-reduce %zu x %s sum: two-shot %s%s, one launch in rounds of "
             "at most %zu elements on stream %p",
             count, qcoll_dtype_name(dtype), qname, rotate ? "+rot" : "", chunk,
             stream);
  return QCOLL_OK;
}

/* The one-shot all-reduce of a message that fits the push kernel's slot
 * (qcoll__push_fits), in one launch on stream. */
static qcoll_status_t qcoll__push_all_reduce(qcoll__ctx_t *comm,
                                             const qcoll__push_view_t *view,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, qcoll_dtype_t dtype,
                                      qcoll_op_t op, void *stream) {
  cudaError_t err = qcoll__cuda_push_launch(view, sendbuf, recvbuf, count,
                                            dtype, op, (cudaStream_t)stream);
  if (err == cudaSuccess) return QCOLL_OK;
  (void)cudaGetLastError();
  return qcoll__error(comm, QCOLL_ERR_CUDA,
                      "launching the push one-shot all-reduce kernel (%zu %s "
                      "elements) on device %d failed: %s (%s)",
                      count, qcoll_dtype_name(dtype), comm->device,
                      cudaGetErrorName(err), cudaGetErrorString(err));
}

/* Under graph capture, the call's buffers are registered (collectively:
 * every rank captures the same calls, so every rank takes part, whether its
 * buffers are already registered or not), so that every replay reads the
 * peers' buffers with no copy-in.  A capture-time cost only; buffers that
 * cannot be registered are staged.  Off with QCOLL_GRAPH_REGISTER=0. */
static qcoll_status_t register_if_captured(qcoll__ctx_t *comm,
                                           const void *sendbuf, void *recvbuf,
                                           size_t bytes, void *stream,
                                           bool *captured) {
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  *captured = false;
  if (!comm->config.graph_register) return QCOLL_OK;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    return QCOLL_OK; /* the launch reports what is wrong with the stream */
  }
  if (capture != cudaStreamCaptureStatusActive) return QCOLL_OK;
  *captured = true;
  const void *bufs[2] = {sendbuf, recvbuf == sendbuf ? NULL : recvbuf};
  const size_t sizes[2] = {bytes, bytes};
  qcoll__reg_result_t out[2];
  return qcoll__cuda_reg_register(comm, bufs, sizes, 2, true, out);
}

qcoll_status_t qcoll__cuda_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op,
                                      void *stream, qcoll_algo_t algo,
                                      qcoll_quant_t quant, bool rotate) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (!cc || !cc->usable)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "CUDA IPC is not usable on this communicator: %s",
                        cc && cc->reason[0] ? cc->reason : "not initialised");
  if (quant != QCOLL_QUANT_NONE && quant != QCOLL_QUANT_DEFAULT)
    return quant_all_reduce(comm, sendbuf, recvbuf, count, dtype, op, stream,
                            algo, quant, rotate);
  if (!qcoll__cuda_all_reduce_supported(dtype, op))
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "the CUDA IPC all-reduce supports f16, bf16 and f32 "
                        "with sum, min and max, not %s/%s",
                        qcoll_dtype_name(dtype), qcoll_op_name(op));
  size_t elem = qcoll_dtype_size(dtype);
  qcoll__ipc_algo_t ipc_algo;
  /* The selection table chose the kernel; this only carries it out. */
  switch (algo) {
    case QCOLL_ALGO_ONESHOT: ipc_algo = QCOLL_IPC_ONESHOT; break;
    case QCOLL_ALGO_TWOSHOT: ipc_algo = QCOLL_IPC_TWOSHOT; break;
    default:
      return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                          "the CUDA IPC all-reduce does not run algorithm %s",
                          qcoll_algo_name(algo));
  }
  /* A kernel of an earlier call gave up: the ranks' flags no longer agree,
   * so launching more would only time out again. */
  qcoll_status_t st = qcoll__cuda_poll_async_error(comm);
  if (st != QCOLL_OK) return st;
  if (count == 0) return QCOLL_OK;

  if (ipc_algo == QCOLL_IPC_ONESHOT &&
      qcoll__push_fits(&cc->push, count, dtype))
    return qcoll__push_all_reduce(comm, &cc->push, sendbuf, recvbuf, count,
                                  dtype, op, stream);

  /* The two-shot reads and writes registered buffers in place.  The
   * one-shot reads a peer's registered input in place only from
   * QCOLL_ONESHOT_REG_MIN_BYTES (4 MiB): it then needs a closing barrier
   * (the input must outlive every peer's read), which costs more than the
   * copy it saves on smaller messages.  One H200, 2 ranks, graph: 8.06-9.20
   * against 9.30-10.67 us copied at 4 MiB, but 8.52-8.63 against 8.19-8.30
   * at 3 MiB and 5.79-6.49 against 5.17-5.24 at 1 MiB
   * (docs/results/2026-12-03-h200-long-launches.md); by default more
   * ranks send no one-shot that large. */
  const size_t reg_min = comm->config.oneshot_reg_min_bytes;
  const bool uses_registration =
      ipc_algo == QCOLL_IPC_TWOSHOT || (reg_min && count * elem >= reg_min);
  bool captured = false;
  if (uses_registration) {
    st = register_if_captured(comm, sendbuf, recvbuf, count * elem, stream,
                              &captured);
    if (st != QCOLL_OK) return st;
  }
  const size_t chunk =
      qcoll__cuda_all_reduce_chunk_elems(&cc->view, ipc_algo, dtype);
  const size_t chunks = (count + chunk - 1) / chunk;
  for (size_t k = 0; k < chunks; k++) {
    size_t offset = k * chunk;
    size_t n = QCOLL_MIN(chunk, count - offset);
    const char *send = (const char *)sendbuf + offset * elem;
    char *recv = (char *)recvbuf + offset * elem;
    /* Registered buffers are read (and written) in place by the peers;
     * the kernel checks the references again on the device. */
    qcoll__ipc_reg_ref_t sref, rref;
    const bool exchange =
        uses_registration && qcoll__cuda_reg_refs(comm, send, recv, n * elem,
                                                captured, &sref, &rref);
    cudaError_t err = qcoll__cuda_all_reduce_launch_reg(
        &cc->view, ipc_algo, send, recv, n, dtype, op,
        exchange ? &sref : NULL, exchange ? &rref : NULL,
        (cudaStream_t)stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return qcoll__error(
          comm, QCOLL_ERR_CUDA,
          "launching the %s all-reduce kernel (chunk %zu of %zu, "
          "%zu %s elements) on device %d failed: %s (%s)",
          ipc_algo == QCOLL_IPC_ONESHOT ? "one-shot" : "two-shot", k + 1,
          chunks, n, qcoll_dtype_name(dtype), comm->device,
          cudaGetErrorName(err), cudaGetErrorString(err));
    }
  }
  QLOG_TRACE(
      comm, COLL, "all-reduce %zu x %s %s: %s, %zu launch(es) on stream %p",
      count, qcoll_dtype_name(dtype), qcoll_op_name(op),
      ipc_algo == QCOLL_IPC_ONESHOT ? "one-shot" : "two-shot", chunks, stream);
  return QCOLL_OK;
}

/* ---- every other collective (collectives.cu) ------------------------------
 */

/* Why the kernels of collectives.cu cannot serve, or QCOLL_OK.  A kernel
 * that gave up earlier leaves the ranks' flags disagreeing: launching more
 * would only time out again. */
static qcoll_status_t coll_ready(qcoll__ctx_t *comm, const char *name) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  if (!cc || !cc->usable)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: CUDA IPC is not usable on this communicator: %s",
                        name,
                        cc && cc->reason[0] ? cc->reason : "not initialised");
  return qcoll__cuda_poll_async_error(comm);
}

/* The kernel of collectives.cu for coll, from the ipc column of the list
 * of collectives (base/colls.h). */
static bool ipc_coll_kind(qcoll__coll_t coll, qcoll__ipc_coll_t *kind) {
#define KIND_IPC(id)             \
  case QCOLL__COLL_##id:         \
    *kind = QCOLL_IPC_COLL_##id; \
    return true;
#define KIND_NOIPC(id)
#define KIND(id, name, reduces, rooted, p2p, ipc) KIND_##ipc(id)
  switch (coll) {
    QCOLL__COLLS(KIND)
    default: return false;
  }
#undef KIND
#undef KIND_NOIPC
#undef KIND_IPC
}

static qcoll_status_t launch_failed(qcoll__ctx_t *comm, const char *name,
                                    size_t chunk_index, size_t chunks, size_t n,
                                    qcoll_dtype_t dtype, cudaError_t err) {
  (void)cudaGetLastError();
  return qcoll__error(comm, QCOLL_ERR_CUDA,
                      "launching the %s kernel (chunk %zu of %zu, %zu %s "
                      "elements) on device %d failed: %s (%s)",
                      name, chunk_index, chunks, n, qcoll_dtype_name(dtype),
                      comm->device, cudaGetErrorName(err),
                      cudaGetErrorString(err));
}

qcoll_status_t qcoll__cuda_collective(qcoll__ctx_t *comm, qcoll__coll_t coll,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, qcoll_dtype_t dtype,
                                      qcoll_op_t op, int root, void *stream) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  const char *name = qcoll__coll_name(coll);
  qcoll__ipc_coll_t kind;
  if (!ipc_coll_kind(coll, &kind))
    return qcoll__error(comm, QCOLL_ERR_INTERNAL,
                        "%s has no CUDA IPC collective kernel", name);
  qcoll_status_t st = coll_ready(comm, name);
  if (st != QCOLL_OK) return st;
  if (!qcoll__cuda_coll_supported(kind, dtype, op))
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: the CUDA IPC kernels do not serve %s/%s", name,
                        qcoll_dtype_name(dtype), qcoll_op_name(op));
  qcoll__ipc_coll_args_t args = {.kind = kind,
                                 .send = sendbuf,
                                 .recv = recvbuf,
                                 .count = count,
                                 .offset = 0,
                                 .len = 0,
                                 .dtype = dtype,
                                 .op = op,
                                 .root = root};
  if (kind == QCOLL_IPC_COLL_BARRIER) {
    cudaError_t err =
        qcoll__cuda_coll_launch(&cc->coll_view, &args, (cudaStream_t)stream);
    if (err != cudaSuccess)
      return launch_failed(comm, name, 1, 1, 0, dtype, err);
    QLOG_TRACE(comm, COLL, "barrier: kernel barrier on stream %p", stream);
    return QCOLL_OK;
  }
  if (count == 0) return QCOLL_OK;
  const size_t chunk =
      qcoll__cuda_coll_chunk_elems(&cc->coll_view, kind, dtype);
  if (chunk == 0)
    return qcoll__error(comm, QCOLL_ERR_UNSUPPORTED,
                        "%s: data regions of %zu bytes hold no %s element for "
                        "%d ranks (QCOLL_IPC_BYTES too small)",
                        name, cc->coll_view.region_bytes,
                        qcoll_dtype_name(dtype), comm->nranks);
  const size_t chunks = (count + chunk - 1) / chunk;
  for (size_t k = 0; k < chunks; k++) {
    args.offset = k * chunk;
    args.len = QCOLL_MIN(chunk, count - args.offset);
    cudaError_t err =
        qcoll__cuda_coll_launch(&cc->coll_view, &args, (cudaStream_t)stream);
    if (err != cudaSuccess)
      return launch_failed(comm, name, k + 1, chunks, args.len, dtype, err);
  }
  QLOG_TRACE(comm, COLL,
             "%s %zu x %s: IPC kernels, %zu launch(es) on stream %p", name,
             count, qcoll_dtype_name(dtype), chunks, stream);
  return QCOLL_OK;
}

static qcoll_status_t p2p(qcoll__ctx_t *comm, bool send, void *buf,
                          size_t count, qcoll_dtype_t dtype, int peer,
                          void *stream) {
  struct qcoll__cuda_comm *cc = comm->cuda;
  const char *name = send ? "send" : "recv";
  qcoll_status_t st = coll_ready(comm, name);
  if (st != QCOLL_OK) return st;
  size_t bytes = count * qcoll_dtype_size(dtype);
  if (bytes == 0) return QCOLL_OK;
  cudaError_t err =
      send ? qcoll__cuda_send_launch(&cc->coll_view, &cc->p2p, buf, bytes, peer,
                                     (cudaStream_t)stream)
           : qcoll__cuda_recv_launch(&cc->coll_view, &cc->p2p, buf, bytes, peer,
                                     (cudaStream_t)stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return qcoll__error(comm, QCOLL_ERR_CUDA,
                        "launching the %s kernel (%zu bytes, %s rank %d) on "
                        "device %d failed: %s (%s)",
                        name, bytes, send ? "to" : "from", peer, comm->device,
                        cudaGetErrorName(err), cudaGetErrorString(err));
  }
  QLOG_TRACE(comm, COLL, "%s %zu bytes %s rank %d: IPC channel, stream %p",
             name, bytes, send ? "to" : "from", peer, stream);
  return QCOLL_OK;
}

qcoll_status_t qcoll__cuda_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer,
                                void *stream) {
  return p2p(comm, true, (void *)sendbuf, count, dtype, peer, stream);
}

qcoll_status_t qcoll__cuda_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer, void *stream) {
  return p2p(comm, false, recvbuf, count, dtype, peer, stream);
}

qcoll_status_t qcoll__cuda_stream_wait(qcoll__ctx_t *comm, void *stream) {
  cudaError_t err = cudaStreamSynchronize((cudaStream_t)stream);
  if (err == cudaSuccess) return QCOLL_OK;
  (void)cudaGetLastError();
  return qcoll__error(comm, QCOLL_ERR_CUDA,
                      "cudaStreamSynchronize(stream %p) on device %d failed: "
                      "%s (%s)",
                      stream, comm->device, cudaGetErrorName(err),
                      cudaGetErrorString(err));
}

#endif /* QCOLL_HAVE_CUDA */
