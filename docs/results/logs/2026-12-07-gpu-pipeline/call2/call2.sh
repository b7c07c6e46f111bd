#!/usr/bin/env bash
# Call 2 (2026-12-07, fourth session): after call 1, QCOLL_QUANT_PIPELINE=1
# (the default) pipelines only limited rounds (INT4/INT6/INT3 on the larger
# grid), 2 every launch of several rounds, 0 none.  2 ranks 64-256 MiB:
# INT6 and INT3 (limited rounds, call 1 did not measure them) with 1 and
# 0, then INT4 and INT8 at the default if time is left.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-250}
dl_start p2
log build
dl_build . build-gpu qcoll qcoll-run qcoll-perf
log built
dl_mps
Q() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot -n 5 -w 2 "$@" all_reduce; }
base="QCOLL_GRAPH_REGISTER=0 QCOLL_QUANT_SHARED_GPU_FLOORS=0"
for q in int6 int3; do
  for p in 1 0; do
    ENVS="$base QCOLL_QUANT_PIPELINE=$p" dl_perf n2-$q-pipe$p build-gpu 2 $(Q -b 64M -e 256M -f 2 -q $q)
  done
done
for q in int4 int8; do
  ENVS="$base" dl_perf n2-$q-default build-gpu 2 $(Q -b 64M -e 256M -f 2 -q $q)
done
log done
