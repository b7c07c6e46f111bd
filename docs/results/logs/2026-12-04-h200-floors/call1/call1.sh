#!/usr/bin/env bash
# Call 1 (2026-12-04, session 2): the quantised kernel against the exact
# two-shot at 2, 4 and 8 ranks on one H200 under MPS (bf16, graph,
# unregistered, two-shot, QCOLL_QUANT_SHARED_GPU_FLOORS=0 so every size is
# quantised), the data of the shared-GPU floors; the default floors at
# 2 ranks; INT4 rounds of 46 and 48 MiB at 256 MiB; the GPU tests of the
# changed paths.
source scripts/device-lib.sh
limit=${LIMIT:-560}
dl_start c1
log build
dl_build . build-gpu qcoll qcoll-run qcoll-perf gpu_quant gpu_allreduce test_select_ipc
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot "$@" all_reduce; }
E0="QCOLL_GRAPH_REGISTER=0 QCOLL_QUANT_SHARED_GPU_FLOORS=0"
for q in none int4 int8 fp8; do
  ENVS="$E0" dl_perf n2-$q build-gpu 2 $(S -b 4M -e 256M -f 2 -n 5 -w 2 -q $q)
done
for q in int6 int3; do
  ENVS="$E0" dl_perf n2-$q build-gpu 2 $(S -b 64M -e 256M -f 2 -n 5 -w 2 -q $q)
done
for q in none int4 int8 fp8; do
  ENVS="$E0" dl_perf n4-$q build-gpu 4 $(S -b 4M -e 256M -f 4 -n 5 -w 2 -q $q)
done
for q in none int4 int8; do
  ENVS="$E0" dl_perf n8-$q build-gpu 8 $(S -b 4M -e 256M -f 4 -n 5 -w 2 -q $q)
done
ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-int4-floors build-gpu 2 $(S -b 4M -e 256M -f 4 -n 5 -w 2 -q int4)
for r in 46M 48M; do
  ENVS="$E0 QCOLL_QUANT_ROUND_BYTES=$r" dl_perf n2-int4-r$r build-gpu 2 \
    --mem gpu -c 1 -d bf16 -G 1 --rounds 3 --algo twoshot -b 256M -e 256M -n 5 -w 2 -q int4 all_reduce
done
ENVS="$E0" dl_perf n2-int4-r44M-again build-gpu 2 \
  --mem gpu -c 1 -d bf16 -G 1 --rounds 3 --algo twoshot -b 256M -e 256M -n 5 -w 2 -q int4 all_reduce
dl_ctest build-gpu '^(unit\.select_ipc|gpu\.quant\.n2|gpu\.quant\.n4|gpu\.quant\.n8|tools\.qcoll_perf\.gpu\.quant)$' $(( $(left) - 15 ))
log done
