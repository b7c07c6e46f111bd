#!/usr/bin/env bash
# Build the wheel as a user does (pip install ./python, with pip's build
# isolation) in a fresh virtual environment, then run the Python example
# through it with no QCOLL_LIB and no PYTHONPATH, from outside the checkout:
# the package must load its own libqcoll and start its own qcoll-run.
#   tests/install/check-wheel.sh [extra pip arguments]
# CI builds it host-only: QCOLL_WITH_CUDA=OFF below (the wheel's own
# default is ON: kernels when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=$work/venv/bin/python
# A venv without its own pip, filled by this pip (--python, pip >= 22.3),
# saves installing pip into it; older pips get a venv with pip.
if python3 -m pip --help 2>/dev/null | grep -q -- "--python <python>"; then
  python3 -m venv --without-pip "$work/venv"
  pip=(python3 -m pip --python "$py")
else
  python3 -m venv "$work/venv"
  pip=("$py" -m pip)
fi
"${pip[@]}" install -q ./python -C cmake.define.QCOLL_WITH_CUDA=OFF "$@"

cd "$work" # nothing of the checkout on sys.path
clean_env=(env -u QCOLL_LIB -u PYTHONPATH -u LD_LIBRARY_PATH -u QCOLL_RUN)
lib=$("${clean_env[@]}" "$py" -c "import qcoll; print(qcoll.lib_path())")
case "$lib" in
  "$work"/venv/*/site-packages/qcoll/libqcoll.so.0) echo "wheel's library: $lib" ;;
  *) echo "check-wheel: the package loaded $lib, not its own copy" >&2; exit 1 ;;
esac
out=$("${clean_env[@]}" "$work/venv/bin/qcoll-run" -n 2 "$py" "$repo/examples/python_allreduce.py")
grep -q "rank 1 of 2: sum = \[3.0, 3.0, 3.0, 3.0\] (expected 3.0)" <<<"$out" ||
  { echo "check-wheel: unexpected output:" >&2; echo "$out" >&2; exit 1; }
echo "console script qcoll-run + examples/python_allreduce.py: ok"
out=$("${clean_env[@]}" "$py" -m qcoll.run -np 2 "$py" "$repo/examples/python_allreduce.py")
grep -q "rank 0 of 2: sum" <<<"$out" || { echo "$out" >&2; exit 1; }
echo "python -m qcoll.run: ok"
"${clean_env[@]}" "$work/venv/bin/qcoll-info" | sed -n 1p
