/*
 * CPU models of quantised two-shot all-reduce over N simulated ranks, used
 * to compare accuracy against an fp64 reference.
 *
 * Both schemes split the n values into N segments of whole 32-value groups
 * (segment r belongs to rank r) and use the same codec (codec.h) for every
 * transfer, so they differ only in how the owner accumulates:
 *
 *   qcoll:      phase 1: every rank encodes segment s of its input for the
 *               owner s; the owner decodes the N contributions, sums them in
 *               f32 in rank order (0, 1, ..., N-1), encodes the sum once;
 *               phase 2: every rank decodes it.  Output: f32.
 *   comparison: phase 1 as above; the owner dequantises each contribution
 *               to f16 (or bf16), accumulates in that type in rank order
 *               (every addition rounded to it), re-quantises the f16/bf16
 *               sum; phase 2: every rank dequantises to f16/bf16.  Output:
 *               that value as f32.  This is the accumulation scheme of
 *               half-precision quantised all-reduce kernels.
 *
 * The owner's own contribution goes through the codec like every other
 * rank's.  Groups are independent, so results do not depend on where the
 * segment boundaries fall as long as they are group boundaries.
 */
#ifndef QCOLL_TESTS_CODEC_REF_SCHEME_H
#define QCOLL_TESTS_CODEC_REF_SCHEME_H

#include <stddef.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ref_acc { REF_ACC_F16, REF_ACC_BF16 } ref_acc_t;

/* First value and length of rank r's segment of n values over nranks. */
void ref_scheme_segment(size_t n, int nranks, int r, size_t *begin,
                        size_t *len);

/* in[r] holds rank r's n input values; out gets the n values every rank
 * ends with.  Return 0, or -1 when memory runs out. */
int ref_scheme_qcoll(qcoll_quant_t fmt, int nranks, size_t n,
                     const float *const *in, float *out);
/* qcoll with rotated groups (codec.h): the kernel's +rot path. */
int ref_scheme_qcoll_rot(qcoll_quant_t fmt, int nranks, size_t n,
                         const float *const *in, float *out);
int ref_scheme_compare(qcoll_quant_t fmt, ref_acc_t acc, int nranks, size_t n,
                       const float *const *in, float *out);

/* The exact sum (fp64, exact for the magnitudes used in the tests). */
void ref_scheme_exact(int nranks, size_t n, const float *const *in,
                      double *out);

/* Round an f32 to f16 or bf16 and back (nearest even). */
float ref_round_acc(ref_acc_t acc, float x);

#ifdef __cplusplus
}
#endif

#endif
