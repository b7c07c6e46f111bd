/*
 * The GPU encode/decode kernels (src/coll/cuda/codec_kernels.cu) against the
 * CPU reference of codec.h, bit for bit: every format, both thread mappings,
 * buffers of Gaussian values, rare outliers, arbitrary finite bit patterns,
 * exact ties, subnormal groups and groups holding inf/NaN, with a partial
 * last group.  Exits 77 (skipped) when no CUDA device is usable.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "coll/codec.h"
#include "coll/cuda/codec_launch.h"

#define G QCOLL_CODEC_GROUP

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_FP8};
static const char *const FORMAT_NAMES[] = {"INT8", "INT6", "INT4", "FP8"};

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_gauss(uint64_t *s) {
  double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* One group of each kind in turn, so every kernel launch sees all of them. */
static void fill(float *x, size_t n, uint32_t range, uint64_t seed) {
  uint64_t s = seed;
  for (size_t g0 = 0; g0 < n; g0 += G) {
    size_t len = n - g0 < G ? n - g0 : G;
    int kind = (int)((g0 / G) % 7), e = (int)(rng_next(&s) % 271) - 150;
    for (size_t i = 0; i < len; i++) {
      float v;
      uint32_t u;
      switch (kind) {
        case 0: v = (float)ldexp(rng_gauss(&s), e); break;
        case 1:
          v = (float)(rng_gauss(&s) * (rng_next(&s) % 64 ? 1.0 : 1e6));
          break;
        case 2:
          do u = (uint32_t)rng_next(&s);
          while ((u & 0x7f800000u) == 0x7f800000u);
          memcpy(&v, &u, 4);
          break;
        case 3: /* ties: (m + 1/2) 2^k with amax R 2^k */
          v = (float)ldexp((double)(rng_next(&s) % (2 * range)) - range + 0.5,
                           e / 2);
          if (i == 7) v = (float)ldexp((double)range, e / 2);
          break;
        case 4: /* subnormal */
          u = (uint32_t)(rng_next(&s) % 0x00800000u) |
              (uint32_t)(rng_next(&s) & 1) << 31;
          memcpy(&v, &u, 4);
          break;
        case 5: /* one inf or NaN in the group */
          v = (float)rng_gauss(&s);
          if (i == (size_t)(g0 / G) % len) v = (g0 / G) & 1 ? INFINITY : NAN;
          break;
        default: v = 0.0f; break; /* all zero */
      }
      x[g0 + i] = v;
    }
  }
}

#define CUDA_OK(call)                                           \
  do {                                                          \
    cudaError_t e_ = (cudaError_t)(call);                       \
    if (e_ != cudaSuccess) {                                    \
      print_error("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                  cudaGetErrorString(e_));                      \
      fail();                                                   \
    }                                                           \
  } while (0)

static void check_size(size_t n, uint64_t seed) {
  for (size_t f = 0; f < 4; f++) {
    qcoll_quant_t fmt = FORMATS[f];
    size_t bytes = qcoll__codec_encoded_bytes(fmt, n);
    float *x = malloc(n * sizeof(float)), *host_y = malloc(n * sizeof(float));
    float *dev_y = malloc(n * sizeof(float));
    uint8_t *host_enc = malloc(bytes), *dev_enc = malloc(bytes);
    assert_non_null(x), assert_non_null(host_y), assert_non_null(dev_y);
    assert_non_null(host_enc), assert_non_null(dev_enc);
    fill(x, n, qcoll__codec_range(fmt), seed + f);
    qcoll__codec_encode(fmt, x, n, host_enc);
    qcoll__codec_decode(fmt, host_enc, n, host_y);

    float *d_x, *d_y;
    uint8_t *d_enc;
    CUDA_OK(cudaMalloc((void **)&d_x, n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_y, n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_enc, bytes));
    CUDA_OK(cudaMemcpy(d_x, x, n * sizeof(float), cudaMemcpyHostToDevice));
    for (int variant = 0; variant < 2; variant++) {
      const char *vname = variant == QCOLL_CODEC_CUDA_WARP ? "warp" : "thread";
      /* encode on the GPU: same bytes */
      CUDA_OK(cudaMemset(d_enc, 0xa5, bytes));
      CUDA_OK(qcoll__codec_cuda_encode(
          fmt, (qcoll__codec_cuda_variant_t)variant, d_x, n, d_enc, NULL));
      CUDA_OK(cudaMemcpy(dev_enc, d_enc, bytes, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < bytes; i++)
        if (dev_enc[i] != host_enc[i]) {
          print_error(
              "%s %s n=%zu: encoded byte %zu (group %zu) is 0x%02x on the GPU, "
              "0x%02x on "
              "the host\n",
              FORMAT_NAMES[f], vname, n, i, i / qcoll__codec_group_bytes(fmt),
              dev_enc[i], host_enc[i]);
          fail();
        }
      /* decode the host's bytes on the GPU: same floats, bit for bit */
      CUDA_OK(cudaMemcpy(d_enc, host_enc, bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(d_y, 0xff, n * sizeof(float)));
      CUDA_OK(qcoll__codec_cuda_decode(
          fmt, (qcoll__codec_cuda_variant_t)variant, d_enc, n, d_y, NULL));
      CUDA_OK(
          cudaMemcpy(dev_y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost));
      if (memcmp(dev_y, host_y, n * sizeof(float)) != 0) {
        for (size_t i = 0; i < n; i++)
          if (memcmp(&dev_y[i], &host_y[i], 4) != 0) {
            print_error(
                "%s %s n=%zu: decoded value %zu is %a on the GPU, %a on the "
                "host\n",
                FORMAT_NAMES[f], vname, n, i, (double)dev_y[i],
                (double)host_y[i]);
            break;
          }
        fail();
      }
    }
    CUDA_OK(cudaFree(d_x));
    CUDA_OK(cudaFree(d_y));
    CUDA_OK(cudaFree(d_enc));
    free(x), free(host_y), free(dev_y), free(host_enc), free(dev_enc);
  }
}

static void test_gpu_matches_cpu(void **state) {
  (void)state;
  const size_t sizes[] = {1, 31, 32, 33, 1000, (size_t)G * 70000 + 13};
  size_t values = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    check_size(sizes[k], 1000 + 17 * k);
    values += sizes[k];
  }
  print_message(
      "GPU == CPU bit for bit: %zu values x 4 formats x {warp, thread} x "
      "{encode, "
      "decode}\n",
      values);
}

static void test_bad_format(void **state) {
  (void)state;
  assert_int_equal(
      qcoll__codec_cuda_encode(QCOLL_QUANT_NONE, QCOLL_CODEC_CUDA_WARP, NULL,
                               32, NULL, NULL),
      cudaErrorInvalidValue);
  assert_int_equal(
      qcoll__codec_cuda_decode(QCOLL_QUANT_DEFAULT, QCOLL_CODEC_CUDA_THREAD,
                               NULL, 32, NULL, NULL),
      cudaErrorInvalidValue);
  assert_int_equal(
      qcoll__codec_cuda_encode(QCOLL_QUANT_INT4, QCOLL_CODEC_CUDA_WARP, NULL, 0,
                               NULL, NULL),
      cudaSuccess);
}

int main(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    printf("test_codec_gpu: skipped: no usable CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    return 77;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("test_codec_gpu: device 0: %s (sm_%d%d)\n", prop.name, prop.major,
           prop.minor);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_format),
      cmocka_unit_test(test_gpu_matches_cpu),
  };
  return cmocka_run_group_tests_name("codec_gpu", tests, NULL, NULL);
}
