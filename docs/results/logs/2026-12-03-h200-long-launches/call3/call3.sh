#!/usr/bin/env bash
# Call 3 (2026-12-03, fifth session).  "new": as in call 2 (long launches:
# no PDL, next launch let in as blocks exit, the GPU's resident blocks
# divided by the ranks on it; QCOLL_MAX_BLOCKS=66 gives them the old grid
# at 2 ranks).  "old": fa93489.  Every other format at 2 ranks with both
# grids; INT4, INT8 and unquantised at 4 and 8 ranks, new beside old; the
# registered one-shot at 3 MiB; the automatic path at 2 ranks 2-16 MiB.
source scripts/device-lib.sh
dl_start c3
log build
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg &
JOBS=8 dl_build build-old build-old/build-gpu $tg &
wait
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
B() { S -G 1 --rounds 3 -b 16M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $1; }
for q in fp8 int6 int3 int4; do
  ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-new build-gpu 2 $(B $q)
  ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_MAX_BLOCKS=66" dl_perf big-$q-new66 build-gpu 2 $(B $q)
done
M() { S -G 1 --rounds 3 -b 4M -e 64M -f 4 -n 5 -w 2 --algo twoshot -q $1; }
for n in 4 8; do
  for q in int4 int8 none; do
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-n$n-new build-gpu $n $(M $q)
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-n$n-old build-old/build-gpu $n $(M $q)
  done
done
for r in a b; do
  ENVS="" dl_perf os3-copy-$r build-gpu 2 $(S -G 1 --rounds 3 -b 3M -e 3M -n 40 -w 5 --algo oneshot)
  ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=1M" dl_perf os3-reg-$r build-gpu 2 $(S -G 1 --rounds 3 -b 3M -e 3M -n 40 -w 5 --algo oneshot)
done
ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=3M" dl_perf auto-n2-new build-gpu 2 $(S -G 1 --rounds 3 -b 2M -e 16M -f 2 -n 20 -w 5)
dl_perf auto-n2-old build-old/build-gpu 2 $(S -G 1 --rounds 3 -b 2M -e 16M -f 2 -n 20 -w 5)
log done
