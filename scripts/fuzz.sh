#!/usr/bin/env bash
# Fuzz the bootstrap's message parsers (src/bootstrap/message.c) with
# libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer for a fixed
# budget, starting from a seed corpus made by the library's own encoders.
#
#   scripts/fuzz.sh                      # 60 s
#   QCOLL_FUZZ_SECONDS=600 scripts/fuzz.sh
#   scripts/fuzz.sh path/to/crash-file   # replay one input, no fuzzing
#
# Environment: QCOLL_FUZZ_SECONDS (budget, default 60), QCOLL_FUZZ_DIR (work
# directory, default build-fuzz: binaries, seeds, the growing corpus and any
# crash inputs), QCOLL_FUZZ_JOBS (parallel fuzzing processes, default 1),
# CC (default clang).  Exits non-zero when an input crashes a parser or
# breaks its contract (tests/fuzz/fuzz_messages.c); the input is kept under
# $QCOLL_FUZZ_DIR/crashes/ and `build/tests/fuzz/fuzz_replay FILE` replays
# it without the fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."

BUDGET=${QCOLL_FUZZ_SECONDS:-60}
WORK=${QCOLL_FUZZ_DIR:-build-fuzz}
JOBS=${QCOLL_FUZZ_JOBS:-1}
CC=${CC:-clang}
SAN_FLAGS="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# libFuzzer ships with clang's runtime libraries; on Debian they are a
# separate package in some releases.
fuzzer_links() {
  local probe
  probe=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)'\
' { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
  "$CC" $SAN_FLAGS "$probe/p.c" -o "$probe/p" >/dev/null 2>&1
  local ok=$?
  rm -rf "$probe"
  return $ok
}

if ! command -v "$CC" >/dev/null; then
  echo "# installing clang"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq clang >/dev/null
fi
if ! fuzzer_links; then
  version=$("$CC" -dumpversion | cut -d. -f1)
  echo "# $CC cannot link -fsanitize=fuzzer: installing libclang-rt-$version-dev"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq \
    "libclang-rt-$version-dev" >/dev/null ||
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq \
      "libclang-common-$version-dev" >/dev/null
  fuzzer_links || { echo "fuzz.sh: $CC still cannot link libFuzzer" >&2; exit 2; }
fi

mkdir -p "$WORK/seeds" "$WORK/corpus" "$WORK/crashes"
INCLUDES="-Iinclude -Isrc -Itests/fuzz"
echo "# building the fuzz target with $("$CC" --version | head -1)"
"$CC" -g -O1 $SAN_FLAGS $INCLUDES src/bootstrap/message.c \
  tests/fuzz/fuzz_messages.c tests/fuzz/fuzz_libfuzzer.c -o "$WORK/fuzz_messages"
"$CC" -O1 $INCLUDES src/bootstrap/message.c tests/fuzz/fuzz_seeds.c \
  tests/fuzz/fuzz_seed_gen.c -o "$WORK/fuzz_seed_gen"
"$WORK/fuzz_seed_gen" "$WORK/seeds"

if [ $# -gt 0 ]; then
  echo "# replaying $*"
  exec "$WORK/fuzz_messages" "$@"
fi

# The magic words and frame sizes, so mutations find the framing sooner.
cat >"$WORK/messages.dict" <<'DICT'
id_magic="qcID"
msg_magic="qcBS"
data_magic="qcDT"
version="\x01"
hello_len="\x00\x00\x00\x44"
ring_hello_len="\x00\x00\x00\x30"
DICT

WORK=$(cd "$WORK" && pwd)
parallel=()
# Several jobs write their logs to fuzz-N.log in the current directory.
[ "$JOBS" -gt 1 ] && parallel=(-jobs="$JOBS" -workers="$JOBS")
before=$(find "$WORK/crashes" -type f | wc -l)
echo "# fuzzing for ${BUDGET} s (${JOBS} job(s)); corpus in $WORK/corpus"
set +e
(cd "$WORK" && ./fuzz_messages -max_total_time="$BUDGET" -max_len=1024 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict=messages.dict \
  -artifact_prefix="$WORK/crashes/" "${parallel[@]}" corpus seeds) 2>&1 |
  tee "$WORK/last-run.log" |
  grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|# Uses: |dictionary'
rc=${PIPESTATUS[0]}
set -e
after=$(find "$WORK/crashes" -type f | wc -l)
if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
  echo "fuzz.sh: FAILED (libFuzzer exit $rc, $((after - before)) new crash input(s) in $WORK/crashes)" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${BUDGET} s; corpus has $(find "$WORK/corpus" -type f | wc -l) inputs"
