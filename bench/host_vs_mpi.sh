#!/usr/bin/env bash
# qcoll's host back end against MPI on this machine, side by side.
#
#   bench/host_vs_mpi.sh
#
# Installs what it needs (Debian's MPI packages, matplotlib), builds qcoll into
# build-bench (no CUDA: only the host back end is measured) and mpi-perf with
# mpicc, then for each world size in RANKS runs the same all-reduce sweep with
# qcoll-perf (started by qcoll-run) and with mpi-perf (started by mpirun over
# the shared-memory transport), ROUNDS times, alternating which one goes first
# so that the machine's noise falls on both.  Every run must report #wrong 0
# and exit 0.  Then bench/host_vs_mpi.py turns the outputs into a table per
# world size (median time per size over the rounds, ratio mpi/qcoll, the
# geometric mean ratio) and a log-log plot.
#
# A second, short experiment (PLACEMENT=1, the default) measures how much of
# the small-message difference is placement rather than algorithm: with 2
# ranks, PLACEMENT_ROUNDS times each, qcoll as qcoll-run starts it (ranks not
# bound), qcoll with each rank bound to one core (bench/pin-rank.sh, as
# mpirun binds), qcoll with QCOLL_SPIN_US=0 (waits sleep at once), MPI as
# mpirun starts it (bound to cores) and MPI with --bind-to none.
#
# BASELINE=<git revision> also builds qcoll at that revision (from git
# archive, into $BUILD_DIR/baseline) and runs it as a third participant of
# every round (the order rotates: qcoll, baseline, MPI; baseline, MPI,
# qcoll; ...), so a change is measured against MPI in the same rounds as the
# code before it; the table then has "before" columns.
#
# QCOLL_BIND=1 starts qcoll's ranks (and the baseline's) the way mpirun
# places MPI's: each bound to one CPU (bench/pin-rank.sh) when there are no
# more ranks than CPUs, not bound otherwise; by default (0) they run as
# qcoll-run starts them (which, since it binds like mpirun, is the same
# placement for qcoll; a baseline older than that runs unbound).
#
# Knobs (environment): RANKS ("2 4"), ROUNDS (5), SIZES ("-b 8 -e 64M -f 2"),
# ITERS ("-n 20 -w 5"), DTYPE (f32), PLACEMENT (1), PLACEMENT_ROUNDS (3),
# PLACEMENT_SIZES ("-b 8 -e 2M -f 8"), BASELINE (none), QCOLL_BIND (0), BUILD_DIR
# (build-bench), OUT ($BUILD_DIR/host-vs-mpi), PLOT
# (docs/results/host-vs-mpi.png; PLOT=none: no plot).
set -euo pipefail
cd "$(dirname "$0")/.."

RANKS=${RANKS:-"2 4"}
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-"-b 8 -e 64M -f 2"}
ITERS=${ITERS:-"-n 20 -w 5"}
DTYPE=${DTYPE:-f32}
PLACEMENT=${PLACEMENT:-1}
PLACEMENT_ROUNDS=${PLACEMENT_ROUNDS:-3}
PLACEMENT_SIZES=${PLACEMENT_SIZES:-"-b 8 -e 2M -f 8"}
BUILD_DIR=${BUILD_DIR:-build-bench}
OUT=${OUT:-$BUILD_DIR/host-vs-mpi}
PLOT=${PLOT:-docs/results/host-vs-mpi.png}
BASELINE=${BASELINE:-}
QCOLL_BIND=${QCOLL_BIND:-0}

# ---- what it needs -----------------------------------------------------------
scripts/deps.sh
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "# installing Debian packages: libopenmpi-dev openmpi-bin"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libopenmpi-dev openmpi-bin >/dev/null
fi
if ! python3 -c "import matplotlib" 2>/dev/null; then
  echo "# installing Python packages: matplotlib"
  python3 -m pip install -q matplotlib 2>/dev/null ||
    python3 -m pip install -q --break-system-packages matplotlib
fi

# ---- build -------------------------------------------------------------------
QCOLL_BUILD_DIR=$BUILD_DIR QCOLL_JOBS=${QCOLL_JOBS:-2} scripts/build.sh \
  -DQCOLL_WITH_CUDA=OFF -DBUILD_TESTING=OFF >/dev/null
mkdir -p "$BUILD_DIR/bench"
# The same optimisation as the library's default build (RelWithDebInfo).
# perf_common.c is what mpi-perf shares with qcoll-perf (options, sweep,
# check, table); it uses no qcoll API.
mpicc -std=c11 -O2 -g -Wall -Wextra -Itools/qcoll-perf -o "$BUILD_DIR/bench/mpi-perf" \
  bench/mpi-perf.c tools/qcoll-perf/perf_common.c -lm

RUN=$BUILD_DIR/tools/qcoll-run/qcoll-run
QPERF=$BUILD_DIR/tools/qcoll-perf/qcoll-perf
LIBS=(qcoll mpi)
if [ -n "$BASELINE" ]; then
  BASE_SRC=$BUILD_DIR/baseline/src
  rm -rf "$BUILD_DIR/baseline"
  mkdir -p "$BASE_SRC"
  git archive "$BASELINE" | tar -x -C "$BASE_SRC"
  cmake -S "$BASE_SRC" -B "$BUILD_DIR/baseline/build" -DQCOLL_WITH_CUDA=OFF \
    -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$BUILD_DIR/baseline/build" -j"${QCOLL_JOBS:-2}" \
    --target qcoll-run qcoll-perf >/dev/null
  BASE_RUN=$BUILD_DIR/baseline/build/tools/qcoll-run/qcoll-run
  BASE_QPERF=$BUILD_DIR/baseline/build/tools/qcoll-perf/qcoll-perf
  LIBS=(qcoll base mpi)
fi
MPERF=$BUILD_DIR/bench/mpi-perf
# Shared memory only: the ob1 messaging layer over the "vader" shared-memory
# transport (and "self" for a rank's messages to itself).  --oversubscribe:
# more ranks than cores is allowed; MPI then yields the CPU while it polls.
# --report-bindings: where mpirun bound each rank goes into the .err files.
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --report-bindings --mca pml ob1
        --mca btl "self,vader")
# shellcheck disable=SC2206
ARGS=($SIZES $ITERS -d "$DTYPE" all_reduce)

rm -rf "$OUT"
mkdir -p "$OUT"

# ---- the machine -------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) online CPUs"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r); $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)"
  echo "compiler: $(cc --version | head -1)"
  echo "mpi: $(mpirun --version | head -1)"
  echo "qcoll: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (working tree with uncommitted changes)'), CMake RelWithDebInfo, QCOLL_WITH_CUDA=OFF"
  [ -n "$BASELINE" ] && echo "baseline: $(git rev-parse "$BASELINE") ($BASELINE)"
  echo "qcoll placement: $([ "$QCOLL_BIND" = 1 ] && echo "bound one rank per CPU when ranks <= CPUs (QCOLL_BIND=1)" || echo "as qcoll-run starts them (its default: one rank per CPU when ranks <= CPUs, as mpirun)")"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"

# ---- the runs ------------------------------------------------------------------
cmd=() # the command line of the run being set up
# Run "${cmd[@]}" with its stdout in $1.out, stderr in $1.err, the command
# line in $1.cmd and the load average before it in $1.load.  A failed run (a
# wrong result, a crash) stops everything.
run_cmd() {
  local base=$1
  echo "${cmd[*]}" >"$base.cmd"
  cut -d' ' -f1-3 /proc/loadavg >"$base.load"
  echo "# ${cmd[*]}" >&2
  local status=0
  "${cmd[@]}" >"$base.out" 2>"$base.err" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "host_vs_mpi: failed (exit status $status): ${cmd[*]}" >&2
    grep -v '^# \[' "$base.err" >&2 || true
    exit 1
  fi
}

# One run of the main sweep: OUT/<lib>-n<N>-r<round>.*
run_one() {
  local lib=$1 n=$2 round=$3 bind=()
  [ "$QCOLL_BIND" = 1 ] && [ "$n" -le "$(nproc --all)" ] && bind=(bench/pin-rank.sh)
  if [ "$lib" = qcoll ]; then
    cmd=("$RUN" -n "$n" "${bind[@]}" "$QPERF" --mem host "${ARGS[@]}")
  elif [ "$lib" = base ]; then
    cmd=("$BASE_RUN" -n "$n" "${bind[@]}" "$BASE_QPERF" --mem host "${ARGS[@]}")
  else
    cmd=("${MPIRUN[@]}" -n "$n" "$MPERF" "${ARGS[@]}")
  fi
  run_cmd "$OUT/$lib-n$n-r$round"
}

# One run of the placement experiment: OUT/place-<variant>-r<round>.*
# shellcheck disable=SC2206
PARGS=($PLACEMENT_SIZES $ITERS -d "$DTYPE" all_reduce)
PLACEMENT_VARIANTS="qcoll qcoll_pinned qcoll_nospin mpi mpi_unbound"
run_placement() {
  local variant=$1 round=$2
  case $variant in
  qcoll) cmd=("$RUN" -n 2 "$QPERF" --mem host "${PARGS[@]}") ;;
  qcoll_pinned) cmd=("$RUN" -n 2 bench/pin-rank.sh "$QPERF" --mem host "${PARGS[@]}") ;;
  qcoll_nospin) cmd=(env QCOLL_SPIN_US=0 "$RUN" -n 2 "$QPERF" --mem host "${PARGS[@]}") ;;
  mpi) cmd=("${MPIRUN[@]}" -n 2 "$MPERF" "${PARGS[@]}") ;;
  mpi_unbound) cmd=("${MPIRUN[@]}" --bind-to none -n 2 "$MPERF" "${PARGS[@]}") ;;
  esac
  run_cmd "$OUT/place-$variant-r$round"
}

for n in $RANKS; do
  for round in $(seq 1 "$ROUNDS"); do
    # Two libraries alternate which goes first; three rotate.
    for i in "${!LIBS[@]}"; do
      if [ ${#LIBS[@]} -eq 2 ]; then
        k=$(((round % 2 == 1) ? i : 1 - i))
      else
        k=$(((i + round - 1) % ${#LIBS[@]}))
      fi
      run_one "${LIBS[k]}" "$n" "$round"
    done
  done
done
if [ "$PLACEMENT" = 1 ]; then
  for round in $(seq 1 "$PLACEMENT_ROUNDS"); do
    # Each round starts with the next variant, so none always goes first.
    read -ra variants <<<"$PLACEMENT_VARIANTS"
    for i in "${!variants[@]}"; do
      run_placement "${variants[(i + round - 1) % ${#variants[@]}]}" "$round"
    done
  done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

# ---- the table and the plot ---------------------------------------------------
PY_PLACEMENT=()
[ "$PLACEMENT" = 1 ] &&
  PY_PLACEMENT=(--placement "$PLACEMENT_VARIANTS" --placement-rounds "$PLACEMENT_ROUNDS")
[ -n "$BASELINE" ] && PY_PLACEMENT+=(--baseline)
[ "$PLOT" = none ] && PY_PLACEMENT+=(--no-plot)
python3 bench/host_vs_mpi.py --dir "$OUT" --ranks "$RANKS" --rounds "$ROUNDS" \
  --plot "$PLOT" --summary "$OUT/summary.md" --raw "$OUT/raw.md" "${PY_PLACEMENT[@]}"
cat "$OUT/summary.md"
echo "# outputs in $OUT, plot in $PLOT" >&2
