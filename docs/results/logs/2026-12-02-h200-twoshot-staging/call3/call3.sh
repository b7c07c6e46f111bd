#!/usr/bin/env bash
# Call 1: build new + old, side-by-side sweeps, GPU tests, sanitizer.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$PWD; deps=$root/build-deps; out=/tmp/c3; mkdir -p $out
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
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" \
  -DCMOCKA_LIBRARY="$lib" > $out/build.log 2>&1
cmake --build build-gpu -j 16 --target qcoll qcoll-run qcoll-perf gpu_push gpu_graph \
  gpu_allreduce gpu_failure gpu_quant gpu_quant_kernels >> $out/build.log 2>&1 || { log "build failed"; grep -E "error" $out/build.log | head -30 | tee -a $out/summary.log; exit 1; }
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
P=(--mem gpu -b 8 -e 64K -f 4 -n 40 -w 5 -c 1 -d bf16 --algo oneshot -G 1 all_reduce)
for n in 2 3 4 6 8; do
  perf push-n$n-G $NEW $n QCOLL_IPC_PUSH_MAX_RANKS=8 -- "${P[@]}"
done
perf barrier-n8-G $NEW 8 QCOLL_IPC_PUSH_BYTES=0 -- "${P[@]}"
perf vsnccl-n8-G $NEW 8 NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl232/libnccl.so.2 -- -G 1 --vs-nccl --mem gpu -b 8 -e 4M -f 4 -n 30 -w 5 -c 1 -d bf16 all_reduce
for r in a b; do
  perf auto-n2-G-$r $NEW 2 -- -G 1 --mem gpu -b 8 -e 4M -f 2 -n 40 -w 5 -c 1 -d bf16 all_reduce
  perf auto-n2-eager-$r $NEW 2 -- --mem gpu -b 8 -e 4M -f 2 -n 40 -w 5 -c 1 -d bf16 all_reduce
done
Q=(--mem gpu -b 4M -e 256M -f 4 -n 20 -w 5 -c 1 -d bf16 --algo twoshot -G 1 all_reduce)
perf twoshot-unreg-n2 $NEW 2 QCOLL_GRAPH_REGISTER=0 -- "${Q[@]}"
for q in int4 int8 fp8 int6 int3; do
  perf quant-$q-unreg-n2 $NEW 2 QCOLL_GRAPH_REGISTER=0 -- -q $q "${Q[@]}"
done
perf twoshot-unreg-n2-again $NEW 2 QCOLL_GRAPH_REGISTER=0 -- "${Q[@]}"
t=$(left)
if [ "$t" -gt 30 ]; then
  log "tests (${t}s left)"
  (cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout $((t - 10)) ctest --output-on-failure --timeout 100 \
     -R '^gpu\.(push\..*|quant\.n2|quant\.n4|quant_kernels|graph\.n2|allreduce\.n2)$') > $out/ctest.log 2>&1
  grep -E "Test +#|tests passed|tests failed" $out/ctest.log | tee -a $out/summary.log
fi
log done
