#!/usr/bin/env bash
# Launch overhead of hyrun in local mode: wall time of `hyrun -n N` for a no-op program
# and for hello (UCX bootstrap, ring, barrier), against plain fork/exec of N processes
# measured in the same run. Prints a table of medians over REPS runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
REPS=${REPS:-9}
SIZES=${SIZES:-"1 2 4 8 16"}
hyrun=$build/launcher/hyrun; hello=$build/examples/hello; base=$build/bench/fork-exec-baseline
for b in "$hyrun" "$hello" "$base"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done

# median_ms CMD... : median wall time in milliseconds over REPS runs (each must succeed)
median_ms() {
  local times=() t0 t1
  for _ in $(seq "$REPS"); do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

echo "hyrun local-mode launch, median of $REPS runs, $(nproc) cores, $(date -u +%Y-%m-%d)"
printf '%4s | %14s | %16s | %6s | %16s | %6s\n' N "fork/exec (ms)" "hyrun no-op (ms)" ratio "hyrun hello (ms)" ratio
printf -- '-----+----------------+------------------+--------+------------------+-------\n'
for n in $SIZES; do
  b=$(median_ms "$base" "$n" /bin/true)
  h=$(median_ms "$hyrun" -n "$n" --bootstrap=none -- /bin/true)
  w=$(median_ms "$hyrun" -n "$n" -- "$hello" --bytes 65536)
  printf '%4s | %14s | %16s | %6.1f | %16s | %6.1f\n' "$n" "$b" "$h" "$(echo "$h / $b" | bc -l)" "$w" "$(echo "$w / $b" | bc -l)"
done
