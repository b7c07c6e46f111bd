#!/usr/bin/env bash
# Call 2 (2026-12-04): the working tree with every format on the larger
# grid for long launches and rounds of 40 MiB for INT6/INT4/INT3 there (the
# default; QCOLL_QUANT_ROUND_BYTES overrides it for every format).  2 ranks
# on one H200 under MPS, bf16, graph, unregistered (QCOLL_GRAPH_REGISTER=0),
# two-shot: every format with the defaults at 4-256 MiB beside the
# unquantised two-shot; INT4, INT6 and INT3 with other round sizes at 64 and
# 256 MiB; then the GPU tests of the changed paths.
source scripts/device-lib.sh
limit=${LIMIT:-560}
dl_start c2
log build
dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_quant gpu_allreduce gpu_graph gpu_register
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot "$@" all_reduce; }
E0="QCOLL_GRAPH_REGISTER=0"
for q in none int8 fp8 int4 int6 int3; do
  ENVS="$E0" dl_perf $q-default build-gpu 2 $(S -b 4M -e 256M -f 4 -n 5 -w 2 -q $q)
done
for r in 48M 56M 64M 80M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf int4-r$r build-gpu 2 $(S -b 64M -e 256M -f 4 -n 5 -w 2 -q int4)
done
for r in 24M 48M 64M; do
  for q in int6 int3; do
    ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf $q-r$r build-gpu 2 $(S -b 64M -e 256M -f 4 -n 5 -w 2 -q $q)
  done
done
ENVS="$E0" dl_perf int4-default-again build-gpu 2 $(S -b 64M -e 256M -f 4 -n 5 -w 2 -q int4)
dl_ctest build-gpu '^gpu\.(quant\.n2|quant\.rounds\.n2|quant\.rounds\.n3|allreduce\.n2|graph\.n2|register\.n2)$' $(( $(left) - 15 ))
log done
