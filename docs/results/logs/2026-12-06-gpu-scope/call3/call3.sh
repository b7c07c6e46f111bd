#!/usr/bin/env bash
# Call 3 (prepared 2026-12-06, NOT RUN: no device time was left): what this
# session could not reach.  (a) 8 ranks, graph, registered, 16 B-16 KiB:
# the tree against every `.sys` of ipc_sync.cuh made `.gpu`
# (../../2026-12-06-mps-skew-torch/gpu-scope.sed, measurement only: the
# host's abort word needs system scope), two alternating rounds: is the
# 0.3 us between last session's variant (6.29-6.69) and the landed form
# (6.64-7.00, another host) the error and abort words, or the host?
# (b) INT4 at 256 MiB, 2 ranks, in place and out of place, round sizes 0
# (what the regions hold), the default 44M and 52M; (c) qcoll.torch's
# bench at 8 and 2 ranks beside PyTorch's NCCL backend and every PyTorch
# GPU test, compiled and Python implementations, on the driver launch.
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-560}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s3
dl_nccl &
log build
dl_tree /tmp/allgpu "$here/../../2026-12-06-mps-skew-torch/gpu-scope.sed"
tg="qcoll qcoll-run qcoll-perf"
JOBS=10 dl_build . build-gpu $tg &
JOBS=6 dl_build /tmp/allgpu /tmp/allgpu/build $tg &
wait
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register -b 16 -e 16K -f 4 all_reduce; }
for r in a b; do
  dl_perf n8-G-tree-$r build-gpu 8 $(S)
  dl_perf n8-G-allgpu-$r /tmp/allgpu/build 8 $(S)
done
Q() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot -b 256M -e 256M -n 5 -w 2 -q int4 all_reduce; }
for R in 0 44M 52M; do
  ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_QUANT_ROUND_BYTES=$R" dl_perf int4-r$R build-gpu 2 $(Q)
done
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
dl_torch $PWD/build-gpu 90
log done
