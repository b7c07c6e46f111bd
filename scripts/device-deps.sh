#!/usr/bin/env bash
# Fill build-deps/ (git-ignored) with what the GPU machine needs but cannot
# fetch, since it has no network:
#   build-deps/cmocka/include/   cmocka headers      (Debian libcmocka-dev)
#   build-deps/cmocka/lib/       libcmocka.so.0      (Debian libcmocka0)
#   build-deps/nccl/libnccl.so.2.xz
#                                NCCL for --vs-nccl  (PyPI nvidia-nccl-cu13),
#                                sm_90 cubins only, see shrink-fatbin.py
# Device call scripts carry build-deps (the run tool's `carry` argument, 64 MiB
# in all), and scripts/device-lib.sh reads it (dl_build, dl_nccl).
# A part that already exists is skipped; --force makes it again.
#
# Usage: scripts/device-deps.sh [--force]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$root/build-deps
nccl_version=2.32.6
force=0
[ "${1:-}" = --force ] && force=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# True when PATH exists and --force was not given.
have() { [ "$force" = 0 ] && [ -e "$1" ]; }

# The GPU machine is x86-64 whatever this one is, so on any other host apt
# is pointed at amd64 with lists of its own (the host's lists stay as they are).
apt_amd64() {
  if [ "$(uname -m)" = x86_64 ]; then
    apt-get "$@"
  else
    mkdir -p "$tmp/lists/partial"
    apt-get -o APT::Architecture=amd64 -o Dir::State::Lists="$tmp/lists" "$@"
  fi
}

# apt-get download needs package lists; update only when they lack the
# packages, so a second run costs no network.
fetch_debs() {
  (cd "$1" && apt_amd64 download "${@:2}") ||
    { apt_amd64 update && (cd "$1" && apt_amd64 download "${@:2}"); }
}

make_cmocka() {
  local out=$deps/cmocka
  if have "$out/include/cmocka.h" && have "$out/lib/libcmocka.so.0"; then
    echo "cmocka: present, skipped"
    return
  fi
  mkdir -p "$tmp/debs" && fetch_debs "$tmp/debs" libcmocka0 libcmocka-dev
  local deb
  for deb in "$tmp"/debs/*.deb; do dpkg -x "$deb" "$tmp/cmocka"; done
  rm -rf "$out" && mkdir -p "$out/include" "$out/lib"
  cp -r "$tmp"/cmocka/usr/include/. "$out/include/"
  # The real object under its soname, not a symlink to it: device-lib.sh
  # takes the first libcmocka.so.0* it lists, and the loader of the tests
  # looks the soname up.
  cp -L "$tmp"/cmocka/usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$out/lib/libcmocka.so.0"
  ln -s libcmocka.so.0 "$out/lib/libcmocka.so"
}

# The wheel is py3-none-manylinux; which manylinux tag a release carries
# varies, so all of the GPU machine's are accepted.
fetch_nccl_wheel() {
  python3 -m pip download --no-deps --only-binary=:all: \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_18_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64 --python-version 3.12 \
    -d "$1" "nvidia-nccl-cu13==$nccl_version"
}

# ncclGetVersion needs no GPU, so this checks here that the shrunk library
# still loads and is the version asked for.
check_nccl() {
  readelf -h "$1" >/dev/null
  nm -D "$1" | grep " ncclGetVersion$" >/dev/null
  command -v cc >/dev/null || { echo "nccl: no cc, version not checked"; return; }
  cat >"$tmp/version.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int v = 0;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  int (*get)(int *) = h ? (int (*)(int *))dlsym(h, "ncclGetVersion") : 0;
  if (!get || get(&v) != 0) { fprintf(stderr, "%s\n", h ? "ncclGetVersion failed" : dlerror()); return 1; }
  printf("%d\n", v);
  return 0;
}
EOF
  cc -o "$tmp/version" "$tmp/version.c" -ldl
  local want got
  want=$(echo "$nccl_version" | awk -F. '{ printf "%d", $1 * 10000 + $2 * 100 + $3 }')
  got=$("$tmp/version" "$1")
  echo "nccl: ncclGetVersion = $got"
  [ "$got" = "$want" ] || { echo "nccl: expected $want" >&2; exit 1; }
}

make_nccl() {
  local out=$deps/nccl/libnccl.so.2.xz
  if have "$out"; then
    echo "nccl: present, skipped"
    return
  fi
  fetch_nccl_wheel "$tmp/wheel"
  python3 - "$tmp"/wheel/*.whl "$tmp/libnccl.so.2" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/libnccl.so.2"))
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
EOF
  python3 "$root/scripts/shrink-fatbin.py" "$tmp/libnccl.so.2" "$tmp/shrunk.so.2" --keep-arch 90
  check_nccl "$tmp/shrunk.so.2"
  mkdir -p "$deps/nccl"
  # Written under a temporary name so that an interrupted run leaves no
  # truncated archive that a later run would skip as present.
  xz -T0 -6 -c "$tmp/shrunk.so.2" >"$out.part"
  mv "$out.part" "$out"
}

make_cmocka
make_nccl
echo "build-deps ($(du -sh "$deps" | cut -f1)):"
(cd "$deps" && find cmocka nccl \( -type f -o -type l \) -exec ls -lh {} + | awk '{ print "  " $5, $9, $10, $11 }')
