#!/usr/bin/env bash
# Call 5 (2026-12-07, second session of the day).  (a) compute-sanitizer
# memcheck and racecheck on the push one-shot's wide shapes (2 ranks, MPS
# off, QCOLL_MAX_BLOCKS=2 so every thread has many packs, as in
# gpu.push.wide.n2; call 3 ran those tests on a GPU, not the sanitizer).
# (b) qcoll.torch: the torch.compile test again (it failed in call 1 and
# passed in call 2), then the bench at 2 and 8 ranks a third time, and
# beside it qcoll-perf's eager time of the same 1 MiB all-reduce from C (the
# GPU time that bounds the bench's figure with a synchronize at 8 ranks).
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-420}
dl_start s5
dl_nccl &
log build
JOBS=16 dl_build . build-gpu qcoll qcoll-run qcoll-perf
wait
T=build-gpu/tools
for tool in memcheck racecheck; do
  f=$out/sanitize-wide-$tool.log
  echo "# QCOLL_MAX_BLOCKS=2 qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf (push one-shot, wide shapes)" >$f
  QCOLL_MAX_BLOCKS=2 CUDA_VISIBLE_DEVICES=0 timeout 90 $T/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 4K -e 256K -f 8 -n 3 -w 1 -c 1 -d bf16 --algo oneshot all_reduce \
    >>$f 2>&1 || log "sanitize-wide-$tool: exit $?"
  grep -E "ERROR SUMMARY|hazards" $f | sort | uniq -c | tee -a $out/summary.log
  grep -E "^ +[0-9]+ " $f | awk '{print "   ", $1, $6, $9, $10, $13}' | tee -a $out/summary.log
done
dl_mps
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
log "torch.compile test"
OUT=$out TORCH_STEPS=test TORCH_TESTS="torch_compile and cuda" TEST_LIMIT=120 \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test-compile.out 2>&1
cp $out/torch-test.log $out/torch-test-compile.log
grep -E "PASSED|FAILED|passed|failed" $out/torch-test-compile.log | tee -a $out/summary.log
log "torch bench 2 and 8 ranks"
OUT=$out TORCH_STEPS=bench BENCH_RANKS="2 8" BENCH_LIMIT=60 \
  TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 BENCH_ARGS="--nccl-max-bytes 65536" \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
grep "bench:" $out/torch-bench.out | tee -a $out/summary.log
sleep 2
E() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 400 -w 20 -b 4K -e 1M -f 256 "$@" all_reduce; }
dl_perf n2-eager-c build-gpu 2 $(E)
dl_perf n8-eager-c build-gpu 8 $(E)
dl_perf n8-graph-c build-gpu 8 $(E -G 1)
log done
