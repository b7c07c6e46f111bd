#!/usr/bin/env bash
# Call 7 (2026-12-03 e): the final tree (kernel of 52811a2): GPU tests, ncu INT4/INT8/FP8 64 MiB, 2-rank INT4/INT8 256 MiB once more.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c7; mkdir -p $out
limit=${LIMIT:-400}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
finish() { echo quit | nvidia-cuda-mps-control 2>/dev/null; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
nvidia-smi > $out/machine.txt 2>&1
lib=$(ls "$deps"/cmocka/lib/libcmocka.so.0* | head -n 1)
log build
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" -DCMOCKA_LIBRARY="$lib" > $out/build.log 2>&1
cmake --build build-gpu -j 16 --target qcoll qcoll-run qcoll-perf gpu_quant gpu_quant_kernels gpu_allreduce gpu_graph test_codec_gpu >> $out/build.log 2>&1 || { log "build failed"; grep -E "error" $out/build.log | head -30 | tee -a $out/summary.log; exit 1; }
log built
T=build-gpu/tools
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
metrics=smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,dram__bytes.sum
for q in int4 int8 fp8; do
  log "ncu 64M -q $q"
  echo "# ncu --metrics $metrics --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce" > $out/ncu-$q.log
  timeout 60 "$NCU" --metrics "$metrics" --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce >> $out/ncu-$q.log 2>&1
  grep -E "inst_executed|throughput|duration" $out/ncu-$q.log | tee -a $out/summary.log
done
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 60 ctest --output-on-failure --timeout 50 -R '^codec_gpu$') > $out/ctest-codec.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest-codec.log | tee -a $out/summary.log
nvidia-cuda-mps-control -d 2>/dev/null; sleep 1
log tests
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 200 ctest --output-on-failure --timeout 120 \
   -R '^gpu\.(quant_kernels|quant\.n2|quant\.n4|quant\.n8|allreduce\.n2|graph\.n2)$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
perf() { local name=$1 n=$2; shift 2
  [ "$(left)" -lt 30 ] && { log "$name: no time left, skipped"; return; }
  log "$name"; echo "# QCOLL_GRAPH_REGISTER=0 qcoll-run -n $n qcoll-perf $*" > "$out/$name.log"
  QCOLL_GRAPH_REGISTER=0 CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n "$n" $T/qcoll-perf/qcoll-perf "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log; }
Q() { echo --mem gpu -b 4M -e 256M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
perf quant-int4-n2 2 $(Q int4)
perf quant-int8-n2 2 $(Q int8)
perf twoshot-unreg-n2 2 $(Q none)
log done
