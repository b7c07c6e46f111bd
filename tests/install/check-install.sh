#!/usr/bin/env bash
# Install a built qcoll into a fresh prefix and use it as a user would:
# the installed tools start, and two programs built against the
# installation (find_package(qcoll), and pkg-config) run with two ranks
# through the installed qcoll-run.  Nothing of the build tree is on any
# search path.
#   tests/install/check-install.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:?usage: check-install.sh BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$BUILD_DIR" --prefix "$prefix" >/dev/null
for f in include/qcoll.h lib/libqcoll.so lib/libqcoll.so.0 lib/cmake/qcoll/qcollConfig.cmake \
         lib/cmake/qcoll/qcollConfigVersion.cmake lib/pkgconfig/qcoll.pc \
         bin/qcoll-run bin/qcoll-perf bin/qcoll-info; do
  [ -e "$prefix/$f" ] || { echo "check-install: $f was not installed" >&2; exit 1; }
done
env -u LD_LIBRARY_PATH "$prefix/bin/qcoll-info" | sed -n 1p

expect_sum() { # $1: output of a 2-rank c_allreduce
  grep -q "rank 1 of 2: sum = 3 (expected 3)" <<<"$1" ||
    { echo "check-install: unexpected output:" >&2; echo "$1" >&2; exit 1; }
}

# 1. CMake: find_package(qcoll) through CMAKE_PREFIX_PATH.
cmake -S tests/install/find_package -B "$work/cmake-consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-consumer" >/dev/null
out=$(env -u LD_LIBRARY_PATH \
      "$prefix/bin/qcoll-run" -np 2 --tag-output "$work/cmake-consumer/c_allreduce")
expect_sum "$out"
echo "find_package(qcoll) consumer: ok"

# 2. pkg-config, run path from its --libs-only-L.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
libdir=$(pkg-config --variable=libdir qcoll)
# shellcheck disable=SC2046
cc examples/c_allreduce.c $(pkg-config --cflags --libs qcoll) -Wl,-rpath,"$libdir" \
  -o "$work/c_allreduce_pc"
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/qcoll-run" -n 2 --tag-output "$work/c_allreduce_pc")
expect_sum "$out"
echo "pkg-config consumer: ok"
