#!/usr/bin/env bash
# Call 2 (2026-12-06): call 1 cut to the device time left after failed
# starts (about 5 minutes): the barrier trace (bench/mps-skew.cu) at 2 and
# 8 ranks, system and GPU scope, graph and eager; the PyTorch tests of the
# backend ops against gloo on CUDA (compiled and Python: both now run small
# ops on the caller's stream and record the end event lazily, and the test
# waits from another stream); then, as time allows, qcoll.torch's bench at
# 8 ranks.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-280}
dl_start s2
log build
nvcc -arch=sm_90 -O2 bench/mps-skew.cu -o /tmp/mps-skew >"$out/build-skew.log" 2>&1 || log "FAIL mps-skew build" &
dl_build . build-gpu qcoll qcoll-run
wait
log built
dl_mps
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1 &
torch_build=$!
skew() { # NAME RANKS ARGS...
  local name=$1 n=$2 d r
  shift 2
  d=$(mktemp -d)
  log "skew $name"
  echo "# mps-skew $n ranks: $*" >"$out/skew-$name.log"
  local pids=()
  for r in $(seq 0 $((n - 1))); do
    CUDA_VISIBLE_DEVICES=0 timeout 40 /tmp/mps-skew "$n" "$r" "$d" "$@" >>"$out/skew-$name.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  tee -a "$out/summary.log" <"$out/skew-$name.log"
}
skew n2-G 2 graph 0
skew n8-G 8 graph 0
skew n8-G-gpu 8 graph 0 1 32 gpu
skew n2-G-gpu 2 graph 0 1 32 gpu
skew n8-E 8 eager 0
skew n8-G-pdl 8 graph 1
wait "$torch_build"
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
log torch tests
OUT=$out TORCH_STEPS=test TORCH_TESTS="ops_match_gloo and cuda" TEST_LIMIT=$(( $(left) - 70 )) \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test.out 2>&1
if [ "$(left)" -gt 55 ]; then
  log torch bench 8 ranks
  OUT=$out TORCH_STEPS=bench BENCH_RANKS=8 BENCH_LIMIT=$(( $(left) - 10 )) \
    BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
fi
log done
