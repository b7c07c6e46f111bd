#!/usr/bin/env bash
# Call 1 (2026-12-07).  (a) The push one-shot polling every pending slot in
# one go (push-poll.diff: the loads of all pending peers' slots issued
# before any is tested; HEAD tested each slot before loading the next, so
# a poll cost n - 1 memory latencies in series): the tree ("new") against
# the same tree with the diff reversed ("old"), graph, registered, 2 and 4
# ranks (the push kernel's default range) and 8 ranks with the push kernel
# forced (QCOLL_IPC_PUSH_MAX_RANKS=8) beside the flag-barrier one-shot that
# 8 ranks take by default; two alternating rounds.  The push GPU tests and
# compute-sanitizer on the new kernel (2 ranks, MPS off).  (b) qcoll.torch:
# the extension built, then the ops inside torch.compile on cuda with both
# implementations (cut off by the time limit in every earlier call).
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-500}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s1
dl_nccl &
log build
dl_tree /tmp/old
(cd /tmp/old && patch -s -R -p1 <"$here/push-poll.diff") && echo "old tree: push-poll.diff reversed" >>$out/summary.log
tg="qcoll qcoll-run qcoll-perf"
JOBS=11 dl_build . build-gpu $tg gpu_push gpu_graph gpu_register &
JOBS=5 dl_build /tmp/old /tmp/old/build $tg &
wait
log built
T=build-gpu/tools
for tool in memcheck racecheck; do
  for n in 2; do
    echo "# QCOLL_IPC_PUSH_MAX_RANKS=8 qcoll-run -n $n compute-sanitizer --tool $tool qcoll-perf (push one-shot)" >$out/sanitize-$tool-$n.log
    QCOLL_IPC_PUSH_MAX_RANKS=8 CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n $n compute-sanitizer --tool $tool --error-exitcode 9 \
      $T/qcoll-perf/qcoll-perf --mem gpu -b 16 -e 64K -f 16 -n 3 -w 1 -c 1 -d bf16 --algo oneshot all_reduce \
      >>$out/sanitize-$tool-$n.log 2>&1 || log "sanitize-$tool-$n: exit $?"
    grep -E "ERROR SUMMARY|hazards" $out/sanitize-$tool-$n.log | sort | uniq -c | tee -a $out/summary.log
  done
done
dl_mps
dl_ctest build-gpu '^gpu\.(push\.n2|push\.n3|push\.n8|push\.small_slots\.n4|graph\.n2|register\.n2)$' 100
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register -b 16 -e "$1" -f 4 all_reduce; }
for r in a b; do
  dl_perf n2-new-$r build-gpu 2 $(S 256K)
  dl_perf n2-old-$r /tmp/old/build 2 $(S 256K)
  dl_perf n4-new-$r build-gpu 4 $(S 64K)
  dl_perf n4-old-$r /tmp/old/build 4 $(S 64K)
  ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-push-new-$r build-gpu 8 $(S 64K)
  ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-push-old-$r /tmp/old/build 8 $(S 64K)
  dl_perf n8-flag-$r build-gpu 8 $(S 64K)
done
E() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 400 -w 5 -b 16 -e "$1" -f 4 all_reduce; }
dl_perf n2-eager-new build-gpu 2 $(E 256K)
ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-eager-push-new build-gpu 8 $(E 16K)
dl_perf n8-eager-flag build-gpu 8 $(E 16K)
[ "$(left)" -lt 120 ] && { log "no time left for the torch steps"; exit 0; }
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
log "torch tests: torch.compile"
OUT=$out TORCH_STEPS=test TORCH_TESTS="torch_compile and cuda" TEST_LIMIT=$(( $(left) - 10 )) \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-test-compile.out 2>&1
cp $out/torch-test.log $out/torch-test-compile.log
log done
