#!/usr/bin/env bash
# Call 1 (2026-12-06, second session): the flags at GPU scope (87deb31) on a
# GPU for the first time.  (a) The GPU tests of the kernels they touch
# (allreduce, graph, push, register, quant) at 2 and 8 ranks; (b) the
# small-message sweeps of issue 17 beside NCCL 2.32.6: 2 ranks graph
# registered and unregistered to 4 MiB, eager to 256 KiB, 8 ranks graph
# and eager; (c) push variant 2
# (../../2026-12-05-gpu-torch-latency/push-variant2.diff) against HEAD at
# 2 and 8 ranks (the push kernel forced at 8).  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-540}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s1
dl_nccl &
log build
dl_tree /tmp/var && (cd /tmp/var && patch -p1 <"$here/../../2026-12-05-gpu-torch-latency/push-variant2.diff") >>"$out/summary.log" 2>&1
tg="qcoll qcoll-run qcoll-perf"
JOBS=12 dl_build . build-gpu $tg gpu_allreduce gpu_graph gpu_push gpu_register gpu_quant &
JOBS=6 dl_build /tmp/var /tmp/var/build $tg &
wait
log built
dl_mps
dl_ctest build-gpu '^gpu\.(allreduce\.n2|allreduce\.n8|graph\.n2|push\.n2|push\.n8|register\.n2|quant\.n2)$' 200
N="NCCL_MULTI_RANK_GPU_ENABLE=1 QCOLL_NCCL_LIB=/tmp/nccl/libnccl.so.2"
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 "$@" all_reduce; }
ENVS="$N" dl_perf n2-G-reg-vsnccl build-gpu 2 $(S -G 1 --register -b 16 -e 4M -f 4 --vs-nccl)
dl_perf n2-G-reg-var /tmp/var/build 2 $(S -G 1 --register -b 16 -e 4M -f 4)
dl_perf n2-G-copy build-gpu 2 $(S -G 1 -b 16 -e 4M -f 4)
dl_perf n2-E build-gpu 2 $(S -b 16 -e 256K -f 4)
dl_perf n2-E-var /tmp/var/build 2 $(S -b 16 -e 256K -f 4)
ENVS="$N" dl_perf n8-G-reg-vsnccl build-gpu 8 $(S -G 1 --register -b 16 -e 64K -f 4 --vs-nccl)
ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-G-push build-gpu 8 $(S -G 1 --register -b 16 -e 16K -f 4)
ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-G-push-var /tmp/var/build 8 $(S -G 1 --register -b 16 -e 16K -f 4)
dl_perf n8-E build-gpu 8 $(S -b 16 -e 64K -f 4)
dl_perf n2-G-reg-b build-gpu 2 $(S -G 1 --register -b 16 -e 16K -f 4)
dl_perf n2-G-reg-var-b /tmp/var/build 2 $(S -G 1 --register -b 16 -e 16K -f 4)
log done
