/*
 * codec.h - the quantisation formats of quantised all-reduce (FP8, INT8,
 * INT6, INT4, INT3), one header for host C11 and for CUDA device code, so
 * that the CPU reference decides bit for bit what the GPU kernels must produce.
 *
 * ==== API (all host and device; qcoll__codec_ prefix) =====================
 *
 *   group_bytes(fmt), range(fmt), groups(n), encoded_bytes(fmt, n)
 *   encode_group(fmt, in[32], out)        decode_group(fmt, in, out[32])
 *   encode(fmt, in, n, out)               decode(fmt, in, n, out)
 *   per element, for kernels: abs_bits, enc_scale, encode_lane, dec_scale,
 *   decode_lane, store_scale/load_scale, pack/unpack_one; rotated groups:
 *   rotate_group, unrotate_group, rotate, unrotate; four codes at a
 *   time: quad_bytes, pack_quad, quad_code; device only: warp_encode,
 *   warp_decode (one group per warp); segment_decode,
 *   store_quad_aligned, segment_rotate, segment_unrotate (four elements
 *   per lane), segment_encode_sets, segment_decode_sets (several groups
 *   per lane); plain groups (host and device): plain,
 *   plain_inv, plain_quad, plain_words, plain_value, plain_decode.
 * fmt is QCOLL_QUANT_FP8, _INT8, _INT6, _INT4 or _INT3; for any other value
 * sizes are 0 and nothing is written.  Host f16/bf16 data converts to and
 * from f32 with base/dtype.h.
 *
 * ==== Groups ==============================================================
 *
 * Values are f32 (f16/bf16 callers convert to f32 first; the conversion is
 * exact).  Groups of QCOLL_CODEC_GROUP = 32 consecutive values share one
 * scale.  A group is encoded as
 *
 *     [ scale: 4 bytes ][ 32 codes, packed ]
 *
 *     format  R (range end)  code bits  codes    group bytes
 *     INT8    127            8          32 B     36
 *     INT6    31             6          24 B     28
 *     INT4    7              4          16 B     20
 *     INT3    3              3          12 B     16
 *     FP8     448            8 (e4m3)   32 B     36
 *
 * Every group size is a multiple of 4, so in a buffer whose base is 4-byte
 * aligned every scale is 4-byte aligned (a kernel may load it as a word).
 *
 * ==== The scale ===========================================================
 *
 * The stored scale is the group's amax, the largest |x|, as an f32 in
 * little-endian byte order (exact: no rounding of the scale itself).  amax is
 * the maximum of the bit patterns (x_bits & 0x7fffffff) taken as unsigned
 * integers: for non-negative floats that order is the numeric order, and inf
 * and NaN sort above every finite value (on a GPU: __reduce_max_sync).
 *
 * Everything below is derived from amax.  Let p = 2^64 when amax < 2^-64
 * (bits < 0x1f800000), else p = 1, and a = amax * p (exact: a power of two).
 * The pre-scale p makes a a normal float for every subnormal amax (down to
 * 2^-149), so tiny groups keep full relative precision.
 *
 *     inv  = fl(R / a)          (0 for an all-zero or non-finite group)
 *     step = fl(a / R)
 *     post = 1 / p              (1 or 2^-64, exact)
 *
 * Both quotients are computed without a division, once per group: with
 * a = m * 2^e, m in [1, 2) (a's mantissa bits), and W = fl(1 / R) (a
 * constant of the format),
 *
 *     y    = rcp(m)                                  (within an ulp of 1/m)
 *     q    = fl(R * y);  q = fma(fma(-q, m, R), y, q)    = fl(R / m)
 *     inv  = fl(q * 2^-e)                                 = fl(R / a)
 *     step = fl(a * W);  step = fma(fma(-step, R, a), W, step) = fl(a / R)
 *
 * rcp(m): y = fma(-8/17, m, 24/17) (relative error <= 1/17 on [1, 2)),
 * then three Newton steps e = fma(-m, y, 1), y = fma(y, e, y).  The
 * correction steps are Markstein's: given a reciprocal within an ulp, the
 * residual fma(-q, m, R) is exact and the second fma rounds the quotient
 * correctly.  test_codec checks fl(R / m) for all 2^23 mantissas and every
 * format, and step for every mantissa and a spread of exponents (a / R and
 * R / m stay normal for every a from 2^-85 to FLT_MAX, so scaling by 2^e
 * changes nothing).  2^-e (e in -85..127) is exact as a float (2^-127 is a
 * subnormal), and multiplying by it is exact unless R / a < 2^-126 (only
 * INT3, amax above 1.5 * 2^127): there inv is that product, one rounding
 * into the subnormal range.  Every step is one correctly rounded fused
 * multiply-add or multiply (fmaf on the host, __fmaf_rn on the device), so
 * the results are the same bits everywhere; a group costs about a dozen
 * such operations, and encoding and decoding a value are multiplications.
 *
 * fl() is one IEEE-754 binary32 operation rounded to nearest even.
 *
 * ==== Encoding one value (encode_lane) ====================================
 *
 *     t = fl(fl(x * p) * inv)      (x * p is exact)
 *
 *   INT:  q = round_half_even(clamp(t, -R, R));  code = q + R  in [0, 2R].
 *         Half-to-even applies to the f32 value t: with amax = R (inv = 1)
 *         the value 2.5 gives q = 2 and 3.5 gives q = 4.
 *   FP8:  code = e4m3(t): the OCP e4m3 ("FN") byte, sign | 4-bit exponent
 *         (bias 7) | 3-bit mantissa, rounded half to even, saturating at 448
 *         (0x7e); 0x7f/0xff (NaN) and -0 (0x80) are never produced: a value
 *         whose magnitude rounds to 0 is 0x00.  Subnormals: exponent 0,
 *         value m * 2^-9.
 *
 * Why the largest element lands EXACTLY on R: amax * p = a, so
 * t = fl(a * fl(R / a)) = R (1 + d1)(1 + d2) with |d1|, |d2| <= 2^-24
 * (INT3's subnormal inv: |d1| <= 2^-22), i.e.
 * |t - R| <= 448 * 2^-23 < 2^-14, far less than the 0.5 needed for INT
 * rounding to give R or the 16 needed for e4m3 to give 448 (its neighbour is
 * 416).  -amax gives -R the same way (rounding is symmetric): code 0 for INT,
 * 0xfe for FP8.  test_codec checks this over amax from 2^-149 to FLT_MAX.
 *
 * ==== Decoding one code (decode_lane) =====================================
 *
 *     v  = code - R (INT, exact)  or  the e4m3 value of code (FP8, exact)
 *     x' = clamp(fl(fl(v * step) * post), -amax, amax)
 *
 * The clamp keeps |x'| <= amax (R * fl(amax / R) may exceed amax by an ulp;
 * for amax = FLT_MAX that would be inf).  When post = 1 the second multiply
 * is exact and may be skipped; likewise x * p when p = 1.
 *
 * ==== Error bounds (asserted by tests/codec) ==============================
 *
 *   INT:  |x - x'| <= amax / (2R) + amax * 2^-21 + 2^-149.
 *   FP8:  |x - x'| <= max(|x| * 2^-4, amax / 448 * 2^-10)
 *                     + (|x| + amax) * 2^-21 + 2^-149.
 * The first term is the rounding to a code (half a step; for FP8 half an
 * e4m3 ulp: relative 2^-4 for normals, absolute 2^-10 in t units in the
 * subnormal range).  The slack covers the four f32 roundings (inv, t, v*step,
 * *post: each <= 2^-24 relative, INT3's subnormal inv 2^-22; at most
 * 7 * 2^-24 < 2^-21) and one rounding into the subnormal range (<= 2^-150
 * absolute) for tiny groups.
 *
 * ==== Policies ============================================================
 *
 * - All-zero group (amax = 0, -0 counts as 0): scale 0, every code the zero
 *   code (INT: R; FP8: 0x00); decodes to +0 exactly.
 * - Non-finite group (any element inf or NaN): the stored scale is the
 *   canonical quiet NaN 0x7fc00000 and every code the zero code; a group
 *   whose scale is not finite decodes to 32 canonical NaNs (0x7fc00000).  An
 *   overflow or a NaN anywhere in a group is therefore visible in all of it,
 *   never silently clamped.
 * - Subnormal amax: handled by p (above); no flushing.  Subnormal elements in
 *   a normal group round to the codes they deserve (usually the zero code).
 * - Buffers of n values: ceil(n / 32) groups; the last group is padded with
 *   zeros (which change neither amax nor any other code); decoding writes
 *   only the n values.
 * - Codes outside the set the encoder produces (INT codes above 2R, FP8 NaN
 *   bytes) decode to (code - R) * step clamped, and NaN, respectively.
 *
 * ==== Bit-exactness between host and device ===============================
 *
 * Each operation above is a single correctly rounded binary32 operation: on
 * the device through __fmul_rn/__fmaf_rn (never contracted, never
 * approximated; no division anywhere), on the host through plain C
 * operators and fmaf, which are IEEE binary32 when FLT_EVAL_METHOD == 0
 * (checked below).  No expression here has the form a*b+c outside an
 * explicit fmaf, so FMA contraction (-ffp-contract=fast, GCC's default in
 * GNU C mode) cannot change any result; code that accumulates decoded
 * values (the tests, the reference schemes) is compiled with
 * -ffp-contract=off.  Requirements: the default rounding mode (nearest even)
 * on the host; no -ffast-math (host) and no -ftz=true / -use_fast_math
 * (device), which flush the subnormals that tiny groups depend on.
 *
 * ==== One group per warp ==================================================
 *
 * Lane i of a warp holds element i of the group:
 *   1. b = qcoll__codec_abs_bits(x); amax_bits = warp max of b.
 *   2. s = qcoll__codec_enc_scale(fmt, amax_bits); lane 0 stores s.stored
 *      (little-endian) at group + 0.
 *   3. c = qcoll__codec_encode_lane(fmt, x, s).
 *   4. Pack, codes starting at group + 4:
 *        INT8, FP8: lane i writes byte i.
 *        INT4:  byte k = c[2k] | c[2k+1] << 4 (even element in the low
 *               nibble): even lane i writes byte i/2 with its odd
 *               neighbour's code taken by a shuffle.
 *        INT6:  every 4 codes make 3 bytes, bits little-endian:
 *               w = c[4k] | c[4k+1] << 6 | c[4k+2] << 12 | c[4k+3] << 18,
 *               bytes 3k, 3k+1, 3k+2 = w, w >> 8, w >> 16.  Lane i puts
 *               c << 6*(i%4) in a word, ORs it across its quad (shuffle xor
 *               1, 2), and lanes with i%4 < 3 write byte 3*(i/4) + i%4.
 *        INT3:  every 8 codes make 3 bytes the same way (code j of the 8 at
 *               bit 3j of w): lane i puts c << 3*(i%8) in a word, ORs it
 *               across its eight (shuffle xor 1, 2, 4), and lanes with
 *               i%8 < 3 write byte 3*(i/8) + i%8.
 * Decoding: every lane reads the scale, s = qcoll__codec_dec_scale(fmt,
 * bits), and lane i decodes qcoll__codec_unpack_one(fmt, group + 4, i).
 * qcoll__codec_warp_encode / qcoll__codec_warp_decode below do exactly this;
 * a kernel that keeps a whole group in one thread uses encode_group /
 * decode_group.  Both give the same bytes.
 *
 * ==== Four elements per lane ==============================================
 *
 * Lane k of eight holds elements 4k..4k+3: the group's amax is the max of
 * the four abs_bits and of the other seven lanes' (segment_encode_sets
 * reduces several groups' maxima at once), and its four codes, packed by
 * pack_quad, are
 * the quad_bits(fmt) = 32, 24, 16 or 12 bits of the packed codes starting
 * at bit quad_bits * k of group + 4.  For the byte formats these are
 * quad_bytes = 4, 3 or 2 whole bytes, and no byte is shared between lanes;
 * INT3's 12 bits are half of 3 bytes, so an even lane takes its odd
 * neighbour's quad (segment_share: one shuffle) and writes both, 3 bytes at
 * group + 4 + 3 * (k / 2), and an odd lane writes nothing.  Decoding reads
 * the word(s) holding the quad's bits and takes quad_code(fmt, word, j).
 */
#ifndef QCOLL_COLL_CODEC_H
#define QCOLL_COLL_CODEC_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../base/dtype.h"
#include "qcoll.h"

#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error \
    "codec.h needs float arithmetic evaluated in binary32 (FLT_EVAL_METHOD == 0)"
#endif

#if defined(__clang__) && !defined(__CUDACC__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Functions of this header: host and device under nvcc, static inline in C.
 * (static: every translation unit gets its own copy, so host C objects and
 * CUDA objects of one library never clash.) */
#ifndef QCOLL_HD
#ifdef __CUDACC__
#define QCOLL_HD static __host__ __device__ __forceinline__
#else
#define QCOLL_HD static inline
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define QCOLL_CODEC_GROUP 32
#define QCOLL_CODEC_SCALE_BYTES 4
/* Largest group of any format (INT8 and FP8). */
#define QCOLL_CODEC_MAX_GROUP_BYTES 36
/* Stored scale of a group that held inf or NaN; also what such a group
 * decodes to. */
#define QCOLL_CODEC_NAN_BITS 0x7fc00000u
/* amax below 2^-64 (bit pattern) is pre-scaled by 2^64. */
#define QCOLL_CODEC_TINY_BITS 0x1f800000u
#define QCOLL_CODEC_INF_BITS 0x7f800000u

/* ---- single correctly rounded binary32 operations ------------------- */

/* Bit casts and the product: base/dtype.h's, shared with the f16/bf16
 * conversions. */
QCOLL_HD float qcoll__codec_bits_to_f32(uint32_t u) {
  return qcoll__bits_to_f32(u);
}

QCOLL_HD uint32_t qcoll__codec_f32_to_bits(float f) {
  return qcoll__f32_to_bits(f);
}

QCOLL_HD float qcoll__codec_mul(float a, float b) {
  return qcoll__mul_rn_f32(a, b);
}

/* fl(a * b + c), one rounding. */
QCOLL_HD float qcoll__codec_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return fmaf(a, b, c);
#endif
}

/* fl(a + b). */
QCOLL_HD float qcoll__codec_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/* Round an f32 holding a value of magnitude < 2^31 to the nearest integer,
 * ties to even. */
QCOLL_HD int32_t qcoll__codec_rint(float t) {
#ifdef __CUDA_ARCH__
  return __float2int_rn(t);
#else
  return (int32_t)rintf(t);
#endif
}

/* ---- formats --------------------------------------------------------- */

/* Whether fmt is one of the five quantised formats. */
QCOLL_HD int qcoll__codec_valid(qcoll_quant_t fmt) {
  return fmt == QCOLL_QUANT_FP8 || fmt == QCOLL_QUANT_INT8 ||
         fmt == QCOLL_QUANT_INT6 || fmt == QCOLL_QUANT_INT4 ||
         fmt == QCOLL_QUANT_INT3;
}

/* R: the end of the signed range the group's amax maps onto; 0 for formats
 * that are not quantised. */
QCOLL_HD uint32_t qcoll__codec_range(qcoll_quant_t fmt) {
  switch (fmt) {
    case QCOLL_QUANT_FP8: return 448;
    case QCOLL_QUANT_INT8: return 127;
    case QCOLL_QUANT_INT6: return 31;
    case QCOLL_QUANT_INT4: return 7;
    case QCOLL_QUANT_INT3: return 3;
    default: return 0;
  }
}

/* W = fl(1 / R), a constant of the format (the quotients below are
 * computed from it and from rcp, never by a division). */
QCOLL_HD float qcoll__codec_inv_range(qcoll_quant_t fmt) {
  switch (fmt) {
    case QCOLL_QUANT_FP8: return 1.0f / 448.0f;
    case QCOLL_QUANT_INT8: return 1.0f / 127.0f;
    case QCOLL_QUANT_INT6: return 1.0f / 31.0f;
    case QCOLL_QUANT_INT4: return 1.0f / 7.0f;
    case QCOLL_QUANT_INT3: return 1.0f / 3.0f;
    default: return 0.0f;
  }
}

/* Bits per code. */
QCOLL_HD uint32_t qcoll__codec_code_bits(qcoll_quant_t fmt) {
  switch (fmt) {
    case QCOLL_QUANT_FP8:
    case QCOLL_QUANT_INT8: return 8;
    case QCOLL_QUANT_INT6: return 6;
    case QCOLL_QUANT_INT4: return 4;
    case QCOLL_QUANT_INT3: return 3;
    default: return 0;
  }
}

/* Bytes of one encoded group (scale + codes): 36, 28, 20, 16, 36; 0 for a
 * format that is not quantised. */
QCOLL_HD uint32_t qcoll__codec_group_bytes(qcoll_quant_t fmt) {
  uint32_t bits = qcoll__codec_code_bits(fmt);
  return bits ? QCOLL_CODEC_SCALE_BYTES + QCOLL_CODEC_GROUP * bits / 8 : 0;
}

/* Number of groups holding n values. */
QCOLL_HD size_t qcoll__codec_groups(size_t n) {
  return n / QCOLL_CODEC_GROUP + (n % QCOLL_CODEC_GROUP != 0);
}

/* Bytes of n encoded values: whole groups, the last one zero-padded. */
QCOLL_HD size_t qcoll__codec_encoded_bytes(qcoll_quant_t fmt, size_t n) {
  return qcoll__codec_groups(n) * qcoll__codec_group_bytes(fmt);
}

/* The code every element of an all-zero or non-finite group gets. */
QCOLL_HD uint32_t qcoll__codec_zero_code(qcoll_quant_t fmt) {
  return fmt == QCOLL_QUANT_FP8 ? 0u : qcoll__codec_range(fmt);
}

/* ---- FP8 e4m3 ---------------------------------------------------------- */

/* e4m3 byte of a finite f32, rounded half to even, saturating at 448, with
 * no negative zero.  Integer and exact float operations only. */
QCOLL_HD uint32_t qcoll__codec_e4m3_from_f32(float t) {
  uint32_t u = qcoll__codec_f32_to_bits(t);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t mag;
  if (a >= 0x43e00000u) { /* >= 448 */
    mag = 0x7eu;
  } else if (a < 0x3c800000u) { /* < 2^-6: subnormal, steps of 2^-9 */
    /* |t| * 2^9 is exact and < 8; rounding it gives the mantissa, and 8
     * carries into the smallest normal (0x08) by itself. */
    mag = (uint32_t)qcoll__codec_rint(
        qcoll__codec_mul(qcoll__codec_bits_to_f32(a), 512.0f));
  } else {
    /* Rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3
     * bits, half to even; a mantissa carry bumps the exponent, and < 448
     * never rounds past 448 (0x7e). */
    uint32_t r = a - (120u << 23);
    mag = (r + 0x7ffffu + ((r >> 20) & 1u)) >> 20;
  }
  return mag ? (sign | mag) : 0u;
}

/* Exact f32 value of an e4m3 byte; NaN (canonical) for 0x7f and 0xff. */
QCOLL_HD float qcoll__codec_e4m3_to_f32(uint32_t code) {
  uint32_t sign = (code & 0x80u) << 24;
  uint32_t exp = (code >> 3) & 0xfu;
  uint32_t man = code & 0x7u;
  if ((code & 0x7fu) == 0x7fu)
    return qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS);
  if (exp == 0) { /* man * 2^-9 */
    float v = qcoll__codec_mul((float)man, 0.001953125f);
    return qcoll__codec_bits_to_f32(qcoll__codec_f32_to_bits(v) | sign);
  }
  return qcoll__codec_bits_to_f32(sign | ((exp + 120u) << 23) | (man << 20));
}

/* ---- scales ------------------------------------------------------------ */

/* |x| as the bit pattern whose unsigned maximum over a group is amax. */
QCOLL_HD uint32_t qcoll__codec_abs_bits(float x) {
  return qcoll__codec_f32_to_bits(x) & 0x7fffffffu;
}

/* A reciprocal of m in [1, 2) within an ulp: a linear first guess (error
 * <= 1/17) and three Newton steps, each a single fused multiply-add (the
 * same bits on host and device). */
QCOLL_HD float qcoll__codec_rcp_mantissa(float m) {
  float y = qcoll__codec_fma(-0.470588237f /* 8/17 */, m,
                             1.41176474f /* 24/17 */);
  int i;
  for (i = 0; i < 3; i++) {
    const float e = qcoll__codec_fma(-m, y, 1.0f);
    y = qcoll__codec_fma(y, e, y);
  }
  return y;
}

/* fl(n / d) from q within an ulp of it and y within an ulp of 1 / d
 * (Markstein: the residual is exact, the last fma rounds correctly), for
 * operands whose quotient and residual are normal. */
QCOLL_HD float qcoll__codec_refine_quotient(float n, float d, float q,
                                            float y) {
  return qcoll__codec_fma(qcoll__codec_fma(-q, d, n), y, q);
}

/* 2^k as a float, for k in -149..127 (exact; subnormal below -126). */
QCOLL_HD float qcoll__codec_pow2(int k) {
  return qcoll__codec_bits_to_f32(k >= -126 ? (uint32_t)(k + 127) << 23
                                            : 1u << (k + 149));
}

/* inv = fl(R / a) for a normal, finite a = m * 2^e: fl(R / m) * 2^-e (one
 * rounding more only where R / a is subnormal: INT3, a > 1.5 * 2^127). */
QCOLL_HD float qcoll__codec_inv_scale(qcoll_quant_t fmt, float a) {
  const uint32_t bits = qcoll__codec_f32_to_bits(a);
  const int e = (int)(bits >> 23) - 127;
  const float m = qcoll__codec_bits_to_f32((bits & 0x007fffffu) | 0x3f800000u);
  const float r = (float)qcoll__codec_range(fmt);
  const float y = qcoll__codec_rcp_mantissa(m);
  const float q =
      qcoll__codec_refine_quotient(r, m, qcoll__codec_mul(r, y), y);
  return qcoll__codec_mul(q, qcoll__codec_pow2(-e));
}

/* step = fl(a / R) for a normal, finite a >= 2^-85. */
QCOLL_HD float qcoll__codec_step_scale(qcoll_quant_t fmt, float a) {
  const float w = qcoll__codec_inv_range(fmt);
  return qcoll__codec_refine_quotient(a, (float)qcoll__codec_range(fmt),
                                      qcoll__codec_mul(a, w), w);
}

/* What encoding a group needs, derived from its amax bits. */
typedef struct qcoll__codec_enc {
  uint32_t stored; /* the scale written to the group: amax, or NaN bits */
  float pre;       /* p: 1 or 2^64 */
  float inv;       /* fl(R / (amax * p)); 0 for all-zero and non-finite */
  int nonfinite;   /* the group held inf or NaN: every code is the zero code */
} qcoll__codec_enc_t;

QCOLL_HD qcoll__codec_enc_t qcoll__codec_enc_scale(qcoll_quant_t fmt,
                                                   uint32_t amax_bits) {
  qcoll__codec_enc_t s;
  float amax = qcoll__codec_bits_to_f32(amax_bits);
  s.nonfinite = amax_bits >= QCOLL_CODEC_INF_BITS;
  s.stored = s.nonfinite ? QCOLL_CODEC_NAN_BITS : amax_bits;
  s.pre = amax_bits < QCOLL_CODEC_TINY_BITS ? 18446744073709551616.0f : 1.0f;
  s.inv = (amax_bits == 0 || s.nonfinite)
              ? 0.0f
              : qcoll__codec_inv_scale(fmt, qcoll__codec_mul(amax, s.pre));
  return s;
}

/* What decoding a group needs, derived from its stored scale. */
typedef struct qcoll__codec_dec {
  float amax; /* the clamp bound */
  float step; /* fl(amax * p / R) */
  float post; /* 1 / p: 1 or 2^-64 */
  int nonfinite;
} qcoll__codec_dec_t;

QCOLL_HD qcoll__codec_dec_t qcoll__codec_dec_scale(qcoll_quant_t fmt,
                                                   uint32_t stored) {
  qcoll__codec_dec_t s;
  uint32_t bits = stored & 0x7fffffffu;
  int tiny = bits < QCOLL_CODEC_TINY_BITS;
  s.nonfinite = bits >= QCOLL_CODEC_INF_BITS;
  s.amax = qcoll__codec_bits_to_f32(bits);
  s.post = tiny ? 5.42101086242752217e-20f /* 2^-64 */ : 1.0f;
  s.step =
      s.nonfinite
          ? 0.0f
          : qcoll__codec_step_scale(
                fmt, qcoll__codec_mul(s.amax,
                                      tiny ? 18446744073709551616.0f : 1.0f));
  return s;
}

/* ---- one element ------------------------------------------------------- */

/* Code of x (|x| <= the amax the scale was made from).  INT: 0..2R; FP8:
 * the e4m3 byte. */
QCOLL_HD uint32_t qcoll__codec_encode_lane(qcoll_quant_t fmt, float x,
                                           qcoll__codec_enc_t s) {
  if (s.nonfinite) return qcoll__codec_zero_code(fmt);
  float t = qcoll__codec_mul(qcoll__codec_mul(x, s.pre), s.inv);
  if (fmt == QCOLL_QUANT_FP8) return qcoll__codec_e4m3_from_f32(t);
  /* No clamp is needed: |x * p| <= a, so |t| <= fl(a * inv), which is
   * within R * 2^-21 of R (see "Why the largest element lands EXACTLY on
   * R"), and rounding gives a q in [-R, R]; an all-zero group has inv = 0,
   * t = +-0, q = 0. */
  return (uint32_t)(qcoll__codec_rint(t) + (int32_t)qcoll__codec_range(fmt));
}

/* Value of a code. */
QCOLL_HD float qcoll__codec_decode_lane(qcoll_quant_t fmt, uint32_t code,
                                        qcoll__codec_dec_t s) {
  float v;
  if (s.nonfinite) return qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS);
  if (fmt == QCOLL_QUANT_FP8) {
    /* Never produced by the encoder; canonical NaN, not whatever payload
     * host or device arithmetic would pass on. */
    if ((code & 0x7fu) == 0x7fu)
      return qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS);
    v = qcoll__codec_e4m3_to_f32(code);
  } else {
    v = (float)((int32_t)code - (int32_t)qcoll__codec_range(fmt));
  }
  float y = qcoll__codec_mul(qcoll__codec_mul(v, s.step), s.post);
  return y > s.amax ? s.amax : (y < -s.amax ? -s.amax : y);
}

/* ---- packing ----------------------------------------------------------- */

QCOLL_HD void qcoll__codec_store_scale(uint8_t *group, uint32_t bits) {
  group[0] = (uint8_t)bits;
  group[1] = (uint8_t)(bits >> 8);
  group[2] = (uint8_t)(bits >> 16);
  group[3] = (uint8_t)(bits >> 24);
}

QCOLL_HD uint32_t qcoll__codec_load_scale(const uint8_t *group) {
  return (uint32_t)group[0] | (uint32_t)group[1] << 8 |
         (uint32_t)group[2] << 16 | (uint32_t)group[3] << 24;
}

/* Pack 32 codes at dst (group + 4). */
QCOLL_HD void qcoll__codec_pack(qcoll_quant_t fmt,
                                const uint32_t codes[QCOLL_CODEC_GROUP],
                                uint8_t *dst) {
  int i;
  switch (fmt) {
    case QCOLL_QUANT_FP8:
    case QCOLL_QUANT_INT8:
      for (i = 0; i < QCOLL_CODEC_GROUP; i++) dst[i] = (uint8_t)codes[i];
      break;
    case QCOLL_QUANT_INT6:
      for (i = 0; i < QCOLL_CODEC_GROUP / 4; i++) {
        uint32_t w = codes[4 * i] | codes[4 * i + 1] << 6 |
                     codes[4 * i + 2] << 12 | codes[4 * i + 3] << 18;
        dst[3 * i] = (uint8_t)w;
        dst[3 * i + 1] = (uint8_t)(w >> 8);
        dst[3 * i + 2] = (uint8_t)(w >> 16);
      }
      break;
    case QCOLL_QUANT_INT4:
      for (i = 0; i < QCOLL_CODEC_GROUP / 2; i++)
        dst[i] = (uint8_t)(codes[2 * i] | codes[2 * i + 1] << 4);
      break;
    case QCOLL_QUANT_INT3:
      for (i = 0; i < QCOLL_CODEC_GROUP / 8; i++) {
        uint32_t w = 0;
        int j;
        for (j = 0; j < 8; j++) w |= codes[8 * i + j] << (3 * j);
        dst[3 * i] = (uint8_t)w;
        dst[3 * i + 1] = (uint8_t)(w >> 8);
        dst[3 * i + 2] = (uint8_t)(w >> 16);
      }
      break;
    default: break;
  }
}

/* Code of element i (0..31) of the codes at src (group + 4). */
QCOLL_HD uint32_t qcoll__codec_unpack_one(qcoll_quant_t fmt, const uint8_t *src,
                                          int i) {
  switch (fmt) {
    case QCOLL_QUANT_FP8:
    case QCOLL_QUANT_INT8: return src[i];
    case QCOLL_QUANT_INT6: {
      const uint8_t *b = src + 3 * (i >> 2);
      uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
      return (w >> (6 * (i & 3))) & 0x3fu;
    }
    case QCOLL_QUANT_INT4: return (src[i >> 1] >> (4 * (i & 1))) & 0xfu;
    case QCOLL_QUANT_INT3: {
      const uint8_t *b = src + 3 * (i >> 3);
      uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
      return (w >> (3 * (i & 7))) & 0x7u;
    }
    default: return 0;
  }
}

/* Four codes at a time, for kernels that give each lane elements 4k..4k+3
 * of a group: quad_bits(fmt) = 32, 24, 16 or 12 bits of the packed codes,
 * starting at bit quad_bits * k.  Four codes of 8, 6 or 4 bits end on a
 * byte boundary, so they are qcoll__codec_quad_bytes(fmt) = 4, 3 or 2
 * whole bytes, starting at byte quad_bytes * k, and a lane can write or
 * read them without touching its neighbours' bytes.  INT3's 12 bits are
 * not whole bytes: quad_bytes is 0, and two lanes' quads make 3 bytes
 * (qcoll__codec_share_bytes). */
QCOLL_HD uint32_t qcoll__codec_quad_bits(qcoll_quant_t fmt) {
  return 4 * qcoll__codec_code_bits(fmt);
}

QCOLL_HD uint32_t qcoll__codec_quad_bytes(qcoll_quant_t fmt) {
  return qcoll__codec_quad_bits(fmt) % 8 ? 0 : qcoll__codec_quad_bits(fmt) / 8;
}

/* What lane k of eight writes of a group's packed codes: share_bytes(fmt,
 * k) bytes at byte share_offset(fmt, k) of them.  The byte formats: its own
 * quad.  INT3: an even lane its quad and its odd neighbour's (3 bytes at
 * 3 * k / 2), an odd lane nothing. */
QCOLL_HD uint32_t qcoll__codec_share_bytes(qcoll_quant_t fmt, int k) {
  if (fmt == QCOLL_QUANT_INT3) return (k & 1) ? 0u : 3u;
  return qcoll__codec_quad_bytes(fmt);
}

QCOLL_HD uint32_t qcoll__codec_share_offset(qcoll_quant_t fmt, int k) {
  if (fmt == QCOLL_QUANT_INT3) return 3u * (uint32_t)(k >> 1);
  return qcoll__codec_quad_bytes(fmt) * (uint32_t)k;
}

/* What lane k reads back: the share_bytes(fmt, k & ~1) bytes at
 * share_offset(fmt, k) (INT3: the pair's 3 bytes for both lanes), and
 * where its own quad starts in them, share_shift(fmt, k) bits up. */
QCOLL_HD uint32_t qcoll__codec_read_bytes(qcoll_quant_t fmt) {
  return qcoll__codec_share_bytes(fmt, 0);
}

QCOLL_HD uint32_t qcoll__codec_share_shift(qcoll_quant_t fmt, int k) {
  return fmt == QCOLL_QUANT_INT3 ? 12u * (uint32_t)(k & 1) : 0u;
}

/* Codes 4k..4k+3 of a group as qcoll__codec_pack lays them out: the low
 * quad_bytes(fmt) bytes of the result, least significant first, are bytes
 * quad_bytes * k .. of the packed codes (code j at bit code_bits * j, the
 * same LSB-first order as pack's INT6 word and INT4 nibbles). */
QCOLL_HD uint32_t qcoll__codec_pack_quad(qcoll_quant_t fmt,
                                         const uint32_t codes[4]) {
  uint32_t b = qcoll__codec_code_bits(fmt);
  return codes[0] | codes[1] << b | codes[2] << 2 * b | codes[3] << 3 * b;
}

/* Code j (0..3) of a word holding four packed codes (qcoll__codec_pack_quad,
 * or quad_bytes(fmt) bytes of packed codes read least significant first). */
QCOLL_HD uint32_t qcoll__codec_quad_code(qcoll_quant_t fmt, uint32_t quad,
                                         int j) {
  uint32_t b = qcoll__codec_code_bits(fmt);
  return (quad >> (b * (uint32_t)j)) & ((1u << b) - 1u);
}

/* ---- plain groups: the same bits with fewer operations ----------------- */

/* A group is plain when its amax (or stored scale) bits are 0 or at least
 * QCOLL_CODEC_TINY_BITS and finite: then p = 1, nothing is non-finite, and
 * encoding and decoding reduce to the operations below, which give exactly
 * the bits of encode_lane / decode_lane (test_codec checks them on the
 * host, codec_emu through the kernels on buffers of plain groups,
 * gpu.quant_kernels and codec_gpu on the GPU).  Kernels take these paths
 * when every group of a warp step is plain (one vote), else the general
 * ones. */
QCOLL_HD int qcoll__codec_plain(uint32_t bits) {
  return bits < QCOLL_CODEC_INF_BITS &&
         (bits >= QCOLL_CODEC_TINY_BITS || bits == 0);
}

/* enc_scale(fmt, amax_bits).inv of a plain group. */
QCOLL_HD float qcoll__codec_plain_inv(qcoll_quant_t fmt, uint32_t amax_bits) {
  return amax_bits == 0
             ? 0.0f
             : qcoll__codec_inv_scale(fmt, qcoll__codec_bits_to_f32(amax_bits));
}

/* 1.5 * 2^23: for |t| <= 2^22, fl(t + M) = M + rint(t) (ties to even, the
 * rounding of the addition itself), and the bits of that sum are
 * 0x4b400000 + rint(t): one addition in place of a conversion. */
#define QCOLL_CODEC_RINT_MAGIC 12582912.0f
#define QCOLL_CODEC_RINT_MAGIC_BITS 0x4b400000u

/* Four codes of a plain group packed as pack_quad lays them out, from the
 * values and inv.  INT: with B_j the bits of fl(fl(x_j * inv) + M), code_j
 * = B_j - 0x4b400000 + R, and sum_j code_j * 2^(b j) is, modulo 2^32,
 * sum_j B_j * 2^(b j) + (R - 0x4b400000) * sum_j 2^(b j): three
 * multiply-adds and one addition (the true sum is below 2^32, so the
 * modular one is it).  FP8: the e4m3 bytes of fl(x * inv). */
QCOLL_HD uint32_t qcoll__codec_plain_quad(qcoll_quant_t fmt, const float x[4],
                                          float inv) {
  const uint32_t b = qcoll__codec_code_bits(fmt);
  uint32_t c[4];
  int j;
  if (fmt == QCOLL_QUANT_FP8) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    /* The hardware's conversion (sm_89 on), two at a time: the same
     * rounding (half to even, saturating at 448: |x * inv| is finite
     * here), except that it keeps the sign of a zero; the codec has no
     * negative zero, so 0x80 bytes become 0. */
    uint32_t w = 0;
    for (j = 0; j < 4; j += 2) {
      unsigned short pair; /* x[j]'s byte low, x[j + 1]'s high */
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
          : "=h"(pair)
          : "f"(qcoll__codec_mul(x[j + 1], inv)),
            "f"(qcoll__codec_mul(x[j], inv)));
      w |= (uint32_t)pair << (8 * j);
    }
    const uint32_t nonzero =
        ((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) & 0x80808080u;
    return w & (nonzero | 0x7f7f7f7fu);
#else
    for (j = 0; j < 4; j++)
      c[j] = qcoll__codec_e4m3_from_f32(qcoll__codec_mul(x[j], inv));
    return qcoll__codec_pack_quad(fmt, c);
#endif
  }
  for (j = 0; j < 4; j++)
    c[j] = qcoll__codec_f32_to_bits(qcoll__codec_add(
        qcoll__codec_mul(x[j], inv), QCOLL_CODEC_RINT_MAGIC));
  const uint32_t weights = 1u + (1u << b) + (1u << 2 * b) + (1u << 3 * b);
  const uint32_t bias =
      (qcoll__codec_range(fmt) - QCOLL_CODEC_RINT_MAGIC_BITS) * weights;
  return ((c[3] * (1u << b) + c[2]) * (1u << b) + c[1]) * (1u << b) + c[0] +
         bias;
}

/* __byte_perm(x, y, s) on host and device: byte i of the result is byte
 * (s >> 4i) & 7 of the eight bytes of y:x (x's bytes are 0..3). */
QCOLL_HD uint32_t qcoll__codec_byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t both = (uint64_t)y << 32 | x;
  uint32_t r = 0;
  int i;
  for (i = 0; i < 4; i++)
    r |= (uint32_t)(both >> (8u * ((s >> (4 * i)) & 7u)) & 0xffu) << (8 * i);
  return r;
#endif
}

/* 2^23 as bits: an INT code in its low mantissa bits makes 2^23 + code. */
#define QCOLL_CODEC_CODE_WORD_BITS 0x4b000000u

/* The words plain_value decodes, of a lane's packed codes (quad_code
 * order): for INT formats 2^23 + code_j as bits, for FP8 the codes.  INT8's
 * bytes, and INT4's nibbles once the even and the odd ones are spread into
 * bytes, are each put under 0x4b by one byte permutation (the selector's
 * bytes 1..3 pick the zero and 0x4b bytes of the constant). */
QCOLL_HD void qcoll__codec_plain_words(qcoll_quant_t fmt, uint32_t quad,
                                       uint32_t w[4]) {
  const uint32_t word = QCOLL_CODEC_CODE_WORD_BITS, sel = 0x7540u;
  int j;
  if (fmt == QCOLL_QUANT_INT8) {
    for (j = 0; j < 4; j++)
      w[j] = qcoll__codec_byte_perm(quad, word, sel | (uint32_t)j);
  } else if (fmt == QCOLL_QUANT_INT4) {
    const uint32_t even = quad & 0x0f0fu, odd = quad >> 4 & 0x0f0fu;
    w[0] = qcoll__codec_byte_perm(even, word, sel);
    w[1] = qcoll__codec_byte_perm(odd, word, sel);
    w[2] = qcoll__codec_byte_perm(even, word, sel | 1u);
    w[3] = qcoll__codec_byte_perm(odd, word, sel | 1u);
  } else {
    for (j = 0; j < 4; j++) {
      const uint32_t c = qcoll__codec_quad_code(fmt, quad, j);
      w[j] = fmt == QCOLL_QUANT_FP8 ? c : word | c;
    }
  }
}

/* fl(v * step) with its magnitude clamped to amax, v finite (the clamp of
 * decode_lane: y is never NaN, and for y = +-0 both give y). */
QCOLL_HD float qcoll__codec_plain_scaled(float v, float step, float amax) {
  const float y = qcoll__codec_mul(v, step);
  const float m = fminf(fabsf(y), amax);
  return qcoll__codec_bits_to_f32(qcoll__codec_f32_to_bits(m) |
                                  (qcoll__codec_f32_to_bits(y) & 0x80000000u));
}

/* Value of a plain group's code from its word (plain_words) with step and
 * amax (dec_scale's): INT v = code - R as fl(bits(word) - (2^23 + R))
 * (exact), FP8 v the e4m3 value (a NaN code gives the canonical NaN), then
 * plain_scaled. */
QCOLL_HD float qcoll__codec_plain_value(qcoll_quant_t fmt, uint32_t word,
                                        float step, float amax) {
  float v;
  if (fmt == QCOLL_QUANT_FP8) {
    if ((word & 0x7fu) == 0x7fu)
      return qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS);
    v = qcoll__codec_e4m3_to_f32(word);
  } else {
    v = qcoll__sub_rn_f32(qcoll__codec_bits_to_f32(word),
                          (float)(8388608u + qcoll__codec_range(fmt)));
  }
  return qcoll__codec_plain_scaled(v, step, amax);
}

/* The four values of a lane's packed codes in a plain group: plain_words
 * and plain_value.  On the device (sm_89 on) FP8 converts its codes two at
 * a time in hardware instead (e4m3 -> f16 is exact, f16 -> f32 too); the
 * NaN codes come out NaN and are made the canonical one, as plain_value
 * does. */
QCOLL_HD void qcoll__codec_plain_decode(qcoll_quant_t fmt, uint32_t quad,
                                        float step, float amax, float y[4]) {
  int j;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (fmt == QCOLL_QUANT_FP8) {
    uint32_t pair = 0; /* codes j and j + 1 (j even) as f16, j's low */
    for (j = 0; j < 4; j++) {
      if (j % 2 == 0)
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;"
            : "=r"(pair)
            : "h"((unsigned short)(quad >> (8 * j))));
      float v;
      asm("cvt.f32.f16 %0, %1;"
          : "=f"(v)
          : "h"((unsigned short)(pair >> (16 * (j % 2)))));
      y[j] = v != v ? qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS)
                    : qcoll__codec_plain_scaled(v, step, amax);
    }
    return;
  }
#endif
  uint32_t w[4];
  qcoll__codec_plain_words(fmt, quad, w);
  for (j = 0; j < 4; j++) y[j] = qcoll__codec_plain_value(fmt, w[j], step, amax);
}

/* ---- whole groups and buffers ----------------------------------------- */

/* Encode 32 values into one group of qcoll__codec_group_bytes(fmt) bytes. */
QCOLL_HD void qcoll__codec_encode_group(qcoll_quant_t fmt,
                                        const float in[QCOLL_CODEC_GROUP],
                                        uint8_t *out) {
  uint32_t amax_bits = 0, codes[QCOLL_CODEC_GROUP];
  int i;
  if (!qcoll__codec_valid(fmt)) return;
  for (i = 0; i < QCOLL_CODEC_GROUP; i++) {
    uint32_t b = qcoll__codec_abs_bits(in[i]);
    amax_bits = b > amax_bits ? b : amax_bits;
  }
  qcoll__codec_enc_t s = qcoll__codec_enc_scale(fmt, amax_bits);
  for (i = 0; i < QCOLL_CODEC_GROUP; i++)
    codes[i] = qcoll__codec_encode_lane(fmt, in[i], s);
  qcoll__codec_store_scale(out, s.stored);
  qcoll__codec_pack(fmt, codes, out + QCOLL_CODEC_SCALE_BYTES);
}

/* Decode the first n (<= 32) values of one group. */
QCOLL_HD void qcoll__codec_decode_group_n(qcoll_quant_t fmt, const uint8_t *in,
                                          float *out, int n) {
  int i;
  if (!qcoll__codec_valid(fmt)) return;
  qcoll__codec_dec_t s =
      qcoll__codec_dec_scale(fmt, qcoll__codec_load_scale(in));
  for (i = 0; i < n; i++)
    out[i] = qcoll__codec_decode_lane(
        fmt, qcoll__codec_unpack_one(fmt, in + QCOLL_CODEC_SCALE_BYTES, i), s);
}

/* Decode one group into 32 values. */
QCOLL_HD void qcoll__codec_decode_group(qcoll_quant_t fmt, const uint8_t *in,
                                        float out[QCOLL_CODEC_GROUP]) {
  qcoll__codec_decode_group_n(fmt, in, out, QCOLL_CODEC_GROUP);
}

/* Encode n values into qcoll__codec_encoded_bytes(fmt, n) bytes. */
QCOLL_HD void qcoll__codec_encode(qcoll_quant_t fmt, const float *in, size_t n,
                                  uint8_t *out) {
  size_t g, full = n / QCOLL_CODEC_GROUP, rest = n % QCOLL_CODEC_GROUP;
  uint32_t gb = qcoll__codec_group_bytes(fmt);
  if (!gb) return;
  for (g = 0; g < full; g++)
    qcoll__codec_encode_group(fmt, in + g * QCOLL_CODEC_GROUP, out + g * gb);
  if (rest) {
    float pad[QCOLL_CODEC_GROUP];
    size_t i;
    for (i = 0; i < QCOLL_CODEC_GROUP; i++)
      pad[i] = i < rest ? in[full * QCOLL_CODEC_GROUP + i] : 0.0f;
    qcoll__codec_encode_group(fmt, pad, out + full * gb);
  }
}

/* Decode n values from qcoll__codec_encoded_bytes(fmt, n) bytes. */
QCOLL_HD void qcoll__codec_decode(qcoll_quant_t fmt, const uint8_t *in,
                                  size_t n, float *out) {
  size_t g, groups = qcoll__codec_groups(n);
  uint32_t gb = qcoll__codec_group_bytes(fmt);
  if (!gb) return;
  for (g = 0; g < groups; g++) {
    size_t left = n - g * QCOLL_CODEC_GROUP;
    qcoll__codec_decode_group_n(
        fmt, in + g * gb, out + g * QCOLL_CODEC_GROUP,
        left < QCOLL_CODEC_GROUP ? (int)left : QCOLL_CODEC_GROUP);
  }
}

/* ---- rotated groups ---------------------------------------------------- */

/* An optional fixed orthogonal transform of every group before it is
 * encoded (a "rotation"): one large value sets the scale of its whole group,
 * and spreading it over the group's 32 values first leaves the others more
 * levels.  The transform is linear and the same on every rank, so the sum of
 * rotated inputs is the rotation of the sum: an all-reduce rotates each
 * input group once, reduces in the rotated domain and applies the inverse
 * once to the final decoded group.
 *
 *   forward  y = H (D x)          inverse  x = D (H y) * 2^-5
 *
 * D flips the sign of element i when bit i of QCOLL_CODEC_ROT_SIGNS is set
 * (exact); H is the unnormalised 32-point Walsh-Hadamard transform (H H =
 * 32 I), five butterfly stages h = 1, 2, 4, 8, 16 in that order: for every
 * i with i & h == 0, (x[i], x[i+h]) becomes (x[i] + x[i+h], x[i] - x[i+h]),
 * each one correctly rounded f32 operation.  The fixed stage order and
 * operand order make the result the same bits on host and device; in the
 * four-values-per-lane layout stages 1 and 2 stay in the lane and stages 4,
 * 8 and 16 pair lane k with lane k ^ 1, 2, 4 of its segment (one shuffle
 * each; the lower lane adds, the upper subtracts its own value from its
 * partner's).  The scaling by 2^-5 is exact unless the result is subnormal.
 *
 * Policies.  Zero groups stay zero.  An inf or NaN anywhere in a group makes
 * the rotated group non-finite, hence (codec policy) the whole group NaN,
 * as without rotation; so does a finite group whose rotated values
 * overflow (|sum| > FLT_MAX, possible only for values above FLT_MAX / 32).
 * The inverse returns the canonical NaN 0x7fc00000 for every NaN and +0 for
 * every zero (as an unrotated decode).  A tail
 * group is padded with zeros before the forward transform; its padding
 * becomes rotated values like the others, and only the real values are
 * taken after the inverse. */
#define QCOLL_CODEC_ROT_SIGNS 0x6a09e667u /* fractional bits of sqrt(2) */

/* Element i with its sign flipped when bit i of the sign pattern is set. */
QCOLL_HD float qcoll__codec_rot_sign(float x, int i) {
  return qcoll__codec_bits_to_f32(
      qcoll__codec_f32_to_bits(x) ^
      (((QCOLL_CODEC_ROT_SIGNS >> i) & 1u) << 31));
}

/* The butterfly stages h = first .. last (powers of two) over n values. */
QCOLL_HD void qcoll__codec_hadamard(float *x, int n, int first, int last) {
  int h, i;
  for (h = first; h <= last; h <<= 1)
    for (i = 0; i < n; i++)
      if (!(i & h)) {
        float lo = x[i], hi = x[i + h];
        x[i] = qcoll__codec_add(lo, hi);
        x[i + h] = qcoll__sub_rn_f32(lo, hi);
      }
}

/* The inverse's last steps on one value: 2^-5, the sign, NaN canonical and
 * zero +0 (x + 0 is x for every other value), as an unrotated decode gives
 * them. */
QCOLL_HD float qcoll__codec_unrotate_value(float y, int i) {
  float x = qcoll__codec_rot_sign(qcoll__codec_mul(y, 0.03125f), i);
  return x != x ? qcoll__codec_bits_to_f32(QCOLL_CODEC_NAN_BITS)
                : qcoll__codec_add(x, 0.0f);
}

/* Forward rotation of one group, in place. */
QCOLL_HD void qcoll__codec_rotate_group(float x[QCOLL_CODEC_GROUP]) {
  int i;
  for (i = 0; i < QCOLL_CODEC_GROUP; i++) x[i] = qcoll__codec_rot_sign(x[i], i);
  qcoll__codec_hadamard(x, QCOLL_CODEC_GROUP, 1, QCOLL_CODEC_GROUP / 2);
}

/* Inverse rotation of one group, in place. */
QCOLL_HD void qcoll__codec_unrotate_group(float x[QCOLL_CODEC_GROUP]) {
  int i;
  qcoll__codec_hadamard(x, QCOLL_CODEC_GROUP, 1, QCOLL_CODEC_GROUP / 2);
  for (i = 0; i < QCOLL_CODEC_GROUP; i++)
    x[i] = qcoll__codec_unrotate_value(x[i], i);
}

/* Rotate n values group by group into ceil(n / 32) * 32 values at out (the
 * tail group padded with zeros first). */
QCOLL_HD void qcoll__codec_rotate(const float *in, size_t n, float *out) {
  size_t g, i, groups = qcoll__codec_groups(n);
  for (g = 0; g < groups; g++) {
    float *x = out + g * QCOLL_CODEC_GROUP;
    for (i = 0; i < QCOLL_CODEC_GROUP; i++) {
      size_t at = g * QCOLL_CODEC_GROUP + i;
      x[i] = at < n ? in[at] : 0.0f;
    }
    qcoll__codec_rotate_group(x);
  }
}

/* Inverse of qcoll__codec_rotate: ceil(n / 32) * 32 rotated values at in
 * (overwritten), n values at out. */
QCOLL_HD void qcoll__codec_unrotate(float *in, size_t n, float *out) {
  size_t g, i, groups = qcoll__codec_groups(n);
  for (g = 0; g < groups; g++) {
    float *x = in + g * QCOLL_CODEC_GROUP;
    qcoll__codec_unrotate_group(x);
    for (i = 0; i < QCOLL_CODEC_GROUP && g * QCOLL_CODEC_GROUP + i < n; i++)
      out[g * QCOLL_CODEC_GROUP + i] = x[i];
  }
}

#ifdef __cplusplus
}
#endif

/* ---- one group per warp (device only) ---------------------------------- */

#if defined(__CUDACC__)
/* All 32 lanes of the warp must call these together (full mask); lane is
 * the caller's lane (threadIdx.x & 31 for 1-D blocks).  Lane i encodes
 * element i of the group at `group`. */
static __device__ __forceinline__ uint32_t qcoll__codec_warp_max(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
  for (int o = 16; o > 0; o >>= 1) {
    uint32_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
#endif
}

static __device__ __forceinline__ void qcoll__codec_warp_encode(
    qcoll_quant_t fmt, float x, int lane, uint8_t *group) {
  uint32_t amax_bits = qcoll__codec_warp_max(qcoll__codec_abs_bits(x));
  qcoll__codec_enc_t s = qcoll__codec_enc_scale(fmt, amax_bits);
  uint32_t c = qcoll__codec_encode_lane(fmt, x, s);
  uint8_t *codes = group + QCOLL_CODEC_SCALE_BYTES;
  if (lane == 0) qcoll__codec_store_scale(group, s.stored);
  if (fmt == QCOLL_QUANT_INT4) {
    uint32_t odd = __shfl_down_sync(0xffffffffu, c, 1);
    if ((lane & 1) == 0) codes[lane >> 1] = (uint8_t)(c | odd << 4);
  } else if (fmt == QCOLL_QUANT_INT6) {
    uint32_t w = c << (6 * (lane & 3));
    w |= __shfl_xor_sync(0xffffffffu, w, 1);
    w |= __shfl_xor_sync(0xffffffffu, w, 2);
    if ((lane & 3) != 3)
      codes[3 * (lane >> 2) + (lane & 3)] = (uint8_t)(w >> (8 * (lane & 3)));
  } else if (fmt == QCOLL_QUANT_INT3) {
    uint32_t w = c << (3 * (lane & 7));
    w |= __shfl_xor_sync(0xffffffffu, w, 1);
    w |= __shfl_xor_sync(0xffffffffu, w, 2);
    w |= __shfl_xor_sync(0xffffffffu, w, 4);
    if ((lane & 7) < 3)
      codes[3 * (lane >> 3) + (lane & 7)] = (uint8_t)(w >> (8 * (lane & 7)));
  } else {
    codes[lane] = (uint8_t)c;
  }
}

/* Lane i gets element i of the group at `group`. */
static __device__ __forceinline__ float qcoll__codec_warp_decode(
    qcoll_quant_t fmt, const uint8_t *group, int lane) {
  qcoll__codec_dec_t s =
      qcoll__codec_dec_scale(fmt, qcoll__codec_load_scale(group));
  return qcoll__codec_decode_lane(
      fmt, qcoll__codec_unpack_one(fmt, group + QCOLL_CODEC_SCALE_BYTES, lane),
      s);
}

/* ---- four elements per lane (device only) ------------------------------ */

/* Lanes of a group ("segment") and elements per lane. */
#define QCOLL_CODEC_SEG_LANES 8
#define QCOLL_CODEC_LANE_VALUES (QCOLL_CODEC_GROUP / QCOLL_CODEC_SEG_LANES)

/* What lane k of its segment writes (qcoll__codec_share_bytes(fmt, k)
 * bytes at share_offset): its quad, or for INT3 an even lane's quad with
 * its odd neighbour's above it (bits 12..23).  Every lane of the warp
 * calls it. */
static __device__ __forceinline__ uint32_t qcoll__codec_segment_share(
    qcoll_quant_t fmt, uint32_t quad) {
  if (fmt != QCOLL_QUANT_INT3) return quad;
  return quad | __shfl_down_sync(0xffffffffu, quad, 1) << 12;
}

/* The lane's four elements from the group's scale (dec_scale) and its
 * packed codes. */
static __device__ __forceinline__ void qcoll__codec_segment_decode(
    qcoll_quant_t fmt, qcoll__codec_dec_t s, uint32_t quad,
    float y[QCOLL_CODEC_LANE_VALUES]) {
#pragma unroll
  for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++)
    y[j] = qcoll__codec_decode_lane(fmt, qcoll__codec_quad_code(fmt, quad, j),
                                    s);
}

/* ---- several sets of groups per lane (device only) --------------------- */

/* A lane that holds four values of each of kSets groups (kSets = 1, 2, 4
 * or 8: "sets" of four consecutive groups, group u of the lane's segment
 * in set u) needs each group's amax.  One set costs three shuffles and
 * three maxima per lane, and every lane then derives the same scale.  For
 * kSets sets the maxima are reduced and scattered instead: at the level of
 * partner k ^ m (m = 4, 2, 1) a lane holding h > 1 partial maxima sends
 * half of them and keeps the other half (the upper lane the second half),
 * so that after the three levels lane k holds the full maximum of group
 * k / (8 / kSets) only: 4 shuffles for four sets (against 12), 7 for
 * eight (against 24), and one scale per lane to derive. */
template <int kSets>
static __device__ __forceinline__ uint32_t qcoll__codec_segment_scatter_max(
    const uint32_t own[kSets], int k) {
  static_assert(kSets == 1 || kSets == 2 || kSets == 4 || kSets == 8,
                "1, 2, 4 or 8 sets");
  uint32_t held[kSets];
#pragma unroll
  for (int u = 0; u < kSets; u++) held[u] = own[u];
#pragma unroll
  for (int m = QCOLL_CODEC_SEG_LANES / 2; m > 0; m >>= 1) {
    const int h = kSets * m / 4 > 1 ? kSets * m / 4 : 1;
    if (h == 1) {
      const uint32_t w = __shfl_xor_sync(0xffffffffu, held[0], m);
      held[0] = w > held[0] ? w : held[0];
    } else {
      const bool upper = (k & m) != 0;
#pragma unroll
      for (int i = 0; i < h / 2; i++) {
        const uint32_t send = upper ? held[i] : held[i + h / 2];
        const uint32_t keep = upper ? held[i + h / 2] : held[i];
        const uint32_t w = __shfl_xor_sync(0xffffffffu, send, m);
        held[i] = w > keep ? w : keep;
      }
    }
  }
  return held[0];
}

/* The lane of x's segment that holds group u's maximum after
 * segment_scatter_max (lane is the caller's lane in the warp). */
template <int kSets>
static __device__ __forceinline__ int qcoll__codec_scatter_lane(int lane,
                                                                int u) {
  return (lane & ~(QCOLL_CODEC_SEG_LANES - 1)) |
         (u * (QCOLL_CODEC_SEG_LANES / kSets));
}

/* Encode the lane's four values of each of kSets groups (group u of the
 * lane's segment: x[u]); quad[u] are its four codes of group u packed
 * (pack_quad), stored[u] group u's stored scale.  Every lane of the warp
 * calls it with the same kSets.  When every group of the warp is plain
 * (one vote) the lane derives the scale of the one group it holds the
 * maximum of and shares inv and the amax by two shuffles per group;
 * otherwise every lane derives every group's scale (enc_scale) from the
 * maximum shared by one shuffle per group.  The same bits either way. */
template <int kSets>
static __device__ __forceinline__ void qcoll__codec_segment_encode_sets(
    qcoll_quant_t fmt, const float x[kSets][QCOLL_CODEC_LANE_VALUES],
    int lane, uint32_t stored[kSets], uint32_t quad[kSets]) {
  uint32_t own[kSets];
#pragma unroll
  for (int u = 0; u < kSets; u++) {
    own[u] = 0;
#pragma unroll
    for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++) {
      const uint32_t b = qcoll__codec_abs_bits(x[u][j]);
      own[u] = b > own[u] ? b : own[u];
    }
  }
  const uint32_t amax = qcoll__codec_segment_scatter_max<kSets>(
      own, lane % QCOLL_CODEC_SEG_LANES);
  if (__all_sync(0xffffffffu, qcoll__codec_plain(amax))) {
    const float inv = qcoll__codec_plain_inv(fmt, amax);
#pragma unroll
    for (int u = 0; u < kSets; u++) {
      const int src = qcoll__codec_scatter_lane<kSets>(lane, u);
      stored[u] = __shfl_sync(0xffffffffu, amax, src);
      quad[u] = qcoll__codec_plain_quad(fmt, x[u],
                                        __shfl_sync(0xffffffffu, inv, src));
    }
  } else {
#pragma unroll
    for (int u = 0; u < kSets; u++) {
      const qcoll__codec_enc_t s = qcoll__codec_enc_scale(
          fmt, __shfl_sync(0xffffffffu, amax,
                           qcoll__codec_scatter_lane<kSets>(lane, u)));
      uint32_t c[QCOLL_CODEC_LANE_VALUES];
#pragma unroll
      for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++)
        c[j] = qcoll__codec_encode_lane(fmt, x[u][j], s);
      stored[u] = s.stored;
      quad[u] = qcoll__codec_pack_quad(fmt, c);
    }
  }
}

/* Decode the lane's four values of each of kGroups groups from their
 * stored scales and the lane's packed codes (quad_code order).  Every lane
 * of the warp calls it with the same kGroups: when every group of the warp
 * is plain (one vote) each is decoded by plain_decode, else by dec_scale
 * and decode_lane; the same bits either way.  Returns, the same on every
 * lane, whether every value of the warp is known finite: the plain path of
 * an INT format (|value| <= amax, finite); FP8 codes can spell NaN, so
 * never for FP8. */
template <int kGroups>
static __device__ __forceinline__ bool qcoll__codec_segment_decode_sets(
    qcoll_quant_t fmt, const uint32_t scale[kGroups],
    const uint32_t quad[kGroups], float y[kGroups][QCOLL_CODEC_LANE_VALUES]) {
  bool plain = true;
#pragma unroll
  for (int u = 0; u < kGroups; u++)
    plain = plain && qcoll__codec_plain(scale[u] & 0x7fffffffu);
  if (__all_sync(0xffffffffu, plain)) {
#pragma unroll
    for (int u = 0; u < kGroups; u++) {
      const float amax = qcoll__codec_bits_to_f32(scale[u] & 0x7fffffffu);
      /* dec_scale's step with p = 1 (+0 for amax = 0: 0 / R's residual
       * is +0) */
      qcoll__codec_plain_decode(fmt, quad[u],
                                qcoll__codec_step_scale(fmt, amax), amax, y[u]);
    }
    return fmt != QCOLL_QUANT_FP8;
  }
#pragma unroll
  for (int u = 0; u < kGroups; u++)
    qcoll__codec_segment_decode(fmt, qcoll__codec_dec_scale(fmt, scale[u]),
                                quad[u], y[u]);
  return false;
}

/* Store lane k's share (`bytes` = share_bytes(fmt, k)) at
 * p = group + 4 + offset, offset = share_offset(fmt, k), of a 4-byte
 * aligned group: p is then 4-byte aligned for 4 bytes and 2-byte aligned
 * for 2; for 3 bytes (offset 3j) p is even for even j (16 bits at p, a
 * byte at p + 2) and odd for odd j (a byte at p, 16 bits at p + 1).
 * Nothing for 0 bytes.  No byte is written by two lanes. */
static __device__ __forceinline__ void qcoll__codec_store_quad_aligned(
    uint8_t *p, uint32_t bytes, uint32_t quad, uint32_t offset) {
  if (bytes == 0) return;
  if (bytes == 4) {
    *(uint32_t *)p = quad;
  } else if (bytes == 2) {
    *(uint16_t *)p = (uint16_t)quad;
  } else { /* no branch on j: neighbouring lanes take the other parity */
    const int odd = (int)(offset & 1u);
    *(uint16_t *)(p + odd) = (uint16_t)(quad >> (8 * odd));
    p[odd ? 0 : 2] = (uint8_t)(quad >> (odd ? 0 : 16));
  }
}
/* The stages h = 4, 8, 16 of qcoll__codec_hadamard in the four-values-per-
 * lane layout: lane k of its segment (k = lane & 7) pairs with lane k ^ m,
 * m = 1, 2, 4; the lower lane adds its partner's value, the upper takes
 * partner - own, the operands and order of the host loop.  Every lane of
 * the warp calls it. */
static __device__ __forceinline__ void qcoll__codec_segment_hadamard(
    float x[QCOLL_CODEC_LANE_VALUES], int k) {
  qcoll__codec_hadamard(x, QCOLL_CODEC_LANE_VALUES, 1, 2);
#pragma unroll
  for (int m = 1; m < QCOLL_CODEC_SEG_LANES; m <<= 1) {
#pragma unroll
    for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++) {
      const float o = __shfl_xor_sync(0xffffffffu, x[j], m);
      x[j] = (k & m) ? __fsub_rn(o, x[j]) : __fadd_rn(x[j], o);
    }
  }
}

/* qcoll__codec_rotate_group on the lane's four values (elements 4k..). */
static __device__ __forceinline__ void qcoll__codec_segment_rotate(
    float x[QCOLL_CODEC_LANE_VALUES], int k) {
#pragma unroll
  for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++)
    x[j] = qcoll__codec_rot_sign(x[j], QCOLL_CODEC_LANE_VALUES * k + j);
  qcoll__codec_segment_hadamard(x, k);
}

/* qcoll__codec_unrotate_group on the lane's four values. */
static __device__ __forceinline__ void qcoll__codec_segment_unrotate(
    float x[QCOLL_CODEC_LANE_VALUES], int k) {
  qcoll__codec_segment_hadamard(x, k);
#pragma unroll
  for (int j = 0; j < QCOLL_CODEC_LANE_VALUES; j++)
    x[j] = qcoll__codec_unrotate_value(x[j], QCOLL_CODEC_LANE_VALUES * k + j);
}
#endif /* __CUDACC__ */

#endif
