#!/usr/bin/env bash
# Call 2 (2026-12-05): qcoll.torch's host time per call beside PyTorch's
# NCCL backend on NCCL 2.32.6 (build-deps/, loaded in place of torch's with
# NCCL_MULTI_RANK_GPU_ENABLE=1; the bench now prints the NCCL the process
# runs) at 2 ranks, and at 8 ranks with NCCL only up to 64 KiB (call 1's
# 8-rank run never finished its 1 MiB round); then the PyTorch tests of the
# compiled implementation on the GPU (device time was short: the Python
# fallback's cases ran in earlier sessions and on CPU in CI).
# HEAD's kernels (call 1's push variant was not taken).  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-575}
dl_start c2
dl_nccl &
log build
dl_build . build-gpu qcoll qcoll-run
wait
log built
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
dl_mps
log torch bench 2 ranks, NCCL 2.32
OUT=$out TORCH_STEPS=bench BENCH_RANKS=2 BENCH_LIMIT=100 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench2.out 2>&1
log torch bench 8 ranks, NCCL 2.32 up to 64 KiB
OUT=$out TORCH_STEPS=bench BENCH_RANKS=8 BENCH_LIMIT=120 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BENCH_ARGS="--nccl-max-bytes 65536" BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench8.out 2>&1
sleep 2
log torch tests
OUT=$out TORCH_STEPS=test TORCH_TESTS="compiled and not cpu" TEST_LIMIT=$(( $(left) - 10 )) BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh \
  >$out/torch-test.out 2>&1
log done
