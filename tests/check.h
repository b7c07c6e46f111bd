/*
 * The assertions of the C test programs that are not cmocka suites (the
 * multi-rank programs started by qcoll-run, the tools' tests, the GPU
 * benchmarks), so every program reports a failure the same way:
 *
 *   rank R: FAIL file.c:123: cond: message
 *
 *   EXPECT(cond, fmt, ...)  count a failure and go on (the first
 *                           CHECK_PRINT_MAX failures are printed); the
 *                           program ends with check_failures ? 1 : 0
 *   CHECK(cond, fmt, ...)   print and exit(1): later steps need this one
 *   CHECK_CUDA(call)        CHECK that a CUDA runtime call succeeded
 *                           (where cuda_runtime_api.h is included first)
 *
 * A program sets check_rank once it knows its rank (-1 until then).
 * tests/reliability/rel_faults.sh looks for ": FAIL" in the output.
 */
#ifndef QCOLL_TESTS_CHECK_H
#define QCOLL_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK_PRINT_MAX 20

static int check_rank = -1;
static long check_count = 0, check_failures = 0;

#define CHECK_REPORT_(cond_text, ...)                                  \
  do {                                                                 \
    fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", check_rank, __FILE__, \
            __LINE__, cond_text);                                      \
    fprintf(stderr, __VA_ARGS__);                                      \
    fputc('\n', stderr);                                               \
    fflush(stderr);                                                    \
  } while (0)

#define EXPECT(cond, ...)                               \
  do {                                                  \
    check_count++;                                      \
    if (!(cond) && ++check_failures <= CHECK_PRINT_MAX) \
      CHECK_REPORT_(#cond, __VA_ARGS__);                \
  } while (0)

#define CHECK(cond, ...)                 \
  do {                                   \
    check_count++;                       \
    if (!(cond)) {                       \
      check_failures++;                  \
      CHECK_REPORT_(#cond, __VA_ARGS__); \
      exit(1);                           \
    }                                    \
  } while (0)

#ifdef CUDART_VERSION
#define CHECK_CUDA(call)                              \
  do {                                                \
    cudaError_t check_err_ = (cudaError_t)(call);     \
    CHECK(check_err_ == cudaSuccess, "%s: %s", #call, \
          cudaGetErrorString(check_err_));            \
  } while (0)
#endif

#endif
