#!/usr/bin/env bash
# Call 3 (2026-12-03, fourth session): the tree with the wide one-shot and
# the quantised all-reduce streaming its rounds in one launch ("new")
# beside 3cb9ad6 ("old", carried in build-old/): GPU tests, quantised and
# large two-shot sweeps, the automatic path beside NCCL 2.32.6 (the PyPI
# wheel's library, shrunk to sm_90, carried xz'd in build-nccl-xz/),
# 8 ranks, eager, compute-sanitizer.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c3; mkdir -p $out
limit=${LIMIT:-560}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
finish() { echo quit | nvidia-cuda-mps-control 2>/dev/null; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
nvidia-smi > $out/machine.txt 2>&1
lib=$(ls "$deps"/cmocka/lib/libcmocka.so.0* | head -n 1)
cfg() { cmake -S "$1" -B "$2" -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" -DCMOCKA_LIBRARY="$lib" "${@:3}"; }
log build
mkdir -p /tmp/nccl && xz -dc build-nccl-xz/libnccl.so.2.xz > /tmp/nccl/libnccl.so.2 &
cfg . build-gpu > $out/build-new.log 2>&1
cfg build-old build-gpu-old > $out/build-old.log 2>&1
tg="qcoll qcoll-run qcoll-perf"
(cmake --build build-gpu -j 16 --target $tg gpu_quant gpu_quant_kernels gpu_allreduce gpu_graph gpu_register test_codec_gpu >> $out/build-new.log 2>&1 || echo FAIL-new >> $out/summary.log) &
(cmake --build build-gpu-old -j 8 --target $tg >> $out/build-old.log 2>&1 || echo FAIL-old >> $out/summary.log) &
wait
grep -h -E " error|FAIL" $out/build-*.log $out/summary.log | head -20
log built
nvidia-cuda-mps-control -d 2>/dev/null; sleep 1
perf() { local name=$1 tree=$2 n=$3; shift 3
  [ "$(left)" -lt 40 ] && { log "$name: no time left, skipped"; return; }
  local T=$tree/tools
  log "$name"; echo "# ${ENVS:-} qcoll-run -n $n qcoll-perf $*  [tree $tree]" > "$out/$name.log"
  env ${ENVS:-} CUDA_VISIBLE_DEVICES=0 timeout 100 $T/qcoll-run/qcoll-run -n "$n" $T/qcoll-perf/qcoll-perf "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10, $14, $15}' | tee -a $out/summary.log; }
log tests
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 200 ctest --output-on-failure --timeout 150 \
   -R '^(codec_gpu|gpu\.(quant_kernels|quant\.n2|allreduce\.n2|graph\.n2|register\.n2))$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
Q() { echo --mem gpu -b 16M -e 256M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
for q in int4 int8; do
  ENVS="QCOLL_GRAPH_REGISTER=0" perf quant-$q-n2-new build-gpu 2 $(Q $q)
  ENVS="QCOLL_GRAPH_REGISTER=0" perf quant-$q-n2-old build-gpu-old 2 $(Q $q)
done
ENVS="QCOLL_GRAPH_REGISTER=0" perf none-n2-new build-gpu 2 $(Q none)
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
ENVS="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2" perf auto-n2-vsnccl build-gpu 2 $(S -G 1 --rounds 3 -b 8 -e 16M -f 4 -n 40 -w 5 --vs-nccl)
perf auto-n2-eager build-gpu 2 $(S --rounds 3 -b 8 -e 4M -f 4 -n 40 -w 5)
perf auto-n8-new build-gpu 8 $(S -G 1 --rounds 3 -b 8 -e 64K -f 8 -n 30 -w 5)
perf auto-n8-old build-gpu-old 8 $(S -G 1 --rounds 3 -b 8 -e 64K -f 8 -n 30 -w 5)
log sanitize
echo quit | nvidia-cuda-mps-control; sleep 1
T=build-gpu/tools
for tool in memcheck racecheck; do
  name=sanitize-$tool-oneshot
  [ "$(left)" -lt 50 ] && { log "$name: no time left"; continue; }
  echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf --mem gpu -b 1M -e 4M -f 4 -n 2 -w 1 -c 1 -d bf16 --algo oneshot" > $out/$name.log
  CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 $T/qcoll-perf/qcoll-perf --mem gpu -b 1M -e 4M -f 4 -n 2 -w 1 -c 1 -d bf16 --algo oneshot all_reduce >> $out/$name.log 2>&1 || log "$name: exit $?"
  grep -E "ERROR SUMMARY|hazard|Out of bounds" $out/$name.log | tee -a $out/summary.log
  name=sanitize-$tool-int4-stream
  [ "$(left)" -lt 50 ] && { log "$name: no time left"; continue; }
  echo "# QCOLL_IPC_BYTES=4M qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf --mem gpu -b 8M -e 8M -n 2 -w 1 -c 1 -d bf16 --algo twoshot -q int4" > $out/$name.log
  QCOLL_IPC_BYTES=4M CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 $T/qcoll-perf/qcoll-perf --mem gpu -b 8M -e 8M -n 2 -w 1 -c 1 -d bf16 --algo twoshot -q int4 all_reduce >> $out/$name.log 2>&1 || log "$name: exit $?"
  grep -E "ERROR SUMMARY|hazard|Out of bounds" $out/$name.log | tee -a $out/summary.log
done
log done
