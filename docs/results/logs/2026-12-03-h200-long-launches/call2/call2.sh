#!/usr/bin/env bash
# Call 2 (2026-12-03, fifth session).  "new": the working tree, where a
# launch of more than 4 MiB per rank (two-shot, quantised) is long: no
# programmatic dependent launch, the next launch let in only as its blocks
# exit, and a grid of the GPU's resident blocks divided by the ranks on it
# (132 at 2 ranks on an H200; QCOLL_MAX_BLOCKS=99 caps it at 3/4).  "old":
# fa93489 (the session's start, carried in build-old/).  GPU tests of new;
# the large all-reduce, quantised and not, new / new capped / old in two
# alternating rounds; the registered one-shot at 2-4 MiB and the push
# kernel's packs per block once more.
source scripts/device-lib.sh
dl_start c2
log build
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg gpu_allreduce gpu_graph gpu_quant gpu_quant_kernels gpu_register &
JOBS=8 dl_build build-old build-old/build-gpu $tg &
wait
log built
dl_mps
dl_ctest build-gpu '^gpu\.(allreduce\.n2|allreduce\.n8|graph\.n2|quant\.n2|quant\.n4|quant_kernels|register\.n2)$' 240
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
B() { S -G 1 --rounds 3 -b 4M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $1; }
for r in a b; do
  for q in int4 int8 none; do
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-new-$r build-gpu 2 $(B $q)
    ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_MAX_BLOCKS=99" dl_perf big-$q-new99-$r build-gpu 2 $(B $q)
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-old-$r build-old/build-gpu 2 $(B $q)
  done
done
for r in c d; do
  ENVS="" dl_perf os-copy-$r build-gpu 2 $(S -G 1 --rounds 3 -b 1M -e 4M -f 2 -n 40 -w 5 --algo oneshot)
  ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=1M" dl_perf os-reg-$r build-gpu 2 $(S -G 1 --rounds 3 -b 1M -e 4M -f 2 -n 40 -w 5 --algo oneshot)
  for bp in 32 128; do
    ENVS="QCOLL_IPC_PUSH_BLOCK_PACKS=$bp" dl_perf push-bp$bp-$r build-gpu 2 $(S -G 1 --rounds 3 -b 1K -e 64K -f 2 -n 40 -w 5)
  done
done
log done
