#!/usr/bin/env bash
# Call 2 (2026-12-03, fourth session): where the two-shot's 7 us floor goes (variants: barriers fenced at gpu scope "gf", no direct writes into peers' outputs "nd"), the one-shot with one pack per thread kept at one round, unregistered one-shot against two-shot, GPU tests.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c2; mkdir -p $out
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
cfg . build-gpu > $out/build-new.log 2>&1
cfg build-old build-gpu-old > $out/build-old.log 2>&1
cfg . build-gpu-gf -DCMAKE_CUDA_FLAGS=-DQCOLL_EXP_GPU_FENCE > $out/build-gf.log 2>&1
cfg . build-gpu-nd -DCMAKE_CUDA_FLAGS=-DQCOLL_EXP_NO_DIRECT > $out/build-nd.log 2>&1
tg="qcoll qcoll-run qcoll-perf"
(cmake --build build-gpu -j 16 --target $tg gpu_allreduce gpu_graph gpu_register >> $out/build-new.log 2>&1 || echo FAIL-new >> $out/summary.log) &
(cmake --build build-gpu-old -j 16 --target $tg >> $out/build-old.log 2>&1 || echo FAIL-old >> $out/summary.log) &
(cmake --build build-gpu-gf -j 16 --target $tg >> $out/build-gf.log 2>&1 || echo FAIL-gf >> $out/summary.log) &
(cmake --build build-gpu-nd -j 16 --target $tg >> $out/build-nd.log 2>&1 || echo FAIL-nd >> $out/summary.log) &
wait
grep -h -E " error|FAIL" $out/build-*.log $out/summary.log | head -20
log built
nvidia-cuda-mps-control -d 2>/dev/null; sleep 1
perf() { local name=$1 tree=$2 n=$3; shift 3
  [ "$(left)" -lt 40 ] && { log "$name: no time left, skipped"; return; }
  local T=$tree/tools
  log "$name"; echo "# ${ENVS:-} qcoll-run -n $n qcoll-perf $*  [tree $tree]" > "$out/$name.log"
  env ${ENVS:-} CUDA_VISIBLE_DEVICES=0 timeout 90 $T/qcoll-run/qcoll-run -n "$n" $T/qcoll-perf/qcoll-perf "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log; }
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 "$@" all_reduce; }
for r in a b; do
  perf two-n2-new-$r build-gpu 2 $(S -G 1 -b 128K -e 8M -f 2 -n 30 -w 5 --algo twoshot)
  perf two-n2-gf-$r build-gpu-gf 2 $(S -G 1 -b 128K -e 8M -f 2 -n 30 -w 5 --algo twoshot)
  perf two-n2-nd-$r build-gpu-nd 2 $(S -G 1 -b 128K -e 8M -f 2 -n 30 -w 5 --algo twoshot)
  ENVS="QCOLL_IPC_PUSH_BYTES=0" perf one-n2-new-$r build-gpu 2 $(S -G 1 -b 8K -e 4M -f 4 -n 30 -w 5 --algo oneshot)
  ENVS="QCOLL_IPC_PUSH_BYTES=0" perf one-n2-gf-$r build-gpu-gf 2 $(S -G 1 -b 8K -e 4M -f 4 -n 30 -w 5 --algo oneshot)
  ENVS="QCOLL_IPC_PUSH_BYTES=0" perf one-n2-old-$r build-gpu-old 2 $(S -G 1 -b 8K -e 4M -f 4 -n 30 -w 5 --algo oneshot)
done
ENVS="QCOLL_GRAPH_REGISTER=0" perf one-n2-unreg build-gpu 2 $(S -G 1 -b 512K -e 8M -f 2 -n 30 -w 5 --algo oneshot)
ENVS="QCOLL_GRAPH_REGISTER=0" perf two-n2-unreg build-gpu 2 $(S -G 1 -b 512K -e 8M -f 2 -n 30 -w 5 --algo twoshot)
perf one-n2-eager build-gpu 2 $(S -b 512K -e 8M -f 2 -n 30 -w 5 --algo oneshot)
perf two-n2-eager build-gpu 2 $(S -b 512K -e 8M -f 2 -n 30 -w 5 --algo twoshot)
perf two-n8-new build-gpu 8 $(S -G 1 -b 128K -e 4M -f 4 -n 30 -w 5 --algo twoshot)
perf two-n8-gf build-gpu-gf 8 $(S -G 1 -b 128K -e 4M -f 4 -n 30 -w 5 --algo twoshot)
perf one-n8-new build-gpu 8 $(S -G 1 -b 8K -e 2M -f 4 -n 30 -w 5 --algo oneshot)
perf one-n8-old build-gpu-old 8 $(S -G 1 -b 8K -e 2M -f 4 -n 30 -w 5 --algo oneshot)
log tests
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 150 ctest --output-on-failure --timeout 120 \
   -R '^gpu\.(allreduce\.n2|allreduce\.n4|allreduce\.n8|graph\.n2|register\.n2)$') > $out/ctest.log 2>&1
grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
log done
