#!/bin/sh
# Tests of the launcher's mechanics with plain shell ranks:
#   qcoll_run_test.sh QCOLL_RUN CASE
# Each case runs qcoll-run, then asserts its exit code, what it printed and
# how long it took.  Prints what it checked; exits non-zero on the first
# failed assertion.
set -u

RUN=$1
CASE=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qcoll_run_test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

fail() {
  echo "FAIL [$CASE]: $*"
  echo "--- stdout:"; cat "$TMP/out" 2>/dev/null
  echo "--- stderr:"; cat "$TMP/err" 2>/dev/null
  exit 1
}

# launch ARGS...: run qcoll-run, record rc and elapsed whole seconds.
launch() {
  t0=$(date +%s)
  "$RUN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  elapsed=$(($(date +%s) - t0))
  echo "qcoll-run $*"
  echo "  -> exit $rc after ${elapsed}s"
}

expect_rc() { [ "$rc" -eq "$1" ] || fail "exit code $rc, expected $1"; }
expect_err() { grep -q -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
# wait_for_lines FILE N: until FILE has N lines (at most 10 s), so a rank
# fails only once its siblings are surely up.  A script, so ranks can call it.
cat >"$TMP/wait_for_lines" <<'EOF_WAIT'
i=0
while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ] && [ $i -lt 200 ]; do
  sleep 0.05; i=$((i + 1))
done
EOF_WAIT
wait_for_lines() { sh "$TMP/wait_for_lines" "$@"; }
W="sh $TMP/wait_for_lines"

expect_fast() { [ "$elapsed" -le "$1" ] || fail "took ${elapsed}s, expected at most $1s"; }

# expect_all_dead FILE N: FILE lists N pids and every one is gone.
expect_all_dead() {
  [ "$(cat "$1" 2>/dev/null | wc -l)" -eq "$2" ] || fail "expected $2 sibling pids in $1"
  for pid in $(cat "$1"); do
    if kill -0 "$pid" 2>/dev/null; then
      fail "sibling pid $pid is still alive after qcoll-run returned"
    fi
  done
  echo "  siblings $(tr '\n' ' ' <"$1")are gone"
}

case "$CASE" in
all_ok)
  # Every rank sees a consistent environment; the ranks are exactly 0..3.
  launch -n 4 /bin/sh -c '
    [ "$QCOLL_WORLD_SIZE" = 4 ] && [ "$QCOLL_LOCAL_SIZE" = 4 ] &&
    [ "$QCOLL_LOCAL_RANK" = "$QCOLL_RANK" ] && [ ${#QCOLL_UNIQUE_ID} = 256 ] &&
    echo "rank $QCOLL_RANK id $QCOLL_UNIQUE_ID"'
  expect_rc 0
  [ "$(sed 's/ id .*//' "$TMP/out" | sort | tr '\n' ,)" = "rank 0,rank 1,rank 2,rank 3," ] ||
    fail "ranks are not exactly 0..3"
  [ "$(sed 's/.* id //' "$TMP/out" | sort -u | wc -l)" -eq 1 ] ||
    fail "ranks saw different unique ids"
  ;;
mpirun_np)
  # mpirun's spelling "-np N" (and "-np=N") sets the rank count; a "-np"
  # after the program is the program's own argument.
  launch -np 3 -x FOO=1 /bin/sh -c 'echo "rank $QCOLL_RANK of $QCOLL_WORLD_SIZE $0"' -np
  expect_rc 0
  [ "$(grep -c ' of 3 -np$' "$TMP/out")" -eq 3 ] || fail "-np 3 did not start 3 ranks"
  launch -np=2 /bin/sh -c 'echo "of $QCOLL_WORLD_SIZE"'
  expect_rc 0
  [ "$(grep -c '^of 2$' "$TMP/out")" -eq 2 ] || fail "-np=2 did not start 2 ranks"
  ;;
env)
  # -x NAME=VALUE and -x NAME reach every rank.
  QCOLL_RUN_TEST_PASSED=passed-on; export QCOLL_RUN_TEST_PASSED
  launch -n 2 -x FOO=bar=baz -x QCOLL_RUN_TEST_PASSED /bin/sh -c \
    'echo "$FOO $QCOLL_RUN_TEST_PASSED"'
  expect_rc 0
  [ "$(grep -c '^bar=baz passed-on$' "$TMP/out")" -eq 2 ] || fail "-x values did not reach both ranks"
  ;;
rank_fails)
  # Rank 1 exits 3 while its siblings sleep: the job ends promptly with 3,
  # names the rank, and the sleeping siblings are gone.
  launch -n 3 /bin/sh -c '
    if [ "$QCOLL_RANK" = 1 ]; then '"$W"' "'"$TMP"'/pids" 2; exit 3; fi
    echo $$ >>"'"$TMP"'/pids"; exec sleep 60'
  expect_rc 3
  expect_err "rank 1 (pid [0-9]*) exited with status 3"
  expect_fast 5
  expect_all_dead "$TMP/pids" 2
  ;;
rank_signal)
  # Rank 2 is killed by SIGKILL: exit 128+9, the message names the signal.
  launch -n 3 /bin/sh -c '
    if [ "$QCOLL_RANK" = 2 ]; then '"$W"' "'"$TMP"'/pids" 2; kill -KILL $$; fi
    echo $$ >>"'"$TMP"'/pids"; exec sleep 60'
  expect_rc 137
  expect_err "rank 2 (pid [0-9]*) was killed by signal 9 (Killed)"
  expect_fast 5
  expect_all_dead "$TMP/pids" 2
  ;;
sigterm_ignored)
  # A sibling that ignores SIGTERM gets SIGKILL after the grace period.
  launch -n 2 /bin/sh -c '
    if [ "$QCOLL_RANK" = 0 ]; then '"$W"' "'"$TMP"'/pids" 1; exit 4; fi
    trap "" TERM; echo $$ >>"'"$TMP"'/pids"; sleep 60; sleep 60'
  expect_rc 4
  expect_err "sending SIGKILL"
  expect_fast 8
  expect_all_dead "$TMP/pids" 1
  ;;
tag_output)
  # Every line carries its rank, stdout and stderr stay apart, and a last
  # line without a newline is still printed (with its prefix).
  launch -n 3 -t /bin/sh -c '
    echo "out one $QCOLL_RANK"; echo "err $QCOLL_RANK" >&2
    echo "out two $QCOLL_RANK"; printf "partial $QCOLL_RANK"'
  expect_rc 0
  for r in 0 1 2; do
    for line in "out one $r" "out two $r" "partial $r"; do
      grep -qx "\[$r\] $line" "$TMP/out" || fail "stdout lacks '[$r] $line'"
    done
    grep -qx "\[$r\] err $r" "$TMP/err" || fail "stderr lacks '[$r] err $r'"
  done
  [ "$(wc -l <"$TMP/out")" -eq 9 ] || fail "stdout should have exactly 9 lines"
  if grep -vq '^\[[0-2]\] ' "$TMP/out"; then fail "a stdout line has no rank prefix"; fi
  if grep -q 'err' "$TMP/out"; then fail "stderr leaked into stdout"; fi
  ;;
timeout)
  # A hung job is stopped by --timeout with exit 124 and says why.
  launch -n 2 --timeout 1 /bin/sh -c 'echo $$ >>"'"$TMP"'/pids"; exec sleep 60'
  expect_rc 124
  expect_err "timed out after 1 s"
  expect_fast 5
  expect_all_dead "$TMP/pids" 2
  ;;
skip)
  # Every rank skips (77): the job reports 77.
  launch -n 3 /bin/sh -c 'exit 77'
  expect_rc 77
  ;;
forward_sigterm)
  # SIGTERM to the launcher reaches every rank; the job exits 128+15.
  "$RUN" -n 2 /bin/sh -c '
    trap "echo term >>\"'"$TMP"'/terms\"; exit 0" TERM
    echo $$ >>"'"$TMP"'/pids"; sleep 60 & wait' >"$TMP/out" 2>"$TMP/err" &
  launcher=$!
  wait_for_lines "$TMP/pids" 2
  kill -TERM "$launcher"
  wait "$launcher"
  rc=$?
  echo "qcoll-run -n 2 (SIGTERM to the launcher) -> exit $rc"
  expect_rc 143
  [ "$(wc -l <"$TMP/terms")" -eq 2 ] || fail "not both ranks got SIGTERM"
  expect_all_dead "$TMP/pids" 2
  ;;
not_found)
  launch -n 2 qcoll-no-such-program-here
  expect_rc 127
  expect_err "qcoll-no-such-program-here"
  launch -n 2 ./no/such/path
  expect_rc 127
  expect_err "./no/such/path"
  ;;
bad_options)
  # Each bad command line: exit 2, a message saying what is wrong, the usage.
  check_bad() {
    want=$1; shift
    launch "$@"
    expect_rc 2
    expect_err "$want"
    expect_err "Usage: "
  }
  check_bad "-n needs a number of ranks in 1..1024, got '0'" -n 0 true
  check_bad "got '1025'" -n 1025 true
  check_bad "got 'abc'" -n abc true
  check_bad "got '2x'" --np 2x true
  check_bad "(-n N) is required" true
  check_bad "no program to run" -n 2
  check_bad "unknown option -z" -n 2 -z true
  check_bad "unknown option '--bogus'" -n 2 --bogus true
  check_bad "option -n needs an argument" -n
  check_bad "'--timeout' needs an argument" -n 1 --timeout
  check_bad "--timeout needs a positive number of seconds, got '-1'" -n 1 --timeout -1 true
  check_bad "-x needs NAME=VALUE" -n 1 -x =3 true
  check_bad "-x QCOLL_RANK: this variable is set by qcoll-run" -n 1 -x QCOLL_RANK=3 true
  check_bad "--bind-to takes core or none, got 'socket'" -n 1 --bind-to socket true
  launch --help
  expect_rc 0
  grep -q "Usage: qcoll-run -n N" "$TMP/out" || fail "--help prints no usage"
  launch --version
  expect_rc 0
  grep -q "^qcoll-run (qcoll) [0-9]*\.[0-9]*\.[0-9]*$" "$TMP/out" || fail "--version prints no version"
  ;;
bind)
  # Placement, checked against the CPUs this test may use (taskset/cgroups
  # included): with ranks <= CPUs each rank is bound to a CPU of its own, in
  # rank order; --bind-to none leaves every rank the whole set; more ranks
  # than CPUs are not bound.
  allowed=$(grep '^Cpus_allowed_list' /proc/self/status | awk '{print $2}')
  ncpu=$(nproc)
  show='echo "$QCOLL_RANK $(grep ^Cpus_allowed_list /proc/self/status | awk "{print \$2}")"'
  launch -n 1 --bind-to none /bin/sh -c "$show"
  expect_rc 0
  grep -qx "0 $allowed" "$TMP/out" || fail "--bind-to none: rank 0 does not have $allowed"
  if [ "$ncpu" -ge 2 ]; then
    launch -n 2 /bin/sh -c "$show"
    expect_rc 0
    c0=$(awk '$1 == 0 {print $2}' "$TMP/out")
    c1=$(awk '$1 == 1 {print $2}' "$TMP/out")
    case "$c0$c1" in *[!0-9]*) fail "ranks not bound to one CPU each: '$c0' '$c1'" ;; esac
    [ -n "$c0" ] && [ -n "$c1" ] && [ "$c0" -lt "$c1" ] ||
      fail "ranks 0 and 1 should be on distinct CPUs in rank order, got '$c0' and '$c1'"
    echo "  2 ranks bound to CPUs $c0 and $c1 (allowed: $allowed)"
  fi
  launch -n $((ncpu + 1)) /bin/sh -c "$show"
  expect_rc 0
  [ "$(grep -c " $allowed\$" "$TMP/out")" -eq $((ncpu + 1)) ] ||
    fail "$((ncpu + 1)) ranks on $ncpu CPUs should not be bound"
  echo "  $((ncpu + 1)) ranks on $ncpu CPUs: not bound"
  ;;
*)
  echo "unknown case $CASE"
  exit 2
  ;;
esac
echo "PASS [$CASE]"
