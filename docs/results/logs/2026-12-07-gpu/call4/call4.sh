#!/usr/bin/env bash
# Call 4 (2026-12-07): the PyTorch GPU tests call 2 did not reach (its time
# ran out in test_quick_all_reduce_quantised_within_bound[python]), then
# qcoll.torch's bench at 2 and 8 ranks again beside PyTorch's NCCL backend
# (NCCL 2.32.6 up to 64 KiB): a second sample of call 2's figures.
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-450}
dl_start s4
dl_nccl &
log build
JOBS=16 dl_build . build-gpu qcoll qcoll-run qcoll-perf
wait
dl_mps
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
log "torch tests: those call 2 did not reach"
K="not cpu and not torch_compile and not backend_ops and not ddp_trains and not device_binding"
K="$K and not mixed_backend and not quick_all_reduce_eager and not cuda_graph_replay"
K="$K and not (quantised_within_bound and compiled)"
OUT=$out TORCH_STEPS=test TORCH_TESTS="$K" TEST_LIMIT=220 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test-rest.out 2>&1
cp $out/torch-test.log $out/torch-test-rest.log
log "torch bench 2 and 8 ranks"
OUT=$out TORCH_STEPS=bench BENCH_RANKS="2 8" BENCH_LIMIT=60 \
  TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 BENCH_ARGS="--nccl-max-bytes 65536" \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
grep "bench:" $out/torch-bench.out | tee -a $out/summary.log
log done
