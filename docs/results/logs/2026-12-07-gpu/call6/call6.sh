#!/usr/bin/env bash
# Call 6 (2026-12-07, third session of the day).  (a) The wide one-shot
# (2 ranks, more packs than threads: 1 MiB and up on an H100) with its
# registry row read as soon as the grid may read memory, before
# block_begin's counters (wide-first-load.diff: the tree; the previous
# order is the tree with the diff reversed, "old").  Call 3 measured a
# variant that also moved each thread's first pack: 2 ranks 0.2-0.3 us
# better at 512 KiB-2 MiB, 8 ranks 0.2 worse; this one leaves the small
# kernel (8 ranks) as it is.  gpu.allreduce.n2/.n8, gpu.graph.n2 and the
# registered-buffer tests on the tree; 2 ranks 512 KiB-4 MiB, graph
# registered, graph unregistered and eager, tree and old in alternating
# rounds; the tree beside NCCL 2.32.6, 16 B-4 MiB.  (b) qcoll.torch's bench
# at 2 and 8 ranks a fourth time.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-540}
dl_start s6
dl_nccl &
log build
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_tree /tmp/old
(cd /tmp/old && patch -s -R -p1 <"$here/wide-first-load.diff") && echo "old: wide-first-load.diff reversed" >>$out/summary.log
JOBS=10 dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_allreduce gpu_graph gpu_register &
JOBS=6 dl_build /tmp/old /tmp/old/build qcoll qcoll-run qcoll-perf &
wait
log built
dl_mps
dl_ctest build-gpu '^gpu\.(allreduce\.n2|allreduce\.n8|graph\.n2|register\.n2|register\.oneshot_reg\.n2)$' 150
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -b 512K -e 4M -f 2 "$@" all_reduce; }
for r in a b; do
  for t in tree old; do
    b=build-gpu; [ $t = old ] && b=/tmp/old/build
    dl_perf n2-reg-$t-$r $b 2 $(S -G 1 --register)
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-unreg-$t-$r $b 2 $(S -G 1)
    dl_perf n2-eager-$t-$r $b 2 $(S -n 200 -w 20)
  done
done
ENVS="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2" \
  dl_perf n2-vsnccl build-gpu 2 --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register -b 16 -e 4M -f 4 --vs-nccl all_reduce
log "torch build"
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 1 $out/torch-build.out | tee -a $out/summary.log
log "torch bench 2 and 8 ranks"
OUT=$out TORCH_STEPS=bench BENCH_RANKS="2 8" BENCH_LIMIT=60 \
  TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 BENCH_ARGS="--nccl-max-bytes 65536" \
  BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
grep "bench:" $out/torch-bench.out | tee -a $out/summary.log
log done
