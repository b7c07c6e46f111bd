#!/usr/bin/env bash
# Call 3 (prepared 2026-12-05, not run: the session's device time was spent
# on failed starts).  One call of about 9 minutes that finishes what calls 1
# and 2 left: (a) the second push variant (../push-variant2.diff applied to a
# copy of this checkout) against HEAD, 2/4/8 ranks, graph on registered
# buffers, and 2 ranks eager, two rounds each; (b) qcoll.torch's bench at 8
# ranks (NCCL 2.32.6 up to 64 KiB) and 2 ranks; (c) every PyTorch test, the
# compiled and the Python implementation.  Needs build-deps/ (run
# scripts/device-deps.sh first) carried: the run tool's carry ["build-deps"].
source scripts/device-lib.sh
limit=${LIMIT:-560}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start c3
dl_nccl &
log build
dl_tree /tmp/var
(cd /tmp/var && patch -p1 <"$here/../push-variant2.diff") >>"$out/summary.log" 2>&1
JOBS=10 dl_build . build-gpu qcoll qcoll-run qcoll-perf &
JOBS=6 dl_build /tmp/var /tmp/var/build qcoll qcoll-run qcoll-perf &
wait
log built
OUT=$out TORCH_STEPS=build BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-build.out 2>&1
tail -n 2 $out/torch-build.out | tee -a $out/summary.log
dl_mps
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 "$@" all_reduce; }
for round in 1 2; do
  dl_perf n2-G-head$round build-gpu 2 $(S -G 1 --register -b 16 -e 256K -f 4)
  dl_perf n2-G-var$round /tmp/var/build 2 $(S -G 1 --register -b 16 -e 256K -f 4)
  dl_perf n2-E-head$round build-gpu 2 $(S -b 16 -e 256K -f 4)
  dl_perf n2-E-var$round /tmp/var/build 2 $(S -b 16 -e 256K -f 4)
done
dl_perf n4-G-head build-gpu 4 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n4-G-var /tmp/var/build 4 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n8-G-head build-gpu 8 $(S -G 1 --register -b 16 -e 64K -f 4)
dl_perf n8-G-var /tmp/var/build 8 $(S -G 1 --register -b 16 -e 64K -f 4)
log torch bench 8 and 2 ranks, NCCL 2.32 up to 64 KiB
OUT=$out TORCH_STEPS=bench BENCH_RANKS="8 2" BENCH_LIMIT=120 TORCH_NCCL_LIB=/tmp/nccl/libnccl.so.2 \
  BENCH_ARGS="--nccl-max-bytes 65536" BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh >$out/torch-bench.out 2>&1
sleep 2
log torch tests
OUT=$out TORCH_STEPS=test TEST_LIMIT=$(( $(left) - 10 )) BUILD_DIR=$PWD/build-gpu scripts/torch-gpu.sh \
  >$out/torch-test.out 2>&1
log done
