#!/usr/bin/env bash
# Everything a GPU machine session verifies, in one call, each step with its
# own time limit, every log under $OUT (default /tmp/qcoll-device):
#   1. scripts/gpu-tests.sh: build with CUDA, MPS, `ctest -L gpu`
#   2. qcoll-perf all-reduce sweeps (bf16, exact check) at 2, 4 and 8 ranks on
#      the GPU(s), eager and with -G (graph replays), and a 1-rank NCCL
#      comparison (NCCL refuses several ranks on one GPU)
#   3. the Python/PyTorch tests (torch installed there)
# Usage on the device machine, from the repository root:
#   OUT=$OUT QCOLL_CMOCKA_DIR=$PWD/build-deps/cmocka scripts/device-suite.sh
# (the device machine has no cmocka and no network: carry build-deps/).
# Steps can be chosen with STEPS="tests perf python" (default: all three);
# CTEST_ARGS adds ctest arguments (e.g. "-E soak --timeout 90") and
# TESTS_LIMIT/PYTHON_LIMIT bound those steps in seconds.
# The device tool brings back at most 8 files, so every log is written to a
# scratch folder and packed into $OUT/logs.tar.gz at exit; suite.log (the
# summary) is also copied beside it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final_out=${OUT:-/tmp/qcoll-device}
export OUT=$(mktemp -d /tmp/qcoll-device-logs.XXXXXX)
mkdir -p "$final_out"
pack() {
  # gpu-tests.sh keeps its logs in /tmp/qcoll-gpu-tests.*: take them even
  # when a step was cut off before it copied them.
  for d in /tmp/qcoll-gpu-tests.*; do [ -d "$d" ] && cp -r "$d" "$OUT/" 2>/dev/null; done
  cp "$BUILD_DIR/Testing/Temporary/LastTest.log" "$OUT/ctest-LastTest-final.log" 2>/dev/null
  tar -C "$OUT" -czf "$final_out/logs.tar.gz" . 2>/dev/null
  cp "$OUT/suite.log" "$final_out/" 2>/dev/null
}
started=0
finish() {
  [ "$started" = 1 ] && echo quit | nvidia-cuda-mps-control
  pack
}
trap finish EXIT
export BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
export JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-"tests perf python"}
mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps/pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps/log}
status=0
step() { echo "== $(date +%T) $*" | tee -a "$OUT/suite.log"; }
{ nvidia-smi; nvidia-smi topo -m; nproc; } >"$OUT/machine.txt" 2>&1

if [[ " $STEPS " == *" tests "* ]]; then
  step "gpu tests"
  # shellcheck disable=SC2086  # CTEST_ARGS is a list of words
  NO_MPS=0 timeout "${TESTS_LIMIT:-420}" "$root/scripts/gpu-tests.sh" ${CTEST_ARGS:-} \
    >"$OUT/gpu-tests.out" 2>&1 || status=1
  tail -n 25 "$OUT/gpu-tests.out" | tee -a "$OUT/suite.log"
fi

# The remaining steps need MPS running for multi-rank runs on one GPU.
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && started=1
fi
if [ ! -x "$BUILD_DIR/tools/qcoll-perf/qcoll-perf" ]; then
  step "build (no tests step ran)"
  args=()
  if [ -n "${QCOLL_CMOCKA_DIR:-}" ]; then
    args=("-DCMOCKA_INCLUDE_DIR=$QCOLL_CMOCKA_DIR/include"
          "-DCMOCKA_LIBRARY=$(ls "$QCOLL_CMOCKA_DIR"/lib/libcmocka.so* | head -n 1)")
  fi
  cmake -S "$root" -B "$BUILD_DIR" "${args[@]}" >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD_DIR" -j "$JOBS" >>"$OUT/build.log" 2>&1 || { status=1; tail "$OUT/build.log"; }
fi
RUN=$BUILD_DIR/tools/qcoll-run/qcoll-run
PERF=$BUILD_DIR/tools/qcoll-perf/qcoll-perf

if [[ " $STEPS " == *" perf "* ]]; then
  for n in ${PERF_RANKS:-2 4 8}; do
    for graph in 0 1; do
      name="perf-allreduce-bf16-n$n-G$graph"
      step "$name"
      args=(-m gpu -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5 -c 1 -d bf16)
      [ "$graph" = 1 ] && args+=(-G 1)
      echo "# $RUN -n $n $PERF ${args[*]} all_reduce" >"$OUT/$name.log"
      timeout 150 "$RUN" -n "$n" "$PERF" "${args[@]}" all_reduce >>"$OUT/$name.log" 2>&1 || status=1
      grep -E "Out of bounds|Avg bus" "$OUT/$name.log" | tee -a "$OUT/suite.log"
    done
  done
  step "perf-vs-nccl-n1"
  echo "# $PERF -m gpu --vs-nccl -b 8 -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16" >"$OUT/perf-vs-nccl-n1.log"
  timeout 150 "$PERF" -m gpu --vs-nccl -b 8 -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16 \
    >>"$OUT/perf-vs-nccl-n1.log" 2>&1 || status=1
fi

if [[ " $STEPS " == *" python "* ]]; then
  step "python and torch tests"
  (cd "$root" && QCOLL_LIB=$BUILD_DIR/libqcoll.so QCOLL_RUN=$RUN PYTHONPATH=$root/python \
     timeout "${PYTHON_LIMIT:-400}" python3 -m pytest -q -rs tests/python) >"$OUT/python.log" 2>&1 || status=1
  tail -n 15 "$OUT/python.log" | tee -a "$OUT/suite.log"
fi
step "done, status $status"
exit $status
