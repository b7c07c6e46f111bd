#!/usr/bin/env bash
# Call 1 (2026-12-03, fifth session).  "new": the working tree (the
# one-shot may read registered inputs in place from
# QCOLL_ONESHOT_REG_MIN_BYTES, its closing barrier without a release).
# "var" (measurement only, variant.sed): new with the closing barrier's
# release put back, and ranks sharing a GPU given resident/sharing blocks
# instead of resident/(2 sharing).  GPU tests of new; the registered
# one-shot at 2 ranks; the push kernel's packs per block; the quantised and
# unquantised 256 MiB with more blocks (PDL off, so no two grids of a rank
# are resident at once); 8 ranks: world sizes, PDL off, push kernel.
here=$(cd "$(dirname "$0")" && pwd)
source scripts/device-lib.sh
dl_start c1
log build
dl_nccl &
dl_tree /tmp/var "$here/variant.sed"
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg gpu_register gpu_allreduce gpu_graph gpu_push &
JOBS=8 dl_build /tmp/var /tmp/var/build-gpu $tg &
wait
log built
dl_mps
dl_ctest build-gpu '^gpu\.(register\.oneshot_reg\.n2|register\.oneshot_reg\.n3|register\.n2|allreduce\.n2|graph\.n2|push\.n2)$' 200
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
N="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2"
# 1. the one-shot at 256 KiB-4 MiB: copied in / registered (relaxed closing
#    barrier) / registered with a release closing barrier (var, same grid)
for r in a b; do
  perf_args=$(S -G 1 --rounds 3 -b 256K -e 4M -f 2 -n 40 -w 5 --algo oneshot)
  ENVS="" dl_perf os-copy-$r build-gpu 2 $perf_args
  ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=256K" dl_perf os-reg-$r build-gpu 2 $perf_args
  ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=256K QCOLL_MAX_BLOCKS=66" dl_perf os-reg-release-$r /tmp/var/build-gpu 2 $perf_args
done
ENVS="$N QCOLL_ONESHOT_REG_MIN_BYTES=256K" dl_perf auto-reg-vsnccl build-gpu 2 $(S -G 1 --rounds 3 -b 8 -e 8M -f 2 -n 40 -w 5 --vs-nccl)
# 2. push kernel, packs per block, 2 ranks
for bp in 32 64 128 256 512; do
  ENVS="QCOLL_IPC_PUSH_BLOCK_PACKS=$bp" dl_perf push-bp$bp build-gpu 2 $(S -G 1 --rounds 3 -b 1K -e 64K -f 2 -n 40 -w 5)
done
# 3. large: more blocks for ranks sharing the GPU (var), PDL off
for q in int4 int8 none; do
  ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-new build-gpu 2 $(S -G 1 --rounds 3 -b 64M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $q)
  ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_PDL=0" dl_perf big-$q-new-nopdl build-gpu 2 $(S -G 1 --rounds 3 -b 64M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $q)
  ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_PDL=0" dl_perf big-$q-var132-nopdl /tmp/var/build-gpu 2 $(S -G 1 --rounds 3 -b 64M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $q)
done
# 4. 8 ranks and the world-size scan
for n in 3 4 6 8; do dl_perf small-n$n build-gpu $n $(S -G 1 --rounds 3 -b 8 -e 4K -f 8 -n 30 -w 5); done
ENVS="QCOLL_PDL=0" dl_perf small-n8-nopdl build-gpu 8 $(S -G 1 --rounds 3 -b 8 -e 4K -f 8 -n 30 -w 5)
ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf small-n8-push build-gpu 8 $(S -G 1 --rounds 3 -b 8 -e 4K -f 8 -n 30 -w 5)
log done
