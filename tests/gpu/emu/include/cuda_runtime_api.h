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
/* 16-byte vectors, 16-byte aligned like CUDA's. */
template <typename E>
struct alignas(16) emu_vec4 {
  E x, y, z, w;
};
typedef emu_vec4<unsigned> uint4;
typedef emu_vec4<float> float4;
template <typename E>
static inline emu_vec4<E> emu_make_vec4(E a, E b, E c, E d) {
  emu_vec4<E> v;
  v.x = a;
  v.y = b;
  v.z = c;
  v.w = d;
  return v;
}
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return emu_make_vec4(a, b, c, d);
}
static inline float4 make_float4(float a, float b, float c, float d) {
  return emu_make_vec4(a, b, c, d);
}
/* Launch configuration of cudaLaunchKernelExC (emu_shim.h runs it as a
 * plain launch: the attributes change nothing on the CPU). */
enum cudaLaunchAttributeID {
  cudaLaunchAttributeProgrammaticStreamSerialization = 5
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  union {
    int programmaticStreamSerializationAllowed;
  } val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute *attrs;
  unsigned numAttrs;
};
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
