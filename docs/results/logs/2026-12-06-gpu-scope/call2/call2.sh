#!/usr/bin/env bash
# Call 2 (2026-12-06, second session): the push kernel with its first pack
# loaded beside the launch index (push variant 2, now in the tree) checked:
# compute-sanitizer memcheck and racecheck at 2 ranks (MPS off), the push,
# graph and all-reduce GPU tests; eager 2 ranks with 40 and 400 timed
# calls (is the eager figure the steady state?); the whole PyTorch GPU
# suite, compiled and Python implementations (with WITH_BENCH=1 first
# qcoll.torch's bench at 8 and 2 ranks: cut for device time); the
# kernels launched through the driver (driver_launch.cuh) against the same
# tree launching through the runtime (../rt-launch.sed), eager, 2 and 8
# ranks, alternating.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-560}
dl_start s2
dl_nccl &
log build
tg="qcoll qcoll-run qcoll-perf"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_tree /tmp/rt "$here/../rt-launch.sed"
JOBS=12 dl_build . build-gpu $tg gpu_allreduce gpu_graph gpu_push gpu_register gpu_quant gpu_kernels &
JOBS=4 dl_build /tmp/rt /tmp/rt/build $tg &
wait
log built
T=build-gpu/tools
for tool in memcheck racecheck; do
  echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf (push one-shot)" >$out/sanitize-$tool.log
  CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 \
    $T/qcoll-perf/qcoll-perf --mem gpu -b 16 -e 64K -f 16 -n 3 -w 1 -c 1 -d bf16 --algo oneshot all_reduce \
    >>$out/sanitize-$tool.log 2>&1 || log "sanitize-$tool: exit $?"
  grep -E "ERROR SUMMARY|hazards" $out/sanitize-$tool.log | tee -a $out/summary.log
done
dl_mps
dl_ctest build-gpu '^gpu\.(push\.n2|push\.n3|push\.n8|push\.small_slots\.n4|graph\.n2|allreduce\.n2|register\.n2|quant\.n2|kernels)$' 150
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -w 5 "$@" all_reduce; }
dl_perf n2-E-40 build-gpu 2 $(S -n 40 -b 16 -e 256K -f 4)
dl_perf n2-E-40-rt /tmp/rt/build 2 $(S -n 40 -b 16 -e 256K -f 4)
dl_perf n2-E-400 build-gpu 2 $(S -n 400 -b 16 -e 256K -f 4)
dl_perf n2-E-400-rt /tmp/rt/build 2 $(S -n 400 -b 16 -e 256K -f 4)
dl_perf n2-E-400-b build-gpu 2 $(S -n 400 -b 16 -e 256K -f 4)
dl_perf n8-E-400 build-gpu 8 $(S -n 400 -b 16 -e 16K -f 4)
dl_perf n8-E-400-rt /tmp/rt/build 8 $(S -n 400 -b 16 -e 16K -f 4)
dl_perf n2-G-reg build-gpu 2 $(S -n 40 -G 1 --register -b 16 -e 256K -f 4)
[ "$(left)" -lt 150 ] && { log "no time left for the torch tests"; exit 0; }
# Built after the timed runs: a compile beside them would slow the hosts.
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
if [ -n "${WITH_BENCH:-}" ]; then
  dl_torch $PWD/build-gpu 90
else
  dl_torch_tests $PWD/build-gpu
fi
log done
