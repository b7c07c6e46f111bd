/*
 * Stand-in for the CUDA runtime API header in the CPU emulation of the IPC
 * kernels (tests/gpu/emu): the few types and calls the kernels' launchers
 * use.  Never used by the library itself.
 */
#ifndef QCOLL_EMU_CUDA_RUNTIME_API_H
#define QCOLL_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef struct emu_stream *cudaStream_t;
enum { cudaDevAttrMultiProcessorCount = 16 };

#ifdef __cplusplus
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  uint4 u;
  u.x = a;
  u.y = b;
  u.z = c;
  u.w = d;
  return u;
}
extern "C" {
#endif

cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks,
                                                          const void *fn,
                                                          int threads,
                                                          size_t smem);

#ifdef __cplusplus
}
#endif

#endif
