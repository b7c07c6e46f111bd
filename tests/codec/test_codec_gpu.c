/*
 * The GPU encode/decode kernels (src/coll/cuda/codec_kernels.cu) against the
 * CPU reference of codec.h, bit for bit: every format, every kernel variant
 * (codec_launch.h), buffers of Gaussian values, rare outliers, arbitrary
 * finite bit patterns, exact ties, subnormal groups and groups holding
 * inf/NaN, with a partial last group, from aligned buffers and from
 * pointers that are not (the segment variant's scalar path).  Exits 77
 * (skipped) when no CUDA device is usable.
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
#include "quant_data.h"

#define G QCOLL_CODEC_GROUP

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                        QCOLL_QUANT_FP8};
#define NFORMATS (sizeof FORMATS / sizeof FORMATS[0])
static const char *const FORMAT_NAMES[] = {"INT8", "INT6", "INT4", "INT3",
                                           "FP8"};

static void fill(float *x, size_t n, uint32_t range, uint64_t seed) {
  qd_rng_t s = {seed};
  for (size_t g0 = 0; g0 < n; g0 += G) {
    size_t len = n - g0 < G ? n - g0 : G;
    int kind = (int)((g0 / G) % 7), e = (int)(qd_next(&s) % 271) - 150;
    for (size_t i = 0; i < len; i++) {
      float v;
      uint32_t u;
      switch (kind) {
        case 0: v = (float)ldexp(qd_gauss(&s), e); break;
        case 1:
          v = (float)(qd_gauss(&s) * (qd_next(&s) % 64 ? 1.0 : 1e6));
          break;
        case 2:
          do u = (uint32_t)qd_next(&s);
          while ((u & 0x7f800000u) == 0x7f800000u);
          memcpy(&v, &u, 4);
          break;
        case 3: /* ties: (m + 1/2) 2^k with amax R 2^k */
          v = (float)ldexp((double)(qd_next(&s) % (2 * range)) - range + 0.5,
                           e / 2);
          if (i == 7) v = (float)ldexp((double)range, e / 2);
          break;
        case 4: /* subnormal */
          u = (uint32_t)(qd_next(&s) % 0x00800000u) |
              (uint32_t)(qd_next(&s) & 1) << 31;
          memcpy(&v, &u, 4);
          break;
        case 5: /* one inf or NaN in the group */
          v = (float)qd_gauss(&s);
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

/* Byte offsets of the f32 and the encoded buffers from cudaMalloc's
 * alignment: aligned for every vector access, then neither.  Each buffer
 * has SLACK bytes more than it needs, poisoned and checked afterwards. */
static const size_t VALUE_OFFSETS[] = {0, 4};
static const size_t CODE_OFFSETS[] = {0, 1};
#define SLACK 16

/* Whether the bytes of base[0, SLACK + len) outside [off, off + len) still
 * hold the poison value v. */
static int slack_intact(const uint8_t *base, size_t off, size_t len, int v) {
  for (size_t i = 0; i < SLACK + len; i++)
    if ((i < off || i >= off + len) && base[i] != (uint8_t)v) return 0;
  return 1;
}

static void check_size(size_t n, uint64_t seed) {
  for (size_t f = 0; f < NFORMATS; f++) {
    qcoll_quant_t fmt = FORMATS[f];
    size_t bytes = qcoll__codec_encoded_bytes(fmt, n);
    float *x = malloc(n * sizeof(float)), *host_y = malloc(n * sizeof(float));
    uint8_t *dev_y_all = malloc(n * sizeof(float) + SLACK);
    uint8_t *host_enc = malloc(bytes), *dev_enc_all = malloc(bytes + SLACK);
    assert_non_null(x), assert_non_null(host_y), assert_non_null(dev_y_all);
    assert_non_null(host_enc), assert_non_null(dev_enc_all);
    fill(x, n, qcoll__codec_range(fmt), seed + f);
    qcoll__codec_encode(fmt, x, n, host_enc);
    qcoll__codec_decode(fmt, host_enc, n, host_y);

    float *x_base, *y_base;
    uint8_t *enc_base;
    CUDA_OK(cudaMalloc((void **)&x_base, n * sizeof(float) + SLACK));
    CUDA_OK(cudaMalloc((void **)&y_base, n * sizeof(float) + SLACK));
    CUDA_OK(cudaMalloc((void **)&enc_base, bytes + SLACK));
    for (int run = 0; run < 2 * QCOLL_CODEC_CUDA_VARIANTS; run++) {
      const int place = run / QCOLL_CODEC_CUDA_VARIANTS;
      const int variant = run % QCOLL_CODEC_CUDA_VARIANTS;
      const char *vname =
          qcoll__codec_cuda_variant_name((qcoll__codec_cuda_variant_t)variant);
      const size_t x_off = VALUE_OFFSETS[place], enc_off = CODE_OFFSETS[place];
      float *d_x = (float *)((char *)x_base + x_off);
      float *d_y = (float *)((char *)y_base + x_off);
      uint8_t *d_enc = enc_base + enc_off;
      uint8_t *dev_enc = dev_enc_all + enc_off;
      const float *dev_y = (const float *)(dev_y_all + x_off);
      CUDA_OK(cudaMemcpy(d_x, x, n * sizeof(float), cudaMemcpyHostToDevice));
      /* encode on the GPU: same bytes, none outside */
      CUDA_OK(cudaMemset(enc_base, 0xa5, bytes + SLACK));
      CUDA_OK(qcoll__codec_cuda_encode(
          fmt, (qcoll__codec_cuda_variant_t)variant, d_x, n, d_enc, NULL));
      CUDA_OK(cudaMemcpy(dev_enc_all, enc_base, bytes + SLACK,
                         cudaMemcpyDeviceToHost));
      if (!slack_intact(dev_enc_all, enc_off, bytes, 0xa5)) {
        print_error("%s %s n=%zu place %d: encoding wrote outside its bytes\n",
                    FORMAT_NAMES[f], vname, n, place);
        fail();
      }
      for (size_t i = 0; i < bytes; i++)
        if (dev_enc[i] != host_enc[i]) {
          print_error(
              "%s %s n=%zu place %d: encoded byte %zu (group %zu) is 0x%02x "
              "on the GPU, 0x%02x on the host\n",
              FORMAT_NAMES[f], vname, n, place, i,
              i / qcoll__codec_group_bytes(fmt), dev_enc[i], host_enc[i]);
          fail();
        }
      /* decode the host's bytes on the GPU: same floats, bit for bit */
      CUDA_OK(cudaMemcpy(d_enc, host_enc, bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(y_base, 0xff, n * sizeof(float) + SLACK));
      CUDA_OK(qcoll__codec_cuda_decode(
          fmt, (qcoll__codec_cuda_variant_t)variant, d_enc, n, d_y, NULL));
      CUDA_OK(cudaMemcpy(dev_y_all, y_base, n * sizeof(float) + SLACK,
                         cudaMemcpyDeviceToHost));
      if (!slack_intact(dev_y_all, x_off, n * sizeof(float), 0xff)) {
        print_error("%s %s n=%zu place %d: decoding wrote outside its values\n",
                    FORMAT_NAMES[f], vname, n, place);
        fail();
      }
      if (memcmp(dev_y, host_y, n * sizeof(float)) != 0) {
        for (size_t i = 0; i < n; i++)
          if (memcmp(&dev_y[i], &host_y[i], 4) != 0) {
            print_error(
                "%s %s n=%zu place %d: decoded value %zu is %a on the GPU, %a "
                "on the host\n",
                FORMAT_NAMES[f], vname, n, place, i, (double)dev_y[i],
                (double)host_y[i]);
            break;
          }
        fail();
      }
    }
    CUDA_OK(cudaFree(x_base));
    CUDA_OK(cudaFree(y_base));
    CUDA_OK(cudaFree(enc_base));
    free(x), free(host_y), free(dev_y_all), free(host_enc), free(dev_enc_all);
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
      "GPU == CPU bit for bit: %zu values x %zu formats x %d variants x "
      "{aligned, unaligned} x {encode, decode}\n",
      values, NFORMATS, QCOLL_CODEC_CUDA_VARIANTS);
}

static void test_bad_format(void **state) {
  (void)state;
  for (int v = 0; v < QCOLL_CODEC_CUDA_VARIANTS; v++) {
    const qcoll__codec_cuda_variant_t variant = (qcoll__codec_cuda_variant_t)v;
    assert_int_equal(qcoll__codec_cuda_encode(QCOLL_QUANT_NONE, variant, NULL,
                                              32, NULL, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(qcoll__codec_cuda_decode(QCOLL_QUANT_DEFAULT, variant,
                                              NULL, 32, NULL, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(qcoll__codec_cuda_encode(QCOLL_QUANT_INT4, variant, NULL,
                                              0, NULL, NULL),
                     cudaSuccess);
  }
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
