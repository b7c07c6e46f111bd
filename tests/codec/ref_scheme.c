/* CPU models of quantised two-shot all-reduce; see ref_scheme.h.  Compiled
 * with -ffp-contract=off so every sum is rounded as written. */
#include "ref_scheme.h"

#include <stdint.h>
#include <stdlib.h>

#include "coll/codec.h"
#include "base/dtype.h"

float ref_round_acc(ref_acc_t acc, float x) {
  if (acc == REF_ACC_BF16) return qcoll__bf16_to_f32(qcoll__f32_to_bf16(x));
  return qcoll__f16_to_f32(qcoll__f32_to_f16(x));
}

void ref_scheme_segment(size_t n, int nranks, int r, size_t *begin,
                        size_t *len) {
  size_t groups = qcoll__codec_groups(n);
  size_t per =
      (groups + (size_t)nranks - 1) / (size_t)nranks; /* groups per rank */
  size_t b = (size_t)r * per * QCOLL_CODEC_GROUP;
  size_t e = (size_t)(r + 1) * per * QCOLL_CODEC_GROUP;
  if (b > n) b = n;
  if (e > n) e = n;
  *begin = b;
  *len = e - b;
}

/* Encode then decode len values: one transfer through the codec. */
static void transfer(qcoll_quant_t fmt, const float *src, size_t len,
                     uint8_t *wire, float *dst) {
  qcoll__codec_encode(fmt, src, len, wire);
  qcoll__codec_decode(fmt, wire, len, dst);
}

/* Shared skeleton: for each segment, phase 1 transfers every rank's part to
 * the owner, which reduces them (f32, or rounded to acc when compare is
 * set); phase 2 transfers the owner's sum back. */
static int two_shot(qcoll_quant_t fmt, int compare, ref_acc_t acc, int nranks,
                    size_t n, const float *const *in, float *out) {
  size_t cap = 0;
  for (int s = 0; s < nranks; s++) {
    size_t b, len;
    ref_scheme_segment(n, nranks, s, &b, &len);
    if (len > cap) cap = len;
  }
  uint8_t *wire = malloc(qcoll__codec_encoded_bytes(fmt, cap) + 1);
  float *part = malloc((cap + 1) * sizeof(float));
  float *sum = malloc((cap + 1) * sizeof(float));
  if (!wire || !part || !sum) {
    free(wire), free(part), free(sum);
    return -1;
  }
  for (int s = 0; s < nranks; s++) {
    size_t b, len;
    ref_scheme_segment(n, nranks, s, &b, &len);
    for (int r = 0; r < nranks; r++) { /* rank order */
      transfer(fmt, in[r] + b, len, wire, part);
      for (size_t i = 0; i < len; i++) {
        if (!compare) {
          sum[i] = r == 0 ? part[i] : sum[i] + part[i];
        } else {
          float v = ref_round_acc(acc, part[i]);
          sum[i] = r == 0 ? v : ref_round_acc(acc, sum[i] + v);
        }
      }
    }
    transfer(fmt, sum, len, wire, out + b);
    if (compare)
      for (size_t i = 0; i < len; i++)
        out[b + i] = ref_round_acc(acc, out[b + i]);
  }
  free(wire), free(part), free(sum);
  return 0;
}

int ref_scheme_qcoll(qcoll_quant_t fmt, int nranks, size_t n,
                     const float *const *in, float *out) {
  return two_shot(fmt, 0, REF_ACC_F16, nranks, n, in, out);
}

/* The same over rotated groups (codec.h "Rotated groups"): every rank's
 * input rotated group by group (tail padded with zeros), the two-shot
 * above on the whole rotated groups, the inverse rotation of the result. */
int ref_scheme_qcoll_rot(qcoll_quant_t fmt, int nranks, size_t n,
                         const float *const *in, float *out) {
  size_t padded = qcoll__codec_groups(n) * QCOLL_CODEC_GROUP;
  float **rot = calloc((size_t)nranks, sizeof(float *));
  float *res = malloc((padded + 1) * sizeof(float));
  int rc = rot && res ? 0 : -1;
  for (int r = 0; rc == 0 && r < nranks; r++) {
    rot[r] = malloc((padded + 1) * sizeof(float));
    if (!rot[r]) rc = -1;
    else qcoll__codec_rotate(in[r], n, rot[r]);
  }
  if (rc == 0)
    rc = two_shot(fmt, 0, REF_ACC_F16, nranks, padded,
                  (const float *const *)rot, res);
  if (rc == 0) qcoll__codec_unrotate(res, n, out);
  for (int r = 0; rot && r < nranks; r++) free(rot[r]);
  free(rot), free(res);
  return rc;
}

/* An f16 (bf16) addition is the exact sum rounded once to f16 (bf16).  The
 * f32 sum of two f16 (bf16) values rounded again to f16 (bf16) gives the same
 * result: binary32 has at least 2p + 2 bits for p = 11 (f16), so the double
 * rounding is innocuous; for bf16 (p = 8) likewise. */
int ref_scheme_compare(qcoll_quant_t fmt, ref_acc_t acc, int nranks, size_t n,
                       const float *const *in, float *out) {
  return two_shot(fmt, 1, acc, nranks, n, in, out);
}

void ref_scheme_exact(int nranks, size_t n, const float *const *in,
                      double *out) {
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += in[r][i];
    out[i] = s;
  }
}
