/*
 * The inputs of the GPU soak (gpu_soak.c), shared by the host check and the
 * device kernels (gpu_soak_kernels.cu), so both compute the same values from
 * one definition.
 *
 * Element i of rank r's input at replay k of graph `salt` is a small integer
 * in [-8, 8] taken from a hash of (salt, r, i, k): it differs between ranks
 * (a result that used one rank's data twice is wrong), between elements (a
 * segment copied to the wrong offset is wrong), between replays (a result
 * left over from an earlier replay is wrong) and between the two graphs (one
 * graph reading the other's buffers is wrong).  Sums over up to 32 ranks stay
 * within [-256, 256], exact in f32 and in bf16 (8 significant bits).
 */
#ifndef QCOLL_TESTS_GPU_SOAK_H
#define QCOLL_TESTS_GPU_SOAK_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gpu_test.h"

#ifdef __CUDACC__
#define SOAK_HD __host__ __device__
#else
#define SOAK_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* |sum| <= 8 * ranks must be exact in bf16: at most 256. */
#define SOAK_MAX_RANKS 32

static inline SOAK_HD uint32_t soak_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static inline SOAK_HD int soak_input(uint32_t salt, int rank, uint32_t index,
                                     uint32_t replay) {
  uint32_t h = soak_mix32(replay * 0x9e3779b1u + index * 0x85ebca77u +
                          (uint32_t)rank * 0xc2b2ae3du + salt * 0x27d4eb2fu);
  return (int)(h % 17u) - 8;
}

/* The exact sum over ranks 0..nranks-1. */
static inline SOAK_HD float soak_expected(uint32_t salt, int nranks,
                                          uint32_t index, uint32_t replay) {
  int sum = 0;
  for (int r = 0; r < nranks; r++) sum += soak_input(salt, r, index, replay);
  return (float)sum;
}

/* Enqueue send[i] = soak_input(salt, rank, i, *replay) for i < count, with
 * *replay read on the device (dtype QCOLL_F32 or QCOLL_BF16). */
cudaError_t soak_fill_launch(void *send, size_t count, qcoll_dtype_t dtype,
                             uint32_t salt, int rank, const unsigned *replay,
                             cudaStream_t stream);

/* Enqueue a check of recv[i] == soak_expected(salt, nranks, i, *replay)
 * for i < count, counted into *state (state->checks grows by one per
 * launch, state->first_iter is the replay of the first wrong element). */
cudaError_t soak_check_launch(const void *recv, size_t count,
                              qcoll_dtype_t dtype, uint32_t salt, int nranks,
                              const unsigned *replay, gt_check_state_t *state,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
