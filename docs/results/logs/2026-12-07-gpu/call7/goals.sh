#!/usr/bin/env bash
# On an H200 (the card the open issues state their goals for; every call of
# the last sessions got an H100): the goal tables of the latency, bandwidth
# and PyTorch issues on main, one run each.
#  latency: 2 ranks graph registered 16 B-4 MiB beside NCCL 2.32.6, the same
#           unregistered, eager 16 B-256 KiB; 8 ranks graph registered and
#           eager 16 B-16 KiB;
#  bandwidth: 2 ranks, unregistered, graph, two-shot 4-256 MiB: exact, INT4,
#           INT8 (out of place / in place);
#  PyTorch: bench/torch_overhead.py at 2 and 8 ranks.
# Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-580}
dl_start s7-goals
dl_nccl &
log build
JOBS=16 dl_build . build-gpu qcoll qcoll-run qcoll-perf
wait
log built
dl_mps
N="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2"
L() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 "$@" all_reduce; }
ENVS="$N" dl_perf n2-graph-reg-vsnccl build-gpu 2 $(L -G 1 --register -b 16 -e 4M -f 4 --vs-nccl)
ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-graph-unreg build-gpu 2 $(L -G 1 -b 16 -e 4M -f 4)
dl_perf n2-eager build-gpu 2 $(L -n 400 -w 20 -b 16 -e 256K -f 4)
dl_perf n8-graph-reg build-gpu 8 $(L -G 1 --register -b 16 -e 16K -f 4)
dl_perf n8-eager build-gpu 8 $(L -n 400 -w 20 -b 16 -e 16K -f 4)
Q() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot -b 4M -e 256M -f 4 -n 5 -w 2 "$@" all_reduce; }
for q in none int4 int8; do
  ENVS="QCOLL_GRAPH_REGISTER=0" dl_perf n2-$q build-gpu 2 $(Q -q $q)
done
dl_torch_build $PWD/build-gpu
dl_torch_bench $PWD/build-gpu 60 "2 8"
log done
