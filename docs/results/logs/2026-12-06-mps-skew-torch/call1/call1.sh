#!/usr/bin/env bash
# Call 1 (2026-12-06): (a) bench/mps-skew.cu, a bare cross-process barrier
# kernel at 2, 4 and 8 ranks on one GPU under MPS, each launch's start and
# completion read from %globaltimer: where the time of a small all-reduce
# goes as ranks are added (and with the flags at GPU scope instead of system); (b) the push variant 2 (../../2026-12-05-gpu-torch-latency/push-variant2.diff)
# against HEAD, 2 and 8 ranks, graph and eager (only with WITH_VARIANT=1: the
# run was cut to fit the device time left after failed starts); (c) INT4 at 256 MiB, 2 ranks,
# against the round size; (d) qcoll.torch's bench at 8 and 2 ranks (NCCL
# 2.32.6 up to 64 KiB) with the lazily recorded work event; (e) the PyTorch
# tests on CUDA, compiled and Python implementations.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-560}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s1
dl_nccl &
log build
[ -n "${WITH_VARIANT:-}" ] && dl_tree /tmp/var &&
  (cd /tmp/var && patch -p1 <"$here/../../2026-12-05-gpu-torch-latency/push-variant2.diff") >>"$out/summary.log" 2>&1
nvcc -arch=sm_90 -O2 bench/mps-skew.cu -o /tmp/mps-skew >"$out/build-skew.log" 2>&1 || log "FAIL mps-skew build" &
JOBS=$([ -n "${WITH_VARIANT:-}" ] && echo 10 || echo 16) dl_build . build-gpu qcoll qcoll-run qcoll-perf &
[ -n "${WITH_VARIANT:-}" ] && JOBS=6 dl_build /tmp/var /tmp/var/build qcoll qcoll-run qcoll-perf &
wait
log built
dl_mps
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1 &
torch_build=$!

skew() { # NAME RANKS MODE PDL [GRID THREADS]
  local name=$1 n=$2 d
  shift 2
  d=$(mktemp -d)
  log "skew $name"
  echo "# ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:+CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE }mps-skew $n ranks: $*" >"$out/skew-$name.log"
  for r in $(seq 0 $((n - 1))); do
    CUDA_VISIBLE_DEVICES=0 timeout 60 /tmp/mps-skew "$n" "$r" "$d" "$@" >>"$out/skew-$name.log" 2>&1 &
  done
  wait_jobs_except "$torch_build"
  tee -a "$out/summary.log" <"$out/skew-$name.log"
}
wait_jobs_except() { local p; for p in $(jobs -p); do [ "$p" = "$1" ] || wait "$p"; done; }
for n in 2 4 8; do skew n$n-G $n graph 0; done
skew n8-G-pdl 8 graph 1
skew n8-G-gpuscope 8 graph 0 1 32 gpu
skew n2-G-gpuscope 2 graph 0 1 32 gpu
skew n8-G-grid16 8 graph 0 16 512
skew n8-E 8 eager 0
skew n2-E 2 eager 0
skew n8-G-b 8 graph 0
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 skew n8-G-pct12 8 graph 0

S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 "$@" all_reduce; }
dl_perf n2-G-head build-gpu 2 $(S -G 1 --register -b 16 -e 256K -f 4)
[ -n "${WITH_VARIANT:-}" ] && dl_perf n2-G-var /tmp/var/build 2 $(S -G 1 --register -b 16 -e 256K -f 4)
dl_perf n2-E-head build-gpu 2 $(S -b 16 -e 256K -f 4)
[ -n "${WITH_VARIANT:-}" ] && dl_perf n2-E-var /tmp/var/build 2 $(S -b 16 -e 256K -f 4)
dl_perf n8-G-head build-gpu 8 $(S -G 1 --register -b 16 -e 64K -f 4)
ENVS="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 QCOLL_MAX_BLOCKS=8" dl_perf n8-G-head-pct12 build-gpu 8 $(S -G 1 --register -b 16 -e 4K -f 4)
ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-G-push-head build-gpu 8 $(S -G 1 --register -b 16 -e 64K -f 4)
[ -n "${WITH_VARIANT:-}" ] && ENVS="QCOLL_IPC_PUSH_MAX_RANKS=8" dl_perf n8-G-push-var /tmp/var/build 8 $(S -G 1 --register -b 16 -e 64K -f 4)
Q() { echo --mem gpu -c 1 -d bf16 -G 1 --rounds 2 --algo twoshot -b 256M -e 256M -n 5 -w 2 -q int4 all_reduce; }
for R in ${INT4_ROUNDS:-0 52M}; do
  ENVS="QCOLL_GRAPH_REGISTER=0 QCOLL_QUANT_ROUND_BYTES=$R" dl_perf int4-r$R build-gpu 2 $(Q)
done
wait "$torch_build"
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
log torch bench 8 and 2 ranks, NCCL 2.32 up to 64 KiB
OUT=$out TORCH_STEPS=bench BENCH_RANKS="8 2" BENCH_LIMIT=100 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BENCH_ARGS="--nccl-max-bytes 65536" BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
sleep 2
log torch tests
OUT=$out TORCH_STEPS=test TORCH_TESTS="not cpu" TEST_LIMIT=$(( $(left) - 10 )) BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh \
  >$out/torch-test.out 2>&1
log done
