#!/usr/bin/env bash
# Call 5 (2026-12-03, fourth session): f777177 ("new": one-shot regions
# beyond their 2 MiB carve, the data regions as before) beside 3cb9ad6
# ("old"): the GPU tests that lay out IPC buffers themselves, the 256 MiB
# two-shot and the 2-rank automatic path at 1-4 MiB beside NCCL 2.32.6.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c5; mkdir -p $out
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
(cmake --build build-gpu -j 16 --target $tg gpu_kernels gpu_quant_kernels gpu_allreduce gpu_graph >> $out/build-new.log 2>&1 || echo FAIL-new >> $out/summary.log) &
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
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 150 ctest --output-on-failure --timeout 100 \
   -R '^gpu\.(quant_kernels|allreduce\.n2|graph\.n2|kernels)$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
for r in a b; do
  ENVS="QCOLL_GRAPH_REGISTER=0" perf none-n2-new-$r build-gpu 2 $(S -G 1 --rounds 3 -b 256M -e 256M -n 10 -w 3 --algo twoshot)
  ENVS="QCOLL_GRAPH_REGISTER=0" perf none-n2-old-$r build-gpu-old 2 $(S -G 1 --rounds 3 -b 256M -e 256M -n 10 -w 3 --algo twoshot)
done
N="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2"
ENVS="$N" perf mid-n2-vsnccl-new build-gpu 2 $(S -G 1 --rounds 3 -b 1M -e 4M -f 2 -n 40 -w 5 --vs-nccl)
ENVS="QCOLL_GRAPH_REGISTER=0" perf quant-int4-n2-new build-gpu 2 $(S -G 1 --rounds 3 -b 256M -e 256M -n 5 -w 2 --algo twoshot -q int4)
log done
