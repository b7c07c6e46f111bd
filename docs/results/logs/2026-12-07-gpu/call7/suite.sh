#!/usr/bin/env bash
# Calls 7 and 8 (2026-12-07, third session): the whole GPU suite of main on
# one GPU (scripts/gpu-tests.sh: every test labelled gpu that one GPU can
# run), in two parts because it takes longer than one call allows: PART=1
# the 1st, 3rd, 5th ... of those tests in ctest's order, PART=2 the others
# (a warm machine keeps build-gpu, so part 2 builds nothing).  After part 1,
# measurements for the latency issue's 1-4 MiB goals at 2 ranks and the
# one-shot/two-shot threshold at 8 ranks on this H100 (graph, registered):
# the one-shot reading registered inputs in place from 1 MiB
# (QCOLL_ONESHOT_REG_MIN_BYTES=1M, default 4M) and the two-shot beside the
# default; 8 ranks 128 KiB-2 MiB one-shot against two-shot (default: one-shot
# up to 512 KiB).  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-560}
part=${PART:-1}
dl_start s7-part$part
names=$out/gpu-tests.txt
build=$PWD/build-gpu
log "suite part $part: build (if needed) and list"
# the build and the list (ctest -N) come from gpu-tests.sh's own configure
QCOLL_CMOCKA_DIR=$dl_deps/cmocka BUILD_DIR=$build OUT=$out/list \
  scripts/gpu-tests.sh -N >$out/list.out 2>&1
grep -oE "Test +#[0-9]+: [^ ]+" $out/list.out | awk '{print $3}' >$names
n=$(wc -l <$names)
sel=$(awk -v p=$part 'NR % 2 == p % 2' $names | paste -sd'|')
log "$n GPU tests listed; part $part runs $(awk -v p=$part 'NR % 2 == p % 2' $names | wc -l)"
QCOLL_CMOCKA_DIR=$dl_deps/cmocka BUILD_DIR=$build OUT=$out/suite \
  timeout $(($(left) - ${RESERVE:-20})) scripts/gpu-tests.sh --timeout 300 -R "^($sel)\$" >$out/suite.out 2>&1
echo "suite exit $?" >>$out/summary.log
grep -E "Test +#|tests passed|tests failed|Skipped|gpu-tests:" $out/suite.out | tee -a $out/summary.log
if [ "$part" = 1 ]; then
  dl_mps
  S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register "$@" all_reduce; }
  for r in a b; do
    dl_perf n2-default-$r build-gpu 2 $(S -b 1M -e 4M -f 2)
    ENVS="QCOLL_ONESHOT_REG_MIN_BYTES=1M" dl_perf n2-regmin1m-$r build-gpu 2 $(S -b 1M -e 4M -f 2)
    dl_perf n2-twoshot-$r build-gpu 2 $(S -b 1M -e 4M -f 2 --algo twoshot)
  done
  for r in a b; do
    dl_perf n8-oneshot-$r build-gpu 8 $(S -b 128K -e 2M -f 2 --algo oneshot)
    dl_perf n8-twoshot-$r build-gpu 8 $(S -b 128K -e 2M -f 2 --algo twoshot)
  done
fi
log done
