#!/usr/bin/env bash
# Formats the C++ and CUDA sources with clang-format (.clang-format), in place.
#   scripts/format.sh           format every source file
#   scripts/format.sh --check   change nothing; list the files that are not formatted, exit 1 if any
# The result depends on clang-format's major version: the project uses Debian 12's (14).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "format.sh: unknown argument '$1'; use no argument (format in place) or --check" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "format.sh: clang-format is not installed (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(find common launcher worker tests bench examples -type f \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
if [ "$check" -eq 0 ]; then
  clang-format -i "${files[@]}"
  echo "format.sh: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'format.sh: not formatted: %s\n' "${bad[@]}" >&2
  echo "format.sh: ${#bad[@]} of ${#files[@]} files need scripts/format.sh" >&2
  exit 1
fi
echo "format.sh: ${#files[@]} files formatted"
