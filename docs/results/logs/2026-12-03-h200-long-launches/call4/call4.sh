#!/usr/bin/env bash
# Call 4 (2026-12-03, fifth session): the final tree ("new": long launches
# of the two-shot above 16 MiB and of the quantised all-reduce above 4 MiB
# without PDL; the larger grid for the two-shot, INT8 and FP8 where at most
# two ranks share a GPU; the one-shot reading registered inputs in place
# from 4 MiB) beside fa93489 ("old"): GPU tests, the large all-reduce at 2,
# 4 and 8 ranks, the automatic path beside NCCL 2.32.6, eager, and
# compute-sanitizer around the registered one-shot.
source scripts/device-lib.sh
limit=${LIMIT:-500}
dl_start c4
log build
dl_nccl &
tg="qcoll qcoll-run qcoll-perf"
dl_build . build-gpu $tg gpu_allreduce gpu_graph gpu_quant gpu_quant_kernels gpu_register &
JOBS=8 dl_build build-old build-old/build-gpu $tg &
wait
log built
dl_mps
dl_ctest build-gpu '^gpu\.(allreduce\.n2|allreduce\.n8|graph\.n2|quant\.n2|quant\.n4|quant_kernels|register\.n2|register\.oneshot_reg\.n2)$' 200
S() { echo --mem gpu -c 1 -d bf16 "$@" all_reduce; }
B() { S -G 1 --rounds 3 -b 4M -e 256M -f 4 -n 5 -w 2 --algo twoshot -q $1; }
for q in int8 none; do
  ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-new build-gpu 2 $(B $q)
  ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-old build-old/build-gpu 2 $(B $q)
done
for q in int4 fp8; do ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-new build-gpu 2 $(B $q); done
M() { S -G 1 --rounds 3 -b 4M -e 64M -f 4 -n 5 -w 2 --algo twoshot -q $1; }
for n in 4 8; do
  for q in int4 none; do
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-n$n-new build-gpu $n $(M $q)
    ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf big-$q-n$n-old build-old/build-gpu $n $(M $q)
  done
done
N="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2"
ENVS="$N" dl_perf auto-n2-vsnccl build-gpu 2 $(S -G 1 --rounds 3 -b 8 -e 16M -f 4 -n 40 -w 5 --vs-nccl)
dl_perf auto-n2-old build-old/build-gpu 2 $(S -G 1 --rounds 3 -b 1M -e 16M -f 2 -n 40 -w 5)
dl_perf auto-n2-new build-gpu 2 $(S -G 1 --rounds 3 -b 1M -e 16M -f 2 -n 40 -w 5)
log sanitize
echo quit | nvidia-cuda-mps-control; sleep 1
T=build-gpu/tools
for tool in memcheck racecheck; do
  name=sanitize-$tool-oneshot-reg
  [ "$(left)" -lt 45 ] && { log "$name: no time left"; continue; }
  echo "# qcoll-run -n 2 compute-sanitizer --tool $tool qcoll-perf --mem gpu -b 4M -e 4M -n 2 -w 1 -c 1 -d bf16 --algo oneshot --register all_reduce" > $out/$name.log
  CUDA_VISIBLE_DEVICES=0 timeout 60 $T/qcoll-run/qcoll-run -n 2 compute-sanitizer --tool $tool --error-exitcode 9 $T/qcoll-perf/qcoll-perf --mem gpu -b 4M -e 4M -n 2 -w 1 -c 1 -d bf16 --algo oneshot --register all_reduce >> $out/$name.log 2>&1 || log "$name: exit $?"
  grep -E "ERROR SUMMARY|hazard|Out of bounds" $out/$name.log | tee -a $out/summary.log
done
log done
