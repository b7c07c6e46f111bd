#!/usr/bin/env bash
# Call 1 (2026-12-07, fourth session of the day): the quantised all-reduce
# with its rounds pipelined (QCOLL_QUANT_PIPELINE=1, the tree's default)
# beside the same kernel running its rounds one after the other
# (QCOLL_QUANT_PIPELINE=0), one tree, alternating runs.  First the quantised
# GPU tests (exact against the CPU model, both schedules), then 2 ranks
# 64-256 MiB (where the default rounds stream), mid sizes with small
# rounds forced, and 4 and 8 ranks.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-550}
dl_start p1
log build
dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_quant_kernels gpu_quant
log built
dl_mps
dl_ctest build-gpu '^gpu\.(quant_kernels|quant\.n2|quant\.n4|quant\.rounds\.n2|quant\.rounds_unpipelined\.n2)$' 200
Q() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot -n 5 -w 2 "$@" all_reduce; }
base="QCOLL_GRAPH_REGISTER=0 QCOLL_QUANT_SHARED_GPU_FLOORS=0"
for r in a b; do
  for q in int4 int8; do
    for p in 1 0; do
      ENVS="$base QCOLL_QUANT_PIPELINE=$p" dl_perf n2-$q-pipe$p-$r build-gpu 2 $(Q -b 64M -e 256M -f 2 -q $q)
    done
  done
done
for rb in 22M 32M; do
  ENVS="$base QCOLL_QUANT_PIPELINE=1 QCOLL_QUANT_ROUND_BYTES=$rb" dl_perf n2-int4-pipe1-round$rb build-gpu 2 $(Q -b 64M -e 256M -f 2 -q int4)
done
ENVS="$base" dl_perf n2-none build-gpu 2 $(Q -b 4M -e 256M -f 4 -q none)
ENVS="$base" dl_perf n2-int4-mid-default build-gpu 2 $(Q -b 4M -e 64M -f 4 -q int4)
for rb in 1M 4M; do
  for p in 1 0; do
    ENVS="$base QCOLL_QUANT_PIPELINE=$p QCOLL_QUANT_ROUND_BYTES=$rb" dl_perf n2-int4-mid-round$rb-pipe$p build-gpu 2 $(Q -b 4M -e 64M -f 4 -q int4)
  done
done
for p in 1 0; do
  ENVS="$base QCOLL_QUANT_PIPELINE=$p" dl_perf n4-int4-pipe$p build-gpu 4 $(Q -b 16M -e 256M -f 4 -q int4)
done
for p in 1 0; do
  ENVS="$base QCOLL_QUANT_PIPELINE=$p" dl_perf n8-int4-pipe$p build-gpu 8 $(Q -b 64M -e 256M -f 4 -q int4)
done
log done
