# shellcheck shell=bash
# Sourced by every bench that prints a table, first, before it reads its options (so that it
# keeps the command line as run): the repository's root ($root) and the build to measure
# ($build: $BUILD_DIR, else build/ of the root), and the bench's row. bench_row BENCHMARK METRIC VALUE REFERENCE prints one row of the
# current-numbers table of docs/performance.md, in its columns:
#   | benchmark | metric | value | against the reference of the same run | machine | date | commit | command |
# the first call after the line "current-numbers row (docs/performance.md):".
#   machine  "N-core HOST" ($(nproc), $(hostname)), or $bench_row_machine when the bench sets it
#   date     today, UTC
#   commit   the checkout the bench runs from (git rev-parse --short HEAD, "+dirty" when its
#            tracked files differ from HEAD), or $bench_row_commit when the bench sets it (a GPU
#            bundle's: bench_row_bundle_commit DIR); a BUILD_DIR of another tree is in the command
#   command  the bench as run from the repository root, after the variables of the environment
#            that the benches read (REPS=11 bench/launch.sh --mpirun)
# A "|" in a field is written "\|" (the table's cells).

bench_row_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2034  # for the bench that sources this file
root=$bench_row_root build=${BUILD_DIR:-$bench_row_root/build}
# The script's own arguments: sourced without arguments, this file sees the script's.
bench_row_words=("bench/${0##*/}" "$@")
bench_row_env="BUILD_DIR REPS SIZES PP_REPS MPI N TLS TOKENS HIDDEN TOPK EXPERTS ITERS WARMUP PERF_ITERS REPEATS ARGS PLANS RUNS HYRUN_CLUSTER_DIR"
bench_row_printed=0

# bench_usage: the bench's header comment (line 2 to the first line that is not a comment),
# without the comment marks: its usage, whatever its length.
bench_usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# bench_row_quote WORD: WORD as a shell word (in double quotes unless it needs none).
bench_row_quote() {
  local w=$1
  if [[ $w =~ ^[A-Za-z0-9_./:=,+@%^-]+$ ]]; then
    printf '%s' "$w"
  else
    w=${w//\\/\\\\}
    w=${w//\"/\\\"}
    w=${w//\$/\\\$}
    printf '"%s"' "$w"
  fi
}

# bench_row_bundle_commit DIR: bench_row_commit from a GPU bundle's MANIFEST ("commit: HASH
# (modified)", scripts/gpu-bundle.sh).
bench_row_bundle_commit() {
  local line
  line=$(sed -n 's/^commit: //p' "$1/MANIFEST" 2>/dev/null | head -1)
  [ -n "$line" ] || return 0
  bench_row_commit=${line:0:7}
  [[ $line != *modified* ]] || bench_row_commit+="+dirty"
}

bench_row() {
  [ $# -eq 4 ] || { echo "bench_row: expected BENCHMARK METRIC VALUE REFERENCE, got $# fields" >&2; return 2; }
  local machine commit cmd="" v w out="|"
  machine=${bench_row_machine:-"$(nproc)-core $(hostname)"}
  commit=${bench_row_commit:-}
  if [ -z "$commit" ]; then
    commit=$(git -C "$bench_row_root" rev-parse --short HEAD 2>/dev/null) || commit=unknown
    if [ "$commit" != unknown ] && ! GIT_OPTIONAL_LOCKS=0 git -C "$bench_row_root" diff --quiet HEAD -- 2>/dev/null; then
      commit+="+dirty"
    fi
  fi
  for v in $bench_row_env; do
    if w=$(printenv "$v") && [ -n "$w" ]; then cmd+="$v=$(bench_row_quote "$w") "; fi
  done
  for w in "${bench_row_words[@]}"; do cmd+="$(bench_row_quote "$w") "; done
  if [ "$bench_row_printed" = 0 ]; then
    echo
    echo "current-numbers row (docs/performance.md):"
    bench_row_printed=1
  fi
  for v in "$@" "$machine" "$(date -u +%Y-%m-%d)" "$commit" "\`${cmd% }\`"; do out+=" ${v//|/\\|} |"; done
  echo "$out"
}
