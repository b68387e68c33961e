#!/usr/bin/env bash
# The whole test suite: builds everything, then runs every test (unit, local launches,
# install, and the real Slurm / Open MPI clusters) with CTest. Extra arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j 2 "$@"
