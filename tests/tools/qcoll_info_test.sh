#!/bin/sh
# qcoll-info: the version line, the device probe, and the QCOLL_* table
# showing this process's values.
#   qcoll_info_test.sh QCOLL_INFO
set -u
INFO=$1
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$OUT"; exit 1; }
OUT=$(mktemp "${TMPDIR:-/tmp}/qcoll_info_test.XXXXXX") || exit 1
trap 'rm -f "$OUT"' EXIT

QCOLL_TIMEOUT=123 QCOLL_ALGO=host "$INFO" >"$OUT" 2>&1
rc=$?
echo "QCOLL_TIMEOUT=123 QCOLL_ALGO=host qcoll-info -> exit $rc"
[ $rc -eq 0 ] || fail "exit $rc"
head -1 "$OUT" | grep -Eq '^qcoll [0-9]+\.[0-9]+\.[0-9]+$' || fail "first line is not the version"
grep -Eq '^  GPU:   (usable|none usable)' "$OUT" || fail "no GPU probe result"
grep -Eq '^  QCOLL_TIMEOUT +300 +123 +[a-z]' "$OUT" || fail "QCOLL_TIMEOUT row lacks default 300, current 123"
grep -Eq '^  QCOLL_ALGO +auto +host +[a-z]' "$OUT" || fail "QCOLL_ALGO row lacks default auto, current host"
grep -Eq '^  QCOLL_DEBUG +[A-Z]+ +- +[a-z]' "$OUT" || fail "an unset variable is not shown as -"
n=$(sed -n 's/^Environment (\([0-9]*\) variables.*/\1/p' "$OUT")
rows=$(grep -c '^  QCOLL_' "$OUT")
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$rows" -eq "$n" ] || fail "$rows rows for $n variables"
echo "  version line, GPU probe, $rows variable rows with current values"

"$INFO" --no-probe --env >"$OUT" 2>&1 || fail "--no-probe --env failed"
grep -q '^  GPU:' "$OUT" && fail "--env printed more than the table"
[ "$(grep -c '^  QCOLL_' "$OUT")" -eq "$rows" ] || fail "--env table differs in length"

"$INFO" --bogus >"$OUT" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--bogus: exit $rc, expected 2"
grep -q "unknown option '--bogus'" "$OUT" || fail "--bogus: no clear message"
echo "  --env, --no-probe, bad option (exit 2)"
echo "PASS"
