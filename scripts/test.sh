#!/usr/bin/env bash
# Build qcoll and run every test: the C tests through CTest (unit, bootstrap,
# host back end, codecs, tools; GPU tests run when a GPU is present and are
# skipped with a printed reason otherwise) and a second build with
# AddressSanitizer + UndefinedBehaviorSanitizer running the same host tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

echo "# build and test (release)"
QCOLL_BUILD_DIR=build scripts/build.sh
(cd build && ctest --output-on-failure --timeout 600 -j 2)

if [ "${QCOLL_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "# build and test with address + undefined-behaviour sanitizers (host back end)"
  QCOLL_BUILD_DIR=build-asan scripts/build.sh -DQCOLL_WITH_CUDA=OFF \
    -DQCOLL_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure \
     --timeout 600 -j 2 -LE "gpu|python|slow")
fi
