#!/usr/bin/env bash
# Lint (ctest lint.docs-names-every-source): every tracked source file (.cpp .hpp .cu .cuh .py)
# of launcher/, worker/ and common/ is named by its stem (the file name without its last
# extension, as a word of its own: `name.*`, `name.hpp`, `name`) in the tracked docs: docs/,
# README.md and every README.md of the tree. Prints each file no doc names and exits 1;
# else prints the count and exits 0. Needs only bash, grep and `git ls-files`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mapfile -t docs < <(git ls-files -- docs README.md '*README.md' | sort -u)
mapfile -t sources < <(git ls-files -- launcher worker common | grep -E '\.(cpp|hpp|cu|cuh|py)$')
if ((${#docs[@]} == 0 || ${#sources[@]} == 0)); then
  echo "docs-check.sh: git ls-files found no docs or no sources under $root" >&2
  exit 1
fi

missing=0
for file in "${sources[@]}"; do
  base=${file##*/}
  stem=${base%.*}
  # The stem as a word: not inside a longer lower-case name (snake_case), e.g. `task` is not
  # named by `task_resources`. Regex characters in the stem are escaped.
  pattern="(^|[^a-z_])$(sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$stem")(\.|[^a-z_]|$)"
  if ! grep -qIE -- "$pattern" "${docs[@]}"; then
    echo "docs-check.sh: no doc names $file (give it a row with its role in docs/architecture.md or its folder's README)"
    missing=$((missing + 1))
  fi
done

if ((missing > 0)); then
  echo "docs-check.sh: $missing of ${#sources[@]} source files named in no doc" >&2
  exit 1
fi
echo "docs-check.sh: ${#sources[@]} source files, each named in the docs"
