#!/usr/bin/env bash
# qcoll.torch on a GPU machine, GPU 0 shared by the ranks under MPS:
#   build  libqcoll with CUDA and qcoll-run (only those targets; an existing
#          $BUILD_DIR, default build-gpu, is reused), then qcoll.torch's compiled extension
#          against the installed torch (QCOLL_TORCH_EXT=require: a failed
#          build stops here with the compiler's message)
#   test   tests/python/test_torch.py: every case with the compiled and the
#          Python implementation (backend ops against gloo, DDP 20 steps,
#          binding, mixed form, QuickAllReduce eager / graph replay /
#          quantised, the ops inside torch.compile), plus the failed-build
#          fallback
#   bench  bench/torch_overhead.py at 2 and 8 ranks (bf16, 4 KiB and 1 MiB,
#          eager, host time per call; DDP step of a small MLP); with
#          TORCH_NCCL_LIB=/path/libnccl.so.2 that NCCL is loaded in place of
#          torch's, with NCCL_MULTI_RANK_GPU_ENABLE=1 (an NCCL that accepts
#          ranks sharing a GPU, for PyTorch's NCCL backend beside qcoll);
#          BENCH_ARGS adds options (e.g. --nccl-max-bytes 65536: with 8
#          ranks on one GPU NCCL 2.32 did not complete 1 MiB in 150 s)
# Usage, from the repository root:
#   OUT=$OUT scripts/torch-gpu.sh                 # TORCH_STEPS="build test bench"
#   OUT=$OUT TORCH_STEPS=bench scripts/torch-gpu.sh   # a later call, machine still warm
#   OUT=$OUT TORCH_STEPS=test TORCH_TESTS="ops_match_gloo and compiled" scripts/torch-gpu.sh
#                                                 # only the tests pytest -k selects
# (its own name: a STEPS of a calling script does not leak into it)
# Logs go to $OUT (torch-*.log); the bench lines are also in $OUT/summary.log.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/qcoll-torch}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
STEPS=${TORCH_STEPS:-"build test bench"}
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/qcoll-mps/pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/qcoll-mps/log}
export QCOLL_LIB=$BUILD_DIR/libqcoll.so QCOLL_RUN=$BUILD_DIR/tools/qcoll-run/qcoll-run
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export QCOLL_TORCH_EXT_DIR=${QCOLL_TORCH_EXT_DIR:-$root/build-torch-ext}
summary=$OUT/summary.log
say() { echo "torch-gpu: $*" | tee -a "$summary"; }
status=0

started_mps=0
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then
  nvidia-cuda-mps-control -d && started_mps=1 || say "MPS did not start: ranks are time-sliced"
fi
trap '[ "$started_mps" = 1 ] && echo quit | nvidia-cuda-mps-control' EXIT
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" \
  | tee -a "$summary"

if [[ " $STEPS " == *" build "* ]]; then
  say "building libqcoll and qcoll-run in $BUILD_DIR"
  # An existing build (scripts/gpu-tests.sh's) is reused as it is configured;
  # a new one needs no tests, so no cmocka.
  configure=(true)
  [ -f "$BUILD_DIR/CMakeCache.txt" ] || configure=(cmake -S "$root" -B "$BUILD_DIR"
    -DQCOLL_WITH_CUDA=ON -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF)
  if ! { "${configure[@]}" && cmake --build "$BUILD_DIR" --target qcoll qcoll-run -j "$(nproc)"; } \
       >"$OUT/torch-build.log" 2>&1; then
    grep -E "error|Error" "$OUT/torch-build.log" | head -n 30
    say "libqcoll build failed (torch-build.log)"
    exit 1
  fi
  say "building the compiled extension into $QCOLL_TORCH_EXT_DIR"
  start=$SECONDS
  if ! QCOLL_TORCH_EXT=require python3 -c \
       "import qcoll.torch as q; s = q.extension_status(); p = s.plan; print('extension', s.module.__file__, 'cuda', s.module.with_cuda, 'compiler', p.compiler if p else '?', repr(p.compiler_note) if p else '')" \
       >>"$OUT/torch-build.log" 2>&1; then
    tail -n 40 "$OUT/torch-build.log"
    say "extension build failed (torch-build.log)"
    exit 1
  fi
  say "extension ready in $((SECONDS - start)) s: $(grep '^extension' "$OUT/torch-build.log")"
fi

if [[ " $STEPS " == *" test "* ]]; then
  say "tests/python/test_torch.py"
  (cd "$root" && timeout "${TEST_LIMIT:-480}" python3 -m pytest -v -rs --capture=tee-sys -p no:cacheprovider \
     ${TORCH_TESTS:+-k "$TORCH_TESTS"} tests/python/test_torch.py tests/python/test_torch_ext.py) \
     >"$OUT/torch-test.log" 2>&1 || status=1
  grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$OUT/torch-test.log" | tail -n 45 \
    | tee -a "$summary"
fi

if [[ " $STEPS " == *" bench "* ]]; then
  port=29631
  for n in ${BENCH_RANKS:-2 8}; do
    say "bench/torch_overhead.py, $n ranks on GPU 0"
    nccl_env=()
    [ -n "${TORCH_NCCL_LIB:-}" ] && nccl_env=(env LD_PRELOAD="$TORCH_NCCL_LIB" NCCL_MULTI_RANK_GPU_ENABLE=1)
    timeout "${BENCH_LIMIT:-240}" "${nccl_env[@]}" "$QCOLL_RUN" -n "$n" --tag-output -x MASTER_PORT=$port \
      python3 "$root/bench/torch_overhead.py" --ddp ${BENCH_ARGS:-} >"$OUT/torch-bench-$n.log" 2>&1 || status=1
    grep "^\[0\] bench:" "$OUT/torch-bench-$n.log" | tee -a "$summary"
    port=$((port + 10))
  done
fi
say "exit status $status"
exit $status
