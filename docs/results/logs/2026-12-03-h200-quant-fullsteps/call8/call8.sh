#!/usr/bin/env bash
# Call 8 (2026-12-03 e): 4 ranks INT4 and 8 ranks FP8, the final tree ("new") and f427dec ("old") alternating, three rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
out=/tmp/c8; mkdir -p $out
limit=${LIMIT:-300}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
finish() { echo quit | nvidia-cuda-mps-control 2>/dev/null; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
log build
(cmake -S .devtree/old -B /tmp/old -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build /tmp/old -j 8 --target qcoll qcoll-run qcoll-perf) > $out/build-old.log 2>&1 &
(cmake -S . -B /tmp/new -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
 cmake --build /tmp/new -j 8 --target qcoll qcoll-run qcoll-perf) > $out/build-new.log 2>&1 &
wait
ls /tmp/new/tools/qcoll-perf/qcoll-perf /tmp/old/tools/qcoll-perf/qcoll-perf || exit 1
log built
nvidia-cuda-mps-control -d 2>/dev/null; sleep 1
NEW=/tmp/new/tools; OLD=/tmp/old/tools
perf() { local name=$1 tree=$2 n=$3; shift 3
  [ "$(left)" -lt 20 ] && { log "$name: no time left, skipped"; return; }
  log "$name"; echo "# QCOLL_GRAPH_REGISTER=0 qcoll-run -n $n qcoll-perf $* ($tree)" > "$out/$name.log"
  QCOLL_GRAPH_REGISTER=0 CUDA_VISIBLE_DEVICES=0 timeout 60 "$tree/qcoll-run/qcoll-run" -n "$n" "$tree/qcoll-perf/qcoll-perf" "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log; }
Q8() { echo --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
for r in a b c; do
  perf quant-int4-n4-new-$r $NEW 4 $(Q8 int4)
  perf quant-int4-n4-old-$r $OLD 4 $(Q8 int4)
  perf quant-fp8-n8-new-$r $NEW 8 $(Q8 fp8)
  perf quant-fp8-n8-old-$r $OLD 8 $(Q8 fp8)
done
log done
