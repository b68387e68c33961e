#!/usr/bin/env bash
# Runs clang-tidy (checks in .clang-tidy) over the project's C++ sources, as compiled in a
# configured build tree (its compile_commands.json; CUDA files are left out: clang-tidy
# cannot take nvcc's flags). Not part of CI: a full run takes about an hour of CPU (see
# docs/architecture.md, "Tooling"). Prints the findings; exits 1 if there are any.
#   scripts/tidy.sh [FILE-REGEX]      e.g. scripts/tidy.sh 'launcher/.*'
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${TIDY_BUILD_DIR:-$root/build-tidy}
command -v run-clang-tidy >/dev/null || { echo "tidy.sh: run-clang-tidy is not installed (apt-get install clang-tidy)" >&2; exit 1; }
# Configure only: the generated headers are all clang-tidy needs, nothing is compiled.
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$dir.configure.log" 2>&1 \
  || { cat "$dir.configure.log"; exit 1; }
filter=${1:-.*}
out=$(run-clang-tidy -quiet -p "$dir" -j "$(nproc)" "$root/($filter)\\.cpp\$" 2>/dev/null || true)
# run-clang-tidy colours its output whatever the terminal: strip the escapes first.
findings=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^/.*: (warning|error): ' | sort -u || true)
if [ -n "$findings" ]; then
  printf '%s\n' "$findings"
  echo "tidy.sh: $(printf '%s\n' "$findings" | wc -l) findings" >&2
  exit 1
fi
echo "tidy.sh: no findings"
