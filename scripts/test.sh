#!/usr/bin/env bash
# The whole test suite: builds everything, then runs every test (unit, local launches,
# install, lint, and the real Slurm / Open MPI clusters) with CTest, then the sanitizer pass
# (scripts/sanitize.sh). Extra arguments go to ctest and leave the sanitizer pass out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j 2 "$@"
# The sanitizer pass, for the whole suite only (CI): HYRUN_SANITIZE_PASS=0 skips it, =1 forces it.
sanitize=${HYRUN_SANITIZE_PASS:-auto}
if [ "$sanitize" = 1 ] || { [ "$sanitize" = auto ] && [ $# -eq 0 ]; }; then
  bash "$root/scripts/sanitize.sh"
fi
