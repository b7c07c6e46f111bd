/* Host side of the quantised all-reduce GPU tests; see quant_check.h.
 * Compiled with -ffp-contract=off, like the reference it calls. */
#include "quant_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/codec.h"
#include "gpu_test.h"
#include "quant_data.h"
#include "quant_gen.h"
#include "ref_scheme.h"

const char *qt_quant_name(qcoll_quant_t fmt) {
  return qd_quant_name(fmt);
}

static void put_specials(qt_inputs_t *in) {
  const size_t count = in->count;
  const int last = in->nranks - 1;
  if (count > 5) in->values[0][5] = INFINITY;
  if (count > 40) in->values[last][40] = NAN;
  for (int r = 0; r < in->nranks; r++)
    for (size_t i = 64; i < 160 && i < count; i++) {
      float v = 0.0f;
      if (i < 96) v = (i & 1) ? 60000.0f : -60000.0f;
      if (i >= 128) v = ((i + (size_t)r) & 1) ? 0x1p-20f : -0x1p-20f;
      in->values[r][i] = qd_round(in->dtype, v);
    }
}

int qt_inputs_make(qt_inputs_t *in, int nranks, size_t count,
                   qcoll_dtype_t dtype, uint32_t seed, qt_data_t kind) {
  memset(in, 0, sizeof *in);
  in->nranks = nranks;
  in->count = count;
  in->dtype = dtype;
  for (int r = 0; r < nranks; r++) {
    in->values[r] = malloc((count + 1) * sizeof(float));
    if (!in->values[r]) {
      qt_inputs_free(in);
      return -1;
    }
    for (size_t i = 0; i < count; i++)
      in->values[r][i] = qd_round(dtype, qg_value(r, i, seed));
  }
  if (kind == QT_DATA_SPECIAL) put_specials(in);
  return 0;
}

void qt_inputs_free(qt_inputs_t *in) {
  for (int r = 0; r < QT_MAX_RANKS; r++) {
    free(in->values[r]);
    in->values[r] = NULL;
  }
}

static void store_bits(qcoll_dtype_t dtype, void *dst, size_t i,
                       uint32_t bits) {
  if (dtype == QCOLL_F32)
    memcpy((char *)dst + 4 * i, &bits, 4);
  else
    ((uint16_t *)dst)[i] = (uint16_t)bits;
}

void qt_inputs_store(const qt_inputs_t *in, int rank, void *dst) {
  for (size_t i = 0; i < in->count; i++)
    store_bits(in->dtype, dst, i,
               qd_store_bits(in->dtype, in->values[rank][i]));
}

int qt_expected(const qt_inputs_t *in, qcoll_quant_t fmt, void *expected) {
  float *ref = malloc((in->count + 1) * sizeof(float));
  if (!ref) return -1;
  int (*model)(qcoll_quant_t, int, size_t, const float *const *, float *) =
      in->rotate ? ref_scheme_qcoll_rot : ref_scheme_qcoll;
  if (model(fmt, in->nranks, in->count, (const float *const *)in->values,
            ref)) {
    free(ref);
    return -1;
  }
  for (size_t i = 0; i < in->count; i++)
    store_bits(in->dtype, expected, i, qd_store_bits(in->dtype, ref[i]));
  free(ref);
  return 0;
}

/* One transfer's error bound (codec.h, "Error bounds"). */
static double transfer_bound(qcoll_quant_t fmt, double x, double amax) {
  const double slack = (fabs(x) + amax) * 0x1p-21 + 0x1p-149;
  if (fmt == QCOLL_QUANT_FP8)
    return fmax(fabs(x) * 0x1p-4, amax / 448.0 * 0x1p-10) + slack;
  return amax / (2.0 * qcoll__codec_range(fmt)) + amax * 0x1p-21 + 0x1p-149;
}

static double unit_roundoff(qcoll_dtype_t dtype, double *tiny) {
  switch (dtype) {
    case QCOLL_F16: *tiny = 0x1p-25; return 0x1p-11;
    case QCOLL_BF16: *tiny = 0x1p-134; return 0x1p-8;
    default: *tiny = 0; return 0;
  }
}

static double largest_finite(qcoll_dtype_t dtype) {
  switch (dtype) {
    case QCOLL_F16: return 65504.0;
    case QCOLL_BF16: return 0x1.fep127;
    default: return 0x1.fffffep127;
  }
}

size_t qt_check_bound(const qt_inputs_t *in, qcoll_quant_t fmt, const void *got,
                      const char *what, double *worst, double *rms_rel) {
  const int n = in->nranks;
  double tiny, u = unit_roundoff(in->dtype, &tiny);
  double err2 = 0, ref2 = 0, worst_ratio = 0;
  size_t beyond = 0;
  for (size_t g0 = 0; g0 < in->count; g0 += QCOLL_CODEC_GROUP) {
    const size_t len =
        in->count - g0 < QCOLL_CODEC_GROUP ? in->count - g0 : QCOLL_CODEC_GROUP;
    double amax[QT_MAX_RANKS] = {0}, exact[QCOLL_CODEC_GROUP],
           e1[QCOLL_CODEC_GROUP], m[QCOLL_CODEC_GROUP];
    double A = 0, amax_s = 0;
    int skip = 0;
    for (int r = 0; r < n; r++) {
      for (size_t k = 0; k < len; k++) {
        double x = in->values[r][g0 + k];
        if (!isfinite(x)) skip = 1;
        amax[r] = fmax(amax[r], fabs(x));
      }
      A += amax[r];
    }
    if (skip) continue;
    const double acc = (n - 1) * 0x1p-24 * A;
    for (size_t k = 0; k < len; k++) {
      exact[k] = 0;
      e1[k] = 0;
      for (int r = 0; r < n; r++) {
        exact[k] += in->values[r][g0 + k]; /* exact in double */
        e1[k] += transfer_bound(fmt, in->values[r][g0 + k], amax[r]);
      }
      m[k] = fabs(exact[k]) + e1[k] + acc;
      amax_s = fmax(amax_s, m[k]);
      if (fabs(exact[k]) + e1[k] + acc >= largest_finite(in->dtype)) skip = 1;
    }
    if (skip) continue;
    for (size_t k = 0; k < len; k++) {
      const double e2 = transfer_bound(fmt, m[k], amax_s);
      const double bound =
          (e1[k] + acc + e2 + (m[k] + e2) * u + tiny) * (1 + 1e-9);
      const double y = gt_load(got, g0 + k, in->dtype);
      const double err = fabs(y - exact[k]);
      err2 += err * err;
      ref2 += exact[k] * exact[k];
      if (in->rotate) continue; /* RMS only, see quant_check.h */
      if (bound > 0 && err / bound > worst_ratio) worst_ratio = err / bound;
      if (err <= bound) continue;
      if (beyond++ < 5)
        gt_fail(
            "%s: element %zu is %.9g, exact sum %.9g: error %.3g beyond the "
            "bound %.3g (quant_check.h)",
            what, g0 + k, y, exact[k], err, bound);
    }
  }
  if (beyond > 5)
    gt_fail("%s: %zu elements beyond the error bound in all", what, beyond);
  *worst = worst_ratio;
  *rms_rel = ref2 > 0 ? sqrt(err2 / ref2) : 0;
  return beyond;
}
