#!/usr/bin/env bash
# Call 1: build new + old, side-by-side sweeps, GPU tests, sanitizer.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c1; mkdir -p $out
limit=${LIMIT:-560}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_on() { nvidia-cuda-mps-control -d 2>/dev/null; sleep 1; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
finish() { mps_off; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
nvidia-smi > $out/machine.txt 2>&1; which nsys ncu >> $out/machine.txt 2>&1
lib=$(ls "$deps"/cmocka/lib/libcmocka.so* | head -n 1)
log build
(cmake -S .devtree/old -B /tmp/old -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build /tmp/old -j 5 --target qcoll qcoll-run qcoll-perf) > $out/build-old.log 2>&1 &
(cmake -S . -B /tmp/v4 -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DQCOLL_PUSH_LOADS=4 &&
 cmake --build /tmp/v4 -j 5 --target qcoll qcoll-run qcoll-perf) > $out/build-v4.log 2>&1 &
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" \
  -DCMOCKA_LIBRARY="$lib" > $out/build.log 2>&1
cmake --build build-gpu -j 10 --target qcoll qcoll-run qcoll-perf gpu_push gpu_graph \
  gpu_allreduce gpu_failure gpu_register gpu_quant gpu_kernels >> $out/build.log 2>&1 || { log "build failed"; grep -E "error" $out/build.log | head -30 | tee -a $out/summary.log; exit 1; }
wait
log "built (old: $(ls /tmp/old/tools/qcoll-perf/qcoll-perf 2>&1))"
NEW=build-gpu/tools; OLD=/tmp/old/tools; V4=/tmp/v4/tools
mkdir -p /tmp/nccl232 && xz -dc "$deps/nccl/libnccl.so.2.xz" > /tmp/nccl232/libnccl.so.2
mps_on
perf() { # perf NAME TREE RANKS ENV... -- ARGS...
  local name=$1 tree=$2 n=$3; shift 3
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  [ "$(left)" -lt 60 ] && { log "$name: no time left, skipped"; return; }
  log "$name"
  echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $* ($tree)" > "$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 60 "$tree/qcoll-run/qcoll-run" -n "$n" \
    "$tree/qcoll-perf/qcoll-perf" "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
}
S=(--mem gpu -b 8 -e 4M -f 2 -n 30 -w 5 -c 1 -d bf16 all_reduce)
for r in a b; do
  perf push-n2-G-new-$r $NEW 2 -- --algo oneshot -G 1 "${S[@]}"
  perf push-n2-G-old-$r $OLD 2 -- --algo oneshot -G 1 "${S[@]}"
  perf push-n2-G-v4-$r $V4 2 -- --algo oneshot -G 1 "${S[@]}"
done
perf push-n2-eager-new $NEW 2 -- --algo oneshot "${S[@]}"
perf push-n8-G-new $NEW 8 QCOLL_IPC_PUSH_MAX_RANKS=8 -- --algo oneshot -G 1 "${S[@]}"
perf push-n8-G-old $OLD 8 QCOLL_IPC_PUSH_MAX_RANKS=8 -- --algo oneshot -G 1 "${S[@]}"
perf push-n8-G-nopdl-new $NEW 8 QCOLL_IPC_PUSH_MAX_RANKS=8 QCOLL_PDL=0 -- --algo oneshot -G 1 --mem gpu -b 8 -e 64K -f 2 -n 30 -w 5 -c 1 -d bf16 all_reduce
perf auto-n2-vsnccl $NEW 2 NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl232/libnccl.so.2 -- -G 1 --vs-nccl "${S[@]}"
L=(--mem gpu -b 4M -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot -G 1 all_reduce)
for r in a b; do
  perf twoshot-unreg-n2-new-$r $NEW 2 QCOLL_GRAPH_REGISTER=0 -- "${L[@]}"
  perf twoshot-unreg-n2-old-$r $OLD 2 QCOLL_GRAPH_REGISTER=0 -- "${L[@]}"
done
perf twoshot-unreg-n8-new $NEW 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot -G 1 all_reduce
perf twoshot-unreg-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 64M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot -G 1 all_reduce
perf twoshot-eager-n2-new $NEW 2 -- --mem gpu -b 4M -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot all_reduce
for q in int4 int8; do
  perf quant-$q-unreg-n2 $NEW 2 QCOLL_GRAPH_REGISTER=0 -- --mem gpu -b 4M -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot -G 1 -q $q all_reduce
done
if [ "$(left)" -gt 150 ]; then
  mps_off
  for tool in memcheck racecheck; do
    for algo in oneshot twoshot; do
      log "sanitize-$tool-$algo"
      echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf --algo $algo" > $out/sanitize-$tool-$algo.log
      CUDA_VISIBLE_DEVICES=0 timeout 40 $NEW/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 \
        $NEW/qcoll-perf/qcoll-perf --mem gpu -b 8 -e 256K -f 32 -n 2 -w 1 -c 1 -d bf16 --algo $algo all_reduce \
        >> $out/sanitize-$tool-$algo.log 2>&1 || log "sanitize-$tool-$algo: exit $?"
      grep -E "ERROR SUMMARY|hazards" $out/sanitize-$tool-$algo.log | tee -a $out/summary.log
    done
  done
  mps_on
fi
t=$(left)
if [ "$t" -gt 30 ]; then
  log "tests (${t}s left)"
  (cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout $((t - 10)) ctest --output-on-failure --timeout 100 \
     -R '^gpu\.(push\..*|graph\.n2|graph\.n8|allreduce\.n2|allreduce\.n8|failure\.n2|register\.n2|register\.noauto\.n2|quant\.n2|allreduce\.small_ipc\.n4|kernels)$') > $out/ctest.log 2>&1
  grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
fi
log done
