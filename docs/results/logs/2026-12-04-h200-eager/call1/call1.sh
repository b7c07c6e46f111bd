#!/usr/bin/env bash
# Call 1 (2026-12-04): the eager path's pointer query (one
# cuPointerGetAttributes of three attributes instead of
# cudaPointerGetAttributes) in "new" (the working tree) beside "old"
# (build-old: git archive of 3b9e3dc); the MPS launch floor
# (bench/mps-launch-floor.cu, 1/2/4/8 processes, graph and eager, PDL off
# and on); the host cost of the runtime calls and of launches
# (bench/launch-cost.cu); eager-call under 2 ranks; qcoll-perf eager and
# graph at 2 and 8 ranks; GPU tests of the changed path.
source scripts/device-lib.sh
limit=${LIMIT:-520}
dl_start c1
log build
nvcc -arch=sm_90 -O2 bench/mps-launch-floor.cu -o /tmp/mlf > $out/build-mlf.log 2>&1 &
nvcc -arch=sm_90 -O2 bench/launch-cost.cu -lcuda -o /tmp/lc > $out/build-lc.log 2>&1 &
tg="qcoll qcoll-run qcoll-perf"
JOBS=10 dl_build . build-gpu $tg gpu_allreduce gpu_graph gpu_register &
JOBS=6 dl_build build-old build-old/build-gpu $tg &
wait
for t in build-gpu build-old/build-gpu; do
  cc -O2 -Iinclude -I/usr/local/cuda/include bench/eager-call.c -L$t -lqcoll \
    -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$PWD/$t -o $t/eager-call >> $out/build-eager.log 2>&1
done
log built
dl_mps
log floor
for mode in graph eager; do
  for pdl in 0 1; do
    for n in 1 2 4 8; do
      start=$(( $(date +%s) + 2 ))
      echo "## $mode pdl=$pdl processes=$n" >> $out/floor.log
      for i in $(seq $n); do CUDA_VISIBLE_DEVICES=0 timeout 60 /tmp/mlf $mode $pdl $start >> $out/floor.log 2>&1 & done
      wait
    done
  done
done
cat $out/floor.log >> $out/summary.log
log launch-cost
CUDA_VISIBLE_DEVICES=0 timeout 60 /tmp/lc > $out/launch-cost.log 2>&1; cat $out/launch-cost.log >> $out/summary.log
log eager-call
for r in 1 2; do
  for t in build-gpu build-old/build-gpu; do
    echo "# $t round $r: qcoll-run -n 2 eager-call -r" >> $out/eager-call.log
    CUDA_VISIBLE_DEVICES=0 timeout 60 $t/tools/qcoll-run/qcoll-run -n 2 $t/eager-call -r >> $out/eager-call.log 2>&1
    echo "# $t round $r: eager-call (1 rank)" >> $out/eager-call.log
    CUDA_VISIBLE_DEVICES=0 timeout 60 $t/eager-call >> $out/eager-call.log 2>&1
  done
done
cat $out/eager-call.log >> $out/summary.log
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -b 8 -e 256K -f 4 -n 40 -w 5 "$@" all_reduce; }
for r in 1 2; do
  dl_perf n2-eager-new-$r build-gpu 2 $(S)
  dl_perf n2-eager-old-$r build-old/build-gpu 2 $(S)
done
dl_perf n2-graph-new build-gpu 2 $(S -G 1)
ENVS="QCOLL_PDL=0" dl_perf n2-eager-nopdl build-gpu 2 $(S)
dl_perf n8-eager-new build-gpu 8 $(S)
dl_perf n8-graph-new build-gpu 8 $(S -G 1)
dl_ctest build-gpu '^gpu\.(allreduce\.n2|graph\.n2|register\.n2)$' 150
log done
