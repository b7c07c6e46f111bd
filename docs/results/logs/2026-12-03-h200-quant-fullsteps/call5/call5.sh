#!/usr/bin/env bash
# Call 5 (2026-12-03 e): "new" = phase-3 loads a step ahead (working tree), "mid" = 52811a2 (full steps without bounds tests, constant rank count in phase 2), "old" = f427dec.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c5; mkdir -p $out
limit=${LIMIT:-570}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_on() { nvidia-cuda-mps-control -d 2>/dev/null; sleep 1; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
finish() { mps_off; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
nvidia-smi > $out/machine.txt 2>&1
lib=$(ls "$deps"/cmocka/lib/libcmocka.so.0* | head -n 1)
log build
(cmake -S .devtree/old -B /tmp/old -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build /tmp/old -j 4 --target qcoll qcoll-run qcoll-perf) > $out/build-old.log 2>&1 &
(cmake -S .devtree/mid -B /tmp/mid -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build /tmp/mid -j 4 --target qcoll qcoll-run qcoll-perf) > $out/build-mid.log 2>&1 &
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" \
  -DCMOCKA_LIBRARY="$lib" > $out/build.log 2>&1
cmake --build build-gpu -j 8 --target qcoll qcoll-run qcoll-perf gpu_quant gpu_quant_kernels gpu_allreduce gpu_graph test_codec_gpu >> $out/build.log 2>&1 || { log "build failed"; grep -E "error" $out/build.log | head -30 | tee -a $out/summary.log; exit 1; }
(nvcc -arch=sm_90 -O2 bench/launch-cost.cu -lcuda -o /tmp/launch-cost > $out/build-lc.log 2>&1) &
wait
log "built (old: $(ls /tmp/old/tools/qcoll-perf/qcoll-perf 2>&1))"
NEW=build-gpu/tools; OLD=/tmp/old/tools; MID=/tmp/mid/tools
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__bytes.sum
ncu_run() { # ncu_run FMT TAG TREE
  local q=$1 tag=$2 T=$3
  log "ncu 64M -q $q $tag"
  echo "# ncu --metrics $metrics --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce ($T)" > $out/ncu-$q-$tag.log
  timeout 60 "$NCU" --metrics "$metrics" --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce >> $out/ncu-$q-$tag.log 2>&1
  echo "rc=$?" >> $out/ncu-$q-$tag.log
  grep -E "inst_executed|throughput|duration" $out/ncu-$q-$tag.log | tee -a $out/summary.log
}
for q in int4 int8 fp8; do ncu_run $q new $NEW; ncu_run $q mid $MID; ncu_run $q old $OLD; done
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 60 ctest --output-on-failure --timeout 50 -R '^codec_gpu$') > $out/ctest-codec.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest-codec.log | tee -a $out/summary.log
mps_on
log "tests"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 200 ctest --output-on-failure --timeout 120 \
   -R '^gpu\.(quant_kernels|quant\.n2|quant\.n4|quant\.n8)$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
log "launch cost, one process then two at once"
/tmp/launch-cost > $out/launch-cost-1.log 2>&1
/tmp/launch-cost > $out/launch-cost-2a.log 2>&1 & /tmp/launch-cost > $out/launch-cost-2b.log 2>&1; wait
grep -i "launch" $out/launch-cost-*.log | tee -a $out/summary.log
perf() { # perf NAME TREE RANKS ENV... -- ARGS...
  local name=$1 tree=$2 n=$3; shift 3
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  [ "$(left)" -lt 40 ] && { log "$name: no time left, skipped"; return; }
  log "$name"
  echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $* ($tree)" > "$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 60 "$tree/qcoll-run/qcoll-run" -n "$n" \
    "$tree/qcoll-perf/qcoll-perf" "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log
}
Q() { echo --mem gpu -b 4M -e 256M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
Q8() { echo --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
for r in a b; do
  for q in int4 int8; do
    perf quant-$q-n2-new-$r $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
    perf quant-$q-n2-mid-$r $MID 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
    perf quant-$q-n2-old-$r $OLD 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
  done
done
perf twoshot-unreg-n2-new $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q none)
for q in fp8 int3; do
  perf quant-$q-n2-new $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
  perf quant-$q-n2-old $OLD 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
done
for q in int4 int8; do
  perf quant-$q-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 $q)
  perf quant-$q-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 $q)
done
perf quant-int4-n4-new $NEW 4 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int4)
perf quant-int4-n4-old $OLD 4 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int4)
perf quant-int6-n2-new $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q int6)
log done
