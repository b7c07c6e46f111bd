#!/usr/bin/env bash
# Call 3 (prepared 2026-12-07, NOT RUN: no device time was left).  Can the
# push one-shot take 8 ranks?  Since the poll fix (call 1) it equals the
# flag-barrier one-shot up to 4 KiB (6.65-6.98 against 6.65-6.93 us) and
# loses at 16 and 64 KiB (7.59-8.04 against 6.88-7.74), where a message is
# spread at QCOLL_IPC_PUSH_BLOCK_PACKS=128 packs per block over 8 and 16
# blocks.  Here, 8 ranks, graph, registered: the flag one-shot, the push
# kernel at 128 (the default), 64 and 32 packs per block, two alternating
# rounds; then 2 and 4 ranks at 64 packs (the default's range), and the
# 8-rank winner beside NCCL 2.32.6.  Also the push kernel's wide shapes
# (several packs per thread per round, landed after call 1 and not yet run
# on a GPU): gpu.push.wide.n2/.n4, and 2 and 4 ranks from 256 KiB to 4 MiB
# with QCOLL_IPC_PUSH_BYTES=4M (the push kernel past its default slot, as
# the wide shape) beside the default (the flag-barrier one-shot there).
# And the flag-barrier one-shot with each thread's first input pack (and
# the registry row) loaded beside block_begin's counters
# (oneshot-first-load.diff, "first", passes the CPU emulation), beside
# the tree: 8 ranks (its default there) and 2 ranks at 1-4 MiB, with
# gpu.allreduce.n2/.n8 and gpu.graph.n2 on it.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-360}
dl_start s3
dl_nccl &
log build
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_tree /tmp/first
(cd /tmp/first && patch -s -p1 <"$here/oneshot-first-load.diff") && echo "first: oneshot-first-load.diff applied" >>$out/summary.log
JOBS=10 dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_push &
JOBS=6 dl_build /tmp/first /tmp/first/build qcoll qcoll-run qcoll-perf gpu_allreduce gpu_graph &
wait
log built
dl_mps
S() { local e=$1; shift; echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register -b 16 -e "$e" -f 4 "$@" all_reduce; }
dl_ctest build-gpu '^gpu\.push\.(wide\.n2|wide\.n4|n2|n8)$' 100
dl_ctest /tmp/first/build '^gpu\.(allreduce\.n2|allreduce\.n8|graph\.n2)$' 100
for r in a b; do
  dl_perf n8-head-$r build-gpu 8 $(S 64K)
  dl_perf n8-first-$r /tmp/first/build 8 $(S 64K)
  dl_perf n2-1m-head-$r build-gpu 2 $(S 4M -b 512K)
  dl_perf n2-1m-first-$r /tmp/first/build 2 $(S 4M -b 512K)
done
for r in a b; do
  dl_perf n8-flag-$r build-gpu 8 $(S 256K)
  for bp in 128 64 32; do
    ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8 QCOLL_IPC_PUSH_BLOCK_PACKS=$bp" dl_perf n8-push-bp$bp-$r build-gpu 8 $(S 256K)
  done
done
for n in 2 4; do
  dl_perf n$n-bp128 build-gpu $n $(S 256K)
  ENVS="QCOLL_IPC_PUSH_BLOCK_PACKS=64" dl_perf n$n-bp64 build-gpu $n $(S 256K)
done
for n in 2 4; do
  ENVS="QCOLL_IPC_PUSH_BYTES=4M" dl_perf n$n-push4m build-gpu $n $(S 4M -b 256K)
  dl_perf n$n-flag4m build-gpu $n $(S 4M -b 256K)
done
ENVS="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2" dl_perf n8-vsnccl build-gpu 8 $(S 64K --vs-nccl)
log done
