#!/usr/bin/env bash
# Build qcoll with CUDA and run the GPU tests (ctest label "gpu") on a
# machine with an NVIDIA GPU.  Starts the MPS daemon first, so that ranks
# sharing one GPU run concurrently (without MPS they are time-sliced: the
# tests still pass, only far slower), and stops it at exit.
#
#   scripts/gpu-tests.sh [extra ctest arguments, e.g. -R gpu.kernels]
#
# Environment:
#   BUILD_DIR         build directory (default: <repo>/build-gpu)
#   JOBS              build parallelism (default: nproc)
#   CUDA_ARCH         CUDA architectures (default: 90, H100/H200)
#   QCOLL_CMOCKA_DIR  prefix holding include/cmocka.h and lib/libcmocka.so*,
#                     for machines without cmocka installed (the build's
#                     unit tests need it to configure)
#   NO_MPS=1          do not start the MPS daemon
#   OUT               when set, logs are copied there at exit
#
# Exit status: ctest's; also non-zero when the build fails, when no GPU is
# visible, or when a GPU test was skipped (on a GPU machine a skip means the
# setup is wrong, not that the test passed).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
arch=${CUDA_ARCH:-90}
logdir=$(mktemp -d /tmp/qcoll-gpu-tests.XXXXXX)
log=$logdir/gpu-tests.log
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps/pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps/log}
started_mps=0

say() { echo "gpu-tests: $*" | tee -a "$log"; }

cleanup() {
  local status=$?
  if [ "$started_mps" = 1 ]; then
    say "stopping the MPS daemon"
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
  fi
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    cp "$log" "$OUT/" 2>/dev/null || true
    cp "$logdir/build.log" "$OUT/" 2>/dev/null || true
    cp "$build/Testing/Temporary/LastTest.log" "$OUT/ctest-LastTest.log" 2>/dev/null || true
    cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "$OUT/mps-control.log" 2>/dev/null || true
    cp "$CUDA_MPS_LOG_DIRECTORY/server.log" "$OUT/mps-server.log" 2>/dev/null || true
  fi
  exit $status
}
trap cleanup EXIT

# ---- the GPU -------------------------------------------------------------
if ! nvidia-smi >>"$log" 2>&1; then
  say "nvidia-smi failed: no usable NVIDIA GPU here, nothing to test"
  exit 1
fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv | tee -a "$log"

# ---- MPS ----------------------------------------------------------------
if [ "${NO_MPS:-0}" != 1 ]; then
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    say "nvidia-cuda-mps-control not found: running without MPS (ranks sharing a GPU are time-sliced, slow)"
  else
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
      say "an MPS daemon already runs at $CUDA_MPS_PIPE_DIRECTORY: using it"
    elif nvidia-cuda-mps-control -d; then
      started_mps=1
      say "MPS daemon started (pipes in $CUDA_MPS_PIPE_DIRECTORY)"
    else
      say "could not start the MPS daemon: running without MPS (slow)"
    fi
  fi
fi

# ---- build ----------------------------------------------------------------
cmake_args=(-S "$root" -B "$build" -DQCOLL_WITH_CUDA=ON "-DQCOLL_CUDA_ARCH=$arch")
if [ -n "${QCOLL_CMOCKA_DIR:-}" ]; then
  lib=$(ls "$QCOLL_CMOCKA_DIR"/lib/libcmocka.so* 2>/dev/null | head -n 1)
  cmake_args+=("-DCMOCKA_INCLUDE_DIR=$QCOLL_CMOCKA_DIR/include" "-DCMOCKA_LIBRARY=$lib")
fi
say "configuring: cmake ${cmake_args[*]}"
if ! cmake "${cmake_args[@]}" >"$logdir/build.log" 2>&1; then
  tail -n 30 "$logdir/build.log"
  say "configure failed (full output in build.log)"
  exit 1
fi
if ! grep -q "qcoll: CUDA back end ON" "$logdir/build.log"; then
  grep "qcoll:" "$logdir/build.log"
  say "the CUDA back end is OFF (no CUDA compiler found?): the GPU tests would only skip"
  exit 1
fi
say "building with $jobs jobs"
if ! cmake --build "$build" -j "$jobs" >>"$logdir/build.log" 2>&1; then
  grep -E "error|Error" "$logdir/build.log" | head -n 40
  say "build failed (full output in build.log)"
  exit 1
fi

# ---- tests ----------------------------------------------------------------
ctest_args=(-L gpu --output-on-failure)
# The GPUs CUDA will see (nvidia-smi ignores CUDA_VISIBLE_DEVICES).
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  ngpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
if [ "$ngpus" -lt 2 ]; then
  say "$ngpus GPU visible: the multi-GPU tests (gpu.multi_device.*, nccl.gpu.multi2) need two, not run"
  ctest_args+=(-E 'gpu\.multi_device\.|nccl\.gpu\.multi2')
fi
say "running: ctest ${ctest_args[*]} $*"
(cd "$build" && ctest "${ctest_args[@]}" "$@") 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
if grep -q "(Skipped)" "$log"; then
  say "some GPU tests were skipped on a machine with a GPU: see their SKIP lines above"
  [ "$status" = 0 ] && status=1
fi
say "ctest exit status $status; logs in $logdir"
exit "$status"
