#!/usr/bin/env bash
# Calls 7 and after: on an H200 the issues' goal tables (goals.sh), else the
# GPU suite in two parts (suite.sh, PART=1 or 2).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "${FORCE_SUITE:-0}" != 1 ]; then
  exec bash "$here/goals.sh"
fi
exec bash "$here/suite.sh"
