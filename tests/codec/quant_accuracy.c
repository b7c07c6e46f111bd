/*
 * Accuracy of quantised two-shot all-reduce, computed on the CPU with the
 * reference schemes of ref_scheme.c (the GPU codec is bit-identical to it,
 * tests/codec/test_codec_gpu checks that; the GPU all-reduce's output is
 * qcoll's scheme rounded to the element type, tests/gpu/gpu_quant checks
 * that).  For every data set x element type x world size x format it prints
 * one markdown table row:
 *
 *   qcoll       qcoll's scheme (f32 accumulation in rank order, the sum
 *               encoded once), its f32 result rounded to f16/bf16 as the
 *               all-reduce returns it
 *   comparison  f16/bf16 accumulation with re-quantisation
 *               (ref_scheme_compare)
 *   rotated     qcoll's scheme over rotated groups (ref_scheme_qcoll_rot,
 *               the +rot option), rounded like qcoll's
 *   unquantised f32 accumulation of the inputs, rounded once to f16/bf16:
 *               what qcoll returns without quantisation (the floor)
 *
 * against the exact (fp64) sum.  Errors are relative to `scale`, the RMS of
 * the exact sum over the elements where no rank holds an outlier (the
 * typical magnitude of a result; for Gaussian inputs, the RMS of all):
 *
 *   rms rel = sqrt(mean((y - exact)^2)) / scale
 *   max rel = max |y - exact| / scale
 *   z       paired z of the squared errors, qcoll vs comparison:
 *           mean(d) / (sd(d) / sqrt(N)), d = (qcoll err)^2 - (comp err)^2;
 *           negative: qcoll more accurate; |z| < 3: within sampling noise
 *   z rot   the same, rotated vs qcoll (negative: rotation helps)
 *
 * Data sets (every rank independent, values exact in the element type):
 *   gauss     N(0, 1)
 *   outliers  N(0, 1), each value with probability 1/1000 multiplied by 100
 *             (the rare large activations of LLMs)
 *
 *   quant_accuracy [--values N] [--seed S] [--short]
 *
 * Exit status 1 (both the full table, 2^20 values per rank by default, and
 * --short, the CTest, 2^16 values per rank) when
 *  - in some case qcoll's error is larger than the comparison's beyond
 *    sampling noise: z > 4.  Where both schemes are dominated by the codec's
 *    own rounding (f16, INT4, INT3, FP8) z is pure noise, and 60 cases at
 *    z > 3 would fail a correct build a few times in a hundred seeds
 *    (measured with the four formats before INT3: one z of +3.1 in 576
 *    cases over 12 seeds); z > 4 keeps that chance below 0.3% for the
 *    family;
 *  - for Gaussian data, INT8 with bf16 is not clearly better (z < -4): bf16
 *    rounding (2^-9 relative) is then comparable to INT8's half step, so
 *    f32 accumulation must show.
 * The rotation goal is reported, not enforced (a last line per format: the
 * largest rotated / comparison RMS ratio over the Gaussian and over the
 * outlier cases).
 *
 * Compiled with -ffp-contract=off.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/codec.h"
#include "quant_data.h"
#include "ref_scheme.h"

#define MAX_RANKS 8
/* |z| beyond which a difference is not sampling noise, for a family of 60
 * cases (see the top of this file). */
#define Z_BEYOND_NOISE 4.0

typedef enum data_set { DATA_GAUSS, DATA_OUTLIERS } data_set_t;

static const char *data_name(data_set_t d) {
  return d == DATA_GAUSS ? "gauss" : "outliers";
}

typedef struct errors {
  double rms, max; /* relative to the scale */
} errors_t;

/* Rank inputs of one case; outlier[i] marks elements where some rank holds
 * an outlier. */
static void make_inputs(data_set_t set, qcoll_dtype_t dtype, int nranks,
                        size_t n, uint64_t seed, float **in,
                        unsigned char *outlier) {
  memset(outlier, 0, n);
  for (int r = 0; r < nranks; r++) {
    qd_rng_t rng = {seed * 7919u + (uint64_t)r * 104729u + 1};
    for (size_t i = 0; i < n; i++) {
      double v = qd_gauss(&rng);
      if (set == DATA_OUTLIERS && qd_next(&rng) % 1000 == 0) {
        v *= 100.0;
        outlier[i] = 1;
      }
      in[r][i] = qd_round(dtype, (float)v);
    }
  }
}

static double result_scale(const double *exact, const unsigned char *outlier,
                           size_t n) {
  double s = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!outlier[i]) s += exact[i] * exact[i], k++;
  return k ? sqrt(s / (double)k) : 1.0;
}

static errors_t measure(const float *y, const double *exact, size_t n,
                        double scale) {
  double s = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)y[i] - exact[i]);
    s += e * e;
    if (e > m || e != e) m = e;
  }
  errors_t r = {sqrt(s / (double)n) / scale, m / scale};
  return r;
}

static double paired_z(const float *a, const float *b, const double *exact,
                       size_t n) {
  double sum = 0, sum2 = 0;
  for (size_t i = 0; i < n; i++) {
    double ea = a[i] - exact[i], eb = b[i] - exact[i], d = ea * ea - eb * eb;
    sum += d, sum2 += d * d;
  }
  double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
  if (var <= 0) return 0;
  return mean / sqrt(var / (double)n);
}

typedef struct options {
  size_t values;
  uint64_t seed;
  int short_run;
} options_t;

static int parse(int argc, char **argv, options_t *o) {
  o->values = (size_t)1 << 20;
  o->seed = 1;
  o->short_run = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--short")) {
      o->short_run = 1;
      o->values = (size_t)1 << 16;
    } else if (!strcmp(argv[i], "--values") && i + 1 < argc) {
      o->values = (size_t)strtoull(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      o->seed = (uint64_t)strtoull(argv[++i], NULL, 0);
    } else {
      fprintf(stderr, "usage: %s [--values N] [--seed S] [--short]\n", argv[0]);
      return -1;
    }
  }
  if (o->values < 32) {
    fprintf(stderr, "%s: --values must be at least 32\n", argv[0]);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options_t o;
  if (parse(argc, argv, &o)) return 2;
  const size_t n = o.values;
  static const qcoll_quant_t formats[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                          QCOLL_QUANT_INT6, QCOLL_QUANT_INT4,
                                          QCOLL_QUANT_INT3};
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16};
  static const int world[] = {2, 4, 8};

  float *in[MAX_RANKS], *yq = malloc(n * sizeof(float)),
                        *yc = malloc(n * sizeof(float));
  float *yu = malloc(n * sizeof(float)), *yr = malloc(n * sizeof(float));
  double *exact = malloc(n * sizeof(double));
  unsigned char *outlier = malloc(n);
  if (!yq || !yc || !yu || !yr || !exact || !outlier) return 2;
  /* Largest rotated / comparison RMS ratio per data set and format. */
  double rot_ratio[2][sizeof formats / sizeof formats[0]] = {{0}};
  for (int r = 0; r < MAX_RANKS; r++)
    if (!(in[r] = malloc(n * sizeof(float)))) return 2;

  printf(
      "%zu values per rank, seed %llu; errors relative to the RMS of the exact "
      "sum over "
      "elements without outliers\n\n",
      n, (unsigned long long)o.seed);
  printf(
      "| data | dtype | ranks | format | qcoll rms rel | comparison rms rel | "
      "ratio "
      "| qcoll max rel | comparison max rel | z | unquantised rms rel "
      "| rotated rms rel | rotated / comparison | rotated max rel | z rot |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int cases = 0, worse = 0, failures = 0;
  for (int set = DATA_GAUSS; set <= DATA_OUTLIERS; set++)
    for (size_t d = 0; d < 2; d++)
      for (size_t w = 0; w < 3; w++) {
        const qcoll_dtype_t dtype = dtypes[d];
        const int nranks = world[w];
        const ref_acc_t acc = dtype == QCOLL_F16 ? REF_ACC_F16 : REF_ACC_BF16;
        make_inputs((data_set_t)set, dtype, nranks, n,
                    o.seed + 100u * (uint64_t)set + 10u * d + w, in, outlier);
        ref_scheme_exact(nranks, n, (const float *const *)in, exact);
        const double scale = result_scale(exact, outlier, n);
        for (size_t i = 0; i < n; i++) { /* f32 in rank order, one rounding */
          float s = in[0][i];
          for (int r = 1; r < nranks; r++) s = s + in[r][i];
          yu[i] = qd_round(dtype, s);
        }
        errors_t eu = measure(yu, exact, n, scale);
        for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
          const qcoll_quant_t fmt = formats[f];
          if (ref_scheme_qcoll(fmt, nranks, n, (const float *const *)in, yq) ||
              ref_scheme_compare(fmt, acc, nranks, n, (const float *const *)in,
                                 yc) ||
              ref_scheme_qcoll_rot(fmt, nranks, n, (const float *const *)in,
                                   yr))
            return 2;
          for (size_t i = 0; i < n; i++) {
            yq[i] = qd_round(dtype, yq[i]);
            yr[i] = qd_round(dtype, yr[i]);
          }
          errors_t eq = measure(yq, exact, n, scale),
                   ec = measure(yc, exact, n, scale),
                   er = measure(yr, exact, n, scale);
          double z = paired_z(yq, yc, exact, n);
          double zr = paired_z(yr, yq, exact, n);
          if (er.rms / ec.rms > rot_ratio[set][f])
            rot_ratio[set][f] = er.rms / ec.rms;
          printf(
              "| %s | %s | %d | %s | %.3e | %.3e | %.3f | %.3e | %.3e | %+.1f "
              "| %.3e | %.3e | %.3f | %.3e | %+.1f |\n",
              data_name((data_set_t)set), qd_dtype_name(dtype), nranks,
              qd_quant_name(fmt), eq.rms, ec.rms, eq.rms / ec.rms, eq.max,
              ec.max, z, eu.rms, er.rms, er.rms / ec.rms, er.max, zr);
          cases++;
          if (!(z <= Z_BEYOND_NOISE)) {
            failures++;
            fprintf(stderr,
                    "FAIL: %s %s %d ranks %s: qcoll's error is larger than the "
                    "comparison's "
                    "beyond sampling noise (z = %+.1f > %.0f)\n",
                    data_name((data_set_t)set), qd_dtype_name(dtype), nranks,
                    qd_quant_name(fmt), z, Z_BEYOND_NOISE);
          }
          if (set == DATA_GAUSS && dtype == QCOLL_BF16 &&
              fmt == QCOLL_QUANT_INT8 && !(z < -Z_BEYOND_NOISE)) {
            failures++;
            fprintf(
                stderr,
                "FAIL: gauss bf16 %d ranks int8: f32 accumulation should be "
                "clearly more "
                "accurate than bf16 accumulation, z = %+.1f (want < -%.0f)\n",
                nranks, z, Z_BEYOND_NOISE);
          }
          worse += z > 3.0;
        }
      }
  printf(
      "\n%d cases; z > 3 (qcoll less accurate, at the edge of noise): %d; "
      "failed checks "
      "(z > %.0f, or gauss bf16 int8 not at z < -%.0f): %d\n",
      cases, worse, Z_BEYOND_NOISE, Z_BEYOND_NOISE, failures);
  printf("\nrotated / comparison RMS ratio, largest over dtypes and ranks:\n");
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
    printf("  %-4s gauss %.3f  outliers %.3f\n", qd_quant_name(formats[f]),
           rot_ratio[DATA_GAUSS][f], rot_ratio[DATA_OUTLIERS][f]);
  for (int r = 0; r < MAX_RANKS; r++) free(in[r]);
  free(yq), free(yc), free(yu), free(yr), free(exact), free(outlier);
  return failures ? 1 : 0;
}
