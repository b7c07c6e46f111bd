/*
 * Where the quantised two-shot all-reduce (allreduce_quant.cu) puts its
 * encoded groups in the IPC data regions, and how one round's groups are
 * split between owners and blocks.  Plain C for host and device, without
 * CUDA headers: the kernel, its launcher and the CPU model of the kernel
 * (tests/codec/test_quant_layout.c) call the same functions.
 *
 * One round reduces count elements, G = ceil(count / 32) codec groups (the
 * last one zero-padded past count).  With n ranks and a grid of B blocks:
 *
 *   segments  owner s (0..n-1) owns the groups [G*s/n, G*(s+1)/n); segment
 *             boundaries are therefore group boundaries, and the segments
 *             differ in length by at most one group.
 *   pieces    block b takes [S + L*b/B, S + L*(b+1)/B) of every segment
 *             (S: the segment's first group, L: its length), in all three
 *             phases, on every rank: block b only ever waits on block b of
 *             its peers, and reads only what those blocks wrote.
 *   slots     each data region is cut into n slots of slot_bytes
 *             (region_bytes / n, rounded down to 16 bytes):
 *               region 0 of owner s, slot p: rank p's encoded part of
 *                                            segment s (phase 1)
 *               region 1 of rank q,  slot s: the encoded sum of segment s
 *                                            (phase 2, pushed by owner s)
 *             Group g of segment s lies at (g - S) * group_bytes in its slot.
 *             Slots depend on the region size and the world size only,
 *             never on the message or the grid (where a group lies in its
 *             slot does, see streaming; it is the same on every rank).
 *   chunk     the largest count of one round of the three phases: every
 *             segment must fit a slot, so n * floor(slot_bytes /
 *             group_bytes) * 32 elements.
 *   streaming a launch of more than a chunk takes its message in rounds of
 *             chunks (whole groups, so every group is the same as in one
 *             round of the whole message).  Its blocks go from round to
 *             round without waiting for each other, so a slot's bytes must
 *             have one writer block and one reader block for the whole
 *             launch: block b's groups of every segment lie in its area
 *             [b * area, (b + 1) * area) of the slot, in every round
 *             (area = floor(slot groups / grid), and the streamed chunk is
 *             n * area * grid * 32 elements, so every piece of a full
 *             round is exactly one area, and a shorter last round's pieces
 *             are shorter).  A launch of one round keeps the plain layout
 *             (group g of segment s at g - S).
 *   ring      a streaming launch may run its rounds as a pipeline
 *             (allreduce_quant.cu): a block encodes round i while its peers
 *             still reduce round i - 1 and it decodes round i - 2, so two
 *             consecutive rounds are live at once and must not share a
 *             byte.  Such a plan has ring = 2: each block owns two areas of
 *             every slot, and round i uses area index b * ring + i % ring
 *             (area = floor(slot groups / (grid * ring))).  ring = 1 is the
 *             schedule of one round after the other, and every launch of
 *             one round has ring = 1.
 *   rounds    a plan may also be given round_groups, the most groups of one
 *             segment per round (0: as many as a slot holds).  A message
 *             of more groups than n * round_groups then streams in rounds
 *             of that size, using the first grid * area groups of every
 *             slot, even where it would fit the slots in one round: a
 *             round's encoded groups stay few enough to be read back from
 *             the GPU's cache (allreduce_quant.cu says what was measured).
 */
#ifndef QCOLL_COLL_CUDA_QUANT_LAYOUT_H
#define QCOLL_COLL_CUDA_QUANT_LAYOUT_H

#include <stddef.h>

#ifdef __CUDACC__
#define QCOLL_QLAYOUT_HD static __host__ __device__ __forceinline__
#else
#define QCOLL_QLAYOUT_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Values per codec group (QCOLL_CODEC_GROUP in ../codec.h). */
#define QCOLL_QLAYOUT_GROUP 32
/* Slots start on 16-byte boundaries. */
#define QCOLL_QLAYOUT_SLOT_ALIGN 16
/* Groups a block is given before the grid grows (two per warp of 16). */
#define QCOLL_QLAYOUT_GROUPS_PER_BLOCK 32

/* Bytes of one slot of a data region of region_bytes shared by nranks. */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_slot_bytes(size_t region_bytes,
                                                  int nranks) {
  return nranks > 0 ? region_bytes / (size_t)nranks / QCOLL_QLAYOUT_SLOT_ALIGN *
                          QCOLL_QLAYOUT_SLOT_ALIGN
                    : 0;
}

/* Largest count of one launch (0 when not even one group fits a slot). */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_chunk_elems(size_t region_bytes,
                                                   int nranks,
                                                   size_t group_bytes) {
  if (group_bytes == 0) return 0;
  size_t per_segment =
      qcoll__qlayout_slot_bytes(region_bytes, nranks) / group_bytes;
  return per_segment * (size_t)nranks * QCOLL_QLAYOUT_GROUP;
}

/* Groups [*begin, *end) of owner s's segment of `groups`. */
QCOLL_QLAYOUT_HD void qcoll__qlayout_segment(size_t groups, int nranks, int s,
                                             size_t *begin, size_t *end) {
  *begin = groups * (size_t)s / (size_t)nranks;
  *end = groups * (size_t)(s + 1) / (size_t)nranks;
}

/* Block b's piece [*begin, *end) of the segment [seg_begin, seg_end). */
QCOLL_QLAYOUT_HD void qcoll__qlayout_piece(size_t seg_begin, size_t seg_end,
                                           unsigned block, unsigned grid,
                                           size_t *begin, size_t *end) {
  size_t len = seg_end - seg_begin;
  *begin = seg_begin + len * block / grid;
  *end = seg_begin + len * (block + 1) / grid;
}

/* Offset of group g of the segment starting at seg_begin, in its slot. */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_group_offset(size_t g, size_t seg_begin,
                                                    size_t group_bytes) {
  return (g - seg_begin) * group_bytes;
}

/* Offset of slot `slot` of data region `region` (0 or 1) from the start of
 * the data regions. */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_slot_offset(size_t region_bytes,
                                                   int nranks, int region,
                                                   int slot) {
  return (size_t)region * region_bytes +
         (size_t)slot * qcoll__qlayout_slot_bytes(region_bytes, nranks);
}

/* Grid of one launch of `groups` groups: a function of its arguments only,
 * so every rank picks the same grid for the same call; 1..limit. */
QCOLL_QLAYOUT_HD int qcoll__qlayout_grid(size_t groups, int limit) {
  size_t grid = (groups + QCOLL_QLAYOUT_GROUPS_PER_BLOCK - 1) /
                QCOLL_QLAYOUT_GROUPS_PER_BLOCK;
  if (limit < 1) limit = 1;
  if (grid > (size_t)limit) grid = (size_t)limit;
  if (grid < 1) grid = 1;
  return (int)grid;
}

/* How one launch of count elements runs: its grid, the elements of each
 * round (chunk) and, when it streams (count > chunk), each block's area of
 * a slot in groups (0: one round, plain layout) and the ring of areas each
 * block cycles through (see "ring"; 1 in a launch of one round).
 * round_groups: see "rounds" above (0: none); ring: the ring a streaming
 * launch asks for (1 or 2).  Whether a message streams does not depend on
 * the ring: it streams when it exceeds one round of the slots (or of
 * round_groups).  0 when the regions hold no group, or not one group per
 * area of the ring.  The same on every rank for the same call. */
typedef struct qcoll__qlayout_plan {
  int grid;
  size_t chunk;
  size_t area;
  int ring;
} qcoll__qlayout_plan_t;

QCOLL_QLAYOUT_HD int qcoll__qlayout_plan(size_t count, size_t region_bytes,
                                         int nranks, size_t group_bytes,
                                         size_t round_groups, int ring,
                                         int limit,
                                         qcoll__qlayout_plan_t *plan) {
  const size_t one =
      qcoll__qlayout_chunk_elems(region_bytes, nranks, group_bytes);
  if (one == 0 || ring < 1) return 0;
  const size_t slot_groups = one / QCOLL_QLAYOUT_GROUP / (size_t)nranks;
  size_t round_cap = slot_groups;
  if (round_groups && round_groups < round_cap) round_cap = round_groups;
  const size_t round = (size_t)nranks * round_cap * QCOLL_QLAYOUT_GROUP;
  if (count <= round) {
    plan->grid = qcoll__qlayout_grid(
        (count + QCOLL_QLAYOUT_GROUP - 1) / QCOLL_QLAYOUT_GROUP, limit);
    plan->chunk = one;
    plan->area = 0;
    plan->ring = 1;
    return 1;
  }
  /* Streaming: every round's groups of a segment fit one ring entry of
   * the slot, and at most round_groups of them. */
  size_t ring_groups = slot_groups / (size_t)ring;
  if (ring_groups > round_cap) ring_groups = round_cap;
  if (ring_groups == 0) return 0;
  int grid = qcoll__qlayout_grid(
      (size_t)nranks * ring_groups, limit);
  if ((size_t)grid > ring_groups) grid = (int)ring_groups;
  plan->grid = grid;
  plan->ring = ring;
  plan->area = ring_groups / (size_t)grid;
  plan->chunk =
      (size_t)nranks * plan->area * (size_t)grid * QCOLL_QLAYOUT_GROUP;
  return 1;
}

/* The area of a slot that block `block` uses in round `round` of a
 * streaming launch with this ring (see "ring"). */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_area_index(unsigned block, int ring,
                                                  size_t round) {
  return (size_t)block * (size_t)ring + round % (size_t)ring;
}

/* Index, in its slot, of group g of a block's piece [piece_begin, ..) of
 * the segment starting at seg_begin: plain (area 0) or in area
 * `area_index` (qcoll__qlayout_area_index) of a streaming launch. */
QCOLL_QLAYOUT_HD size_t qcoll__qlayout_slot_group(size_t g, size_t seg_begin,
                                                  size_t piece_begin,
                                                  size_t area_index,
                                                  size_t area) {
  return area ? area_index * area + (g - piece_begin) : g - seg_begin;
}

#ifdef __cplusplus
}
#endif

#endif
