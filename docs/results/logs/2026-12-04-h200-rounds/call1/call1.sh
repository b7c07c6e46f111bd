#!/usr/bin/env bash
# Call 1 (2026-12-04): rounds of the quantised all-reduce limited by
# QCOLL_QUANT_ROUND_BYTES.  "new": the working tree (the limit, default 0:
# none); "lg" (measurement only, larger-all.sed): every format takes the
# larger grid for long launches.  2 ranks on one H200 under MPS, bf16,
# graph, unregistered buffers (QCOLL_GRAPH_REGISTER=0), two-shot, 16, 64
# and 256 MiB: each format with several round limits; then 4 and 8 ranks
# at 4-64 MiB with and without a limit; the GPU tests of the quantised
# all-reduce (rounds included) last.
here=$(cd "$(dirname "$0")" && pwd)
source scripts/device-lib.sh
limit=${LIMIT:-560}
dl_start c1
log build
dl_tree /tmp/lg "$here/larger-all.sed"
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg gpu_quant gpu_allreduce gpu_graph gpu_register &
JOBS=8 dl_build /tmp/lg /tmp/lg/build-gpu $tg &
wait
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot "$@" all_reduce; }
E0="QCOLL_GRAPH_REGISTER=0"
L=/tmp/lg/build-gpu
big() { S -b 16M -e 256M -f 4 -n 5 -w 2 -q "$1"; }
ENVS="$E0" dl_perf none-new build-gpu 2 $(big none)
for r in 0 16M 24M 32M 40M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf int4-lg-r$r $L 2 $(big int4)
done
for r in 0 32M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf int4-new-r$r build-gpu 2 $(big int4)
done
for r in 0 24M 32M 48M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf int8-new-r$r build-gpu 2 $(big int8)
done
for r in 0 32M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf fp8-new-r$r build-gpu 2 $(big fp8)
  for q in int6 int3; do
    ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf $q-lg-r$r $L 2 $(big $q)
  done
done
for n in 4 8; do
  for r in 0 32M; do
    for q in int4 int8; do
      ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf $q-new-n$n-r$r build-gpu $n $(S -b 4M -e 64M -f 4 -n 5 -w 2 -q $q)
    done
  done
done
dl_ctest build-gpu '^gpu\.quant\.(rounds\.n2|rounds\.n3|n2)$' $(( $(left) - 20 ))
log done
