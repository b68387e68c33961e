#!/usr/bin/env bash
# Runs shellcheck (settings in .shellcheckrc) over every shell file of the repository: the
# scripts, tests, benches, CI and the Slurm examples. Exits non-zero on any finding.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v shellcheck >/dev/null || { echo "shellcheck.sh: shellcheck is not installed (apt-get install shellcheck)" >&2; exit 1; }
mapfile -t files < <({ find scripts tests bench examples -type f \( -name '*.sh' -o -name '*.sbatch' \); echo .ci/run; } | sort)
shellcheck "${files[@]}"
echo "shellcheck.sh: ${#files[@]} files clean"
