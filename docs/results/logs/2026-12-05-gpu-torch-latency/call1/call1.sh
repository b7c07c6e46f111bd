#!/usr/bin/env bash
# Call 1 (2026-12-05): qcoll.torch's host time per call beside PyTorch's
# NCCL backend (NCCL 2.32.6 from build-deps/, loaded in place of torch's
# with NCCL_MULTI_RANK_GPU_ENABLE=1) at 2 and 8 ranks; the push one-shot
# with its first pack loaded beside the launch index ("new", this checkout)
# against HEAD's kernel ("old", build-deps/old/allreduce_push.cu in a copy
# of this checkout), 2, 4 and 8 ranks, graph on registered buffers and
# eager; 2-rank latency beside NCCL 2.32; the GPU tests of the push kernel
# and compute-sanitizer around it.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-575}
dl_start c1
dl_nccl &
log build
printf '' >/tmp/no-patch
dl_tree /tmp/old /tmp/no-patch
cp build-deps/old/allreduce_push.cu /tmp/old/src/coll/cuda/allreduce_push.cu
JOBS=10 dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_push gpu_allreduce gpu_graph gpu_register &
JOBS=6 dl_build /tmp/old /tmp/old/build qcoll qcoll-run qcoll-perf &
wait
log built
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
dl_mps
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 "$@" all_reduce; }
for round in 1 2; do
  dl_perf n2-G-old$round /tmp/old/build 2 $(S -G 1 --register -b 16 -e 4M -f 4)
  dl_perf n2-G-new$round build-gpu 2 $(S -G 1 --register -b 16 -e 4M -f 4)
done
dl_perf n2-E-old /tmp/old/build 2 $(S -b 16 -e 256K -f 4)
dl_perf n2-E-new build-gpu 2 $(S -b 16 -e 256K -f 4)
dl_perf n2-G-unreg-new build-gpu 2 $(S -G 1 -b 16 -e 4M -f 4)
ENVS="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2" \
  dl_perf n2-G-vsnccl-new build-gpu 2 $(S -G 1 --register -b 16 -e 4M -f 4 --vs-nccl)
dl_perf n4-G-old /tmp/old/build 4 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n4-G-new build-gpu 4 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n8-G-old /tmp/old/build 8 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n8-G-new build-gpu 8 $(S -G 1 --register -b 16 -e 64K -f 4)
log torch bench 2 ranks, NCCL 2.32
OUT=$out TORCH_STEPS=bench BENCH_RANKS=2 BENCH_LIMIT=120 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench2.out 2>&1
log torch bench 8 ranks, NCCL 2.32
OUT=$out TORCH_STEPS=bench BENCH_RANKS=8 BENCH_LIMIT=150 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench8.out 2>&1
dl_ctest build-gpu '^gpu\.(push\..*|graph\.n2|allreduce\.n2|register\.n2)$' 120
if [ "$(left)" -gt 60 ]; then
  echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1
  for tool in memcheck racecheck; do
    log "sanitize-$tool"
    CUDA_VISIBLE_DEVICES=0 timeout 40 build-gpu/tools/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool \
      --error-exitcode 9 build-gpu/tools/qcoll-perf/qcoll-perf --mem gpu -b 16 -e 256K -f 16 -n 2 -w 1 -c 1 \
      -d bf16 --algo oneshot all_reduce >$out/sanitize-$tool.log 2>&1 || log "sanitize-$tool: exit $?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $out/sanitize-$tool.log | tee -a $out/summary.log
  done
fi
log done
