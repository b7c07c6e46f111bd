/*
 * Launchers that encode and decode whole buffers on the GPU with the
 * quantisation formats of ../codec.h (plain C; the kernels live in
 * codec_kernels.cu).  The bytes are the same as qcoll__codec_encode() and
 * the floats the same as qcoll__codec_decode() on the host, bit for bit.
 *
 * Buffers are device memory on the current device; the work is enqueued on
 * `stream` (a cudaStream_t, NULL for the legacy default stream) and nothing
 * is synchronised.  Return: a cudaError_t as int, 0 (cudaSuccess) when the
 * launch was enqueued, cudaErrorInvalidValue (1) for a format that is not
 * quantised.  n == 0 launches nothing.
 */
#ifndef QCOLL_COLL_CUDA_CODEC_LAUNCH_H
#define QCOLL_COLL_CUDA_CODEC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the kernel maps groups to threads.  All give identical bytes; the
 * GPU test and the CPU emulation (tests/gpu/emu/codec_emu.cpp) run every
 * one, and the bandwidth test judges the fastest. */
typedef enum qcoll__codec_cuda_variant {
  QCOLL_CODEC_CUDA_WARP = 0,   /* one warp per group, one value per lane */
  QCOLL_CODEC_CUDA_THREAD = 1, /* one thread per group */
  /* Eight lanes per group, four consecutive values per lane (one 16-byte
   * load or store), several groups per lane in flight: the fast one.
   * Vector accesses need the f32 buffer 16-byte and the encoded buffer
   * 4-byte aligned; other pointers take a slower path of scalar and byte
   * accesses, with the same results. */
  QCOLL_CODEC_CUDA_SEGMENT = 2,
} qcoll__codec_cuda_variant_t;

/* Number of variants: they are 0 .. QCOLL_CODEC_CUDA_VARIANTS - 1. */
#define QCOLL_CODEC_CUDA_VARIANTS 3

/* Short name of a variant, for tables and messages ("?" for others). */
static inline const char *qcoll__codec_cuda_variant_name(
    qcoll__codec_cuda_variant_t variant) {
  switch (variant) {
    case QCOLL_CODEC_CUDA_WARP: return "warp";
    case QCOLL_CODEC_CUDA_THREAD: return "thread";
    case QCOLL_CODEC_CUDA_SEGMENT: return "segment";
    default: return "?";
  }
}

/* n f32 values at in -> qcoll__codec_encoded_bytes(fmt, n) bytes at out. */
int qcoll__codec_cuda_encode(qcoll_quant_t fmt,
                             qcoll__codec_cuda_variant_t variant,
                             const float *in, size_t n, uint8_t *out,
                             void *stream);

/* qcoll__codec_encoded_bytes(fmt, n) bytes at in -> n f32 values at out. */
int qcoll__codec_cuda_decode(qcoll_quant_t fmt,
                             qcoll__codec_cuda_variant_t variant,
                             const uint8_t *in, size_t n, float *out,
                             void *stream);

#ifdef __cplusplus
}
#endif

#endif
