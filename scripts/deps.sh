#!/usr/bin/env bash
# Install what building and testing qcoll needs, on Debian, when missing:
# a C toolchain, CMake, cmocka (C unit tests), pkg-config, Python with venv
# (the wheel check), numpy and pytest.
#   scripts/deps.sh          everything (the test command)
#   scripts/deps.sh bench    only what building the library and its tools
#                            needs (the main job): a C toolchain and CMake
set -euo pipefail
mode=${1:-all}

apt_install() {
  [ $# -gt 0 ] || return 0
  echo "# installing Debian packages: $*"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v cc >/dev/null || need_apt+=(build-essential)
if [ "$mode" != bench ]; then
  [ -f /usr/include/cmocka.h ] || need_apt+=(libcmocka-dev)
  command -v pkg-config >/dev/null || need_apt+=(pkg-config)
  command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
  # Debian's python3 makes virtual environments only with python3-venv.
  python3 -c "import ensurepip, venv" 2>/dev/null || need_apt+=(python3-venv)
fi
apt_install "${need_apt[@]}"
[ "$mode" = bench ] && exit 0

missing_py=()
python3 -c "import numpy" 2>/dev/null || missing_py+=(numpy)
python3 -c "import pytest" 2>/dev/null || missing_py+=(pytest)
if [ ${#missing_py[@]} -gt 0 ]; then
  echo "# installing Python packages: ${missing_py[*]}"
  python3 -m pip install -q "${missing_py[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing_py[@]}"
fi
