#!/usr/bin/env bash
# Call 6 (2026-12-03 e, warm machine of call 5): the runs call 5 had no time for, "mid" (52811a2) beside "old" (f427dec).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 QCOLL_TIMEOUT=20
out=/tmp/c6; mkdir -p $out
limit=${LIMIT:-400}
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
left() { echo $((limit - SECONDS)); }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/qcoll-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/qcoll-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d 2>/dev/null; sleep 1
finish() { echo quit | nvidia-cuda-mps-control 2>/dev/null; tar -C "$out" -czf "$OUT/logs.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
ls /tmp/mid/tools/qcoll-perf/qcoll-perf /tmp/old/tools/qcoll-perf/qcoll-perf || exit 1
MID=/tmp/mid/tools; OLD=/tmp/old/tools
perf() { local name=$1 tree=$2 n=$3; shift 3
  local envs=(X=1); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  [ "$(left)" -lt 30 ] && { log "$name: no time left, skipped"; return; }
  log "$name"; echo "# ${envs[*]} qcoll-run -n $n qcoll-perf $* ($tree)" > "$out/$name.log"
  env "${envs[@]}" CUDA_VISIBLE_DEVICES=0 timeout 60 "$tree/qcoll-run/qcoll-run" -n "$n" "$tree/qcoll-perf/qcoll-perf" "$@" >> "$out/$name.log" 2>&1 || log "$name: exit $?"
  grep -E "^ +[0-9]+ " "$out/$name.log" | awk '{print "   ", $1, $6, $10}' | tee -a $out/summary.log; }
Q() { echo --mem gpu -b 4M -e 256M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
Q8() { echo --mem gpu -b 4M -e 64M -f 4 -n 10 -w 3 -c 1 -G 1 -d bf16 --algo twoshot -q $1 all_reduce; }
for q in int4 int8 fp8; do
  perf quant-$q-n8-mid $MID 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 $q)
  perf quant-$q-n8-old $OLD 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 $q)
done
perf quant-int4-n4-mid $MID 4 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int4)
perf quant-int4-n4-old $OLD 4 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int4)
perf none-n4-mid $MID 4 QCOLL_GRAPH_REGISTER=0 -- $(Q8 none)
for q in int3 int6; do
  perf quant-$q-n2-mid $MID 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
  perf quant-$q-n2-old $OLD 2 QCOLL_GRAPH_REGISTER=0 -- $(Q $q)
done
perf quant-int8-n8-mid-b $MID 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int8)
perf quant-int8-n8-old-b $OLD 8 QCOLL_GRAPH_REGISTER=0 -- $(Q8 int8)
log done
