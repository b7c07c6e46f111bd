#!/usr/bin/env bash
# Install what building and testing qcoll needs, on Debian, when missing:
# a C toolchain, CMake, cmocka (C unit tests), Python with numpy and pytest.
set -euo pipefail

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v cc >/dev/null || need_apt+=(build-essential)
[ -f /usr/include/cmocka.h ] || need_apt+=(libcmocka-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "# installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

missing_py=()
python3 -c "import numpy" 2>/dev/null || missing_py+=(numpy)
python3 -c "import pytest" 2>/dev/null || missing_py+=(pytest)
if [ ${#missing_py[@]} -gt 0 ]; then
  echo "# installing Python packages: ${missing_py[*]}"
  python3 -m pip install -q "${missing_py[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing_py[@]}"
fi
