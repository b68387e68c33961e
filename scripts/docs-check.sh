#!/usr/bin/env bash
# Lint (ctest lint.docs-names-every-source): every tracked source file (.cpp .hpp .cu .cuh .py)
# of launcher/, worker/ and common/ is named as a file in the tracked docs (docs/, README.md
# and every README.md of the tree): its stem (the file name without its last extension), not
# inside a longer name, then a dot and an extension, `*` or a brace list (`name.*`,
# `name.hpp`, `name.{hpp,cpp}`). A bare word does not count: a stem such as `main`, `value`
# or `status` is a word any text has. (A stem that files of several folders share counts
# once named; the docs' tables name such files with their folder.) Prints each file no doc
# names and exits 1; else prints the count and exits 0. Needs only bash, grep and `git ls-files`.
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
  # The stem as a file name: not the end of a longer name (`task` is not named by
  # `node_task.*`), followed by a dot and an extension, `*` or a brace list. Regex
  # characters in the stem are escaped.
  pattern="(^|[^a-zA-Z0-9_])$(sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$stem")\.(\*|[a-z]+|\{[a-z,]+\})"
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
