/*
 * Quantised two-shot all-reduce (sum) over CUDA IPC peer memory: every
 * transfer carries the groups of ../codec.h (FP8, INT8, INT6, INT4, INT3:
 * 32 values and one scale per group) instead of the elements themselves.
 *
 * Algorithm.  A launch takes its message in rounds of at most `chunk`
 * elements (whole groups; one round when it fits the regions), each round
 * the three phases below; a launch of several rounds may run them as a
 * pipeline (a block encodes round i while its peers may still reduce
 * round i - 1, see "Pipelined rounds"; by default INT4's limited rounds,
 * see `pipelined`).  A round's G = ceil(n / 32) groups are cut into
 * one segment per owner rank and every segment into one piece per block,
 * as quant_layout.h describes; block b of every rank handles piece b of
 * every segment, so blocks only wait on peer blocks of the same index, as
 * in allreduce.cu, and go from round to round on their own.  A launch of
 * several rounds (streaming) puts block b's groups in its own area of
 * every slot (quant_layout.h), so that no slot byte is ever written or
 * read by another block of the launch: a block that starts round k + 1
 * while another is still in round k never touches what that one reads.
 *
 *  phase 1:  for every owner s, encode my piece of segment s of the input
 *            (f16/bf16/f32 -> f32, exact) and write the groups into slot
 *            <my rank> of owner s's region 0 (a push; my own segment goes to
 *            my own region the same way);  barrier 0.
 *  phase 2:  as owner of segment r: for each group of my piece, load the n
 *            encoded contributions from my region 0 (slot p = rank p's,
 *            mine included), decode each, add them in f32 in rank order
 *            0..n-1 (one rounding per addition, __fadd_rn), encode the sum
 *            once and write it into slot r of region 1 of every other
 *            rank; decode those same codes (the bits a peer reads back)
 *            and store my segment's values;  barrier 1.
 *  phase 3:  decode every other segment's groups from my own region 1 and
 *            store the values rounded once (nearest even) to the element
 *            type.
 * In place (recv == send) is safe: only my phase 1 reads send, before
 * barrier 0, and recv is written only after it.
 *
 * Each value is therefore rounded by the codec twice (once on the way to
 * its owner, once on the way back) and once to the element type at the
 * end; the owner's own contribution goes through the codec like every other
 * (so the result does not depend on who owns what).  The operations are
 * those of ref_scheme_qcoll() in tests/codec/ref_scheme.c, with the same
 * correctly rounded f32 operations (codec.h's __fmul_rn/__fmaf_rn and
 * __fadd_rn here: nothing is contracted into an FMA), so the output is that
 * CPU model's f32 result rounded to the element type, bit for bit, on every
 * rank.  A NaN (a group that held inf or NaN, see codec.h's policies) is
 * stored as the host conversions of codec.h's canonical NaN produce it:
 * f16 0x7e00, bf16 0x7fc0, f32 0x7fc00000.
 *
 * Rotated groups (rotate != 0, codec.h "Rotated groups"): phase 1 rotates
 * each group after loading it (the tail group zero-padded first) and before
 * encoding it; phase 2 reduces in the rotated domain unchanged, except that
 * the padding of the last group is kept (it holds rotated values); phase 3
 * applies the inverse after decoding, before storing.  Forward and inverse
 * are codec.h's segment_rotate/segment_unrotate (three shuffles among the
 * eight lanes of a group, in the host loop's operation order), so the output
 * is ref_scheme_qcoll_rot()'s bit for bit.  The flag is one value for the
 * whole grid, so the branches are uniform and every lane takes part in the
 * shuffles.
 *
 * Tails.  The last group of a launch is zero-padded past count in phase 1
 * and its padded lanes are zero again in phase 2 (they decode to zero
 * anyway, or to NaN in a group whose real values are not finite, which
 * makes the whole group NaN either way); phase 3 stores only the count
 * values.  Zero padding changes neither a group's scale nor any code, so a
 * message split into rounds at group boundaries gives the same bits as one
 * round, and the same as the CPU model on the whole message.
 *
 * Eight lanes per group, four values per lane (codec.h "Four elements per
 * lane"), in all three phases.  A warp is four segments of eight lanes; a
 * set is four consecutive groups, lane l holding values 4l .. 4l + 3 of
 * the set (group l / 8 of it, as lane k = l % 8 of its segment), so one
 * warp access covers 128 consecutive values: an 8-byte (f16/bf16) or
 * 16-byte (f32) load or store per lane.
 *  - Encoding (phases 1 and 2), a step's sets together (codec.h's
 *    segment_encode_sets): each group's amax is the max of the lanes' four
 *    abs_bits, reduced and scattered over the segment so that one lane
 *    pair holds each group's; when every group of the warp is plain (one
 *    vote: zero, or amax >= 2^-64 and finite) that pair derives the scale
 *    (no division) and shares inv and amax by two shuffles, and every lane
 *    encodes by a multiply, a rounding addition and multiply-add packing;
 *    otherwise every lane derives every scale (enc_scale) and encodes
 *    its values by encode_lane; the same bits.  A lane packs its four codes
 *    (pack_quad) and stores its
 *    share_bytes = 4, 3 or 2 bytes at group + 4 + share_offset (INT3: even
 *    lanes 3 bytes, their quad and their odd neighbour's); lane 0 of the
 *    segment stores the scale word.  No byte has two writers, so remote
 *    writes are direct stores, no staging.
 *  - Decoding (phases 2 and 3): every lane loads the group's scale word and
 *    the aligned word(s) holding its code bytes (INT6 and INT3: two words
 *    when its 3 bytes straddle them; the other formats one, with no test)
 *    with __ldcg (peers wrote them: L2, never L1), and decodes its values
 *    of the step's groups together (segment_decode_sets: when every group
 *    of the warp is plain, plain_words puts each INT8 or INT4 code under
 *    2^23 by one byte permutation and plain_value makes the value by a
 *    subtraction, a multiply and a magnitude clamp; else dec_scale and
 *    decode_lane; the same bits).  The stores of results (phase 2's own
 *    segment, phase 3) then know every value finite (INT formats, no
 *    rotation) and convert f16/bf16 two at a time with no NaN test.
 *  - Work is handed out in warp steps of several sets (kEncodeSets,
 *    kDecodeSets, kReduceLoads); a step issues all its loads before it uses
 *    the first, so memory latency is paid once per step (phase 2: once per
 *    chunk of 1, 2 or 4 contributions, taken in rank order).  A block deals
 *    the steps of its pieces to its warps in turn.  Steps wholly inside the
 *    piece run a copy of the step without bounds tests (walk_steps).  Loads
 *    are not issued a step ahead: in phases 1 and 2 the registers of a
 *    second step spilled, and in phase 3 it gained nothing on an H200.
 *  - The user's buffers are accessed per lane as one 8- or 16-byte vector
 *    when the pointer is aligned for it and all four values exist, else
 *    element by element (unaligned pointers, the last group): padding reads
 *    as zero and nothing past count is written.
 * Shuffles have full masks: all lanes of a warp run the same steps, lanes
 * whose group lies past the piece with zeros, storing nothing.
 *
 * Synchronisation protocol: that of allreduce.cu (ipc_sync.cuh): a
 * per-block epoch in device memory advanced by the kernel, release/acquire
 * flags at system scope (GPU scope where every rank shares this GPU),
 * deadlines and abort.  Two barriers, phases 0 and 1, per round; pipelined
 * rounds split them (below).
 * No closing barrier is needed:
 *  - region 0 of owner s is written (phase 1 of the next launch, by any
 *    rank p) only after p's kernel for this launch has finished, hence
 *    after p passed barrier 1 of this launch, which needs s's arrival at
 *    barrier 1, which s reaches after reading its region 0;
 *  - region 1 of rank q is written (phase 2 of the next launch, by any
 *    owner) only after that owner passed barrier 0 of the next launch,
 *    which needs q's arrival there, after q's kernel for this launch
 *    finished reading its region 1.
 * The same two arguments hold across the unquantised one-shot and two-shot
 * kernels in either order (they read their peers' regions only between
 * their own barriers 0 and 1, or their own region 1 after barrier 1), so
 * the three kinds of launch may be mixed on one communicator.
 *
 * Pipelined rounds (ring 2, view.quant_pipeline, a launch of several
 * rounds).  The two barriers are split into their halves: F0(k), block
 * b's flag 0 at epoch e(k) (round k's epoch), raised at every peer after
 * b has pushed its encoded parts of round k; F1(k), flag 1 at e(k), raised
 * after b has pushed its reduced segment of round k.  Round k's groups lie
 * in area b * 2 + k % 2 of every slot (quant_layout.h "ring").  Step i of
 * block b (i = 0 .. rounds + 1) runs, skipping rounds that do not exist:
 *    A  wait F1(i - 2) of every peer; decode round i - 2 (phase 3);
 *    B  encode round i (phase 1); raise F0(i);
 *    C  wait F0(i - 1) of every peer; reduce round i - 1 (phase 2);
 *       raise F1(i - 1).
 * Every wait is for a flag that its peer raises in an earlier step, so no
 * wait can close a cycle.  No byte is written while a peer still reads it:
 *  - region 0 of owner s, the area of round i, is written by p in B of
 *    step i; it last held round i - 2, which s read in C of its step i - 1,
 *    before raising F1(i - 2), and p waited for that flag in A of step i;
 *  - region 1 of rank q, the area of round i - 1, is written by owner s in
 *    C of step i; it last held round i - 3, which q read in A of its step
 *    i - 1, before raising F0(i - 1) in B of that step, and s waited for
 *    that flag in C of step i;
 *  - rounds i and i - 1, both live in step i, use different areas.
 * The waits accept a later epoch than the one awaited (ipc_sync.cuh
 * flags_wait): a flag only grows, and a peer is never more than one round
 * ahead on it (raising F0(i + 1) needs this block's F1(i - 1), raised after
 * its wait on F0(i - 1)).  A peer's release of a later epoch also
 * publishes its earlier rounds' writes.  When a rank's kernel ends it has
 * passed A of its last step, so every owner has reduced the last round,
 * and the two arguments above on the next launch hold unchanged.  The
 * epoch left for the next launch is the last round's.
 *
 * Requirements: those of allreduce.cu (residency of the whole grid on every
 * GPU, the same launches in the same order on every rank), plus: no
 * -ftz=true / -use_fast_math (codec.h), blocks of whole warps, and
 * little-endian words (scales and codes are moved as words, as codec.h
 * allows).  Launched, like the unquantised kernels, with programmatic
 * dependent launch when the view says so (block_begin).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../codec.h"
#include "ipc_sync.cuh"
#include "launch.h"

namespace {

constexpr int kWarps = kThreads / 32;
/* A segment of eight lanes holds one group, four values per lane. */
constexpr int kSegLanes = QCOLL_CODEC_SEG_LANES;
constexpr int kSegsPerWarp = 32 / kSegLanes; /* groups of one set */
constexpr int kLaneValues = QCOLL_CODEC_LANE_VALUES;
static_assert(kLaneValues == 4, "a lane holds one quad of codes");
/* Sets (four consecutive groups each) of one warp step: every load of a
 * step is issued before the first value is used.  Phase 1 has 8 or 16
 * bytes of values per lane and set in flight, phase 3 a scale word and one
 * or two code words.  Phase 2 keeps kReduceLoads (set, contribution) pairs
 * in flight: two sets of two contributions for two ranks (of one for one
 * rank, the same registers), else one set and its contributions four at a
 * time.  More would not fit the registers
 * of two 512-thread blocks per SM without spilling, and is not needed:
 * every step is hundreds of instructions per warp, so the SM's other warps
 * cover the latency. */
constexpr int kEncodeSets = 4;
constexpr int kDecodeSets = 4;
constexpr int kReduceLoads = 4;
static_assert(kReduceLoads % 4 == 0, "phase 2 takes chunks of 1, 2 or 4");

/* ---- element types: exact to f32, one rounding back ------------------- */

/* Bits: the element as an unsigned integer (how a lane loads it);
 * part_to_f32(w, h) the exact f32 value of element h of a loaded word;
 * from_f32 the one rounding back, NaN canonical; pack_finite (16-bit types)
 * the same rounding of two values known finite into one word (element 0
 * low), one packed conversion with no NaN test. */

template <typename T>
struct QElem;
template <>
struct QElem<float> {
  using Bits = uint32_t;
  static __device__ __forceinline__ float part_to_f32(uint32_t w, int) {
    return __uint_as_float(w);
  }
  /* codec.h's only NaN is 0x7fc00000 already. */
  static __device__ __forceinline__ float from_f32(float y) { return y; }
};
template <>
struct QElem<__half> {
  using Bits = uint16_t;
  static __device__ __forceinline__ float part_to_f32(uint32_t w, int h) {
    return __half2float(__ushort_as_half((unsigned short)(w >> (16 * h))));
  }
  static __device__ __forceinline__ __half from_f32(float y) {
    return y != y ? __ushort_as_half((unsigned short)0x7e00u)
                  : __float2half_rn(y);
  }
  static __device__ __forceinline__ uint32_t pack_finite(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&h);
  }
};
template <>
struct QElem<__nv_bfloat16> {
  using Bits = uint16_t;
  /* A bf16 is the top half of its f32: a shift or a mask, no conversion. */
  static __device__ __forceinline__ float part_to_f32(uint32_t w, int h) {
    return __uint_as_float(h ? w & 0xffff0000u : w << 16);
  }
  static __device__ __forceinline__ __nv_bfloat16 from_f32(float y) {
    return y != y ? __ushort_as_bfloat16((unsigned short)0x7fc0u)
                  : __float2bfloat16_rn(y);
  }
  static __device__ __forceinline__ uint32_t pack_finite(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&h);
  }
};

/* A lane's four consecutive elements, moved as one 8- or 16-byte access. */
template <typename T>
struct alignas(kLaneValues * sizeof(T)) LaneVec {
  T v[kLaneValues];
};

/* The same bytes as loaded: whole 32-bit words (so that the two ways of
 * loading them below end in the same registers, and nothing uses a loaded
 * value before the step has issued all its loads). */
template <typename T>
struct alignas(kLaneValues * sizeof(T)) LaneWords {
  uint32_t w[kLaneValues * sizeof(T) / 4];
};

/* Whether p may be accessed as LaneVec<T> at every multiple of four
 * elements (the user's pointers need not be). */
template <typename T>
__device__ __forceinline__ bool vector_ok(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(LaneVec<T>) == 0;
}

/* The four elements at p, zeros for those at or past `avail` (the number
 * of values from p on that exist): one vector load when all four exist and
 * the buffer allows it, else element by element (the last group of a
 * message, unaligned buffers). */
template <typename T>
__device__ __forceinline__ LaneWords<T> load_values(const T *p, int avail,
                                                    bool vec) {
  using Bits = typename QElem<T>::Bits;
  constexpr int kPerWord = 4 / sizeof(T);
  LaneWords<T> q;
  if (vec && avail >= kLaneValues) {
    q = *reinterpret_cast<const LaneWords<T> *>(p);
  } else {
    const Bits *e = reinterpret_cast<const Bits *>(p);
#pragma unroll
    for (int i = 0; i < kLaneValues / kPerWord; i++) {
      q.w[i] = 0;
#pragma unroll
      for (int h = 0; h < kPerWord; h++)
        if (i * kPerWord + h < avail)
          q.w[i] |= (uint32_t)e[i * kPerWord + h] << (8 * sizeof(T) * h);
    }
  }
  return q;
}

/* Value j of four loaded elements, as f32 (exact). */
template <typename T>
__device__ __forceinline__ float value_of(const LaneWords<T> &q, int j) {
  constexpr int kPerWord = 4 / sizeof(T);
  return QElem<T>::part_to_f32(q.w[j / kPerWord], j % kPerWord);
}

/* Store the four values rounded to T at p, only the first `avail`.
 * `finite` (the same on every lane of the warp): no value is NaN, so
 * 16-bit types convert two at a time with no NaN test (the same bits). */
template <typename T>
__device__ __forceinline__ void store_values(T *p, int avail, bool vec,
                                             bool finite,
                                             const float y[kLaneValues]) {
  if (vec && avail >= kLaneValues) {
    if constexpr (sizeof(T) == 2) {
      if (finite) {
        LaneWords<T> q;
#pragma unroll
        for (int i = 0; i < kLaneValues / 2; i++)
          q.w[i] = QElem<T>::pack_finite(y[2 * i], y[2 * i + 1]);
        *reinterpret_cast<LaneWords<T> *>(p) = q;
        return;
      }
    }
    LaneVec<T> q;
#pragma unroll
    for (int j = 0; j < kLaneValues; j++) q.v[j] = QElem<T>::from_f32(y[j]);
    *reinterpret_cast<LaneVec<T> *>(p) = q;
  } else {
#pragma unroll
    for (int j = 0; j < kLaneValues; j++)
      if (j < avail) p[j] = QElem<T>::from_f32(y[j]);
  }
}

/* ---- one lane's share of a group ----------------------------------------- */

/* What lane k of a segment writes or reads of its group: the group's stored
 * scale and the lane's codes 4k..4k+3, packed (qcoll__codec_pack_quad). */
struct LaneCode {
  uint32_t scale;
  uint32_t quad;
};

/* Encode the lane's four values of each of kSets groups (x[u]: group u
 * of its segment's, codec.h "several sets of groups per lane"); c[u].quad
 * is what the lane stores of group u (segment_share: for INT3 an even
 * lane's quad and its odd neighbour's), own[u] the group's scale word and
 * the lane's own codes (what decode_sets takes).  Every lane of the warp
 * calls it. */
template <int F, int kSets>
__device__ __forceinline__ void encode_sets(const float x[kSets][kLaneValues],
                                            int lane, LaneCode c[kSets],
                                            LaneCode own[kSets]) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  uint32_t stored[kSets], quad[kSets];
  qcoll__codec_segment_encode_sets<kSets>(fmt, x, lane, stored, quad);
#pragma unroll
  for (int u = 0; u < kSets; u++) {
    c[u] = LaneCode{stored[u], qcoll__codec_segment_share(fmt, quad[u])};
    own[u] = LaneCode{stored[u], quad[u]};
  }
}

/* The lane's four values of each of kGroups groups, from their stored
 * scales and its codes, and whether all of the warp's are known finite
 * (segment_decode_sets).  Every lane of the warp calls it. */
template <int F, int kGroups>
__device__ __forceinline__ bool decode_sets(const LaneCode c[kGroups],
                                            float y[kGroups][kLaneValues]) {
  uint32_t scale[kGroups], quad[kGroups];
#pragma unroll
  for (int u = 0; u < kGroups; u++) {
    scale[u] = c[u].scale;
    quad[u] = c[u].quad;
  }
  return qcoll__codec_segment_decode_sets<kGroups>(
      static_cast<qcoll_quant_t>(F), scale, quad, y);
}

/* Encoded groups in the IPC regions: slots are 16-byte aligned and groups
 * multiples of 4 bytes, so every scale is a word and lane k's
 * share_bytes(fmt, k) code bytes at group + 4 + share_offset(fmt, k) are a
 * word (INT8, FP8), a 16-bit half (INT4), or for INT6 and INT3's even
 * lanes (3 bytes at an offset of 3j) a half and a byte: the half first for
 * even j, the byte first for odd j.  No byte is written by two lanes. */
template <int F>
__device__ __forceinline__ void store_code(uint8_t *group, int k, LaneCode c) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t so = qcoll__codec_share_offset(fmt, k);
  if (k == 0) *reinterpret_cast<uint32_t *>(group) = c.scale;
  qcoll__codec_store_quad_aligned(group + QCOLL_CODEC_SCALE_BYTES + so,
                                  qcoll__codec_share_bytes(fmt, k), c.quad, so);
}

/* A lane's share of a group as loaded: the scale word and the one or two
 * aligned words that hold its code bytes.  Reading is split from combining
 * (raw_quad) so that a step issues all its loads before it waits for the
 * first. */
struct RawCode {
  uint32_t scale;
  uint32_t lo, hi;
};

/* Byte offset of the code bytes lane k reads in a group (INT3: its
 * pair's). */
template <int F>
__device__ __forceinline__ uint32_t quad_offset(int k) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  return QCOLL_CODEC_SCALE_BYTES + qcoll__codec_share_offset(fmt, k);
}

/* Offset of the aligned word holding lane k's first code byte. */
template <int F>
__device__ __forceinline__ uint32_t code_word_offset(int k) {
  return quad_offset<F>(k) & ~3u;
}

/* Whether a lane's code bytes can run into the next word: INT6's and
 * INT3's 3 bytes at 4 + 3j can; INT4's 2 bytes at an even offset and
 * INT8's and FP8's aligned word cannot (so those load one word, shift it
 * by 0 or 16 and never test at run time). */
template <int F>
__device__ __forceinline__ constexpr bool may_split() {
  return F == QCOLL_QUANT_INT6 || F == QCOLL_QUANT_INT3;
}

/* Load lane k's share of a group that peers wrote: L2 loads (__ldcg) of
 * whole aligned words.  `codes` is group + code_word_offset(k): INT8/FP8
 * read their code word, INT4 the word holding their half, INT6 and INT3
 * that word and, when the 3 bytes at 4 + 3j run into the next word, that
 * one too (never past the group). */
template <int F>
__device__ __forceinline__ RawCode load_code(const uint8_t *group,
                                             const uint8_t *codes, int k) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t rb = qcoll__codec_read_bytes(fmt);
  const bool split = may_split<F>() && (quad_offset<F>(k) & 3u) + rb > 4u;
  RawCode r;
  r.scale = __ldcg(reinterpret_cast<const uint32_t *>(group));
  r.lo = __ldcg(reinterpret_cast<const uint32_t *>(codes));
  r.hi = split ? __ldcg(reinterpret_cast<const uint32_t *>(codes + 4)) : 0u;
  return r;
}

/* The lane's packed codes out of the words load_code read (little-endian:
 * the byte at offset o of a word is bits 8 * (o % 4) up).  Bits above the
 * four codes may hold a neighbour's; quad_code masks them off. */
template <int F>
__device__ __forceinline__ LaneCode raw_quad(RawCode r, int k) {
  const uint32_t shift =
      8u * (quad_offset<F>(k) & 3u) +
      qcoll__codec_share_shift(static_cast<qcoll_quant_t>(F), k);
  if (!may_split<F>()) return LaneCode{r.scale, r.lo >> shift};
  const uint64_t both = (uint64_t)r.hi << 32 | r.lo;
  return LaneCode{r.scale, (uint32_t)(both >> shift)};
}

/* ---- addressing --------------------------------------------------------- */

/* Byte offset of slot `slot` of data region `index` in every rank's
 * buffer. */
__device__ __forceinline__ size_t slot_offset(const qcoll__ipc_view_t &v,
                                              int index, int slot) {
  return qcoll__ipc_region_offset(v.oneshot_bytes, v.region_bytes, 0) +
         qcoll__qlayout_slot_offset(v.region_bytes, v.nranks, index, slot);
}

/* This block's piece of owner's segment: groups [begin, end), slot_first
 * the index of group `begin` in its slot (quant_layout.h: plain, or in the
 * block's area when the launch streams), and limit, the number of values
 * before `end` that exist (count cuts the last group). */
struct Piece {
  size_t slot_first, begin, end, limit;
};

/* Where this block's groups of one round lie in every slot: `area` groups
 * at area `index` (quant_layout.h qcoll__qlayout_area_index) in a streaming
 * launch; area 0 in a launch of one round (the plain layout). */
struct Slots {
  size_t area, index;
};

__device__ __forceinline__ Piece my_piece(size_t count, Slots where, int nranks,
                                          int owner) {
  Piece p;
  size_t seg_begin, seg_end;
  qcoll__qlayout_segment(qcoll__codec_groups(count), nranks, owner, &seg_begin,
                         &seg_end);
  qcoll__qlayout_piece(seg_begin, seg_end, blockIdx.x, gridDim.x, &p.begin,
                       &p.end);
  p.slot_first =
      qcoll__qlayout_slot_group(p.begin, seg_begin, p.begin, where.index, where.area);
  const size_t e = p.end * QCOLL_CODEC_GROUP;
  p.limit = e < count ? e : count;
  return p;
}

/* ---- warp steps ---------------------------------------------------------- */

/* A warp step covers kSets sets of four consecutive groups: set u is groups
 * g0 + 4u .. g0 + 4u + 3, and lane l holds values 4l .. 4l + 3 of it
 * (group g0 + 4u + l / 8, as lane l % 8 of its segment), so one warp access
 * covers 128 consecutive values.  A block deals the steps of its pieces to
 * its warps in turn (phases 1 and 3 continue the deal from one owner's
 * piece to the next, so that small pieces spread over all warps).
 *
 * A warp walks its steps with per-lane pointers to its set-0 group and
 * values and with the groups and values left in the piece (signed: they go
 * negative past the end).  Within a step everything is an immediate offset
 * from those pointers, and lanes whose group lies past the piece take part
 * in the shuffles with zeros and store nothing. */
template <int kSets>
struct Walk {
  static constexpr int kGroups = kSets * kSegsPerWarp;
  static constexpr int kValues = kGroups * QCOLL_CODEC_GROUP;
  ptrdiff_t groups; /* groups left from the step's first one */
  ptrdiff_t values; /* values left (below the limit) from its first one */
};

/* The walk of a piece for the warp that takes its step `first`. */
template <int kSets>
__device__ __forceinline__ Walk<kSets> walk_from(const Piece &p, size_t first) {
  Walk<kSets> w;
  const size_t g0 = p.begin + first * Walk<kSets>::kGroups;
  w.groups = (ptrdiff_t)p.end - (ptrdiff_t)g0;
  w.values = (ptrdiff_t)p.limit - (ptrdiff_t)(g0 * QCOLL_CODEC_GROUP);
  return w;
}

/* Advance a walk by one round of the block's warps. */
template <int kSets>
__device__ __forceinline__ void walk_next(Walk<kSets> *w) {
  w->groups -= (ptrdiff_t)kWarps * Walk<kSets>::kGroups;
  w->values -= (ptrdiff_t)kWarps * Walk<kSets>::kValues;
}

/* What a lane needs of its warp's walk in one step: how many of its sets
 * have their group inside the piece (sets 0 .. live - 1), and how many
 * values from its first value of set 0 on are below the limit (set u's
 * start 128u further on). */
struct LaneLeft {
  int live, avail;
};

template <int kSets>
__device__ __forceinline__ LaneLeft lane_left(const Walk<kSets> &w, int lane) {
  const int groups =
      w.groups < Walk<kSets>::kGroups ? (int)w.groups : Walk<kSets>::kGroups;
  const int values =
      w.values < Walk<kSets>::kValues ? (int)w.values : Walk<kSets>::kValues;
  /* groups >= 1 in a step, so the numerator is never negative. */
  return LaneLeft{(groups - lane / kSegLanes + kSegsPerWarp - 1) / kSegsPerWarp,
                  values - lane * kLaneValues};
}

/* A step that lies wholly inside the piece and below the limit: every set
 * live, every value there.  A constant, so that the step's bounds tests
 * fold away where walk_steps passes it. */
template <int kSets>
__device__ __forceinline__ constexpr LaneLeft full_left() {
  return LaneLeft{kSets, Walk<kSets>::kValues};
}

/* Run step(t) for every step of the warp's walk, t the lane's LaneLeft,
 * advancing the walk by a round of the block's warps after each.  The
 * steps wholly inside the piece (all but at most the last one of each
 * warp) get full_left(), a constant, so their copy of the step has no
 * bounds tests; the last one, if partial, gets lane_left(). */
template <int kSets, typename Step>
__device__ __forceinline__ void walk_steps(Walk<kSets> w, int lane,
                                           Step &&step) {
  for (; w.groups >= Walk<kSets>::kGroups && w.values >= Walk<kSets>::kValues;
       walk_next(&w))
    step(full_left<kSets>());
  for (; w.groups > 0; walk_next(&w)) step(lane_left(w, lane));
}

/* Whether the lane's group of set u is inside the piece. */
__device__ __forceinline__ bool set_live(LaneLeft t, int u) {
  return u < t.live;
}

/* Values of set u from the lane's first on that are below the limit. */
__device__ __forceinline__ int set_avail(LaneLeft t, int u) {
  return t.avail - u * kSegsPerWarp * QCOLL_CODEC_GROUP;
}

/* Steps of a piece of kSets sets each. */
template <int kSets>
__device__ __forceinline__ size_t piece_steps(const Piece &p) {
  return (p.end - p.begin + Walk<kSets>::kGroups - 1) / Walk<kSets>::kGroups;
}

/* This warp's first step of a piece whose first step goes to warp `first`,
 * and the warp that takes the first step of the piece after it. */
__device__ __forceinline__ size_t first_step(int warp, int first) {
  return (size_t)((warp - first + kWarps) % kWarps);
}
__device__ __forceinline__ int next_first(int first, size_t steps) {
  return (int)(((size_t)first + steps) % kWarps);
}

/* Byte offset, in its slot, of the lane's set-0 group of step `first` of
 * a piece. */
__device__ __forceinline__ size_t lane_group(const Piece &p, size_t first,
                                             int kGroups, int seg,
                                             uint32_t gb) {
  return (p.slot_first + first * (size_t)kGroups + (size_t)seg) * gb;
}

/* Index, in the user's buffer, of the lane's first value of step `first`
 * of a piece. */
__device__ __forceinline__ size_t lane_value(const Piece &p, size_t first,
                                             int kGroups, int lane) {
  return (p.begin + first * (size_t)kGroups) * QCOLL_CODEC_GROUP +
         (size_t)lane * kLaneValues;
}

/* x, hidden from the optimiser: a step's addresses are then derived from
 * it inside the step, rather than kept across the whole loop in a register
 * pair per load (which spills). */
template <typename X>
__device__ __forceinline__ X opaque(X x) {
#ifdef __CUDA_ARCH__
  asm volatile("" : "+l"(x));
#endif
  return x;
}

/* ---- results ------------------------------------------------------------ */

/* The results of kSets sets from their codes (c[u]: the lane's share of
 * set u's group, scale word and own codes), unrotated if the groups are,
 * stored at dst (set u at dst + 128u; only live sets, only values below
 * the walk's limit).  Phase 2 stores my segment this way, phase 3 the
 * others.  Every lane of the warp calls it. */
template <typename T, int F, int kSets>
__device__ __forceinline__ void store_results(const LaneCode c[kSets], T *dst,
                                              bool vec, LaneLeft t, int lane,
                                              bool rot) {
  const int k = lane % kSegLanes;
  float y[kSets][kLaneValues];
  /* Unrotating may overflow finite values into inf - inf = NaN. */
  const bool finite = decode_sets<F, kSets>(c, y) && !rot;
#pragma unroll
  for (int u = 0; u < kSets; u++) {
    if (rot) qcoll__codec_segment_unrotate(y[u], k);
    if (set_live(t, u))
      store_values(dst + u * kSegsPerWarp * QCOLL_CODEC_GROUP, set_avail(t, u),
                   vec, finite, y[u]);
  }
}

/* ---- phase 1 ------------------------------------------------------------- */

/* One warp step of phase 1: the lane's values at src (set u at
 * src + 128u), encoded into its group at dst (set u: 4u groups further). */
template <typename T, int F>
__device__ __forceinline__ void encode_step(const T *src, bool vec,
                                            uint8_t *dst, LaneLeft t, int lane,
                                            bool rot) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const int k = lane % kSegLanes;
  LaneWords<T> raw[kEncodeSets];
#pragma unroll
  for (int u = 0; u < kEncodeSets; u++)
    raw[u] = load_values(src + u * kSegsPerWarp * QCOLL_CODEC_GROUP,
                         set_avail(t, u), vec);
  float x[kEncodeSets][kLaneValues];
#pragma unroll
  for (int u = 0; u < kEncodeSets; u++) {
#pragma unroll
    for (int j = 0; j < kLaneValues; j++) x[u][j] = value_of(raw[u], j);
    if (rot) qcoll__codec_segment_rotate(x[u], k);
  }
  LaneCode c[kEncodeSets], own[kEncodeSets];
  encode_sets<F, kEncodeSets>(x, lane, c, own);
#pragma unroll
  for (int u = 0; u < kEncodeSets; u++)
    if (set_live(t, u)) store_code<F>(dst + u * kSegsPerWarp * gb, k, c[u]);
}

/* Phase 1: my piece of every segment, encoded, into its owner's region 0
 * (slot: my rank), the last group zero-padded past count.  Owners are
 * visited starting after me, so that ranks do not all write to the same
 * owner at once. */
template <typename T, int F>
__device__ __forceinline__ void encode_parts(const qcoll__ipc_view_t &v,
                                             const BlockState *s, const T *send,
                                             size_t count, Slots where,
                                             int warp, int lane, bool rot) {
  using W = Walk<kEncodeSets>;
  const uint32_t gb = qcoll__codec_group_bytes(static_cast<qcoll_quant_t>(F));
  const int seg = lane / kSegLanes;
  const size_t mine = slot_offset(v, 0, v.rank);
  const bool vec = vector_ok(send);
  int first = 0;
  for (int i = 0; i < v.nranks; i++) {
    const int owner = (v.rank + 1 + i) % v.nranks;
    const Piece p = my_piece(count, where, v.nranks, owner);
    const size_t j = first_step(warp, first);
    first = next_first(first, piece_steps<kEncodeSets>(p));
    W w = walk_from<kEncodeSets>(p, j);
    size_t at = lane_value(p, j, W::kGroups, lane);
    uint8_t *dst = reinterpret_cast<uint8_t *>(s->bases[owner] + mine) +
                   lane_group(p, j, W::kGroups, seg, gb);
    walk_steps(w, lane, [&](LaneLeft t) {
      encode_step<T, F>(send + opaque(at), vec, opaque(dst), t, lane, rot);
      at += kWarps * W::kValues;
      dst += kWarps * W::kGroups * gb;
    });
  }
}

/* ---- phase 2 ------------------------------------------------------------- */

/* Phase 2's loads of one chunk of contributions: for kSets sets, the
 * lane's share of contributions p0 .. p0 + kChunk - 1 (those below n) of
 * its group, from my region 0 (`in`: the lane's group in slot 0; slot p,
 * rank p's, is p * slot_bytes further). */
template <int F, int kSets, int kChunk>
__device__ __forceinline__ void load_chunk(const uint8_t *in, size_t slot_bytes,
                                           int p0, int n, LaneLeft t, int lane,
                                           RawCode c[kSets][kChunk]) {
  const uint32_t gb = qcoll__codec_group_bytes(static_cast<qcoll_quant_t>(F));
  const int k = lane % kSegLanes;
#pragma unroll
  for (int p = 0; p < kChunk; p++) {
    const uint8_t *group = in + (size_t)(p0 + p) * slot_bytes;
    const uint8_t *codes = group + code_word_offset<F>(k);
#pragma unroll
    for (int u = 0; u < kSets; u++) {
      c[u][p] = RawCode{0, 0, 0};
      if (p0 + p < n && set_live(t, u))
        c[u][p] = load_code<F>(group + u * kSegsPerWarp * gb,
                               codes + u * kSegsPerWarp * gb, k);
    }
  }
}

/* Contributions p0 .. p0 + kChunk - 1 of kSets sets, loaded (load_chunk)
 * and decoded: y[u * kChunk + p] is set u's of contribution p0 + p (zeros
 * past n). */
template <int F, int kSets, int kChunk>
__device__ __forceinline__ void decode_chunk(const uint8_t *in,
                                             size_t slot_bytes, int p0, int n,
                                             LaneLeft t, int lane,
                                             float y[kSets * kChunk]
                                                    [kLaneValues]) {
  const int k = lane % kSegLanes;
  RawCode c[kSets][kChunk];
  load_chunk<F, kSets, kChunk>(in, slot_bytes, p0, n, t, lane, c);
  LaneCode q[kSets * kChunk];
#pragma unroll
  for (int u = 0; u < kSets; u++)
#pragma unroll
    for (int p = 0; p < kChunk; p++) q[u * kChunk + p] = raw_quad<F>(c[u][p], k);
  decode_sets<F, kSets * kChunk>(q, y);
}

/* One warp step of phase 2: kSets sets of my segment's piece.  Each group's
 * n contributions are loaded kChunk at a time (every load of a chunk issued
 * before the first is used), decoded and added in rank order (the first
 * contribution is the sum's start, not an addition to zero, which would
 * turn a -0 into +0), re-encoded once (values past count zero again, unless
 * the groups are rotated: there the padding was rotated into real values)
 * and pushed into slot <my rank> of every other rank's region 1 (the lane's
 * group at byte `out` of each rank's buffer).  My own result is decoded
 * from the same codes here (the bits phase 3 would read back) and stored
 * at dst (set u at dst + 128u), as phase 3 stores the others'. */
template <typename T, int F, int kSets, int kChunk, int kRanks>
__device__ __forceinline__ void reduce_step(const qcoll__ipc_view_t &v,
                                            const BlockState *s,
                                            const uint8_t *in,
                                            size_t slot_bytes, size_t out,
                                            T *dst, bool vec, LaneLeft t,
                                            int lane, bool rot) {
  const uint32_t gb = qcoll__codec_group_bytes(static_cast<qcoll_quant_t>(F));
  const int n = kRanks > 0 ? kRanks : v.nranks;
  const int k = lane % kSegLanes;
  float acc[kSets][kLaneValues];
  for (int p0 = 0; p0 < n; p0 += kChunk) {
    float y[kSets * kChunk][kLaneValues];
    decode_chunk<F, kSets, kChunk>(in, slot_bytes, p0, n, t, lane, y);
#pragma unroll
    for (int u = 0; u < kSets; u++)
#pragma unroll
      for (int p = 0; p < kChunk; p++)
        if (p0 + p < n) {
#pragma unroll
          for (int j = 0; j < kLaneValues; j++)
            acc[u][j] = p0 + p == 0
                            ? y[u * kChunk + p][j]
                            : __fadd_rn(acc[u][j], y[u * kChunk + p][j]);
        }
  }
  /* The padding of the last group: zero again, whatever it decoded to (a
   * lane tests once whether any of its values lies past count). */
  if (!rot && set_avail(t, kSets - 1) < kLaneValues) {
#pragma unroll
    for (int u = 0; u < kSets; u++)
#pragma unroll
      for (int j = 0; j < kLaneValues; j++)
        if (j >= set_avail(t, u)) acc[u][j] = 0.0f;
  }
  LaneCode sum[kSets], own[kSets];
  encode_sets<F, kSets>(acc, lane, sum, own);
  /* The other ranks, those after me first, wrapping round (no division in
   * the loop). */
  for (int i = 1, q = v.rank + 1; i < n; i++, q++) {
    if (q == n) q = 0;
    uint8_t *region = reinterpret_cast<uint8_t *>(s->bases[q]) + out;
#pragma unroll
    for (int u = 0; u < kSets; u++)
      if (set_live(t, u))
        store_code<F>(region + u * kSegsPerWarp * gb, k, sum[u]);
  }
  store_results<T, F, kSets>(own, dst, vec, t, lane, rot);
}

/* Phase 2: my segment's piece, reduced from every rank's contribution in
 * rank order and pushed, encoded once, into every other rank's region 1
 * (slot: my rank), and decoded into my recv.  The padding is zero up to the
 * group's end, so the walk's values count up to count (only the live sets'
 * values are stored). */
template <typename T, int F, int kSets, int kChunk, int kRanks>
__device__ __forceinline__ void reduce_segment(const qcoll__ipc_view_t &v,
                                               const BlockState *s, T *recv,
                                               size_t count, Slots where,
                                               int warp, int lane, bool rot) {
  using W = Walk<kSets>;
  const uint32_t gb = qcoll__codec_group_bytes(static_cast<qcoll_quant_t>(F));
  const int seg = lane / kSegLanes;
  const Piece p = my_piece(count, where, v.nranks, v.rank);
  Piece counted = p;
  counted.limit = count;
  const size_t j = (size_t)warp;
  W w = walk_from<kSets>(counted, j);
  const size_t at = lane_group(p, j, W::kGroups, seg, gb);
  const uint8_t *in = reinterpret_cast<const uint8_t *>(s->bases[v.rank] +
                                                        slot_offset(v, 0, 0)) +
                      at;
  size_t out = slot_offset(v, 1, v.rank) + at;
  const size_t slot_bytes = qcoll__qlayout_slot_bytes(v.region_bytes, v.nranks);
  const bool vec = vector_ok(recv);
  size_t val = lane_value(p, j, W::kGroups, lane);
  walk_steps(w, lane, [&](LaneLeft t) {
    reduce_step<T, F, kSets, kChunk, kRanks>(v, s, opaque(in), slot_bytes, out,
                                             recv + opaque(val), vec, t, lane,
                                             rot);
    in += kWarps * W::kGroups * gb;
    out += kWarps * W::kGroups * gb;
    val += kWarps * W::kValues;
  });
}

/* ---- phase 3 ------------------------------------------------------------- */

/* One warp step of phase 3: the lane's groups read from my region 1 at
 * `src` (set u: 4u groups further), decoded and stored at dst
 * (store_results). */
template <typename T, int F>
__device__ __forceinline__ void decode_step(const uint8_t *src, T *dst,
                                            bool vec, LaneLeft t, int lane,
                                            bool rot) {
  constexpr qcoll_quant_t fmt = static_cast<qcoll_quant_t>(F);
  const uint32_t gb = qcoll__codec_group_bytes(fmt);
  const int k = lane % kSegLanes;
  const uint8_t *codes = src + code_word_offset<F>(k);
  RawCode c[kDecodeSets];
#pragma unroll
  for (int u = 0; u < kDecodeSets; u++) {
    c[u] = RawCode{0, 0, 0};
    if (set_live(t, u))
      c[u] = load_code<F>(src + u * kSegsPerWarp * gb,
                          codes + u * kSegsPerWarp * gb, k);
  }
  LaneCode q[kDecodeSets];
#pragma unroll
  for (int u = 0; u < kDecodeSets; u++) q[u] = raw_quad<F>(c[u], k);
  store_results<T, F, kDecodeSets>(q, dst, vec, t, lane, rot);
}

/* Phase 3: every other segment's piece, decoded from my region 1 into
 * recv (phase 2 stored my own). */
template <typename T, int F>
__device__ __forceinline__ void decode_all(const qcoll__ipc_view_t &v,
                                           const BlockState *s, T *recv,
                                           size_t count, Slots where, int warp,
                                           int lane, bool rot) {
  using W = Walk<kDecodeSets>;
  const uint32_t gb = qcoll__codec_group_bytes(static_cast<qcoll_quant_t>(F));
  const int seg = lane / kSegLanes;
  const bool vec = vector_ok(recv);
  int first = 0;
  for (int owner = 0; owner < v.nranks; owner++) {
    if (owner == v.rank) continue;
    const Piece p = my_piece(count, where, v.nranks, owner);
    const size_t j = first_step(warp, first);
    first = next_first(first, piece_steps<kDecodeSets>(p));
    W w = walk_from<kDecodeSets>(p, j);
    const uint8_t *src = reinterpret_cast<const uint8_t *>(
                             s->bases[v.rank] + slot_offset(v, 1, owner)) +
                         lane_group(p, j, W::kGroups, seg, gb);
    size_t at = lane_value(p, j, W::kGroups, lane);
    walk_steps(w, lane, [&](LaneLeft t) {
      decode_step<T, F>(opaque(src), recv + opaque(at), vec, t, lane, rot);
      src += kWarps * W::kGroups * gb;
      at += kWarps * W::kValues;
    });
  }
}

/* ---- the kernel ---------------------------------------------------------- */

/* Phase 2 with kReduceLoads (set, contribution) loads in flight: small
 * worlds take more sets per step, larger ones more contributions per
 * chunk (one rank: one contribution per chunk, so that no decode is
 * spent on a contribution that does not exist).  One and two ranks are
 * compiled with the number of ranks a constant (kRanks; 0: v.nranks), so
 * their contribution loops have no run-time bounds. */
template <typename T, int F>
__device__ __forceinline__ void reduce_any(const qcoll__ipc_view_t &v,
                                           const BlockState *s, T *recv,
                                           size_t count, Slots where, int warp,
                                           int lane, bool rot) {
  if (v.nranks == 1)
    reduce_segment<T, F, kReduceLoads / 2, 1, 1>(v, s, recv, count, where, warp,
                                                 lane, rot);
  else if (v.nranks == 2)
    reduce_segment<T, F, kReduceLoads / 2, 2, 2>(v, s, recv, count, where, warp,
                                                 lane, rot);
  else
    reduce_segment<T, F, kReduceLoads / 4, 4, 0>(v, s, recv, count, where, warp,
                                                 lane, rot);
}

/* Round k of a launch: its first element, its count and where its groups
 * lie (area index b * ring + k % ring, quant_layout.h "ring"). */
struct Round {
  size_t off, n;
  Slots where;
};

__device__ __forceinline__ Round round_at(size_t k, size_t count, size_t chunk,
                                          size_t area, int ring) {
  Round r;
  r.off = k * chunk;
  r.n = count - r.off < chunk ? count - r.off : chunk;
  r.where = Slots{area, qcoll__qlayout_area_index(blockIdx.x, ring, k)};
  return r;
}

/* The message streams through the data regions in rounds of `chunk`
 * elements (whole groups), round k with the block's k-th epoch after its
 * first (each thread follows the same sequence in registers).  Block b
 * waits only on its peers' blocks b, so the blocks go from round to round
 * on their own (no grid-wide drain between rounds, as between the launches
 * of a host loop); that is safe because a streaming launch (area != 0)
 * keeps each block's groups in its own areas of every slot
 * (quant_layout.h), so a slot byte is written and read by blocks b alone.
 *
 * ring 1: round after round, phases 1, 2, 3 of one round between its
 * barriers.  ring 2 (the pipeline, the header's "Pipelined rounds"): step
 * i decodes round i - 2, encodes round i, reduces round i - 1, each wait
 * on a flag raised one step earlier. */
template <typename T, int F>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    quant_twoshot_kernel(qcoll__ipc_view_t v, const T *send, T *recv,
                         size_t count, size_t chunk, size_t area, int ring,
                         int rotate) {
  __shared__ BlockState s;
  block_begin(v, &s,
              !long_launch(count * sizeof(T), QCOLL_IPC_LONG_QUANT_BYTES));
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const bool rot = rotate != 0; /* the same for the whole grid */
  const size_t rounds = (count + chunk - 1) / chunk;
  const size_t lag = ring > 1 ? 1 : 0;
  /* The epochs of rounds i, i - 1 and i - 2. */
  uint32_t e0 = s.epoch, e1 = 0, e2 = 0;

  for (size_t i = 0; i < rounds + 2 * lag; i++) {
    if (i != 0) e2 = e1, e1 = e0, e0 = epoch_after(e0);
    if (lag && i >= 2) {
      const Round r = round_at(i - 2, count, chunk, area, ring);
      if (!flags_wait(v, 1, &s, e2)) return;
      decode_all<T, F>(v, &s, recv + r.off, r.n, r.where, warp, lane, rot);
    }
    if (i < rounds) {
      const Round r = round_at(i, count, chunk, area, ring);
      encode_parts<T, F>(v, &s, send + r.off, r.n, r.where, warp, lane, rot);
      flags_arrive(v, 0, &s, e0, true);
    }
    if (i >= lag && i - lag < rounds) {
      const Round r = round_at(i - lag, count, chunk, area, ring);
      const uint32_t e = lag ? e1 : e0;
      if (!flags_wait(v, 0, &s, e)) return;
      reduce_any<T, F>(v, &s, recv + r.off, r.n, r.where, warp, lane, rot);
      flags_arrive(v, 1, &s, e, true);
      if (!lag) {
        if (!flags_wait(v, 1, &s, e)) return;
        decode_all<T, F>(v, &s, recv + r.off, r.n, r.where, warp, lane, rot);
      }
    }
  }
  /* The epoch of the last round, which the next launch follows. */
  if (threadIdx.x == 0) s.epoch = lag ? e2 : e0;
  block_end(v, &s);
}

/* ---- dispatch ------------------------------------------------------------ */

typedef void (*kernel_fn)(qcoll__ipc_view_t, const void *, void *, size_t,
                          size_t, size_t, int, int);

template <typename T>
kernel_fn pick_format(qcoll_quant_t quant) {
  switch (quant) {
    case QCOLL_QUANT_FP8:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_FP8>);
    case QCOLL_QUANT_INT8:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT8>);
    case QCOLL_QUANT_INT6:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT6>);
    case QCOLL_QUANT_INT4:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT4>);
    case QCOLL_QUANT_INT3:
      return reinterpret_cast<kernel_fn>(
          quant_twoshot_kernel<T, QCOLL_QUANT_INT3>);
    default: return nullptr;
  }
}

kernel_fn pick_kernel(qcoll_dtype_t dtype, qcoll_op_t op, qcoll_quant_t quant) {
  if (op != QCOLL_SUM) return nullptr;
  switch (dtype) {
    case QCOLL_F16: return pick_format<__half>(quant);
    case QCOLL_BF16: return pick_format<__nv_bfloat16>(quant);
    case QCOLL_F32: return pick_format<float>(quant);
    default: return nullptr;
  }
}

/* The message bytes per round that a long launch on the larger grid
 * (view.max_grid_long) takes by default: 0 (what the regions hold) for
 * INT8 and FP8, less for the codes narrower than a byte.  On one H200
 * shared by two ranks (132 blocks per rank, bf16, 256 MiB, unregistered,
 * out of place), the rounds that the regions hold (107 MB of message for
 * INT4) took INT4 1164 us, INT6 1373 and INT3 1667, about twice their time
 * on the smaller grid (774, 872, 833); rounds of 40 MiB took INT4 654-660
 * and INT6 757, of 44 MiB INT4 642-645 (in place 653-656 against 664-667),
 * of 32 MiB INT3 764 (40 MiB: 924 once; from 48 MiB on, INT6 and INT3 were
 * slow again, from 56 MiB INT4).  INT8 and FP8 were
 * fastest without a limit (670 and 716 against 723 and 828 with 32 MiB),
 * and so was every format on the smaller grid of four and eight ranks
 * sharing a GPU (INT4, 4 ranks, 64 MiB: 446 against 493), which therefore
 * takes none (docs/results/2026-12-04-h200-rounds.md). */
size_t larger_grid_round_bytes(qcoll_quant_t quant) {
  const size_t mib = (size_t)1 << 20;
  switch (quant) {
    case QCOLL_QUANT_INT4: return 44 * mib;
    case QCOLL_QUANT_INT6: return 40 * mib;
    case QCOLL_QUANT_INT3: return 32 * mib;
    default: return 0;
  }
}

}  // namespace

extern "C" int qcoll__cuda_all_reduce_quant_supported(qcoll_dtype_t dtype,
                                                      qcoll_op_t op,
                                                      qcoll_quant_t quant) {
  return pick_kernel(dtype, op, quant) != nullptr;
}

extern "C" size_t qcoll__cuda_all_reduce_quant_chunk_elems(
    const qcoll__ipc_view_t *view, qcoll_quant_t quant) {
  return qcoll__qlayout_chunk_elems(view->region_bytes, view->nranks,
                                    qcoll__codec_group_bytes(quant));
}

/* Whether a launch of count elements runs alone (ipc_sync.cuh
 * long_launch). */
static bool runs_alone(size_t count, qcoll_dtype_t dtype) {
  return long_launch(count * qcoll_dtype_size(dtype),
                     QCOLL_IPC_LONG_QUANT_BYTES);
}

/* The message bytes per round of a launch: QCOLL_QUANT_ROUND_BYTES where
 * it is set, else larger_grid_round_bytes on the larger grid; 0: what the
 * regions hold. */
static size_t round_bytes(const qcoll__ipc_view_t *view, qcoll_quant_t quant,
                          bool larger_grid) {
  if (view->quant_round_bytes) return view->quant_round_bytes;
  return larger_grid ? larger_grid_round_bytes(quant) : 0;
}

/* Whether a launch of several rounds of `bytes` (round_bytes) pipelines
 * them (view.quant_pipeline).  On one H100 shared by two ranks (bf16,
 * unregistered, graph, 64-256 MiB) the pipeline made INT4's rounds of 44
 * MiB 1.3-3 % faster in all 12 cells (256 MiB 793-794 against 804 us),
 * INT8's rounds of what the regions hold 6-9.5 % slower (918-925 against
 * 841-842), and INT6's (40 MiB) and INT3's (32 MiB) faster or slower by a
 * few % depending on size and placement (INT6 256 MiB 938 / 948 against
 * 923 / 917), so by default only INT4's limited rounds are pipelined
 * (docs/results/2026-12-07-h100-quant-pipeline.md). */
static bool pipelined(const qcoll__ipc_view_t *view, qcoll_quant_t quant,
                      size_t bytes) {
  return view->quant_pipeline == 2 ||
         (view->quant_pipeline == 1 && bytes && quant == QCOLL_QUANT_INT4);
}

/* The most groups of one segment per round (quant_layout.h "rounds"): at
 * least one; 0 without a limit. */
static size_t round_groups(const qcoll__ipc_view_t *view, qcoll_dtype_t dtype,
                           size_t bytes) {
  if (!bytes) return 0;
  const size_t groups = bytes / qcoll_dtype_size(dtype) / QCOLL_QLAYOUT_GROUP /
                        (size_t)view->nranks;
  return groups ? groups : 1;
}

/* The plan of one launch: a long one on the larger grid, in rounds of
 * round_bytes.  False when the regions hold no group. */
static bool launch_plan(const qcoll__ipc_view_t *view, size_t count,
                        qcoll_dtype_t dtype, qcoll_quant_t quant,
                        qcoll__qlayout_plan_t *plan) {
  /* A long launch's limit exceeds the ordinary one only where the ranks
   * agreed a larger grid (at most two ranks on a GPU). */
  const int limit = grid_limit(view, runs_alone(count, dtype));
  const bool larger_grid = limit > grid_limit(view);
  const size_t bytes = round_bytes(view, quant, larger_grid);
  return qcoll__qlayout_plan(count, view->region_bytes, view->nranks,
                             qcoll__codec_group_bytes(quant),
                             round_groups(view, dtype, bytes),
                             pipelined(view, quant, bytes) ? 2 : 1, limit,
                             plan) != 0;
}

extern "C" int qcoll__cuda_all_reduce_quant_grid(const qcoll__ipc_view_t *view,
                                                 size_t count,
                                                 qcoll_dtype_t dtype,
                                                 qcoll_quant_t quant,
                                                 size_t *round_elems) {
  qcoll__qlayout_plan_t plan;
  if (!launch_plan(view, count, dtype, quant, &plan)) return 0;
  if (round_elems) *round_elems = plan.area ? plan.chunk : count;
  return plan.grid;
}

extern "C" cudaError_t qcoll__cuda_all_reduce_quant_launch(
    const qcoll__ipc_view_t *view, const void *sendbuf, void *recvbuf,
    size_t count, qcoll_dtype_t dtype, qcoll_quant_t quant, int rotate,
    cudaStream_t stream) {
  kernel_fn fn = pick_kernel(dtype, QCOLL_SUM, quant);
  qcoll__qlayout_plan_t plan;
  if (!fn || view->nranks < 1 || view->nranks > QCOLL_IPC_MAX_RANKS ||
      !launch_plan(view, count, dtype, quant, &plan))
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  qcoll__ipc_view_t v = *view;
  int rot = rotate != 0;
  void *args[] = {&v,         &sendbuf,   &recvbuf,   &count,
                  &plan.chunk, &plan.area, &plan.ring, &rot};
  return launch_kernel(reinterpret_cast<const void *>(fn), plan.grid, args,
                       stream, v.pdl != 0 && !runs_alone(count, dtype));
}

extern "C" cudaError_t qcoll__cuda_all_reduce_quant_blocks_per_sm(int *per_sm) {
  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_quant_t formats[] = {QCOLL_QUANT_FP8, QCOLL_QUANT_INT8,
                                          QCOLL_QUANT_INT6, QCOLL_QUANT_INT4,
                                          QCOLL_QUANT_INT3};
  int least = 1 << 30;
  for (qcoll_dtype_t d : dtypes)
    for (qcoll_quant_t q : formats) {
      int n = 0;
      cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, reinterpret_cast<const void *>(pick_kernel(d, QCOLL_SUM, q)),
          kThreads, 0);
      if (err != cudaSuccess) return err;
      if (n < least) least = n;
    }
  *per_sm = least;
  return cudaSuccess;
}
