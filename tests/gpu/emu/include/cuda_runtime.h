/* Stand-in for cuda_runtime.h in the CPU emulation (tests/gpu/emu). */
#include "cuda_runtime_api.h"
