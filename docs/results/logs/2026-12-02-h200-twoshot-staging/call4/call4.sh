#!/usr/bin/env bash
# Call 4: 8-rank latency against CUDA_DEVICE_MAX_CONNECTIONS; ncu of the two-shot and INT4 at 64 MiB, one rank.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; out=/tmp/c4; mkdir -p $out
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_on() { nvidia-cuda-mps-control -d 2>/dev/null; sleep 1; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
finish() { mps_off; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
log build
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF > $out/build.log 2>&1
cmake --build build-gpu -j 16 --target qcoll qcoll-run qcoll-perf >> $out/build.log 2>&1 || { log "build failed"; exit 1; }
T=build-gpu/tools
mps_on
perf() { local name=$1 n=$2; shift 2; local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  log "$name"; echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $*" > "$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 40 $T/qcoll-run/qcoll-run -n $n $T/qcoll-perf/qcoll-perf "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"; }
P=(--mem gpu -b 8 -e 64K -f 4 -n 40 -w 5 -c 1 -d bf16 -G 1 all_reduce)
for r in a b; do
  perf n8-default-$r 8 -- "${P[@]}"
  perf n8-conn1-$r 8 CUDA_DEVICE_MAX_CONNECTIONS=1 -- "${P[@]}"
  perf n8-conn32-$r 8 CUDA_DEVICE_MAX_CONNECTIONS=32 -- "${P[@]}"
done
mps_off
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__bytes.sum
for q in none int4; do
  log "ncu 64M -q $q"
  echo "# ncu --metrics $metrics --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce" > $out/ncu-$q.log
  timeout 60 "$NCU" --metrics "$metrics" --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce >> $out/ncu-$q.log 2>&1
  echo "rc=$?" >> $out/ncu-$q.log
  grep -E "twoshot|inst_executed|throughput|duration|dram__bytes" $out/ncu-$q.log | tee -a $out/summary.log
done
log done
