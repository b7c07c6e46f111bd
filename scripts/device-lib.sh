# Shared pieces of a measurement session on the GPU machine, sourced by the
# per-call scripts under docs/results/logs/*/ (and usable by hand):
#   dl_start NAME     logs in /tmp/NAME, packed into $OUT/logs.tar.gz with
#                     summary.log beside it when the script exits (the
#                     device tool brings back a few files only); MPS is
#                     stopped on exit
#   dl_tree DIR [PATCH]
#                     make DIR a copy of this checkout (sources only) and
#                     apply the sed script PATCH, if given, to the files it
#                     names (lines "FILE<TAB>SED-EXPRESSION"): measurement-only
#                     variants, never committed
#   dl_build DIR BUILD TARGETS...
#                     configure (sm_90, cmocka from build-deps/) and build
#   dl_mps            start the MPS daemon (ranks share GPU 0)
#   dl_perf NAME TREE RANKS ARGS...
#                     one qcoll-run -n RANKS qcoll-perf ARGS under `timeout
#                     100`, environment from $ENVS, log NAME.log opening
#                     with the command, its size/time columns into the
#                     summary; skipped when fewer than 40 s of $LIMIT remain
#   dl_ctest BUILD REGEX LIMIT
#                     ctest of the tests matching REGEX
#   dl_nccl           unpack build-deps/nccl/libnccl.so.2.xz to /tmp/nccl for
#                     --vs-nccl (NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=...)
#   dl_torch BUILD BENCH_SECONDS
#                     after scripts/torch-gpu.sh's build step: dl_torch_bench
#                     at 8 and 2 ranks, then dl_torch_tests
#   dl_torch_bench BUILD BENCH_SECONDS "RANKS"
#                     qcoll.torch's bench at each of RANKS (PyTorch's NCCL
#                     backend on the NCCL of dl_nccl, up to 64 KiB; the
#                     script itself copies its lines into the summary)
#   dl_torch_build BUILD
#                     scripts/torch-gpu.sh's build step (libqcoll and the
#                     compiled extension)
#   dl_torch_tests BUILD
#                     every PyTorch GPU test in the time left
# $LIMIT (seconds, default 560) is the call's budget.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
dl_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dl_deps=$dl_root/build-deps
limit=${LIMIT:-560}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log

log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }

dl_finish() {
  echo quit | nvidia-cuda-mps-control 2>/dev/null
  tar -C "$out" -czf "${OUT:-/tmp}/logs.tar.gz" . 2>/dev/null
  cp "$out/summary.log" "${OUT:-/tmp}/" 2>/dev/null
}

dl_start() {
  out=/tmp/$1
  mkdir -p "$out" "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  trap dl_finish EXIT
  { nvidia-smi; nproc; git -C "$dl_root" log -1 --format='%H %s'; } >"$out/machine.txt" 2>&1
}

dl_tree() {
  local dir=$1 patch=${2:-} file expr
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dl_root" && tar -cf - --exclude='./build*' --exclude=./.git .) | tar -xf - -C "$dir"
  [ -n "$patch" ] || return 0
  while IFS=$'\t' read -r file expr; do
    [ -z "$file" ] && continue
    sed -i "$expr" "$dir/$file"
    echo "variant $dir: $file: $expr" >>"$out/summary.log"
  done <"$patch"
}

dl_build() {
  local src=$1 build=$2
  shift 2
  local lib
  lib=$(ls "$dl_deps"/cmocka/lib/libcmocka.so.0* | head -n 1)
  cmake -S "$src" -B "$build" -DQCOLL_CUDA_ARCH=90 \
    -DCMOCKA_INCLUDE_DIR="$dl_deps/cmocka/include" -DCMOCKA_LIBRARY="$lib" \
    >"$out/build-${build//\//_}.log" 2>&1 &&
    cmake --build "$build" -j "${JOBS:-16}" --target "$@" \
      >>"$out/build-${build//\//_}.log" 2>&1 ||
    echo "FAIL build $build" | tee -a "$out/summary.log"
}

dl_mps() { nvidia-cuda-mps-control -d 2>/dev/null; sleep 1; }

dl_nccl() { mkdir -p /tmp/nccl && xz -dc "$dl_deps/nccl/libnccl.so.2.xz" >/tmp/nccl/libnccl.so.2; }

dl_perf() {
  local name=$1 tree=$2 n=$3
  shift 3
  [ "$(left)" -lt 40 ] && { log "$name: no time left, skipped"; return; }
  local T=$tree/tools
  log "$name"
  echo "# ${ENVS:-} qcoll-run -n $n qcoll-perf $*  [tree $tree]" >"$out/$name.log"
  # shellcheck disable=SC2086  # ENVS is a list of assignments
  env ${ENVS:-} CUDA_VISIBLE_DEVICES=0 timeout 100 "$T/qcoll-run/qcoll-run" -n "$n" \
    "$T/qcoll-perf/qcoll-perf" "$@" >>"$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10, $14, $15}' | tee -a "$out/summary.log"
}

dl_ctest() {
  local build=$1 regex=$2 lim=$3
  (cd "$build" && CUDA_VISIBLE_DEVICES=0 timeout "$lim" ctest --output-on-failure \
    --timeout "$lim" -R "$regex") >"$out/ctest-${build//\//_}.log" 2>&1
  grep -E "Test +#|tests passed|tests failed" "$out/ctest-${build//\//_}.log" | tee -a "$out/summary.log"
}

dl_torch_build() {
  log "torch build"
  OUT=$out TORCH_STEPS=build BUILD_DIR="$1" "$dl_root/scripts/torch-gpu.sh" >"$out/torch-build.out" 2>&1
}

dl_torch_bench() {
  local build=$1 bench_limit=$2 ranks=$3
  log "torch bench at $ranks ranks, NCCL 2.32 up to 64 KiB"
  OUT=$out TORCH_STEPS=bench BENCH_RANKS="$ranks" BENCH_LIMIT="$bench_limit" \
    TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 BENCH_ARGS="--nccl-max-bytes 65536" \
    BUILD_DIR="$build" "$dl_root/scripts/torch-gpu.sh" >"$out/torch-bench.out" 2>&1
}

dl_torch() {
  dl_torch_bench "$1" "$2" "8 2"
  sleep 2 # MPS lets go of the bench's clients
  dl_torch_tests "$1"
}

dl_torch_tests() {
  log "torch tests"
  OUT=$out TORCH_STEPS=test TORCH_TESTS="not cpu" TEST_LIMIT=$(($(left) - 10)) \
    BUILD_DIR="$1" "$dl_root/scripts/torch-gpu.sh" >"$out/torch-test.out" 2>&1
}
