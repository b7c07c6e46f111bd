#!/usr/bin/env bash
# The GPU half of docs/results/reliability.md, section 8, on a one-GPU
# machine (ranks share GPU 0 under MPS):
#   1. scripts/gpu-tests.sh -R '^(gpu\.soak|nccl\.)': builds with CUDA and
#      runs the 100 000-replay soak (its "VmRSS split" line says whether a
#      growth comes from the replays or the checkpoints; the replays' share
#      must stay within 16 KiB) and the NCCL tests, the watchdog's included;
#   2. NCCL forced where it stalls (3 ranks on GPU 0, reduce of 2 MiB,
#      QCOLL_TIMEOUT=10): the job must end by itself well before the 120 s
#      limit, with the once-per-process warning, the watchdog's message
#      naming the call, and a failing exit status (1 or 70), not a hang.
# Usage, from the repository root:
#   OUT=$OUT QCOLL_CMOCKA_DIR=$PWD/build-deps/cmocka scripts/reliability-gpu.sh
# NCCL is found as usual (QCOLL_NCCL_LIB, else the loader's search).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/qcoll-reliability-gpu}
mkdir -p "$out"
export BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
status=0

echo "== $(date +%T) soak and NCCL tests" | tee "$out/reliability-gpu.log"
OUT=$out "$root/scripts/gpu-tests.sh" -R '^(gpu\.soak|nccl\.)' -V \
  >"$out/soak-nccl.log" 2>&1 || status=1
grep -E "VmRSS split|PASS|FAIL|tests passed|tests failed" "$out/soak-nccl.log" |
  tee -a "$out/reliability-gpu.log"

echo "== $(date +%T) NCCL forced on 3 ranks of one GPU" |
  tee -a "$out/reliability-gpu.log"
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps/pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps/log}
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d 2>/dev/null && started_mps=1 || started_mps=0
t0=$SECONDS
timeout 120 env QCOLL_TIMEOUT=10 QCOLL_ALGO=nccl NCCL_MULTI_RANK_GPU_ENABLE=1 \
  "$BUILD_DIR/tools/qcoll-run/qcoll-run" -n 3 \
  "$BUILD_DIR/tools/qcoll-perf/qcoll-perf" --mem gpu -b 2M -e 2M -n 20 -w 2 \
  -c 1 reduce >"$out/forced-nccl.log" 2>&1
rc=$?
[ "$started_mps" = 1 ] && echo quit | nvidia-cuda-mps-control
took=$((SECONDS - t0))
echo "exit $rc after $took s" | tee -a "$out/reliability-gpu.log"
grep -E "NCCL is forced|watchdog|still running|qcoll-run:" "$out/forced-nccl.log" |
  head -20 | tee -a "$out/reliability-gpu.log"
if [ "$rc" -eq 124 ]; then
  echo "FAIL: the job hung past 120 s" | tee -a "$out/reliability-gpu.log"
  status=1
elif [ "$rc" -eq 0 ]; then
  echo "note: the run completed (NCCL did not stall this time)" |
    tee -a "$out/reliability-gpu.log"
fi
exit $status
