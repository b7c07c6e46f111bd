#!/usr/bin/env bash
# Kill one rank at random moments around start-up, many times, and check
# that no shared-memory segment outlives the jobs:
#
#   rel_init_kill.sh QCOLL_RUN REL_FAULTS N TRIES MAX_MS VICTIM
#
# Each try runs `qcoll-run -n N rel_faults kill-init MAX_MS VICTIM`.  A
# segment is created by local rank 0 and unlinked once every local rank
# has mapped it; killing VICTIM (0 = the creator) in between must not leave
# it in /dev/shm.  Segments that appeared and are still there 2 s after the
# last job are counted as leaks (another job's segment lives a few ms) and
# then removed, so a failing run does not fill /dev/shm.
set -u
run=$1 prog=$2 n=$3 tries=$4 max_ms=$5 victim=$6
shm_list() { ls /dev/shm 2>/dev/null | grep '^qcoll-' | sort; }
before=$(shm_list)
killed=0 completed=0 other=0
for _ in $(seq "$tries"); do
  "$run" -n "$n" "$prog" kill-init "$max_ms" "$victim" >/dev/null 2>&1
  case $? in
    0) completed=$((completed + 1)) ;;
    137) killed=$((killed + 1)) ;;
    *) other=$((other + 1)) ;;
  esac
done
sleep 2
leaked=$(comm -13 <(echo "$before") <(shm_list))
nleaked=$(echo "$leaked" | grep -c .)
echo "$tries jobs of $n ranks, rank $victim killed within ${max_ms} ms of its start:" \
  "$killed killed, $completed completed first, $other other exits;" \
  "$nleaked segment(s) left in /dev/shm"
for s in $leaked; do
  echo "  left behind: /dev/shm/$s ($(stat -c %s "/dev/shm/$s" 2>/dev/null) bytes)"
  rm -f "/dev/shm/$s"
done
if [ "$killed" -eq 0 ]; then
  echo "FAIL: the rank was never killed (raise MAX_MS)"
  exit 1
fi
if [ "$nleaked" -ne 0 ]; then
  echo "FAIL: a rank killed during start-up left its shared-memory segment behind"
  exit 1
fi
echo "rel_init_kill: all checks passed"
