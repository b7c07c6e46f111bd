#!/usr/bin/env bash
# Call 3 (2026-12-04): "new" = the committed tree (2a3c487 and on);
# "long1m" (measurement only, long1m.sed): quantised launches are long
# (no PDL, running alone, the larger grid at 2 ranks) from 1 MiB instead of
# 4 MiB per rank.  2 ranks on one H200 under MPS, bf16, graph,
# unregistered, two-shot: INT8, INT4 and FP8 at 1-16 MiB in both trees
# beside the unquantised two-shot; INT4 in rounds of 36 and 44 MiB beside
# the default 40 at 64 and 256 MiB, twice.
here=$(cd "$(dirname "$0")" && pwd)
source scripts/device-lib.sh
limit=${LIMIT:-540}
dl_start c3
log build
dl_tree /tmp/l1 "$here/long1m.sed"
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg &
JOBS=8 dl_build /tmp/l1 /tmp/l1/build-gpu $tg &
wait
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 3 --algo twoshot "$@" all_reduce; }
E0="QCOLL_GRAPH_REGISTER=0"
ENVS="$E0" dl_perf none-mid build-gpu 2 $(S -b 1M -e 16M -f 2 -n 20 -w 3 -q none)
for q in int8 int4 fp8; do
  ENVS="$E0" dl_perf $q-mid-new build-gpu 2 $(S -b 1M -e 16M -f 2 -n 20 -w 3 -q $q)
  ENVS="$E0" dl_perf $q-mid-long1m /tmp/l1/build-gpu 2 $(S -b 1M -e 16M -f 2 -n 20 -w 3 -q $q)
done
for k in a b; do
  for r in 36M 40M 44M; do
    ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf int4-r$r-$k build-gpu 2 $(S -b 64M -e 256M -f 4 -n 5 -w 2 -q int4)
  done
done
log done
