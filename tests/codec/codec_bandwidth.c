/*
 * Throughput of the GPU codec kernels (src/coll/cuda/codec_kernels.cu)
 * beside a device-to-device copy measured in the same run.
 *
 *   codec_bandwidth [--mib M] [--iters N] [--require R]
 *
 * For M MiB of f32 values (default 256) and every format and kernel
 * variant: the time of one encode, of one decode, and their memory
 * bandwidth counted as bytes read plus bytes written; the copy is
 * cudaMemcpyAsync of the same M MiB, counted the same way (read + write).
 * "ratio" is the bandwidth of encode+decode (both kernels' bytes over both
 * kernels' times) over the copy's.  With --require R the program exits 1
 * when the best variant of any format stays below R (the quantised
 * all-reduce aims at R = 0.8), 77 when no GPU is usable.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "coll/codec.h"
#include "coll/cuda/codec_launch.h"

typedef struct options {
  size_t mib;
  int iters;
  double require;
} options_t;

static options_t parse(int argc, char **argv) {
  options_t o = {256, 20, 0.0};
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--mib") == 0)
      o.mib = (size_t)atol(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0)
      o.iters = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--require") == 0)
      o.require = atof(argv[++i]);
    else {
      fprintf(stderr,
              "usage: codec_bandwidth [--mib M] [--iters N] [--require R]\n");
      exit(2);
    }
  }
  if (o.mib == 0 || o.iters < 1) {
    fprintf(stderr, "codec_bandwidth: --mib and --iters must be positive\n");
    exit(2);
  }
  return o;
}

/* Mean milliseconds of one launch of `what` (after two untimed ones). */
typedef int (*launch_fn)(void *ctx);
static double time_ms(launch_fn fn, void *ctx, int iters, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 2; i++) CHECK_CUDA(fn(ctx));
  CHECK_CUDA(cudaEventRecord(a, s));
  for (int i = 0; i < iters; i++) CHECK_CUDA(fn(ctx));
  CHECK_CUDA(cudaEventRecord(b, s));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return ms / iters;
}

typedef struct work {
  qcoll_quant_t fmt;
  qcoll__codec_cuda_variant_t variant;
  float *values, *decoded;
  uint8_t *encoded;
  size_t n;
  cudaStream_t stream;
} work_t;

static int do_copy(void *p) {
  work_t *w = p;
  return cudaMemcpyAsync(w->decoded, w->values, w->n * sizeof(float),
                         cudaMemcpyDeviceToDevice, w->stream);
}
static int do_encode(void *p) {
  work_t *w = p;
  return qcoll__codec_cuda_encode(w->fmt, w->variant, w->values, w->n,
                                  w->encoded, w->stream);
}
static int do_decode(void *p) {
  work_t *w = p;
  return qcoll__codec_cuda_decode(w->fmt, w->variant, w->encoded, w->n,
                                  w->decoded, w->stream);
}

static double gbps(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv) {
  options_t o = parse(argc, argv);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no usable CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  work_t w;
  memset(&w, 0, sizeof w);
  w.n = o.mib << 18; /* MiB of f32 */
  const size_t value_bytes = w.n * sizeof(float);
  CHECK_CUDA(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMalloc((void **)&w.values, value_bytes));
  CHECK_CUDA(cudaMalloc((void **)&w.decoded, value_bytes));
  CHECK_CUDA(cudaMalloc((void **)&w.encoded,
                        qcoll__codec_encoded_bytes(QCOLL_QUANT_INT8, w.n)));
  /* Non-trivial values: every group gets its own scale. */
  float *host = malloc(value_bytes);
  if (!host) return 1;
  for (size_t i = 0; i < w.n; i++)
    host[i] = (float)((int)(i * 2654435761u % 2001u) - 1000) *
              (1.0f + (float)(i / 32 % 7));
  CHECK_CUDA(cudaMemcpy(w.values, host, value_bytes, cudaMemcpyHostToDevice));
  free(host);

  const double copy_ms = time_ms(do_copy, &w, o.iters, w.stream);
  const double copy_bw = gbps(2.0 * (double)value_bytes, copy_ms);
  printf("# codec_bandwidth --mib %zu --iters %d on %s\n", o.mib, o.iters,
         prop.name);
  printf("# bandwidth = (bytes read + bytes written) / time\n");
  printf("# device-to-device copy of %zu MiB: %.3f ms, %.1f GB/s\n", o.mib,
         copy_ms, copy_bw);
  printf("%-6s %-7s %12s %12s %12s %12s %12s %7s\n", "format", "variant",
         "encode_ms", "encode_GB/s", "decode_ms", "decode_GB/s", "both_GB/s",
         "ratio");
  static const qcoll_quant_t formats[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                          QCOLL_QUANT_INT6, QCOLL_QUANT_INT4,
                                          QCOLL_QUANT_INT3};
  int below = 0;
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
    double best = 0;
    w.fmt = formats[f];
    const double enc_bytes = (double)qcoll__codec_encoded_bytes(w.fmt, w.n);
    for (int v = 0; v < QCOLL_CODEC_CUDA_VARIANTS; v++) {
      w.variant = (qcoll__codec_cuda_variant_t)v;
      double e = time_ms(do_encode, &w, o.iters, w.stream);
      double d = time_ms(do_decode, &w, o.iters, w.stream);
      double moved = 2.0 * ((double)value_bytes + enc_bytes);
      double both = gbps(moved, e + d), ratio = both / copy_bw;
      if (ratio > best) best = ratio;
      printf("%-6s %-7s %12.3f %12.1f %12.3f %12.1f %12.1f %7.2f\n",
             qcoll_quant_name(w.fmt), qcoll__codec_cuda_variant_name(w.variant),
             e, gbps((double)value_bytes + enc_bytes, e), d,
             gbps((double)value_bytes + enc_bytes, d), both, ratio);
    }
    if (o.require > 0 && best < o.require) {
      printf("# %s: best ratio %.2f is below the required %.2f\n",
             qcoll_quant_name(w.fmt), best, o.require);
      below++;
    }
  }
  CHECK_CUDA(cudaFree(w.values));
  CHECK_CUDA(cudaFree(w.decoded));
  CHECK_CUDA(cudaFree(w.encoded));
  CHECK_CUDA(cudaStreamDestroy(w.stream));
  if (below) return 1;
  if (o.require > 0)
    printf("# every format reaches %.2f of the copy bandwidth\n", o.require);
  return 0;
}
