#!/usr/bin/env bash
# The main job: build qcoll, then run a multi-rank all-reduce benchmark with a
# correctness check (qcoll-perf -c 1; exits non-zero on any wrong value).
# On a machine with a GPU the ranks share the GPU(s) under MPS and use GPU
# buffers; otherwise they use the host back end.
#   QCOLL_BENCH_RANKS   ranks to start (default 4)
#   QCOLL_BENCH_ARGS    qcoll-perf arguments (default: a sweep 8 B .. 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
QCOLL_BUILD_DIR=build-bench scripts/build.sh -DBUILD_TESTING=OFF
RANKS=${QCOLL_BENCH_RANKS:-4}
RUN=build-bench/tools/qcoll-run/qcoll-run
PERF=build-bench/tools/qcoll-perf/qcoll-perf

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  MEM=gpu
  ARGS=${QCOLL_BENCH_ARGS:-"-b 8 -e 256M -f 4 -n 50 -w 10 -c 1 -d bf16"}
  # Several ranks share one GPU: MPS lets their kernels run side by side.
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if command -v nvidia-cuda-mps-control >/dev/null; then
    nvidia-cuda-mps-control -d 2>/dev/null || true
    trap 'echo quit | nvidia-cuda-mps-control 2>/dev/null || true' EXIT
  fi
else
  MEM=host
  ARGS=${QCOLL_BENCH_ARGS:-"-b 8 -e 64M -f 4 -n 20 -w 5 -c 1 -d f32"}
fi
echo "# qcoll-run -n $RANKS qcoll-perf --mem $MEM $ARGS all_reduce"
# shellcheck disable=SC2086
"$RUN" -n "$RANKS" "$PERF" --mem "$MEM" $ARGS all_reduce
