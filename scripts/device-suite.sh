#!/usr/bin/env bash
# Everything a GPU machine session verifies, in one call, each step with its
# own time limit; every log is packed into $OUT/logs.tar.gz (the device tool
# brings back at most 8 files), with suite.log, the summary, beside it.
#   tests     scripts/gpu-tests.sh on GPU 0 only (ranks share it under MPS):
#             build with CUDA, `ctest -L gpu`; ctest's full log is kept, so
#             passing tests' figures (the soak's) are in it too
#   perf      qcoll-perf all-reduce sweeps (bf16, exact check) at 2, 4 and 8
#             ranks on GPU 0, eager and -G; every other collective at 2 and
#             4 ranks; each quantised format at 2 ranks; the codec bandwidth
#   multigpu  with two or more GPUs: the tests that need them (device index,
#             wrong-device refusals, NCCL engine) and qcoll-perf --vs-nccl
#             with one rank per GPU, eager and -G, every collective and INT4
#   python    the Python/PyTorch tests on GPU 0, then the torch tests with
#             every GPU visible (one rank per GPU)
#   sanitize  compute-sanitizer memcheck and racecheck around each of 2
#             ranks running one-shot and two-shot all-reduces on GPU 0
#             (qcoll-perf, short sweeps, results checked); MPS is stopped
#             first, the tool may not run under it
# Usage on the device machine, from the repository root:
#   OUT=$OUT QCOLL_CMOCKA_DIR=$PWD/build-deps/cmocka scripts/device-suite.sh
# (the device machine has no cmocka and no network: carry build-deps/).
# STEPS="tests perf multigpu python sanitize" (the default) picks steps; CTEST_ARGS
# adds ctest arguments (e.g. "-E soak --timeout 90"); TESTS_LIMIT and
# PYTHON_LIMIT bound those steps in seconds.  NVLink multicast stays off.
# On an H200 each step takes a few minutes (tests about 6, perf about 4,
# multigpu and python about 3 each): within a 10-minute command run one or
# two steps per call, the build is kept for the next call while the
# machine stays warm.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
final_out=${OUT:-/tmp/qcoll-device}
export OUT=$(mktemp -d /tmp/qcoll-device-logs.XXXXXX)
mkdir -p "$final_out"
pack() {
  # gpu-tests.sh keeps its logs in /tmp/qcoll-gpu-tests.*: take them even
  # when a step was cut off before it copied them.
  for d in /tmp/qcoll-gpu-tests.*; do [ -d "$d" ] && cp -r "$d" "$OUT/" 2>/dev/null; done
  cp "$BUILD_DIR/Testing/Temporary/LastTest.log" "$OUT/ctest-LastTest-final.log" 2>/dev/null
  tar -C "$OUT" -czf "$final_out/logs.tar.gz" . 2>/dev/null
  cp "$OUT/suite.log" "$final_out/" 2>/dev/null
}
started=0
finish() {
  [ "$started" = 1 ] && echo quit | nvidia-cuda-mps-control
  pack
}
trap finish EXIT
export BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
export JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-"tests perf multigpu python sanitize"}
NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps/pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps/log}
status=0
step() { echo "== $(date +%T) $*" | tee -a "$OUT/suite.log"; }
{ nvidia-smi; nvidia-smi topo -m; nproc; } >"$OUT/machine.txt" 2>&1

if [[ " $STEPS " == *" tests "* ]]; then
  step "gpu tests"
  # shellcheck disable=SC2086  # CTEST_ARGS is a list of words
  CUDA_VISIBLE_DEVICES=0 NO_MPS=0 timeout "${TESTS_LIMIT:-420}" "$root/scripts/gpu-tests.sh" ${CTEST_ARGS:-} \
    >"$OUT/gpu-tests.out" 2>&1 || status=1
  tail -n 25 "$OUT/gpu-tests.out" | tee -a "$OUT/suite.log"
fi

# The remaining steps need MPS running for multi-rank runs on one GPU.
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && started=1
fi
if [ ! -x "$BUILD_DIR/tools/qcoll-perf/qcoll-perf" ]; then
  step "build (no tests step ran)"
  args=()
  if [ -n "${QCOLL_CMOCKA_DIR:-}" ]; then
    args=("-DCMOCKA_INCLUDE_DIR=$QCOLL_CMOCKA_DIR/include"
          "-DCMOCKA_LIBRARY=$(ls "$QCOLL_CMOCKA_DIR"/lib/libcmocka.so* | head -n 1)")
  fi
  cmake -S "$root" -B "$BUILD_DIR" "${args[@]}" >"$OUT/build.log" 2>&1 &&
    cmake --build "$BUILD_DIR" -j "$JOBS" >>"$OUT/build.log" 2>&1 || { status=1; tail "$OUT/build.log"; }
fi
RUN=$BUILD_DIR/tools/qcoll-run/qcoll-run
PERF=$BUILD_DIR/tools/qcoll-perf/qcoll-perf

# One qcoll-perf run: perf NAME RANKS LIMIT_S ARGS...; output in NAME.log
# under $OUT with the command on its first line.
perf() {
  local name=$1 n=$2 limit=$3
  shift 3
  step "$name"
  echo "# qcoll-run -n $n qcoll-perf $*" >"$OUT/$name.log"
  timeout "$limit" "$RUN" -n "$n" "$PERF" "$@" >>"$OUT/$name.log" 2>&1 || status=1
  grep -E "Out of bounds|Avg bus|Geomean" "$OUT/$name.log" | tee -a "$OUT/suite.log"
}
COLLS="reduce broadcast all_gather reduce_scatter all_to_all sendrecv barrier"

if [[ " $STEPS " == *" perf "* ]]; then
  (
    export CUDA_VISIBLE_DEVICES=0
    for n in ${PERF_RANKS:-2 4 8}; do
      for d in bf16 f16; do
        perf "allreduce-$d-n$n" "$n" 90 --mem gpu -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5 -c 1 -d $d all_reduce
        perf "allreduce-$d-n$n-G" "$n" 90 --mem gpu -b 8 -e "${PERF_MAX:-256M}" -f 4 -n 20 -w 5 -c 1 -d $d -G 1 all_reduce
      done
    done
    for c in $COLLS; do
      for n in 2 4; do perf "$c-n$n" "$n" 60 --mem gpu -b 8 -e 64M -f 8 -n 10 -w 3 -c 1 -d bf16 "$c"; done
    done
    for q in none fp8 int8 int6 int4; do
      QCOLL_QUANT_SHARED_GPU_FLOORS=0 perf "quant-$q-n2" 2 60 --mem gpu -b 64K -e 256M -f 4 -n 10 -w 3 -c 1 -d bf16 --algo twoshot -q "$q" all_reduce
    done
    step "codec bandwidth"
    timeout 60 "$BUILD_DIR/tests/codec/codec_bandwidth" --mib 256 --iters 20 --require 0.8 \
      >"$OUT/codec-bandwidth.log" 2>&1 || status=1
    tail -n 14 "$OUT/codec-bandwidth.log" | tee -a "$OUT/suite.log"
    exit $status
  ) || status=1
fi

if [[ " $STEPS " == *" multigpu "* ]]; then
  if [ "$NGPUS" -lt 2 ]; then
    step "multigpu: $NGPUS GPU visible, needs two: not run"
  else
    step "multigpu tests on $NGPUS GPUs"
    (cd "$BUILD_DIR" && timeout 200 ctest --timeout 90 -V \
       -R '^(gpu\.multi_device\..*|gpu\.device\.n2|gpu\.failure\.kill\.n2|nccl\.gpu\.multi2)$') \
      >"$OUT/ctest-multigpu.log" 2>&1 || status=1
    grep -E "Test +#|tests passed" "$OUT/ctest-multigpu.log" | tee -a "$OUT/suite.log"
    perf "vsnccl-allreduce-n$NGPUS" "$NGPUS" 120 --mem gpu -b 8 -e 1G -f 4 -n 10 -w 3 -c 1 -d bf16 --vs-nccl all_reduce
    perf "vsnccl-allreduce-n$NGPUS-G" "$NGPUS" 120 --mem gpu -b 8 -e 1G -f 4 -n 10 -w 3 -c 1 -d bf16 -G 1 --vs-nccl all_reduce
    perf "vsnccl-int4-n$NGPUS" "$NGPUS" 120 --mem gpu -b 1M -e 1G -f 4 -n 10 -w 3 -c 1 -d bf16 -q int4 --vs-nccl all_reduce
    for c in $COLLS; do
      perf "vsnccl-$c-n$NGPUS" "$NGPUS" 60 --mem gpu -b 8 -e 256M -f 8 -n 10 -w 3 -c 1 -d bf16 --vs-nccl "$c"
    done
  fi
fi

if [[ " $STEPS " == *" python "* ]]; then
  pytest_cmd=(python3 -m pytest -v -rs --timeout 120)
  step "python and torch tests, GPU 0"
  (cd "$root" && CUDA_VISIBLE_DEVICES=0 QCOLL_LIB=$BUILD_DIR/libqcoll.so QCOLL_RUN=$RUN \
     PYTHONPATH=$root/python timeout "${PYTHON_LIMIT:-400}" "${pytest_cmd[@]}" tests/python) \
    >"$OUT/python.log" 2>&1 || status=1
  grep -E "FAILED|ERROR|passed|failed" "$OUT/python.log" | tail -n 15 | tee -a "$OUT/suite.log"
  if [ "$NGPUS" -ge 2 ]; then
    step "torch tests, one rank per GPU"
    (cd "$root" && QCOLL_LIB=$BUILD_DIR/libqcoll.so QCOLL_RUN=$RUN PYTHONPATH=$root/python \
       timeout 300 "${pytest_cmd[@]}" tests/python/test_torch.py) \
      >"$OUT/python-multigpu.log" 2>&1 || status=1
    grep -E "FAILED|ERROR|passed|failed" "$OUT/python-multigpu.log" | tail -n 15 | tee -a "$OUT/suite.log"
  fi
fi
if [[ " $STEPS " == *" sanitize "* ]]; then
  if ! command -v compute-sanitizer >/dev/null; then
    step "sanitize: compute-sanitizer not found, not run"
  else
    [ "$started" = 1 ] && echo quit | nvidia-cuda-mps-control && started=0
    for tool in memcheck racecheck; do
      for algo in oneshot twoshot; do
        name="sanitize-$tool-$algo"
        step "$name"
        echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf --mem gpu --algo $algo ..." >"$OUT/$name.log"
        CUDA_VISIBLE_DEVICES=0 timeout 240 "$RUN" -n 2 compute-sanitizer --tool "$tool" \
          --error-exitcode 9 "$PERF" --mem gpu -b 8 -e 4M -f 16 -n 2 -w 1 -c 1 -d bf16 --algo "$algo" \
          all_reduce >>"$OUT/$name.log" 2>&1 || status=1
        grep -E "ERROR SUMMARY|Out of bounds" "$OUT/$name.log" | tee -a "$OUT/suite.log"
      done
    done
  fi
fi
step "done, status $status"
exit $status
