#!/usr/bin/env bash
# Build the quantised and two-shot all-reduce pieces with CUDA and, on one
# GPU with the ranks under MPS, run their GPU tests, the qcoll-perf sweeps
# at 2 ranks (4 MiB .. 256 MiB, bf16, one graph launch, out of and in
# place) for the unquantised two-shot and every format, shorter sweeps at
# 4 and 8 ranks, and Nsight Compute on one rank at 64 MiB.  Every step has
# its own time limit; logs go to $OUT (default ./quant-gpu-logs).
#
#   QCOLL_CMOCKA_DIR=<prefix with include/cmocka.h, lib/libcmocka.so*> \
#     scripts/quant-gpu-run.sh
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/quant-gpu-logs}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe
export CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
export QCOLL_TIMEOUT=${QCOLL_TIMEOUT:-20}
# The kernel is measured at every size, also where the ranks share the GPU.
export QCOLL_QUANT_SHARED_GPU_FLOORS=0

step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }

nvidia-smi > "$out/nvidia-smi.log" 2>&1

step configure
args=(-S "$root" -B "$build" -DQCOLL_WITH_CUDA=ON -DQCOLL_CUDA_ARCH=90
      -DCMAKE_BUILD_TYPE=Release)
if [ -n "${QCOLL_CMOCKA_DIR:-}" ]; then
  lib=$(ls "$QCOLL_CMOCKA_DIR"/lib/libcmocka.so* | head -n 1)
  args+=("-DCMOCKA_INCLUDE_DIR=$QCOLL_CMOCKA_DIR/include" "-DCMOCKA_LIBRARY=$lib")
  export LD_LIBRARY_PATH=$QCOLL_CMOCKA_DIR/lib:${LD_LIBRARY_PATH:-}
fi
cmake "${args[@]}" > "$out/build.log" 2>&1 || { step "configure failed"; exit 1; }
step build
timeout 230 cmake --build "$build" -j "$(nproc)" --target qcoll-perf qcoll-run \
  gpu_quant_kernels test_codec_gpu >> "$out/build.log" 2>&1 ||
  { step "build failed"; grep -E "error" "$out/build.log" | head -n 20; exit 1; }

mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && step "MPS started"

step codec_gpu
timeout 30 "$build/tests/codec/test_codec_gpu" > "$out/codec_gpu.log" 2>&1
echo "rc=$?" >> "$out/codec_gpu.log"
step gpu_quant_kernels
timeout 45 "$build/tests/gpu/gpu_quant_kernels" 2 4 > "$out/gpu_quant_kernels.log" 2>&1
echo "rc=$?" >> "$out/gpu_quant_kernels.log"

RUN=$build/tools/qcoll-run/qcoll-run
PERF=$build/tools/qcoll-perf/qcoll-perf
sweep() { # ranks max_bytes quant
  step "perf n=$1 -q $3"
  timeout 25 "$RUN" -n "$1" "$PERF" --mem gpu -b 4M -e "$2" -f 4 -n 20 -w 5 -c 1 \
    -G 1 -d bf16 --algo twoshot -q "$3" all_reduce >> "$out/perf-n$1.log" 2>&1
  echo "# rc=$?" >> "$out/perf-n$1.log"
}
for q in none int4 int8 fp8 int6 int3; do sweep 2 256M $q; done
for q in none int4 int8; do sweep 4 64M $q; done
for q in none int4; do sweep 8 64M $q; done

echo quit | nvidia-cuda-mps-control
step "MPS stopped"

NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
for q in int4 none; do
  step "ncu 1 rank 64M -q $q"
  timeout 30 "$NCU" --metrics "$metrics" --kernel-name regex:twoshot \
    --launch-skip 2 --launch-count 1 "$PERF" --mem gpu -b 64M -e 64M -n 3 -w 1 \
    -c 0 -d bf16 --algo twoshot -q $q all_reduce > "$out/ncu-$q.log" 2>&1
  echo "rc=$?" >> "$out/ncu-$q.log"
done
step done
