#!/usr/bin/env bash
# The main job on its embedded default: builds everything, then runs the example job on
# this machine without any PMIx server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh" >/dev/null
echo "+ hyrun -n 4 -- hello"
exec "$build/launcher/hyrun" -n 4 -- "$build/examples/hello"
