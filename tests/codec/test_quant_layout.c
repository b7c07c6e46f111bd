/*
 * The quantised two-shot all-reduce kernel (src/coll/cuda/allreduce_quant.cu)
 * modelled on the CPU: n simulated ranks with their data regions, the
 * kernel's three phases for every block of a grid, round after round of a
 * launch that streams a message larger than the regions, all through the
 * layout functions the kernel itself calls (quant_layout.h: the plan, the
 * slot areas) and codec.h's group functions (the GPU's warp path gives the
 * same bytes, test_codec_gpu checks that).  Asserted:
 *
 *  - every encoded group lies inside its slot, and no byte of a region is
 *    written twice in one round (segments, pieces and slots do not overlap);
 *  - every group read in phase 2 or 3 was written earlier in the same
 *    round (never stale bytes of an earlier launch or round), also when the
 *    rounds run as the kernel's pipeline (quant_layout.h "ring" 2: round
 *    i's phase 1 before round i - 1's phase 2 and round i - 2's phase 3),
 *    where a round that wrote into bytes the round before still needs
 *    would be caught reading the later round's data;
 *  - no byte is written by two rounds that are live at once (ring 2: two
 *    consecutive rounds);
 *  - in a launch of several rounds, every byte of a slot is written and
 *    read by blocks of one index only (blocks wait only on their peers'
 *    blocks of the same index, so another block could overwrite it while
 *    it is still being read);
 *  - every output element is written exactly once;
 *  - every rank's output equals ref_scheme_qcoll() (tests/codec/ref_scheme.c)
 *    rounded to the element type, bit for bit (NaN as the kernel stores it),
 *    for every format x f16/bf16/f32 x world sizes 1..8 x grids x counts from
 *    1 to several chunks, with inf, NaN, overflowing and all-zero groups.
 *
 * What this cannot show: the device code itself (warp shuffles, barriers,
 * memory ordering); the GPU tests in tests/gpu do.
 *
 * Compiled with -ffp-contract=off (sums rounded as written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/codec.h"
#include "coll/cuda/quant_layout.h"
#include "quant_data.h"
#include "ref_scheme.h"

#define G QCOLL_CODEC_GROUP
#define MAX_RANKS 8

static const qcoll_quant_t FORMATS[] = {QCOLL_QUANT_INT8, QCOLL_QUANT_INT6,
                                        QCOLL_QUANT_INT4, QCOLL_QUANT_INT3,
                                        QCOLL_QUANT_FP8};
#define NFORMATS (sizeof FORMATS / sizeof FORMATS[0])
static const qcoll_dtype_t DTYPES[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};

/* ---- the simulated ranks ------------------------------------------------ */

enum { UNWRITTEN = 0, BY_PHASE1 = 1, BY_PHASE2 = 2 };

typedef struct model {
  int n;
  size_t region_bytes;
  uint8_t *data[MAX_RANKS]; /* each rank's two data regions */
  uint8_t *written[MAX_RANKS]; /* per byte: which phase wrote it last */
  int32_t *round[MAX_RANKS];   /* per byte: in which round, -1 none */
  int16_t *block[MAX_RANKS]; /* per byte: the block index that used it in
                                this launch, -1 none yet */
} model_t;

static void model_init(model_t *m, int n, size_t region_bytes) {
  memset(m, 0, sizeof *m);
  m->n = n;
  m->region_bytes = region_bytes;
  for (int r = 0; r < n; r++) {
    m->data[r] = malloc(2 * region_bytes);
    m->written[r] = malloc(2 * region_bytes);
    m->block[r] = malloc(2 * region_bytes * sizeof(int16_t));
    m->round[r] = malloc(2 * region_bytes * sizeof(int32_t));
    assert_non_null(m->round[r]);
    assert_non_null(m->data[r]);
    assert_non_null(m->written[r]);
    assert_non_null(m->block[r]);
    memset(m->data[r], 0xa5, 2 * region_bytes); /* garbage, never zeros */
  }
}

static void model_free(model_t *m) {
  for (int r = 0; r < m->n; r++)
    free(m->data[r]), free(m->written[r]), free(m->block[r]),
        free(m->round[r]);
}

/* Bytes [offset, offset + gb) of rank's regions used by block `b`: the
 * only block index to use them in this launch. */
static void claim(model_t *m, int rank, size_t offset, size_t gb, int b) {
  for (size_t k = 0; k < gb; k++) {
    int16_t *owner = &m->block[rank][offset + k];
    if (*owner >= 0 && *owner != b) {
      print_error("rank %d byte %zu used by blocks %d and %d in one launch\n",
                  rank, offset + k, *owner, b);
      fail();
    }
    *owner = (int16_t)b;
  }
}

/* Write one group at `offset` of rank's data regions by block b in round
 * `round` of a launch whose rounds run on a ring of `ring` areas: no byte
 * written twice in one round, nor by a round still live (the ring - 1
 * rounds before it). */
static void put_group(model_t *m, int rank, size_t offset, const uint8_t *bytes,
                      size_t gb, int phase, int b, int round, int ring) {
  assert_true(offset + gb <= 2 * m->region_bytes);
  claim(m, rank, offset, gb, b);
  for (size_t k = 0; k < gb; k++) {
    const int32_t last = m->round[rank][offset + k];
    if (last >= 0 && round - last < ring) {
      print_error("rank %d byte %zu written in round %d (phase %d) and in "
                  "round %d (phase %d), both live\n",
                  rank, offset + k, last, m->written[rank][offset + k], round,
                  phase);
      fail();
    }
    m->written[rank][offset + k] = (uint8_t)phase;
    m->round[rank][offset + k] = round;
  }
  memcpy(m->data[rank] + offset, bytes, gb);
}

/* The group at `offset` of rank's regions, which `phase` of `round` must
 * have written, read by block b. */
static const uint8_t *get_group(model_t *m, int rank, size_t offset, size_t gb,
                                int phase, int b, int round) {
  assert_true(offset + gb <= 2 * m->region_bytes);
  claim(m, rank, offset, gb, b);
  for (size_t k = 0; k < gb; k++)
    if (m->written[rank][offset + k] != phase ||
        m->round[rank][offset + k] != round) {
      print_error("rank %d byte %zu read in phase %d of round %d holds %s\n",
                  rank, offset + k, phase + 1, round,
                  m->written[rank][offset + k] == UNWRITTEN ? "stale data"
                  : m->round[rank][offset + k] != round
                      ? "another round's data"
                      : "the wrong phase's data");
      fail();
    }
  return m->data[rank] + offset;
}

/* ---- one launch, as the kernel does it ----------------------------------- */

typedef struct launch {
  qcoll_quant_t fmt;
  qcoll_dtype_t dtype;
  int grid;
  size_t area;                /* the plan's: 0 in a launch of one round */
  int ring;                   /* the plan's */
  int round;                  /* this round's index in the launch */
  size_t count;               /* this round's */
  const float *in[MAX_RANKS]; /* each rank's chunk, f32 values exact in dtype */
  uint32_t *out[MAX_RANKS];   /* each rank's chunk of output bits */
  uint8_t *out_hits[MAX_RANKS];
} launch_t;

/* Byte offset in its slot of group g of block b's piece [pb, ..) of the
 * segment starting at sb, checked to lie inside the slot. */
static size_t slot_at(const model_t *m, const launch_t *l, size_t g, size_t sb,
                      size_t pb, int b, size_t gb) {
  size_t at = qcoll__qlayout_slot_group(
                  g, sb, pb,
                  qcoll__qlayout_area_index((unsigned)b, l->ring,
                                            (size_t)l->round),
                  l->area) *
              gb;
  if (!l->area) assert_true(at == qcoll__qlayout_group_offset(g, sb, gb));
  assert_true(at + gb <= qcoll__qlayout_slot_bytes(m->region_bytes, m->n));
  return at;
}

static void phase1(model_t *m, const launch_t *l) {
  size_t gb = qcoll__codec_group_bytes(l->fmt),
         groups = qcoll__codec_groups(l->count);
  uint8_t wire[QCOLL_CODEC_MAX_GROUP_BYTES];
  for (int p = 0; p < m->n; p++)
    for (int b = 0; b < l->grid; b++)
      for (int s = 0; s < m->n; s++) {
        size_t sb, se, pb, pe;
        qcoll__qlayout_segment(groups, m->n, s, &sb, &se);
        qcoll__qlayout_piece(sb, se, (unsigned)b, (unsigned)l->grid, &pb, &pe);
        for (size_t g = pb; g < pe; g++) {
          float x[G];
          for (int lane = 0; lane < G; lane++) {
            size_t i = g * G + (size_t)lane;
            x[lane] = i < l->count ? l->in[p][i] : 0.0f;
          }
          qcoll__codec_encode_group(l->fmt, x, wire);
          put_group(m, s,
                    qcoll__qlayout_slot_offset(m->region_bytes, m->n, 0, p) +
                        slot_at(m, l, g, sb, pb, b, gb),
                    wire, gb, BY_PHASE1, b, l->round, l->ring);
        }
      }
}

static void phase2(model_t *m, const launch_t *l) {
  size_t gb = qcoll__codec_group_bytes(l->fmt),
         groups = qcoll__codec_groups(l->count);
  uint8_t wire[QCOLL_CODEC_MAX_GROUP_BYTES];
  for (int s = 0; s < m->n; s++)
    for (int b = 0; b < l->grid; b++) {
      size_t sb, se, pb, pe;
      qcoll__qlayout_segment(groups, m->n, s, &sb, &se);
      qcoll__qlayout_piece(sb, se, (unsigned)b, (unsigned)l->grid, &pb, &pe);
      for (size_t g = pb; g < pe; g++) {
        size_t at = slot_at(m, l, g, sb, pb, b, gb);
        float acc[G], dec[G];
        for (int p = 0; p < m->n; p++) { /* rank order */
          size_t off =
              qcoll__qlayout_slot_offset(m->region_bytes, m->n, 0, p) + at;
          qcoll__codec_decode_group(
              l->fmt, get_group(m, s, off, gb, BY_PHASE1, b, l->round), dec);
          for (int lane = 0; lane < G; lane++)
            acc[lane] = p == 0 ? dec[lane] : acc[lane] + dec[lane];
        }
        for (int lane = 0; lane < G; lane++)
          if (g * G + (size_t)lane >= l->count) acc[lane] = 0.0f;
        qcoll__codec_encode_group(l->fmt, acc, wire);
        for (int q = 0; q < m->n; q++)
          put_group(
              m, q,
              qcoll__qlayout_slot_offset(m->region_bytes, m->n, 1, s) + at,
              wire, gb, BY_PHASE2, b, l->round, l->ring);
      }
    }
}

static void phase3(model_t *m, const launch_t *l) {
  size_t gb = qcoll__codec_group_bytes(l->fmt),
         groups = qcoll__codec_groups(l->count);
  for (int q = 0; q < m->n; q++)
    for (int b = 0; b < l->grid; b++)
      for (int owner = 0; owner < m->n; owner++) {
        size_t sb, se, pb, pe;
        qcoll__qlayout_segment(groups, m->n, owner, &sb, &se);
        qcoll__qlayout_piece(sb, se, (unsigned)b, (unsigned)l->grid, &pb, &pe);
        for (size_t g = pb; g < pe; g++) {
          float y[G];
          size_t off =
              qcoll__qlayout_slot_offset(m->region_bytes, m->n, 1, owner) +
              slot_at(m, l, g, sb, pb, b, gb);
          qcoll__codec_decode_group(l->fmt,
                                    get_group(m, q, off, gb, BY_PHASE2, b,
                                              l->round),
                                    y);
          for (int lane = 0; lane < G; lane++) {
            size_t i = g * G + (size_t)lane;
            if (i >= l->count) continue;
            l->out[q][i] = qd_store_bits(l->dtype, y[lane]);
            l->out_hits[q][i]++;
          }
        }
      }
}

/* A new launch: nothing written, no byte used by any block yet. */
static void model_launch(model_t *m) {
  for (int r = 0; r < m->n; r++) {
    memset(m->written[r], UNWRITTEN, 2 * m->region_bytes);
    for (size_t k = 0; k < 2 * m->region_bytes; k++)
      m->block[r][k] = -1, m->round[r][k] = -1;
  }
}

/* The rounds of one launch in the kernel's order: ring 1, phases 1, 2, 3
 * of each round in turn; ring 2 (the pipeline), step i runs phase 3 of
 * round i - 2, phase 1 of round i and phase 2 of round i - 1. */
static void model_rounds(model_t *m, const launch_t *l, int rounds) {
  const int lag = l->ring > 1 ? 1 : 0;
  for (int i = 0; i < rounds + 2 * lag; i++) {
    if (lag && i >= 2) phase3(m, &l[i - 2]);
    if (i < rounds) phase1(m, &l[i]);
    if (i >= lag && i - lag < rounds) {
      phase2(m, &l[i - lag]);
      if (!lag) phase3(m, &l[i]);
    }
  }
}

/* ---- one message, one launch streaming its rounds ------------------------ */

typedef enum data_kind { DATA_GAUSS, DATA_SPECIAL } data_kind_t;

/* Rank r's inputs: Gaussian with a different scale per group, some groups
 * all zero, and with DATA_SPECIAL an inf, a NaN and values near the f16
 * maximum (their sum overflows f16) at a few places. */
static void make_inputs(float *x, size_t count, int rank, int nranks,
                        qcoll_dtype_t dtype, data_kind_t kind, uint64_t seed) {
  qd_rng_t rng = {seed * 1000003u + (uint64_t)rank};
  for (size_t i = 0; i < count; i++) {
    size_t g = i / G;
    double scale = ldexp(1.0, (int)(g % 9) - 4);
    x[i] =
        g % 11 == 5 ? 0.0f : qd_round(dtype, (float)(qd_gauss(&rng) * scale));
  }
  if (kind != DATA_SPECIAL) return;
  if (count > 3 && rank == 0) x[3] = INFINITY;
  if (count > 40 && rank == nranks - 1) x[40] = NAN;
  for (size_t i = 70; i < count && i < 70 + G; i++)
    x[i] = (i & 1) ? 60000.0f : -60000.0f;
}

typedef struct message_case {
  qcoll_quant_t fmt;
  qcoll_dtype_t dtype;
  int n;
  size_t count;
  size_t region_bytes;
  int grid_limit; /* the grid is qcoll__qlayout_grid(groups, grid_limit) */
  data_kind_t kind;
  size_t round_groups; /* the plan's limit per segment and round, 0: none */
  int ring;            /* the ring a streaming launch asks for, 0: 1 */
} message_case_t;

static int run_message(const message_case_t *c, uint64_t seed) {
  float *in[MAX_RANKS], *ref = malloc((c->count + 1) * sizeof(float));
  uint32_t *out[MAX_RANKS];
  uint8_t *hits[MAX_RANKS];
  assert_non_null(ref);
  for (int r = 0; r < c->n; r++) {
    in[r] = malloc((c->count + 1) * sizeof(float));
    out[r] = calloc(c->count + 1, sizeof(uint32_t));
    hits[r] = calloc(c->count + 1, 1);
    assert_non_null(in[r]), assert_non_null(out[r]), assert_non_null(hits[r]);
    make_inputs(in[r], c->count, r, c->n, c->dtype, c->kind, seed);
  }
  assert_int_equal(
      ref_scheme_qcoll(c->fmt, c->n, c->count, (const float *const *)in, ref),
      0);

  model_t m;
  model_init(&m, c->n, c->region_bytes);
  qcoll__qlayout_plan_t plan = {0, 0, 0, 0};
  const int ring = c->ring ? c->ring : 1;
  assert_true(qcoll__qlayout_plan(c->count, c->region_bytes, c->n,
                                  qcoll__codec_group_bytes(c->fmt),
                                  c->round_groups, ring, c->grid_limit,
                                  &plan));
  assert_int_equal(plan.ring, plan.area ? ring : 1);
  assert_true(plan.chunk > 0 && plan.chunk % G == 0);
  assert_true(plan.grid >= 1 && plan.grid <= c->grid_limit);
  /* A launch of one round keeps the plain layout; one that streams has
   * areas, and its chunk fills whole areas. */
  assert_true((plan.area == 0) == (c->count <= plan.chunk));
  if (plan.area)
    assert_true(plan.chunk == (size_t)c->n * plan.area * (size_t)plan.grid * G);
  const int rounds = (int)((c->count + plan.chunk - 1) / plan.chunk);
  launch_t *l = calloc((size_t)rounds, sizeof *l);
  assert_non_null(l);
  for (int k = 0; k < rounds; k++) {
    const size_t off = (size_t)k * plan.chunk;
    l[k].fmt = c->fmt;
    l[k].dtype = c->dtype;
    l[k].count = c->count - off < plan.chunk ? c->count - off : plan.chunk;
    l[k].grid = plan.grid;
    l[k].area = plan.area;
    l[k].ring = plan.ring;
    l[k].round = k;
    for (int r = 0; r < c->n; r++) {
      l[k].in[r] = in[r] + off;
      l[k].out[r] = out[r] + off;
      l[k].out_hits[r] = hits[r] + off;
    }
  }
  model_launch(&m);
  model_rounds(&m, l, rounds);
  free(l);

  size_t bad = 0;
  for (int r = 0; r < c->n; r++)
    for (size_t i = 0; i < c->count; i++) {
      uint32_t want = qd_store_bits(c->dtype, ref[i]);
      if (hits[r][i] == 1 && out[r][i] == want) continue;
      if (bad++ < 5)
        print_error(
            "%s %s n=%d count=%zu region=%zu grid<=%d: rank %d element %zu: %s "
            "0x%x, "
            "reference 0x%x\n",
            qd_quant_name(c->fmt), qd_dtype_name(c->dtype), c->n, c->count,
            c->region_bytes, c->grid_limit, r, i,
            hits[r][i] == 1 ? "got" : "written 0 or 2+ times, got", out[r][i],
            want);
    }
  assert_int_equal(bad, 0);
  model_free(&m);
  for (int r = 0; r < c->n; r++) free(in[r]), free(out[r]), free(hits[r]);
  free(ref);
  return rounds;
}

/* ---- the tests ------------------------------------------------------------
 */

static void test_layout_functions(void **state) {
  (void)state;
  /* Slots: n per region, 16-byte aligned, inside the region. */
  for (int n = 1; n <= MAX_RANKS; n++) {
    size_t rb = 4096 * 3;
    size_t slot = qcoll__qlayout_slot_bytes(rb, n);
    assert_true(slot % 16 == 0 && slot * (size_t)n <= rb && slot > 0);
    assert_true(qcoll__qlayout_slot_offset(rb, n, 1, n - 1) + slot <= 2 * rb);
    for (size_t f = 0; f < NFORMATS; f++) {
      size_t gb = qcoll__codec_group_bytes(FORMATS[f]);
      size_t chunk = qcoll__qlayout_chunk_elems(rb, n, gb);
      /* The largest segment of a full chunk fits a slot exactly as computed. */
      size_t sb, se;
      qcoll__qlayout_segment(qcoll__codec_groups(chunk), n, n - 1, &sb, &se);
      assert_true((se - sb) * gb <= slot);
      assert_true(((se - sb) + 1) * gb > slot);
    }
  }
  /* Segments and pieces tile the groups exactly, for any grid. */
  const size_t groups_list[] = {0, 1, 2, 7, 8, 9, 255, 1000};
  for (size_t k = 0; k < sizeof groups_list / sizeof groups_list[0]; k++)
    for (int n = 1; n <= MAX_RANKS; n++)
      for (unsigned grid = 1; grid <= 300; grid += grid < 10 ? 1 : 37) {
        size_t next = 0;
        for (int s = 0; s < n; s++) {
          size_t sb, se;
          qcoll__qlayout_segment(groups_list[k], n, s, &sb, &se);
          assert_true(sb == next && se >= sb);
          assert_true(se - sb <= (groups_list[k] + (size_t)n - 1) / (size_t)n);
          size_t piece_next = sb;
          for (unsigned b = 0; b < grid; b++) {
            size_t pb, pe;
            qcoll__qlayout_piece(sb, se, b, grid, &pb, &pe);
            assert_true(pb == piece_next && pe >= pb);
            piece_next = pe;
          }
          assert_true(piece_next == se);
          next = se;
        }
        assert_true(next == groups_list[k]);
      }
  /* Grids: 1..limit, growing with the groups. */
  assert_int_equal(qcoll__qlayout_grid(0, 256), 1);
  assert_int_equal(qcoll__qlayout_grid(1, 256), 1);
  assert_int_equal(qcoll__qlayout_grid(QCOLL_QLAYOUT_GROUPS_PER_BLOCK + 1, 256),
                   2);
  assert_int_equal(qcoll__qlayout_grid(1000000, 256), 256);
  assert_int_equal(qcoll__qlayout_grid(1000000, 0), 1);

  /* Plans: one round in the plain layout up to a chunk, whatever the ring;
   * beyond it, `ring` areas of at least one group per block that the grid
   * fills exactly, inside the slot, with a grid no larger than the limit or
   * the slot's groups (a slot of fewer groups than the grid would leave
   * blocks without an area). */
  const size_t regions[] = {4096, 12288, (size_t)30 << 20};
  const int limits[] = {1, 3, 66, 256};
  for (size_t ri = 0; ri < sizeof regions / sizeof regions[0]; ri++)
    for (int n = 1; n <= MAX_RANKS; n++)
      for (size_t f = 0; f < NFORMATS; f++)
        for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++)
          for (int ring = 1; ring <= 2; ring++) {
            size_t gb = qcoll__codec_group_bytes(FORMATS[f]);
            size_t one = qcoll__qlayout_chunk_elems(regions[ri], n, gb);
            size_t slot_groups =
                qcoll__qlayout_slot_bytes(regions[ri], n) / gb;
            qcoll__qlayout_plan_t p = {0, 0, 0, 0};
            assert_true(qcoll__qlayout_plan(one, regions[ri], n, gb, 0, ring,
                                            limits[li], &p));
            assert_true(p.area == 0 && p.chunk == one && p.ring == 1);
            assert_int_equal(p.grid, qcoll__qlayout_grid(one / G, limits[li]));
            if (slot_groups < (size_t)ring) {
              assert_false(qcoll__qlayout_plan(3 * one + 1, regions[ri], n, gb,
                                               0, ring, limits[li], &p));
              continue;
            }
            assert_true(qcoll__qlayout_plan(3 * one + 1, regions[ri], n, gb, 0,
                                            ring, limits[li], &p));
            assert_true(p.grid >= 1 && p.grid <= limits[li]);
            assert_true(p.ring == ring);
            assert_true((size_t)p.grid * (size_t)ring <= slot_groups);
            assert_true(p.area >= 1);
            assert_true(p.area * (size_t)p.grid * (size_t)ring <= slot_groups);
            /* The last area of the ring lies inside the slot. */
            assert_true((qcoll__qlayout_area_index((unsigned)p.grid - 1, ring,
                                                   (size_t)ring - 1) +
                         1) * p.area <=
                        slot_groups);
            assert_true(p.chunk == (size_t)n * p.area * (size_t)p.grid * G);
            assert_true(p.chunk * (size_t)ring <= one);
            /* A round limit below the slot's groups streams a message that
             * the slots would hold in one round, inside the limit; at or
             * above it, or for a message of at most one limited round, the
             * plan is as without. */
            const size_t rounds[] = {1, 3, slot_groups / 2, slot_groups,
                                     2 * slot_groups};
            for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
              size_t r = rounds[k];
              if (r == 0) continue;
              qcoll__qlayout_plan_t q = {0, 0, 0, 0}, plain = {0, 0, 0, 0};
              const int planned = qcoll__qlayout_plan(one, regions[ri], n, gb,
                                                      r, ring, limits[li], &q);
              assert_true(qcoll__qlayout_plan(one, regions[ri], n, gb, 0, ring,
                                              limits[li], &plain));
              if (r >= slot_groups) {
                assert_true(planned);
                /* field by field: the struct has padding */
                assert_int_equal(q.grid, plain.grid);
                assert_true(q.chunk == plain.chunk && q.area == plain.area);
              } else if (planned) {
                assert_true(q.area >= 1 && q.grid >= 1 &&
                            q.grid <= limits[li]);
                assert_true(q.area * (size_t)q.grid <= r);
                assert_true(q.area * (size_t)q.grid * (size_t)ring <=
                            slot_groups);
                assert_true(q.chunk ==
                            (size_t)n * q.area * (size_t)q.grid * G);
                assert_true(q.chunk < one);
              }
              size_t fits =
                  (size_t)n * (r < slot_groups ? r : slot_groups) * G;
              assert_true(qcoll__qlayout_plan(fits, regions[ri], n, gb, r,
                                              ring, limits[li], &q));
              assert_true(q.area == 0 && q.chunk == one);
            }
          }
  qcoll__qlayout_plan_t none = {0, 0, 0, 0};
  assert_false(qcoll__qlayout_plan(1000, 16, 8, 36, 0, 1, 4, &none));
  assert_false(qcoll__qlayout_plan(1000, 4096, 2, 36, 0, 0, 4, &none));
}

/* Small counts and tails, every format, dtype and world size, two grids. */
static void test_small_messages(void **state) {
  (void)state;
  uint64_t seed = 1;
  int cases = 0;
  for (size_t f = 0; f < NFORMATS; f++)
    for (size_t d = 0; d < 3; d++)
      for (int n = 1; n <= MAX_RANKS; n++) {
        const size_t counts[] = {1,
                                 31,
                                 32,
                                 33,
                                 (size_t)G * n - 1,
                                 (size_t)G * n,
                                 (size_t)G * n + 1,
                                 1000,
                                 4099};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
          for (int grid_limit = 1; grid_limit <= 256; grid_limit += 255) {
            message_case_t mc = {FORMATS[f],
                                 DTYPES[d],
                                 n,
                                 counts[c],
                                 64 * 1024,
                                 grid_limit,
                                 c % 2 ? DATA_SPECIAL : DATA_GAUSS,
                                 0,
                                 1};
            run_message(&mc, seed++);
            cases++;
          }
      }
  print_message(
      "%d small messages: every rank equals the reference bit for bit\n",
      cases);
}

/* Three messages of one format, dtype and world size, on the grids given,
 * the last one of special values, each once for either ring: each checked
 * against the reference, and taken in at least ceil(count / round) rounds
 * (ring 1; ring 2 halves the rounds' areas).  Returns the most rounds. */
static int run_streamed(qcoll_quant_t fmt, qcoll_dtype_t dtype, int n,
                        size_t region_bytes, size_t round_groups, size_t round,
                        const size_t counts[3], const int grids[3],
                        uint64_t *seed) {
  int most = 0;
  for (int ring = 1; ring <= 2; ring++)
    for (size_t c = 0; c < 3; c++) {
      message_case_t mc = {fmt,
                           dtype,
                           n,
                           counts[c],
                           region_bytes,
                           grids[c],
                           c == 2 ? DATA_SPECIAL : DATA_GAUSS,
                           round_groups,
                           ring};
      int rounds = run_message(&mc, (*seed)++);
      if (ring == 1)
        assert_true(rounds >= (int)((counts[c] + round - 1) / round));
      if (rounds > most) most = rounds;
    }
  return most;
}


/* Messages of several rounds of one launch (small regions), odd grids; the
 * last round of chunk + 1 elements is one group, whose piece would lie in
 * another block's bytes of the slot without the areas. */
static void test_chunked_messages(void **state) {
  (void)state;
  uint64_t seed = 1000;
  int cases = 0, max_rounds = 0;
  const int sizes[] = {2, 3, 4, 8};
  const int grids[] = {3, 7, 256};
  for (size_t f = 0; f < NFORMATS; f++)
    for (size_t d = 0; d < 3; d++)
      for (size_t k = 0; k < 4; k++) {
        int n = sizes[k];
        size_t rb = 4096;
        size_t chunk = qcoll__qlayout_chunk_elems(
            rb, n, qcoll__codec_group_bytes(FORMATS[f]));
        const size_t counts[] = {chunk, chunk + 1, 2 * chunk + 17 * G + 5};
        int most = run_streamed(FORMATS[f], DTYPES[d], n, rb, 0, chunk, counts,
                                grids, &seed);
        if (most > max_rounds) max_rounds = most;
        cases += 3;
      }
  print_message(
      "%d chunked messages (up to %d rounds in one launch): every rank "
      "equals the reference\n",
      cases, max_rounds);
}

/* Messages that the regions would hold in one round, streamed in rounds of
 * at most round_groups groups per segment (QCOLL_QUANT_ROUND_BYTES): the
 * same bits as one round, and as the reference. */
static void test_round_limited_messages(void **state) {
  (void)state;
  uint64_t seed = 5000;
  int cases = 0, max_rounds = 0;
  const int sizes[] = {1, 2, 3, 8};
  const size_t limits[] = {1, 2, 5};
  const int grids[] = {1, 3, 256};
  for (size_t f = 0; f < NFORMATS; f++)
    for (size_t d = 0; d < 3; d++)
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
          int n = sizes[k];
          size_t round = (size_t)n * limits[l] * G;
          const size_t counts[] = {round + 1, 3 * round, 4 * round + 7 * G + 3};
          int most = run_streamed(FORMATS[f], DTYPES[d], n, 64 * 1024,
                                  limits[l], round, counts, grids, &seed);
          if (most > max_rounds) max_rounds = most;
          cases += 3;
        }
  print_message(
      "%d round-limited messages (up to %d rounds in one launch): every rank "
      "equals the reference\n",
      cases, max_rounds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_functions),
      cmocka_unit_test(test_small_messages),
      cmocka_unit_test(test_chunked_messages),
      cmocka_unit_test(test_round_limited_messages),
  };
  return cmocka_run_group_tests_name("quant_layout", tests, NULL, NULL);
}
