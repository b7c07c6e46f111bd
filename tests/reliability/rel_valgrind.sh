#!/usr/bin/env bash
# Run rel_valgrind's ranks under valgrind's memcheck:
#
#   rel_valgrind.sh QCOLL_RUN REL_VALGRIND [N [SANITIZERS]]
#
# Any memory error or definite/indirect leak in any rank fails the job
# (valgrind --error-exitcode=1, and qcoll-run exits with the first failing
# rank's status).  Exits 77 (skipped) when valgrind is not installed or
# the build uses sanitizers (SANITIZERS not empty).
set -u
run=$1 prog=$2 n=${3:-2} sanitizers=${4:-}
if [ -n "$sanitizers" ]; then
  echo "SKIP: this build uses -fsanitize=$sanitizers, which cannot run under valgrind"
  exit 77
fi
valgrind=$(command -v valgrind) || {
  echo "SKIP: valgrind is not installed (apt-get install valgrind)"
  exit 77
}
# Spinning is pointless under valgrind, which runs one thread at a time.
export QCOLL_SPIN_US=0
set -x
exec "$run" -n "$n" --tag-output "$valgrind" --error-exitcode=1 \
  --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --show-leak-kinds=definite,indirect --track-origins=yes -q "$prog"
