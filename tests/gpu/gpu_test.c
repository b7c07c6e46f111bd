#include "gpu_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/dtype.h"

int gt_rank = -1;
int gt_nranks = 0;
const char *gt_prog = "gpu-test";
static int failures; /* atomic: tests with several threads share it */

static void vprint(const char *tag, const char *fmt, va_list ap) {
  char line[2048];
  vsnprintf(line, sizeof line, fmt, ap);
  if (gt_rank >= 0)
    printf("[%s rank %d/%d] %s%s\n", gt_prog, gt_rank, gt_nranks, tag, line);
  else
    printf("[%s pid %d] %s%s\n", gt_prog, (int)getpid(), tag, line);
  fflush(stdout);
}

void gt_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("FAIL ", fmt, ap);
  va_end(ap);
  __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

void gt_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

int gt_failures(void) {
  return __atomic_load_n(&failures, __ATOMIC_RELAXED);
}

void gt_cuda_die(const char *what, cudaError_t err, int line) {
  gt_fail("line %d: %s failed: %s (%s)", line, what, cudaGetErrorName(err),
          cudaGetErrorString(err));
  exit(1);
}

void gt_upload(void *dst, const void *src, size_t bytes) {
  GT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  GT_CUDA(cudaDeviceSynchronize());
}

double gt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gt_wait_stream(cudaStream_t stream, double seconds, const char *what) {
  double deadline = gt_now() + seconds;
  for (;;) {
    cudaError_t err = cudaStreamQuery(stream);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) gt_cuda_die(what, err, __LINE__);
    if (gt_now() > deadline) {
      gt_fail("%s: the GPU work did not finish within %.0f s (hang)", what,
              seconds);
      fflush(stdout);
      _exit(1); /* exit() would wait on the stuck stream */
    }
    usleep(200);
  }
}

void gt_skip_without_gpu(const char *prog) {
  gt_prog = prog;
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *disable = getenv("QCOLL_DISABLE_CUDA");
  if (disable && strcmp(disable, "0") && *disable) {
    printf("SKIP: no CUDA device (QCOLL_DISABLE_CUDA=%s)\n", disable);
    exit(GPU_TEST_SKIP);
  }
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    printf("SKIP: no CUDA device (cudaGetDeviceCount: %s: %s)\n",
           cudaGetErrorName(err), cudaGetErrorString(err));
    exit(GPU_TEST_SKIP);
  }
  if (n < 1) {
    printf("SKIP: no CUDA device (the driver reports none)\n");
    exit(GPU_TEST_SKIP);
  }
}

const gt_placement_t gt_placements[] = {
    {"out-of-place aligned", false, 0, 0},
    {"out-of-place send+1 recv+1", false, 1, 1},
    {"out-of-place recv+1", false, 0, 1},
    {"in-place aligned", true, 0, 0},
    {"in-place +1", true, 1, 1},
};
const size_t gt_placement_count =
    sizeof gt_placements / sizeof gt_placements[0];

size_t gt_env_bytes(const char *name, size_t fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end = NULL;
  double x = strtod(v, &end);
  if (end && (*end == 'K' || *end == 'k')) x *= 1024;
  if (end && (*end == 'M' || *end == 'm')) x *= 1024 * 1024;
  if (end && (*end == 'G' || *end == 'g')) x *= 1024.0 * 1024 * 1024;
  return (size_t)x;
}

/* ---- data ------------------------------------------------------------- */

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static float round_to(float v, qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: return qcoll__f16_to_f32(qcoll__f32_to_f16(v));
    case QCOLL_BF16: return qcoll__bf16_to_f32(qcoll__f32_to_bf16(v));
    default: return v;
  }
}

float gt_input_value(gt_pattern_t pattern, int rank, size_t i, uint32_t seed,
                     qcoll_dtype_t dtype) {
  if (pattern == GT_SMALL_INTS)
    return (float)((int)((i * 7u + (size_t)rank * 13u + seed * 5u) % 17u) - 8);
  /* Mixed magnitudes (2^-8 .. 2^9) with full mantissas: adding them in
   * another order rounds differently, so only a fixed order gives the
   * reference's bits. */
  uint32_t h = mix32((uint32_t)i * 0x9e3779b1u ^
                     mix32((uint32_t)rank + 0x51ed270bu * seed));
  uint32_t mant = h & 0x7fffffu;
  int exp = (int)((h >> 23) % 17u) - 8;
  float v = qcoll__bits_to_f32((uint32_t)(127 + exp) << 23 | mant);
  if (h >> 31) v = -v;
  return round_to(v, dtype);
}

void gt_store(void *dst, size_t i, float v, qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: ((uint16_t *)dst)[i] = qcoll__f32_to_f16(v); break;
    case QCOLL_BF16: ((uint16_t *)dst)[i] = qcoll__f32_to_bf16(v); break;
    case QCOLL_F32: ((float *)dst)[i] = v; break;
    default: abort();
  }
}

float gt_load(const void *src, size_t i, qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: return qcoll__f16_to_f32(((const uint16_t *)src)[i]);
    case QCOLL_BF16: return qcoll__bf16_to_f32(((const uint16_t *)src)[i]);
    case QCOLL_F32: return ((const float *)src)[i];
    default: abort();
  }
}

size_t gt_dtype_size(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16:
    case QCOLL_BF16: return 2;
    case QCOLL_F32: return 4;
    default: abort();
  }
}

const char *gt_dtype_name(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: return "f16";
    case QCOLL_BF16: return "bf16";
    case QCOLL_F32: return "f32";
    default: return "?";
  }
}

const char *gt_op_name(qcoll_op_t op) {
  switch (op) {
    case QCOLL_SUM: return "sum";
    case QCOLL_MIN: return "min";
    case QCOLL_MAX: return "max";
    default: return "?";
  }
}

uint32_t gt_bits(const void *src, size_t i, qcoll_dtype_t dtype) {
  if (dtype == QCOLL_F32) return qcoll__f32_to_bits(((const float *)src)[i]);
  return ((const uint16_t *)src)[i];
}

void gt_fill_inputs(void *dst, size_t count, gt_pattern_t pattern, int rank,
                    uint32_t seed, qcoll_dtype_t dtype) {
  for (size_t i = 0; i < count; i++)
    gt_store(dst, i, gt_input_value(pattern, rank, i, seed, dtype), dtype);
}

void gt_reference(void *expected, size_t count, gt_pattern_t pattern,
                  int nranks, uint32_t seed, qcoll_dtype_t dtype,
                  qcoll_op_t op) {
  for (size_t i = 0; i < count; i++) {
    float acc = gt_input_value(pattern, 0, i, seed, dtype);
    for (int r = 1; r < nranks; r++) {
      float x = gt_input_value(pattern, r, i, seed, dtype);
      switch (op) {
        case QCOLL_SUM: acc = acc + x; break;
        case QCOLL_MIN: acc = x < acc ? x : acc; break;
        case QCOLL_MAX: acc = x > acc ? x : acc; break;
        default: abort();
      }
    }
    gt_store(expected, i, acc, dtype);
  }
}

size_t gt_compare(const void *expected, const void *got, size_t count,
                  qcoll_dtype_t dtype, const char *what) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t e = gt_bits(expected, i, dtype), g = gt_bits(got, i, dtype);
    if (e == g) continue;
    if (bad < 5)
      gt_fail("%s: element %zu expected %.9g (0x%x) got %.9g (0x%x)", what, i,
              gt_load(expected, i, dtype), e, gt_load(got, i, dtype), g);
    bad++;
  }
  if (bad > 5)
    gt_fail("%s: %zu of %zu elements differ in all", what, bad, count);
  return bad;
}

uint64_t gt_hash(const void *data, size_t bytes) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

unsigned long long gt_report_check(const gt_check_state_t *s,
                                   const char *what) {
  if (s->bad == 0) return 0;
  gt_fail(
      "%s: %llu wrong element(s) over %llu check(s); first at iteration %u, "
      "element %u: expected %.9g got %.9g",
      what, s->bad, s->checks, s->first_iter, s->first_index_lo,
      s->first_expected, s->first_got);
  return s->bad;
}

void gt_check_reset(gt_check_state_t *state) {
  GT_CUDA(cudaMemset(state, 0, sizeof *state));
  GT_CUDA(cudaDeviceSynchronize());
}

bool gt_check_finish(const gt_check_state_t *state, const char *what,
                     unsigned long long expected) {
  gt_check_state_t host;
  GT_CUDA(cudaMemcpy(&host, state, sizeof host, cudaMemcpyDeviceToHost));
  bool ok = true;
  if (host.checks != expected) {
    gt_fail("%s: %llu checks ran, expected %llu", what, host.checks,
            expected);
    ok = false;
  }
  if (gt_report_check(&host, what)) ok = false;
  return ok;
}
