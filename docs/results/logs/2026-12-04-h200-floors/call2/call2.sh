#!/usr/bin/env bash
# Call 2 (2026-12-04, session 2): qcoll.torch's host time per call beside
# PyTorch's NCCL backend (NCCL 2.32.6, the PyPI wheel's library shrunk to
# its sm_90 code, loaded in place of torch's with NCCL_MULTI_RANK_GPU_ENABLE=1)
# at 2 ranks, and at 8 ranks; the shared-GPU floors as users get them
# (INT4 asked for, 2 and 4 ranks); 2-rank latency beside NCCL 2.32 (graph,
# the buffers registered at capture); then the PyTorch tests.
source scripts/device-lib.sh
limit=${LIMIT:-560}
dl_start c2
dl_nccl &
log build
dl_build . build-gpu qcoll qcoll-run qcoll-perf
wait
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh > $out/torch-build.out 2>&1
log built; tail -n 3 $out/torch-build.out | tee -a $out/summary.log
dl_mps
log torch bench 2 ranks with NCCL 2.32
OUT=$out TORCH_STEPS=bench BENCH_RANKS=2 BENCH_LIMIT=150 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh > $out/torch-bench2.out 2>&1
log torch bench 8 ranks
OUT=$out TORCH_STEPS=bench BENCH_RANKS=8 BENCH_LIMIT=150 BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh \
  > $out/torch-bench8.out 2>&1
S() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot "$@" all_reduce; }
ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-int4-floors build-gpu 2 $(S -b 16M -e 64M -f 2 -n 5 -w 2 -q int4)
ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-none build-gpu 2 $(S -b 16M -e 64M -f 2 -n 5 -w 2 -q none)
ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n4-int4-floors build-gpu 4 $(S -b 4M -e 64M -f 4 -n 5 -w 2 -q int4)
ENVS="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2" dl_perf n2-vsnccl-G build-gpu 2 \
  --mem gpu -c 1 -d bf16 -G 1 --rounds 3 -b 8 -e 4M -f 2 -n 40 -w 5 --vs-nccl all_reduce
log torch tests
OUT=$out TORCH_STEPS=test TEST_LIMIT=$(( $(left) - 15 )) BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh \
  > $out/torch-test.out 2>&1
log done
