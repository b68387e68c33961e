#!/usr/bin/env bash
# Lint (ctest lint.env-names-in-the-contract): every HYRUN_* variable name that a source of
# launcher/, worker/ or common/ spells out is spelled in common/include/hyrun/common/
# env_contract.hpp alone, "the one definition of every variable name"; the others use its
# env::k* constants. (Comments may name a variable: only string literals count.) Prints each
# literal found elsewhere and exits 1; else exits 0. Needs only bash, grep and `git ls-files`.
set -euo pipefail
cd "$(dirname "$0")/.."
contract=common/include/hyrun/common/env_contract.hpp
mapfile -t sources < <(git ls-files -- launcher worker common | grep -E '\.(cpp|hpp|cu|cuh|h)$' | grep -vx "$contract")
[ ${#sources[@]} -gt 0 ] || { echo "env-names-check.sh: git ls-files found no sources" >&2; exit 1; }
# A string literal that is a HYRUN_ name (or starts with one, "HYRUN_X=..."), outside // comments.
found=$(grep -nE '"HYRUN_[A-Z0-9_]+' "${sources[@]}" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [ -n "$found" ]; then
  echo "$found"
  echo "env-names-check.sh: HYRUN_* names spelled outside $contract (use its env::k* constants, or add one there)" >&2
  exit 1
fi
echo "env-names-check.sh: ${#sources[@]} sources, every HYRUN_* name from $contract"
