#!/usr/bin/env bash
# The launcher names the rank that failed first even when it was not
# running while the ranks ended (a loaded machine): rank 0 stops qcoll-run
# with SIGSTOP, rank 2 is then killed by SIGKILL and rank 1 exits 1 as a
# survivor would, and only then is qcoll-run continued, so it finds both
# ended at once (waitpid hands them back in rank order).  It must blame
# rank 2.  Usage: rel_blame.sh QCOLL_RUN [RUNS]
set -u
run=$1
runs=${2:-5}
rank_script='
case $QCOLL_RANK in
  0) sleep 0.2; kill -STOP $PPID; sleep 1.3; kill -CONT $PPID; sleep 30 ;;
  1) sleep 0.9; exit 1 ;;
  2) sleep 0.4; kill -KILL $$ ;;
esac'
fails=0
for i in $(seq 1 "$runs"); do
  out=$("$run" -n 3 bash -c "$rank_script" 2>&1 >/dev/null)
  rc=$?
  if ! grep -q "rank 2 (pid [0-9]*) was killed by signal 9" <<<"$out" ||
     grep -q "rank 1 (pid [0-9]*) exited" <<<"$out" || [ "$rc" -ne 137 ]; then
    echo "run $i: FAIL (exit $rc): $out"
    fails=$((fails + 1))
  fi
done
echo "$runs runs, $fails blamed the wrong rank or exited wrongly"
[ "$fails" -eq 0 ] && echo "rel_blame: all checks passed"
