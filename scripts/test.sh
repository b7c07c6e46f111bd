#!/usr/bin/env bash
# Build qcoll and run every test:
#   1. the release build (with the CUDA back end when nvcc is found) and all
#      of CTest: unit, bootstrap, host back end, codecs, NCCL loader, tools,
#      reliability, Python; GPU tests run when a GPU is present and are
#      skipped otherwise, with the reason printed below the summary;
#      then that build installed into a temporary prefix, and two programs
#      built against the installation (find_package(qcoll), pkg-config) run
#      with two ranks through the installed qcoll-run;
#      then the wheel (pip install ./python, host-only) in a fresh virtual
#      environment, running the Python example with no QCOLL_LIB;
#   2. a host-only build with AddressSanitizer + UndefinedBehaviorSanitizer
#      running the same host tests;
#   3. a host-only build with ThreadSanitizer running them again, but for
#      the single-threaded arithmetic tests (label single_thread) and the
#      larger world sizes of multi-process tests (label notsan_thread: TSan
#      sees only a process's own threads, which the smaller ones exercise);
#   4. the bootstrap message fuzzer for QCOLL_FUZZ_SECONDS (default 30).
# QCOLL_SKIP_SANITIZERS=1 and QCOLL_FUZZ_SECONDS=0 shorten a local run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

took() { echo "# ($1 took $(($(date +%s) - $2)) s)"; }

echo "# 1. build and test (release)"
t0=$(date +%s)
QCOLL_BUILD_DIR=build scripts/build.sh
took build "$t0"
t0=$(date +%s)
(cd build && ctest --output-on-failure --timeout 600 -j 2 -LE "slow|subset")
echo "# reasons given by skipped tests:"
(cd build && ctest -L gpu -V 2>&1 | grep -E "SKIP" | sed 's/^[0-9]*: //' | sort | uniq -c) || true
took ctest "$t0"
echo "# 1b. cmake --install and two consumers of the installation"
t0=$(date +%s)
tests/install/check-install.sh build
took "install check" "$t0"
echo "# 1c. the wheel, in a fresh virtual environment (host-only)"
t0=$(date +%s)
tests/install/check-wheel.sh
took "wheel check" "$t0"

host_tests() { # $1 build dir, $2 more labels to leave out ("|single_thread")
  (cd "$1" && ctest --output-on-failure --timeout 600 -j 2 -LE "gpu|python|slow|valgrind|nosan${2:-}")
}
if [ "${QCOLL_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "# 2. address + undefined-behaviour sanitizers (host back end)"
  t0=$(date +%s)
  QCOLL_BUILD_DIR=build-asan scripts/build.sh -DQCOLL_WITH_CUDA=OFF \
    -DQCOLL_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  ASAN_OPTIONS=detect_leaks=1 host_tests build-asan
  took "address sanitizer pass" "$t0"
  echo "# 3. thread sanitizer (host back end)"
  t0=$(date +%s)
  QCOLL_BUILD_DIR=build-tsan scripts/build.sh -DQCOLL_WITH_CUDA=OFF \
    -DQCOLL_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug
  TSAN_OPTIONS=halt_on_error=1 host_tests build-tsan "|single_thread|notsan_thread"
  took "thread sanitizer pass" "$t0"
fi
if [ "${QCOLL_FUZZ_SECONDS:-30}" != 0 ]; then
  echo "# 4. fuzzing the bootstrap message parsers"
  QCOLL_FUZZ_SECONDS=${QCOLL_FUZZ_SECONDS:-30} scripts/fuzz.sh
fi
