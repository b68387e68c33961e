#!/usr/bin/env bash
# The main job on its embedded default: builds everything, then runs the elastic EP benchmark
# on this machine without any PMIx server (scripts/main-job.sh says what it runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh" >/dev/null
exec bash "$root/scripts/main-job.sh"
