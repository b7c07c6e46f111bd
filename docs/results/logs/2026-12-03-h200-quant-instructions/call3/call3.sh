#!/usr/bin/env bash
# Call 3 (2026-12-03 c): FP8 by the hardware conversions ("new": working tree) beside 6128fe1 ("old").
# GPU quant and codec tests; FP8 sweeps alternating, the other formats once; ncu FP8/INT4 64 MiB and an INT4 source profile.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c3; mkdir -p $out
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
 cmake --build /tmp/old -j 6 --target qcoll qcoll-run qcoll-perf) > $out/build-old.log 2>&1 &
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" \
  -DCMOCKA_LIBRARY="$lib" > $out/build.log 2>&1
cmake --build build-gpu -j 10 --target qcoll qcoll-run qcoll-perf gpu_quant gpu_quant_kernels gpu_allreduce gpu_graph test_codec_gpu >> $out/build.log 2>&1 || { log "build failed"; grep -E "error" $out/build.log | head -30 | tee -a $out/summary.log; exit 1; }
wait
log "built (old: $(ls /tmp/old/tools/qcoll-perf/qcoll-perf 2>&1))"
NEW=build-gpu/tools; OLD=/tmp/old/tools
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 60 ctest --output-on-failure --timeout 50 -R '^codec_gpu$') > $out/ctest-codec.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest-codec.log | tee -a $out/summary.log
mps_on
log "tests"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 170 ctest --output-on-failure --timeout 120 \
   -R '^gpu\.(quant_kernels|quant\.n2|quant\.n4|allreduce\.n2|graph\.n2)$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
perf() { # perf NAME TREE RANKS ENV... -- ARGS...
  local name=$1 tree=$2 n=$3; shift 3
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  [ "$(left)" -lt 60 ] && { log "$name: no time left, skipped"; return; }
  log "$name"
  echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $* ($tree)" > "$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 60 "$tree/qcoll-run/qcoll-run" -n "$n" \
    "$tree/qcoll-perf/qcoll-perf" "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log
}
Q() { echo --mem gpu -b 4M -e 256M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
for r in a b; do
  perf quant-fp8-n2-new-$r $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q fp8)
  perf quant-fp8-n2-old-$r $OLD 2 QCOLL_GRAPH_REGISTER=0 -- $(Q fp8)
done
perf quant-fp8-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q fp8 all_reduce
perf quant-fp8-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q fp8 all_reduce
for q in int4 int8; do perf quant-$q-n2-new $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q); done
perf twoshot-unreg-n2-new $NEW 2 QCOLL_GRAPH_REGISTER=0 -- $(Q none)
perf quant-int6-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q int6 all_reduce
perf quant-int6-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q int6 all_reduce
perf quant-int3-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q int3 all_reduce
perf quant-int3-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q int3 all_reduce
perf none-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q none all_reduce
mps_off
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__bytes.sum
for q in fp8 int4; do for T in $NEW $OLD; do
  tag=$([ $T = $NEW ] && echo new || echo old)
  [ "$(left)" -lt 20 ] && break
  log "ncu 64M -q $q $tag"
  echo "# ncu --metrics $metrics --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce ($T)" > $out/ncu-$q-$tag.log
  timeout 40 "$NCU" --metrics "$metrics" --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce >> $out/ncu-$q-$tag.log 2>&1
  echo "rc=$?" >> $out/ncu-$q-$tag.log
  grep -E "inst_executed|throughput|duration" $out/ncu-$q-$tag.log | tee -a $out/summary.log
done; done
[ "$(left)" -gt 40 ] && { log "ncu source int4 new"; timeout 60 "$NCU" --section SourceCounters --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 --export $out/rep --force-overwrite $NEW/qcoll-perf/qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q int4 all_reduce > $out/ncu-src.log 2>&1; timeout 60 "$NCU" --import $out/rep.ncu-rep --page source --print-source sass --csv > $out/src-int4.csv 2>&1; rm -f $out/rep.ncu-rep; }
log done
