#!/usr/bin/env bash
# One GPU session for the latency work (push one-shot all-reduce, PDL):
# build with CUDA, then in this order, each step under its own limit and
# within LIMIT seconds in all (default 330):
#   perf      qcoll-perf bf16 all-reduce sweeps, 8 B to 4 MiB, results
#             checked (-c 1), on GPU 0 under MPS, 2 and 8 ranks: the
#             one-shot forced (the push kernel), eager and -G 1; the
#             flag-barrier one-shot (QCOLL_IPC_PUSH_BYTES=0), the push one
#             without PDL (QCOLL_PDL=0) and the two-shot, -G 1; beside NCCL
#             when build-deps/nccl/libnccl.so.2.xz is there (2 ranks)
#   sanitize  compute-sanitizer memcheck and racecheck around 2 ranks of
#             push one-shots (MPS stopped first: the tool may not run under it)
#   tests     ctest gpu.push.*, gpu.graph.n2/n8, gpu.allreduce.n2, gpu.failure.n2
# Logs (first line: the command) packed into $OUT/logs.tar.gz, summary.log
# beside it (the device tool brings back at most 8 files).  Usage on the
# device machine,
# from the repository root:
#   OUT=$OUT DEPS=$PWD/../../build-deps scripts/latency-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
root=$(cd "$(dirname "$0")/.." && pwd)
final_out=${OUT:-/tmp/qcoll-latency}
out=$(mktemp -d /tmp/qcoll-latency-logs.XXXXXX)
deps=${DEPS:-$root/build-deps}
limit=${LIMIT:-330}
build=$root/build-gpu
mkdir -p "$out" "$final_out"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
mps_on() { nvidia-cuda-mps-control -d 2>/dev/null; sleep 1; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
finish() {
  mps_off
  tar -C "$out" -czf "$final_out/logs.tar.gz" . && cp "$out/summary.log" "$final_out/"
}
trap finish EXIT
nvidia-smi >"$out/machine.txt" 2>&1

log "build"
lib=$(ls "$deps"/cmocka/lib/libcmocka.so* 2>/dev/null | head -n 1)
cmake -S "$root" -B "$build" -DQCOLL_CUDA_ARCH=90 -DCMOCKA_INCLUDE_DIR="$deps/cmocka/include" \
  -DCMOCKA_LIBRARY="$lib" >"$out/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target qcoll qcoll-run qcoll-perf gpu_push gpu_graph \
  gpu_allreduce gpu_failure >>"$out/build.log" 2>&1 || { log "build failed"; tail -30 "$out/build.log"; exit 1; }
RUN=$build/tools/qcoll-run/qcoll-run
PERF=$build/tools/qcoll-perf/qcoll-perf
mps_on

perf() { # perf NAME RANKS ENV... -- ARGS...
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  [ "$(left)" -lt 40 ] && { log "$name: no time left, skipped"; return; }
  log "$name"
  echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $*" >"$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 45 "$RUN" -n "$n" "$PERF" "$@" >>"$out/$name.log" 2>&1 ||
    log "$name: exit $?"
  grep -cE "^ +[0-9]+ " "$out/$name.log" | sed "s/^/$name rows: /" >>"$out/summary.log"
}
S=(--mem gpu -b 8 -e 4M -f 2 -n 30 -w 5 -c 1 -d bf16)
perf push-n2-G 2 X=1 -- "${S[@]}" --algo oneshot -G 1 all_reduce
perf push-n2 2 X=1 -- "${S[@]}" --algo oneshot all_reduce
perf push-n8-G 8 QCOLL_IPC_PUSH_MAX_RANKS=8 -- "${S[@]}" --algo oneshot -G 1 all_reduce
perf push-n8 8 QCOLL_IPC_PUSH_MAX_RANKS=8 -- "${S[@]}" --algo oneshot all_reduce
perf barrier1shot-n2-G 2 QCOLL_IPC_PUSH_BYTES=0 -- "${S[@]}" --algo oneshot -G 1 all_reduce
perf nopdl-n2-G 2 QCOLL_PDL=0 -- "${S[@]}" --algo oneshot -G 1 all_reduce
perf twoshot-n2-G 2 X=1 -- "${S[@]}" --algo twoshot -G 1 all_reduce
perf barrier1shot-n8-G 8 QCOLL_IPC_PUSH_BYTES=0 -- "${S[@]}" --algo oneshot -G 1 all_reduce
perf twoshot-n8-G 8 X=1 -- "${S[@]}" --algo twoshot -G 1 all_reduce
if [ -f "$deps/nccl/libnccl.so.2.xz" ] && [ "$(left)" -gt 150 ]; then
  mkdir -p /tmp/nccl232 && xz -dc "$deps/nccl/libnccl.so.2.xz" >/tmp/nccl232/libnccl.so.2
  perf vsnccl-n2-G 2 NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl232/libnccl.so.2 -- \
    "${S[@]}" --algo oneshot -G 1 --vs-nccl all_reduce
fi

if command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 110 ]; then
  mps_off
  for tool in memcheck racecheck; do
    log "sanitize-$tool"
    echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf -a oneshot" >"$out/sanitize-$tool.log"
    CUDA_VISIBLE_DEVICES=0 timeout 50 "$RUN" -n 2 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$PERF" --mem gpu -b 8 -e 64K -f 64 -n 2 -w 1 -c 1 -d bf16 --algo oneshot all_reduce \
      >>"$out/sanitize-$tool.log" 2>&1 || log "sanitize-$tool: exit $?"
    grep -E "ERROR SUMMARY" "$out/sanitize-$tool.log" | tee -a "$out/summary.log"
  done
  mps_on
fi

t=$(left)
if [ "$t" -gt 20 ]; then
  log "tests (${t}s left)"
  (cd "$build" && CUDA_VISIBLE_DEVICES=0 timeout $((t - 5)) ctest --output-on-failure --timeout 120 \
     -R '^gpu\.(push\..*|graph\.n2|graph\.n8|allreduce\.n2|failure\.n2)$') >"$out/ctest.log" 2>&1
  grep -E "Test +#|tests passed|tests failed" "$out/ctest.log" | tee -a "$out/summary.log"
fi
log "done"
