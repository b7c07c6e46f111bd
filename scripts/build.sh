#!/usr/bin/env bash
# Configure and build qcoll into $QCOLL_BUILD_DIR (default: build).  The CUDA
# back end is built whenever nvcc is found; the library still runs on
# machines without a GPU.  Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${QCOLL_BUILD_DIR:-build}
JOBS=${QCOLL_JOBS:-$(nproc)}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S . -B "$BUILD_DIR" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
