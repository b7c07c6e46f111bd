/*
 * launch-cost: the host time of the CUDA runtime calls an eager qcoll call
 * makes (pointer attributes, capture status, stream device, the device
 * guard) and of a bare kernel launch, per call, on an idle stream.  The
 * floor that bench/eager-call.c's figures are measured against: qcoll's
 * eager overhead is its time per call minus the launch's.
 *
 *   nvcc -arch=sm_90 -O2 bench/launch-cost.cu -lcuda -o launch-cost
 *   ./launch-cost
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
static double now_ns() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
__global__ void empty_kernel(int *p) { if (p && threadIdx.x == 1000) *p = 1; }
/* As large as the view and arguments the push one-shot takes (about 200
 * bytes): whether the size of the parameters shows in the launch's cost. */
struct Params192 { int *p; char pad[184]; };
__global__ void params_kernel(Params192 a) { if (a.p && threadIdx.x == 1000) *a.p = a.pad[threadIdx.x & 7]; }
#define N 20000
#define TIME(name, stmt) { for (int i = 0; i < 1000; i++) { stmt; } double t0 = now_ns(); for (int i = 0; i < N; i++) { stmt; } printf("%-44s %8.1f ns\n", name, (now_ns() - t0) / N); }
/* The host time of one launch: the best of 200 batches of 64 (the stream
 * drained between batches, so no launch waits for the GPU). */
template <typename Launch> static double best_batch(cudaStream_t s, Launch launch) {
  double best = 1e30;
  for (int b = 0; b < 200; b++) {
    double t0 = now_ns();
    for (int i = 0; i < 64; i++) launch();
    double t = (now_ns() - t0) / 64; if (t < best) best = t;
    cudaStreamSynchronize(s);
  }
  return best;
}
/* 8 blocks of 512 on s, with programmatic stream serialisation when pdl;
 * the attribute lives as long as the program (the config points at it). */
static cudaLaunchConfig_t runtime_config(cudaStream_t s, int pdl) {
  static cudaLaunchAttribute at;
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(8); cfg.blockDim = dim3(512); cfg.stream = s; cfg.attrs = &at; cfg.numAttrs = pdl;
  return cfg;
}
int main() {
  int *d; cudaMalloc(&d, 1 << 20); cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int dev; cudaPointerAttributes a; cudaStreamCaptureStatus cs; cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  unsigned long long bid; void *fn = 0; cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 4000, cudaEnableDefault, &q);
  typedef CUresult (*pga_t)(void *, CUpointer_attribute, CUdeviceptr);
  pga_t pga = (pga_t)fn;
  TIME("cudaGetDevice", cudaGetDevice(&dev));
  TIME("cudaPointerGetAttributes", cudaPointerGetAttributes(&a, d + 17));
  TIME("cudaThreadExchangeStreamCaptureMode x2", (cudaThreadExchangeStreamCaptureMode(&m), cudaThreadExchangeStreamCaptureMode(&m)));
  TIME("cudaStreamIsCapturing", cudaStreamIsCapturing(s, &cs));
  TIME("cudaStreamGetDevice", cudaStreamGetDevice(s, &dev));
  TIME("cudaGetLastError", cudaGetLastError());
  TIME("cuPointerGetAttribute(BUFFER_ID)", pga(&bid, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(d + 17)));
  typedef CUresult (*pgas_t)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
  cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 7000, cudaEnableDefault, &q);
  pgas_t pgas = (pgas_t)fn;
  CUpointer_attribute which[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  unsigned mtype = 0; int managed = 0, ordinal = -1; void *vals[3] = {&mtype, &managed, &ordinal};
  TIME("cuPointerGetAttributes(3 attributes)", pgas(3, which, vals, (CUdeviceptr)(d + 17)));
  cudaFunction_t cf;
  TIME("cudaGetFuncBySymbol", cudaGetFuncBySymbol(&cf, (const void *)empty_kernel));
  typedef CUresult (*lke_t)(const CUlaunchConfig *, CUfunction, void **, void **);
  cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000, cudaEnableDefault, &q);
  lke_t lke = (lke_t)fn;
  void *args[] = {&d};
  for (int r = 0; r < 2; r++) {
    for (int pdl = 0; pdl < 2; pdl++) {
      CUlaunchAttribute at; at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; at.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig cfg = {}; cfg.gridDimX = 8; cfg.gridDimY = cfg.gridDimZ = 1; cfg.blockDimX = 512; cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = (CUstream)s; cfg.attrs = &at; cfg.numAttrs = pdl;
      double best = best_batch(s, [&] { lke(&cfg, (CUfunction)cf, args, 0); });
      printf("cuLaunchKernelEx pdl=%d (best batch of 64)    %8.1f ns\n", pdl, best);
    }
    for (int pdl = 0; pdl < 2; pdl++) {
      cudaLaunchConfig_t cfg = runtime_config(s, pdl);
      double best = best_batch(s, [&] { cudaLaunchKernelExC(&cfg, (void *)empty_kernel, args); });
      printf("cudaLaunchKernelExC pdl=%d (best batch of 64) %8.1f ns\n", pdl, best);
    }
    {
      Params192 big = {}; big.p = d;
      void *big_args[] = {&big};
      cudaLaunchConfig_t cfg = runtime_config(s, 1);
      double best = best_batch(s, [&] { cudaLaunchKernelExC(&cfg, (void *)params_kernel, big_args); });
      printf("cudaLaunchKernelExC pdl=1, 192-byte params    %8.1f ns\n", best);
    }
    double best = best_batch(s, [&] { empty_kernel<<<8, 512, 0, s>>>(d); });
    printf("<<<>>> launch (best batch of 64)              %8.1f ns\n", best);
  }
  return 0;
}
