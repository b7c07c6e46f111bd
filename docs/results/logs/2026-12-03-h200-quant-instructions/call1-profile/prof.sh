#!/usr/bin/env bash
# Profile: per-SASS-instruction executed counts (ncu SourceCounters) of the quantised two-shot.
set -uo pipefail
out=/tmp/p; mkdir -p $out
log() { echo "== $(date +%T) +${SECONDS}s $*" | tee -a "$out/summary.log"; }
finish() { tar -C "$out" -czf "$OUT/prof.tar.gz" . ; cp "$out/summary.log" "$OUT/"; }
trap finish EXIT
log build
cmake -S . -B build-gpu -DQCOLL_CUDA_ARCH=90 -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release > $out/build.log 2>&1
cmake --build build-gpu -j 16 --target qcoll qcoll-perf >> $out/build.log 2>&1 || { log "build failed"; grep error $out/build.log | head; exit 1; }
log built
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
P=build-gpu/tools/qcoll-perf/qcoll-perf
for q in int4 int8; do
  log "ncu source $q"
  timeout 150 $NCU --section SourceCounters --section ComputeWorkloadAnalysis --section SpeedOfLight --kernel-name regex:twoshot --launch-skip 2 --launch-count 1 \
    --export $out/rep-$q --force-overwrite $P --mem gpu -b 64M -e 64M -n 3 -w 1 -c 0 -d bf16 --algo twoshot -q $q all_reduce > $out/ncu-$q.log 2>&1
  echo "rc=$?" >> $out/ncu-$q.log
  timeout 100 $NCU --import $out/rep-$q.ncu-rep --page source --print-source sass --csv > $out/src-$q.csv 2> $out/src-$q.err
  timeout 60 $NCU --import $out/rep-$q.ncu-rep --page details > $out/det-$q.txt 2>&1
  ls -la $out | tee -a $out/summary.log
  rm -f $out/rep-$q.ncu-rep
done
log done
