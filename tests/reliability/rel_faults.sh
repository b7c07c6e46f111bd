#!/usr/bin/env bash
# Run one fault of rel_faults under qcoll-run and check what the job as a
# whole must show:
#
#   rel_faults.sh QCOLL_RUN REL_FAULTS N MODE [K VICTIM]
#
# kill modes: qcoll-run exits 137 and names the killed rank; every other
# rank prints a PASS line.  Other modes: exit 0 and N PASS lines.  Always:
# the job's shared-memory segment is gone from /dev/shm, and no qcoll
# segment that appeared during the job is still there afterwards.
set -u
run=$1 prog=$2 n=$3 mode=$4
k=${5:-} victim=${6:-}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

shm_list() { ls /dev/shm 2>/dev/null | grep '^qcoll-' | sort; }
before=$(shm_list)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stamp=$work/death

args=("$mode")
case $mode in kill-*) args+=("$k" "$victim" "$stamp") ;; esac
echo "# QCOLL_TIMEOUT=${QCOLL_TIMEOUT:-} QCOLL_CHECK=${QCOLL_CHECK:-} $run -n $n $prog ${args[*]}"
start=$(date +%s.%N)
"$run" -n "$n" "$prog" "${args[@]}" >"$work/out" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$work/out"
echo "# qcoll-run exited $rc after $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"

passes=$(grep -c '^rank [0-9]*: PASS' "$work/out")
case $mode in
  kill-*)
    [ "$rc" -eq 137 ] || fail "qcoll-run exited $rc, expected 137 (rank $victim killed)"
    grep -q "qcoll-run: rank $victim (pid [0-9]*) was killed by signal 9" "$work/out" ||
      fail "qcoll-run did not report rank $victim killed by signal 9"
    [ "$passes" -eq $((n - 1)) ] || fail "$passes of $((n - 1)) survivors passed"
    ;;
  *)
    [ "$rc" -eq 0 ] || fail "qcoll-run exited $rc"
    [ "$passes" -eq "$n" ] || fail "$passes of $n ranks passed"
    ;;
esac
if [ "$mode" = never ]; then
  grep -q '^rank [0-9]*: PASS: timeout after' "$work/out" ||
    fail "no rank reported QCOLL_ERR_TIMEOUT"
fi
grep -q ': FAIL' "$work/out" && fail "a rank reported a failure"

segment=$(sed -n 's/^segment \(\/qcoll-[0-9a-f]*\)$/\1/p' "$work/out" | head -1)
if [ -z "$segment" ]; then
  fail "rank 0 did not print its segment name"
elif [ -e "/dev/shm$segment" ]; then
  fail "/dev/shm$segment is left behind"
fi
# Anything new must be another job's segment during its init (unlinked
# within milliseconds); look again before calling it a leak.
new=$(comm -13 <(echo "$before") <(shm_list))
if [ -n "$new" ]; then
  sleep 2
  left=$(comm -12 <(echo "$new") <(shm_list))
  [ -z "$left" ] || fail "left in /dev/shm: $left"
fi
echo "# /dev/shm qcoll entries before: $(echo "$before" | grep -c .), after: $(shm_list | grep -c .)"
[ "$failures" -eq 0 ] && echo "rel_faults $mode: all checks passed"
exit $((failures > 0))
