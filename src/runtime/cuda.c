/*
 * The CUDA implementation of the device runtime (compiled only in CUDA
 * builds).  The CUDA runtime is linked statically and loads the driver on
 * first use, so on a machine without a driver or a GPU the probe fails with
 * a logged reason and the library keeps its host back end.
 *
 * Nothing here remembers a device: every answer is asked of the driver when
 * needed.
 */
#ifdef QCOLL_HAVE_CUDA /* the whole file: CUDA builds only */

#include <cuda.h> /* driver types only: entry points come through cudart */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdint.h>

#include "runtime.h"

static qcoll_status_t cuda_failed(const char *what, cudaError_t err) {
  return qcoll__error(NULL, QCOLL_ERR_CUDA, "%s failed: %s (%s)", what,
                      cudaGetErrorName(err), cudaGetErrorString(err));
}

static int cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

static qcoll_status_t cuda_get_device(int *dev) {
  cudaError_t err = cudaGetDevice(dev);
  return err == cudaSuccess ? QCOLL_OK : cuda_failed("cudaGetDevice", err);
}

static qcoll_status_t cuda_set_device(int dev) {
  cudaError_t err = cudaSetDevice(dev);
  if (err == cudaSuccess) return QCOLL_OK;
  return qcoll__error(NULL, QCOLL_ERR_CUDA, "cudaSetDevice(%d) failed: %s (%s)",
                      dev, cudaGetErrorName(err), cudaGetErrorString(err));
}

/* Queries run in relaxed capture mode: core asks them while the caller's
 * stream may be capturing a graph, and a query must neither fail nor
 * invalidate that capture.  The mode is this thread's; the outermost begin
 * switches it and keeps the caller's, the matching end puts it back, so a
 * window around several calls pays one exchange pair instead of one per
 * call (each pair costs about as much as the query it guards). */
static _Thread_local int relaxed_depth;
static _Thread_local enum cudaStreamCaptureMode relaxed_saved;

static void relaxed_begin(void) {
  if (relaxed_depth++ > 0) return;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
    (void)cudaGetLastError();
    mode = cudaStreamCaptureModeRelaxed;
  }
  relaxed_saved = mode;
}
static void relaxed_end(void) {
  if (--relaxed_depth > 0) return;
  enum cudaStreamCaptureMode saved = relaxed_saved;
  if (cudaThreadExchangeStreamCaptureMode(&saved) != cudaSuccess)
    (void)cudaGetLastError();
}

/* The driver's cuPointerGetAttributes, resolved at probe time: the
 * memory type and device ordinal of a pointer in one query, in less host
 * time than cudaPointerGetAttributes on the eager path of every GPU call
 * (54.9 against 88.3 ns on an H200 host, bench/launch-cost.cu,
 * docs/results/2026-12-04-h200-eager.md), and it neither fails nor leaves
 * an error behind on a pointer the driver does not know. */
typedef CUresult (*pointer_attrs_fn)(unsigned, CUpointer_attribute *, void **,
                                     CUdeviceptr);
static pointer_attrs_fn pointer_attrs;

/* One driver query: -1 for host memory (pinned, or unknown to the driver),
 * else the device that owns the allocation (managed memory included).
 * False when the query itself failed. */
static bool driver_pointer_device(const void *ptr, int *dev) {
  CUpointer_attribute which[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  unsigned int type = 0;
  int managed = 0, ordinal = -1;
  void *values[3] = {&type, &managed, &ordinal};
  relaxed_begin();
  CUresult r = pointer_attrs(3, which, values, (CUdeviceptr)(uintptr_t)ptr);
  relaxed_end();
  if (r != CUDA_SUCCESS) return false;
  const bool on_device = type == CU_MEMORYTYPE_DEVICE || managed;
  *dev = on_device && ordinal >= 0 ? ordinal : -1;
  return true;
}

static qcoll_status_t cuda_pointer_device(const void *ptr, int *dev) {
  if (pointer_attrs && driver_pointer_device(ptr, dev)) return QCOLL_OK;
  struct cudaPointerAttributes attr;
  relaxed_begin();
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  relaxed_end();
  if (err == cudaErrorInvalidValue) {
    /* A pointer the driver does not know: plain host memory.  The failed
     * query leaves a (non-sticky) error behind; clear it so the caller's
     * next cudaGetLastError() does not see it. */
    (void)cudaGetLastError();
    *dev = -1;
    return QCOLL_OK;
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return qcoll__error(NULL, QCOLL_ERR_CUDA,
                        "cudaPointerGetAttributes(%p) failed: %s (%s)", ptr,
                        cudaGetErrorName(err), cudaGetErrorString(err));
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: *dev = attr.device; break;
    default: *dev = -1; break; /* pinned or unregistered host memory */
  }
  return QCOLL_OK;
}

/* The legacy and per-thread default streams belong to whichever device is
 * current when work is enqueued. */
static bool is_default_stream(void *stream) {
  return stream == NULL || stream == (void *)cudaStreamLegacy ||
         stream == (void *)cudaStreamPerThread;
}

/* cudaStreamGetDevice (and the driver's cuStreamGetDevice) fail on a
 * stream that is capturing a graph and invalidate the capture (seen with
 * CUDA 13.0, driver 580).  Asking the driver for the stream's context and
 * that context's device leaves the capture intact (checked on the same
 * setup), so capturing streams are asked that way.  The entry points are
 * resolved once, at probe time, outside any capture. */
typedef CUresult (*stream_get_ctx_fn)(CUstream, CUcontext *);
typedef CUresult (*ctx_push_fn)(CUcontext);
typedef CUresult (*ctx_pop_fn)(CUcontext *);
typedef CUresult (*ctx_get_device_fn)(CUdevice *);
static struct {
  stream_get_ctx_fn stream_get_ctx;
  ctx_push_fn ctx_push;
  ctx_pop_fn ctx_pop;
  ctx_get_device_fn ctx_get_device;
} driver;

void *qcoll__cuda_driver_entry(const char *symbol, unsigned version) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found =
      cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return fn;
}

static void resolve_driver_entries(void) {
  pointer_attrs =
      (pointer_attrs_fn)qcoll__cuda_driver_entry("cuPointerGetAttributes", 7000);
  driver.stream_get_ctx =
      (stream_get_ctx_fn)qcoll__cuda_driver_entry("cuStreamGetCtx", 9020);
  driver.ctx_push = (ctx_push_fn)qcoll__cuda_driver_entry("cuCtxPushCurrent", 4000);
  driver.ctx_pop = (ctx_pop_fn)qcoll__cuda_driver_entry("cuCtxPopCurrent", 4000);
  driver.ctx_get_device =
      (ctx_get_device_fn)qcoll__cuda_driver_entry("cuCtxGetDevice", 2000);
}

static bool capturing_stream_device(void *stream, int *dev, const char **how) {
  CUdevice d;
  CUcontext ctx = NULL, popped = NULL;
  if (driver.stream_get_ctx && driver.ctx_push && driver.ctx_pop &&
      driver.ctx_get_device &&
      driver.stream_get_ctx((CUstream)stream, &ctx) == CUDA_SUCCESS &&
      driver.ctx_push(ctx) == CUDA_SUCCESS) {
    CUresult r = driver.ctx_get_device(&d);
    driver.ctx_pop(&popped);
    if (r == CUDA_SUCCESS) {
      *dev = (int)d;
      *how = "the stream's context";
      return true;
    }
  }
  return false;
}

static qcoll_status_t cuda_stream_device(void *stream, int *dev) {
  if (is_default_stream(stream)) {
    *dev = -1;
    return QCOLL_OK;
  }
  /* Capturing streams never meet cudaStreamGetDevice (see above). */
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing((cudaStream_t)stream, &capture);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return qcoll__error(NULL, QCOLL_ERR_CUDA,
                        "cudaStreamIsCapturing(stream %p) failed: %s (%s)",
                        stream, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  if (capture != cudaStreamCaptureStatusNone) {
    static atomic_bool told;
    const char *how = NULL;
    if (capturing_stream_device(stream, dev, &how)) {
      if (!atomic_exchange(&told, true))
        QLOG_INFO(NULL, CUDA, "device of a capturing stream: asked through %s",
                  how);
      return QCOLL_OK;
    }
    /* Cannot tell: treat it like the default stream.  A stream of another
     * device then fails at the kernel launch, which reports the error. */
    if (!atomic_exchange(&told, true))
      QLOG_INFO(NULL, CUDA,
                "device of a capturing stream: not available, "
                "assuming the communicator's");
    *dev = -1;
    return QCOLL_OK;
  }
  relaxed_begin();
  err = cudaStreamGetDevice((cudaStream_t)stream, dev);
  relaxed_end();
  if (err == cudaSuccess) return QCOLL_OK;
  (void)cudaGetLastError();
  return qcoll__error(NULL, QCOLL_ERR_CUDA,
                      "cudaStreamGetDevice(stream %p) failed: %s (%s)", stream,
                      cudaGetErrorName(err), cudaGetErrorString(err));
}

static qcoll_status_t copy_and_wait(void *dst, const void *src, size_t bytes,
                                    enum cudaMemcpyKind kind, void *stream) {
  if (bytes == 0) return QCOLL_OK;
  cudaError_t err =
      cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream);
  if (err != cudaSuccess) return cuda_failed("cudaMemcpyAsync", err);
  err = cudaStreamSynchronize((cudaStream_t)stream);
  return err == cudaSuccess ? QCOLL_OK
                            : cuda_failed("cudaStreamSynchronize", err);
}

static qcoll_status_t cuda_memcpy_d2h(void *dst, const void *src, size_t bytes,
                                      void *stream) {
  return copy_and_wait(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
}

static qcoll_status_t cuda_memcpy_h2d(void *dst, const void *src, size_t bytes,
                                      void *stream) {
  return copy_and_wait(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}

static qcoll_status_t cuda_stream_is_capturing(void *stream, bool *capturing) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing((cudaStream_t)stream, &status);
  if (err == cudaErrorStreamCaptureImplicit) {
    /* The legacy stream while another stream captures: using it would
     * break that capture, so treat it as capturing. */
    (void)cudaGetLastError();
    *capturing = true;
    return QCOLL_OK;
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_failed("cudaStreamIsCapturing", err);
  }
  /* An invalidated capture still has to be ended by its owner: no
   * synchronous work on it either. */
  *capturing = status != cudaStreamCaptureStatusNone;
  return QCOLL_OK;
}

static qcoll_status_t cuda_event_record(void **event, void *stream) {
  cudaError_t err = cudaSuccess;
  if (!*event) {
    cudaEvent_t ev = NULL;
    err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (err != cudaSuccess) return cuda_failed("cudaEventCreateWithFlags", err);
    *event = ev;
  }
  err = cudaEventRecord((cudaEvent_t)*event, (cudaStream_t)stream);
  return err == cudaSuccess ? QCOLL_OK : cuda_failed("cudaEventRecord", err);
}

static qcoll_status_t cuda_event_query(void *event, bool *done) {
  cudaError_t err = cudaEventQuery((cudaEvent_t)event);
  *done = err != cudaErrorNotReady;
  if (err == cudaSuccess || err == cudaErrorNotReady) return QCOLL_OK;
  (void)cudaGetLastError();
  return cuda_failed("cudaEventQuery", err);
}

static void cuda_event_destroy(void *event) {
  if (event) (void)cudaEventDestroy((cudaEvent_t)event);
}

static const qcoll__runtime_t cuda_runtime = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .get_device = cuda_get_device,
    .set_device = cuda_set_device,
    .pointer_device = cuda_pointer_device,
    .stream_device = cuda_stream_device,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_h2d = cuda_memcpy_h2d,
    .stream_is_capturing = cuda_stream_is_capturing,
    .relaxed_begin = relaxed_begin,
    .relaxed_end = relaxed_end,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_destroy = cuda_event_destroy,
};

const qcoll__runtime_t *qcoll__runtime_cuda_probe(void) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    QLOG_INFO(NULL, CUDA,
              "no usable CUDA driver or device (%s: %s): host back end only",
              cudaGetErrorName(err), cudaGetErrorString(err));
    return NULL;
  }
  if (count < 1) {
    QLOG_INFO(NULL, CUDA,
              "the CUDA driver reports no device: host back end only");
    return NULL;
  }
  int driver_version = 0, runtime_version = 0;
  (void)cudaDriverGetVersion(&driver_version);
  (void)cudaRuntimeGetVersion(&runtime_version);
  QLOG_INFO(NULL, CUDA, "CUDA: %d device(s), driver %d.%d, runtime %d.%d",
            count, driver_version / 1000, driver_version % 1000 / 10,
            runtime_version / 1000, runtime_version % 1000 / 10);
  resolve_driver_entries();
  return &cuda_runtime;
}

#endif /* QCOLL_HAVE_CUDA */
