#!/usr/bin/env bash
# Call 3 (2026-12-06, the last 3 minutes of device time): qcoll's flag
# barrier at GPU scope (../gpu-scope.sed on a copy of the checkout: valid
# only because every rank shares the GPU) against HEAD, 8 and 2 ranks,
# graph, registered, small sizes.  Carry build-deps.
source scripts/device-lib.sh
limit=${LIMIT:-140}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl_start s3
log build
dl_tree /tmp/var "$here/../gpu-scope.sed"
JOBS=8 dl_build . build-gpu qcoll qcoll-run qcoll-perf &
JOBS=8 dl_build /tmp/var /tmp/var/build qcoll qcoll-run qcoll-perf &
wait
log built
dl_mps
S() { echo --mem gpu -c 1 -d bf16 --rounds 3 -n 40 -w 5 -G 1 --register "$@" all_reduce; }
dl_perf n8-G-head build-gpu 8 $(S -b 16 -e 16K -f 4)
dl_perf n8-G-gpuscope /tmp/var/build 8 $(S -b 16 -e 16K -f 4)
dl_perf n8-G-head-b build-gpu 8 $(S -b 16 -e 16K -f 4)
dl_perf n8-G-gpuscope-b /tmp/var/build 8 $(S -b 16 -e 16K -f 4)
log done
