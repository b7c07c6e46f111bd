/* Stand-in for cuda_fp16.h in the CPU emulation (tests/gpu/emu). */
#include "emu_half_types.h"
