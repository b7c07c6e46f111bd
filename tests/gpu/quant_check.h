/*
 * Host side of the quantised all-reduce GPU tests: every rank's inputs
 * (quant_gen.h, or with special values), the result every rank must hold
 * (tests/codec/ref_scheme.c's qcoll scheme rounded to the element type, bit
 * for bit) and the error bound against the exact sum.
 *
 * The error bound, per element i of a 32-value group (codec.h's bounds, "Error
 * bounds", applied to both transfers):
 *
 *   q(x, amax)  one transfer: INT   amax / (2R) + amax 2^-21 + 2^-149
 *                             FP8   max(|x| 2^-4, amax / 448 2^-10)
 *                                   + (|x| + amax) 2^-21 + 2^-149
 *   e1  = sum over ranks r of q(x_r(i), amax_r)   (amax_r: rank r's group)
 *   acc = (n - 1) 2^-24 A,  A = sum of the amax_r (decoded values are
 *         clamped to amax_r, so every partial f32 sum is at most A)
 *   m   = |exact(i)| + e1 + acc                   (bounds the f32 sum |S(i)|)
 *   e2  = q(m, max of m over the group)           (the sum's transfer)
 *   out = (m + e2) u + t     (rounding to the element type: u = 2^-11 f16,
 *                             2^-8 bf16, 0 f32; t = 2^-25 f16, 2^-134 bf16)
 *   |result(i) - exact(i)| <= e1 + acc + e2 + out
 *
 * Groups holding inf or NaN, or whose exact sum overflows the element type,
 * are left to the bit-for-bit comparison.
 */
#ifndef QCOLL_TESTS_GPU_QUANT_CHECK_H
#define QCOLL_TESTS_GPU_QUANT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QT_MAX_RANKS 8

typedef enum qt_data {
  QT_DATA_GEN = 0,     /* quant_gen.h values */
  QT_DATA_SPECIAL = 1, /* the same, plus: inf (rank 0, element 5), NaN (last
                          rank, element 40), a group of +-60000 on every rank
                          (elements 64..95: the sum overflows f16), an
                          all-zero group (96..127), a group of 2^-20
                          (128..159: f16 subnormals) */
} qt_data_t;

/* Every rank's inputs of one case, as f32 values exact in the element type. */
typedef struct qt_inputs {
  int nranks;
  size_t count;
  qcoll_dtype_t dtype;
  float *values[QT_MAX_RANKS];
  int rotate; /* rotated groups: qt_expected follows ref_scheme_qcoll_rot */
} qt_inputs_t;

/* Make the inputs (seed as in qg_value); 0, or -1 when memory runs out. */
int qt_inputs_make(qt_inputs_t *in, int nranks, size_t count,
                   qcoll_dtype_t dtype, uint32_t seed, qt_data_t kind);
void qt_inputs_free(qt_inputs_t *in);

/* Rank `rank`'s inputs stored as the element type at dst (count elements). */
void qt_inputs_store(const qt_inputs_t *in, int rank, void *dst);

/* What every rank must hold: ref_scheme_qcoll's (in->rotate:
 * ref_scheme_qcoll_rot's) f32 result stored as the
 * element type (a NaN as 0x7e00 / 0x7fc0 / 0x7fc00000).  0, or -1 when
 * memory runs out. */
int qt_expected(const qt_inputs_t *in, qcoll_quant_t fmt, void *expected);

/* The bound check above for got (count elements of the element type).
 * The bound is the plain codec's, per value; over rotated groups
 * (in->rotate) an error is spread over its group by the inverse transform,
 * so no per-value bound holds and only the RMS error is computed. 
 * Reports up to 5 elements beyond the bound through gt_fail; returns how
 * many there are.  *worst: the largest error / bound; *rms_rel: RMS error /
 * RMS of the exact sum (finite groups only). */
size_t qt_check_bound(const qt_inputs_t *in, qcoll_quant_t fmt, const void *got,
                      const char *what, double *worst, double *rms_rel);

const char *qt_quant_name(qcoll_quant_t fmt);

/* ---- device side (quant_kernels.cu) -------------------------------------- */

/* buf[i] = qg_value(rank, i, seed + *counter) rounded to dtype, for i < n
 * (counter NULL: seed alone).  The counter is read on the device, so a
 * graph replay fills the input of the next seed. */
cudaError_t qt_fill_launch(void *buf, size_t n, qcoll_dtype_t dtype, int rank,
                           uint32_t seed, const unsigned *counter,
                           cudaStream_t stream);

/* Copy bytes from src to history + (*counter % slots) * bytes. */
cudaError_t qt_save_launch(void *history, const void *src, size_t bytes,
                           const unsigned *counter, unsigned slots,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
