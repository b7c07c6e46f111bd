/* The 16-bit float types of the CPU emulation (tests/gpu/emu), behind the
 * stand-ins for cuda_fp16.h and cuda_bf16.h: the conversions the kernels
 * use, as the host's exact conversions of src/base/dtype.h (round to
 * nearest even). */
#ifndef QCOLL_EMU_HALF_TYPES_H
#define QCOLL_EMU_HALF_TYPES_H

#include "base/dtype.h"

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
static inline float __half2float(__half h) {
  return qcoll__f16_to_f32(h.bits);
}
static inline __half __float2half_rn(float f) {
  return __half{qcoll__f32_to_f16(f)};
}
static inline __half __ushort_as_half(unsigned short u) {
  return __half{u};
}
static inline float __bfloat162float(__nv_bfloat16 h) {
  return qcoll__bf16_to_f32(h.bits);
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{qcoll__f32_to_bf16(f)};
}
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  return __nv_bfloat16{u};
}
/* Pairs, element x in the low half of the word as on the device. */
struct __half2 {
  __half x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
static inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__float2half_rn(a), __float2half_rn(b)};
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}

#endif
