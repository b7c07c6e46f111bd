/*
 * The codec kernels of src/coll/cuda/codec_kernels.cu run on the CPU, so
 * that machines without a GPU (CI) check them against the CPU reference of
 * codec.h bit for bit.  The kernels and their launchers are the real code
 * (this file includes the .cu file; emu_shim.h gives the CUDA keywords,
 * float4 and the warp exchanges); every block is an OS thread of one warp,
 * every CUDA thread a coroutine of it (emu_runtime.inc), so the launchers'
 * grids run with fewer threads than on a GPU and the grid-stride loops go
 * round several times.
 *
 * Checked for every variant and format, encoded bytes and decoded floats
 * exactly equal to qcoll__codec_encode / qcoll__codec_decode, nothing
 * written outside the output:
 *  - group kinds mixed in every buffer: Gaussian values over the whole
 *    exponent range, rare outliers, one outlier among tiny values,
 *    arbitrary finite bit patterns, exact ties (INT and e4m3 midpoints),
 *    subnormal groups, subnormals in normal groups, amax at the 2^-64
 *    pre-scale threshold, the largest finite values, groups holding inf,
 *    -inf or NaN, all-zero groups with -0;
 *  - counts around the group (32), the lanes' four values and the segment
 *    variant's warp steps (512 values encoding, 1024 decoding), up to
 *    several steps per warp;
 *  - f32 pointers 16-byte aligned and not, encoded pointers 4-byte aligned
 *    and not (the segment variant's scalar path);
 *  - decoding arbitrary bytes: codes the encoder never writes, NaN, inf,
 *    negative and subnormal scales;
 *  - codec.h's four-code helpers against pack / unpack_one;
 *  - a format that is not quantised is refused and n = 0 launches nothing.
 *
 *   codec_emu        (no arguments; exit 0 when every check passes)
 */
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "quant_data.h" /* deterministic random numbers */
#include "launch.h" /* the IPC view of emu_runtime.inc's helpers */

/* The kernels, their launchers and qcoll__codec_cuda_encode/_decode. */
#include "codec_kernels.cu"

static const unsigned EMU_THREADS = 32;
#include "emu_runtime.inc"

/* ---- the launches ---------------------------------------------------- */

static int launches;

/* Every codec kernel is (const In *in, size_t n, Out *out). */
cudaError_t emu_launch(const void *fn, dim3 grid, void **args, int nargs,
                       cudaStream_t s) {
  if (nargs != 3) {
    fprintf(stderr, "emu_launch: %d args\n", nargs);
    abort();
  }
  auto f = (void (*)(const void *, size_t, void *))fn;
  const void *in = *(const void **)args[0];
  size_t n = *(size_t *)args[1];
  void *out = *(void **)args[2];
  unsigned g = grid.x;
  launches++;
  s->push([=] { run_grid([=] { f(in, n, out); }, g); });
  return cudaSuccess;
}

static emu_stream *stream;

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                        QCOLL_QUANT_INT6, QCOLL_QUANT_INT4,
                                        QCOLL_QUANT_INT3};
static const char *fmt_name(qcoll_quant_t f) {
  switch (f) {
    case QCOLL_QUANT_FP8: return "FP8";
    case QCOLL_QUANT_INT8: return "INT8";
    case QCOLL_QUANT_INT6: return "INT6";
    case QCOLL_QUANT_INT3: return "INT3";
    default: return "INT4";
  }
}

/* ---- data ------------------------------------------------------------ */

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* A value halfway between two neighbouring codes of fmt when amax is R
 * (inv = 1, so t = x): INT k + 1/2, e4m3 the midpoint of two codes. */
static float tie(qcoll_quant_t fmt, qd_rng_t *s) {
  int sign = qd_next(s) & 1 ? -1 : 1;
  if (fmt == QCOLL_QUANT_FP8) {
    uint32_t c = (uint32_t)(qd_next(s) % 0x7e); /* 0 .. 0x7d: c + 1 <= 448 */
    float a = qcoll__codec_e4m3_to_f32(c), b = qcoll__codec_e4m3_to_f32(c + 1);
    return sign * ((a + b) * 0.5f); /* exact: neighbours differ in 4 bits */
  }
  uint32_t r = qcoll__codec_range(fmt);
  return sign * ((float)(qd_next(s) % r) + 0.5f);
}

/* One group of 32 values of the given kind. */
static void fill_group(float *x, int kind, qcoll_quant_t fmt, qd_rng_t *s) {
  const int G = QCOLL_CODEC_GROUP;
  int e = (int)(qd_next(s) % 271) - 150, at = (int)(qd_next(s) % G);
  for (int i = 0; i < G; i++) {
    uint32_t u;
    switch (kind) {
      case 0: /* Gaussian at a random exponent */
        x[i] = (float)ldexp(qd_gauss(s), e);
        break;
      case 1: /* rare large outliers */
        x[i] = (float)(qd_gauss(s) * (qd_next(s) % 64 ? 1.0 : 1e6));
        break;
      case 2: /* one outlier: the others round to the zero code */
        x[i] = i == at ? 3.0e4f : (float)(qd_gauss(s) * 1e-3);
        break;
      case 3: /* any finite bit pattern */
        do u = (uint32_t)qd_next(s);
        while ((u & 0x7f800000u) == 0x7f800000u);
        x[i] = from_bits(u);
        break;
      case 4: /* exact ties, amax = R */
        x[i] = i == at ? (float)qcoll__codec_range(fmt) : tie(fmt, s);
        break;
      case 5: /* a subnormal group */
        x[i] = from_bits((uint32_t)(qd_next(s) % 0x00800000u) |
                         (uint32_t)(qd_next(s) & 1) << 31);
        break;
      case 6: /* subnormals in a normal group */
        x[i] = i % 3 ? from_bits((uint32_t)(qd_next(s) % 0x00800000u))
                     : (float)qd_gauss(s);
        break;
      case 7: /* amax just below, at or just above the pre-scale threshold */
        u = QCOLL_CODEC_TINY_BITS - 1 + (uint32_t)(qd_next(s) % 3);
        x[i] = i == at ? from_bits(u | (uint32_t)(qd_next(s) & 1) << 31)
                       : (float)ldexp(qd_gauss(s), -70);
        break;
      case 8: /* the largest finite values */
        x[i] = i == at ? (qd_next(s) & 1 ? FLT_MAX : -FLT_MAX)
               : i % 4 == 0
                   ? from_bits(0x7f7fffffu - (uint32_t)(qd_next(s) % 64))
                   : (float)(qd_gauss(s) * 1e37);
        break;
      case 9: /* inf, -inf or a NaN (any payload, either sign) */
        if (i == at) {
          switch (qd_next(s) % 4) {
            case 0: x[i] = INFINITY; break;
            case 1: x[i] = -INFINITY; break;
            case 2: x[i] = NAN; break;
            default:
              x[i] = from_bits(0xff800000u |
                               (1u + (uint32_t)(qd_next(s) % 0x7fffffu)));
          }
        } else {
          x[i] = (float)qd_gauss(s);
        }
        break;
      default: /* zeros, some negative */
        x[i] = qd_next(s) & 1 ? -0.0f : 0.0f;
        break;
    }
  }
}

static const int KINDS = 11;

/* The kinds whose groups are plain (codec.h: zero or amax >= 2^-64, and
 * finite), so that whole warp steps take the kernels' plain paths. */
static const int PLAIN_KINDS[] = {1, 2, 3, 4, 6, 8, 10};

static std::vector<float> make_values(size_t n, qcoll_quant_t fmt,
                                      uint64_t seed, bool plain = false) {
  std::vector<float> x(qcoll__codec_groups(n) * QCOLL_CODEC_GROUP);
  qd_rng_t s = {seed};
  for (size_t g = 0; g * QCOLL_CODEC_GROUP < n; g++) {
    const uint64_t r = qd_next(&s);
    const int kind = plain ? PLAIN_KINDS[r % 7] : (int)(r % KINDS);
    fill_group(&x[g * QCOLL_CODEC_GROUP], kind, fmt, &s);
  }
  x.resize(n);
  return x;
}

/* ---- checks ---------------------------------------------------------- */

static const size_t GUARD = 64; /* bytes poisoned before and after outputs */

/* A buffer of `bytes` at `offset` bytes past a 64-byte aligned base, with
 * GUARD poisoned bytes on either side. */
struct Placed {
  std::vector<unsigned char> mem;
  unsigned char *p;
  size_t bytes;
  Placed(size_t bytes_, size_t offset) : bytes(bytes_) {
    mem.assign(bytes + 2 * GUARD + 128, 0);
    uintptr_t base = (uintptr_t)mem.data() + GUARD;
    base = (base + 63) & ~(uintptr_t)63;
    p = (unsigned char *)base + offset;
  }
  void poison(unsigned char v) { memset(p - GUARD, v, bytes + 2 * GUARD); }
  bool guards_intact(unsigned char v) const {
    for (size_t i = 0; i < GUARD; i++)
      if (p[-1 - (ptrdiff_t)i] != v || p[bytes + i] != v) return false;
    return true;
  }
};

static int checks;

/* Encode x (at in_off bytes) into out_off bytes past an aligned base. */
static void check_encode(qcoll_quant_t fmt, int variant,
                         const std::vector<float> &x, size_t in_off,
                         size_t out_off, const char *what) {
  const size_t n = x.size(), bytes = qcoll__codec_encoded_bytes(fmt, n);
  std::vector<uint8_t> want(bytes);
  qcoll__codec_encode(fmt, x.data(), n, want.data());
  Placed in(n * 4, in_off), out(bytes, out_off);
  in.poison(0x7f); /* reading past n would see 3.4e38, not the padding 0 */
  memcpy(in.p, x.data(), n * 4);
  out.poison(0xa5);
  cudaError_t err = (cudaError_t)qcoll__codec_cuda_encode(
      fmt, (qcoll__codec_cuda_variant_t)variant, (const float *)in.p, n, out.p,
      stream);
  stream->sync();
  checks++;
  const char *vname =
      qcoll__codec_cuda_variant_name((qcoll__codec_cuda_variant_t)variant);
  if (err != cudaSuccess) {
    FAIL("encode %s %s n=%zu: launch error %d", fmt_name(fmt), vname, n, err);
    return;
  }
  if (!out.guards_intact(0xa5))
    FAIL("encode %s %s %s n=%zu in+%zu out+%zu: wrote outside the output",
         fmt_name(fmt), vname, what, n, in_off, out_off);
  for (size_t i = 0; i < bytes; i++)
    if (out.p[i] != want[i]) {
      FAIL(
          "encode %s %s %s n=%zu in+%zu out+%zu: byte %zu (group %zu) is "
          "0x%02x, the reference 0x%02x",
          fmt_name(fmt), vname, what, n, in_off, out_off, i,
          i / qcoll__codec_group_bytes(fmt), out.p[i], want[i]);
      return;
    }
}

/* Decode enc (at in_off bytes) into n floats at out_off bytes. */
static void check_decode(qcoll_quant_t fmt, int variant,
                         const std::vector<uint8_t> &enc, size_t n,
                         size_t in_off, size_t out_off, const char *what) {
  std::vector<float> want(n);
  qcoll__codec_decode(fmt, enc.data(), n, want.data());
  Placed in(enc.size(), in_off), out(n * 4, out_off);
  in.poison(0x5a);
  memcpy(in.p, enc.data(), enc.size());
  out.poison(0xff);
  cudaError_t err = (cudaError_t)qcoll__codec_cuda_decode(
      fmt, (qcoll__codec_cuda_variant_t)variant, in.p, n, (float *)out.p,
      stream);
  stream->sync();
  checks++;
  const char *vname =
      qcoll__codec_cuda_variant_name((qcoll__codec_cuda_variant_t)variant);
  if (err != cudaSuccess) {
    FAIL("decode %s %s n=%zu: launch error %d", fmt_name(fmt), vname, n, err);
    return;
  }
  if (!out.guards_intact(0xff))
    FAIL("decode %s %s %s n=%zu in+%zu out+%zu: wrote outside the output",
         fmt_name(fmt), vname, what, n, in_off, out_off);
  for (size_t i = 0; i < n; i++) {
    uint32_t got;
    memcpy(&got, out.p + 4 * i, 4);
    if (got != to_bits(want[i])) {
      FAIL(
          "decode %s %s %s n=%zu in+%zu out+%zu: value %zu is 0x%08x, the "
          "reference 0x%08x",
          fmt_name(fmt), vname, what, n, in_off, out_off, i, got,
          to_bits(want[i]));
      return;
    }
  }
}

/* Offsets in bytes: {f32 buffer, encoded buffer}.  The first is aligned
 * for every vector access; the others each break one alignment. */
static const size_t PLACES[][2] = {{0, 0}, {4, 0}, {0, 1}, {12, 2}, {8, 3}};

/* Buffers of at most max_values values (codec_emu [MAX_VALUES]). */
static void check_buffers(size_t max_values) {
  static const size_t sizes[] = {
      1,   3,   4,   5,   7,   8,   31,   32,   33,   63,   64,   65,    100,
      127, 128, 129, 511, 512, 513, 1023, 1024, 1025, 1553, 4099, 16384, 40001};
  uint64_t seed = 1;
  for (qcoll_quant_t fmt : FORMATS)
    for (size_t n : sizes) {
      if (n > max_values) continue;
      std::vector<float> x = make_values(n, fmt, seed++);
      std::vector<float> xp = make_values(n, fmt, seed++, true);
      std::vector<uint8_t> enc(qcoll__codec_encoded_bytes(fmt, n));
      std::vector<uint8_t> encp(enc.size());
      qcoll__codec_encode(fmt, x.data(), n, enc.data());
      qcoll__codec_encode(fmt, xp.data(), n, encp.data());
      /* every whole group plain: the kernels' plain paths on whole warp
       * steps (a partial last group of one random pattern may be tiny) */
      for (uint32_t g = 0; g < (uint32_t)(n / QCOLL_CODEC_GROUP); g++)
        if (!qcoll__codec_plain(qcoll__codec_load_scale(
                &encp[g * qcoll__codec_group_bytes(fmt)]) & 0x7fffffffu))
          FAIL("%s n=%zu: group %u of the plain data is not plain",
               fmt_name(fmt), n, g);
      /* Arbitrary bytes: every scale and code the decoder may meet. */
      std::vector<uint8_t> junk(enc.size());
      qd_rng_t s = {seed * 7919};
      for (auto &b : junk) b = (uint8_t)qd_next(&s);
      for (int v = 0; v < QCOLL_CODEC_CUDA_VARIANTS; v++)
        for (const auto &pl : PLACES) {
          /* the largest buffers in the aligned and one unaligned place */
          if (n > 5000 && pl[0] + pl[1] != 0 && pl[0] != 12) continue;
          check_encode(fmt, v, x, pl[0], pl[1], "values");
          check_encode(fmt, v, xp, pl[0], pl[1], "plain values");
          check_decode(fmt, v, encp, n, pl[1], pl[0], "plain encoded");
          check_decode(fmt, v, enc, n, pl[1], pl[0], "encoded");
          check_decode(fmt, v, junk, n, pl[1], pl[0], "random bytes");
        }
    }
}

/* pack_quad / quad_code agree with pack / unpack_one on every format. */
static void check_quads() {
  qd_rng_t s = {99};
  for (qcoll_quant_t fmt : FORMATS)
    for (int rep = 0; rep < 200; rep++) {
      uint32_t codes[QCOLL_CODEC_GROUP];
      uint8_t packed[QCOLL_CODEC_GROUP];
      const uint32_t bits = qcoll__codec_code_bits(fmt);
      const uint32_t qbits = qcoll__codec_quad_bits(fmt);
      for (auto &c : codes) c = (uint32_t)qd_next(&s) & ((1u << bits) - 1u);
      qcoll__codec_pack(fmt, codes, packed);
      checks++;
      for (int k = 0; k < QCOLL_CODEC_GROUP / 4; k++) {
        const uint32_t quad = qcoll__codec_pack_quad(fmt, codes + 4 * k);
        /* the share lane k writes: its quad, or (INT3, even k) the pair */
        const uint32_t share =
            fmt == QCOLL_QUANT_INT3 && !(k & 1)
                ? quad | qcoll__codec_pack_quad(fmt, codes + 4 * k + 4) << 12
                : quad;
        const uint32_t sb = qcoll__codec_share_bytes(fmt, k),
                       so = qcoll__codec_share_offset(fmt, k);
        for (uint32_t b = 0; b < sb; b++)
          if ((uint8_t)(share >> (8 * b)) != packed[so + b])
            FAIL("%s: share of lane %d byte %u differs from pack",
                 fmt_name(fmt), k, b);
        if (qbits < 32 && quad >> qbits != 0)
          FAIL("%s: pack_quad %d has bits past its %u", fmt_name(fmt), k,
               qbits);
        /* what lane k reads back: read_bytes at share_offset, shifted */
        uint32_t read = 0;
        for (uint32_t b = 0; b < qcoll__codec_read_bytes(fmt); b++)
          read |= (uint32_t)packed[so + b] << (8 * b);
        read >>= qcoll__codec_share_shift(fmt, k);
        for (int j = 0; j < 4; j++)
          if (qcoll__codec_quad_code(fmt, read, j) !=
              qcoll__codec_unpack_one(fmt, packed, 4 * k + j))
            FAIL("%s: quad_code %d of quad %d differs from unpack_one",
                 fmt_name(fmt), j, k);
      }
    }
}

static void check_refusals() {
  float x[32] = {0};
  uint8_t enc[64] = {0};
  int before = launches;
  for (int v = 0; v < QCOLL_CODEC_CUDA_VARIANTS; v++) {
    auto var = (qcoll__codec_cuda_variant_t)v;
    checks++;
    if (qcoll__codec_cuda_encode(QCOLL_QUANT_NONE, var, x, 32, enc, stream) !=
            cudaErrorInvalidValue ||
        qcoll__codec_cuda_decode(QCOLL_QUANT_DEFAULT, var, enc, 32, x,
                                 stream) != cudaErrorInvalidValue)
      FAIL("%s: a format that is not quantised was not refused",
           qcoll__codec_cuda_variant_name(var));
    for (qcoll_quant_t fmt : FORMATS)
      if (qcoll__codec_cuda_encode(fmt, var, nullptr, 0, nullptr, stream) !=
              cudaSuccess ||
          qcoll__codec_cuda_decode(fmt, var, nullptr, 0, nullptr, stream) !=
              cudaSuccess)
        FAIL("%s %s: n = 0 failed", fmt_name(fmt),
             qcoll__codec_cuda_variant_name(var));
  }
  stream->sync();
  if (launches != before) FAIL("refused or empty calls launched kernels");
}

int main(int argc, char **argv) {
  const size_t max_values =
      argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)-1;
  stream = new emu_stream;
  check_quads();
  check_refusals();
  check_buffers(max_values);
  delete stream;
  if (failures) {
    fprintf(stderr, "codec_emu: %d failures in %d checks\n", failures, checks);
    return 1;
  }
  printf(
      "codec_emu: %d checks passed (%d launches: %d variants x %zu formats, "
      "encode and decode)\n",
      checks, launches, QCOLL_CODEC_CUDA_VARIANTS,
      sizeof FORMATS / sizeof FORMATS[0]);
  return 0;
}
