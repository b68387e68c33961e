#!/usr/bin/env bash
# Binding-plan scaling: user CPU time of `hyrun -n N --dry-run` for growing N, against the
# smallest N measured in the same run. Near-linear code gives a ratio close to N / N0;
# the quadratic grouping it replaced gave (N / N0)^2. Prints medians over REPS runs.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
REPS=${REPS:-5}
SIZES=${SIZES:-"10000 40000 160000"}
hyrun=$build/launcher/hyrun
[ -x "$hyrun" ] || { echo "missing $hyrun: run scripts/build.sh first" >&2; exit 1; }

# median_cpu_ms N : median user+system CPU milliseconds of one dry run (CPU time: the
# machine may be shared, wall time would measure the neighbours)
median_cpu_ms() {
  local times=() t
  for _ in $(seq "$REPS"); do
    t=$( { /usr/bin/time -f '%U %S' "$hyrun" -n "$1" --dry-run --bootstrap=none -- true >/dev/null; } 2>&1 | tail -1)
    times+=("$(echo "$t" | awk '{printf "%d", ($1 + $2) * 1000}')")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

echo "binding plan (hyrun --dry-run), median CPU of $REPS runs, $(date -u +%Y-%m-%d)"
printf '%8s | %8s | %10s | %12s\n' N "CPU ms" "ratio" "N ratio"
first_n=""; first_t=""
for n in $SIZES; do
  t=$(median_cpu_ms "$n")
  [ -z "$first_n" ] && { first_n=$n; first_ms=$t; first_t=$(( t > 0 ? t : 1 )); }
  printf '%8s | %8s | %10.1f | %12.1f\n' "$n" "$t" "$(echo "$t / $first_t" | bc -l)" "$(echo "$n / $first_n" | bc -l)"
  last_n=$n last_t=$t
done
bench_row "binding plan (\`bench/plan.sh\`), \`hyrun -n N --dry-run\`" "CPU at N = $last_n, median of $REPS" "$last_t ms" \
  "$(printf '%.1f' "$(echo "$last_t / $first_t" | bc -l)") x N = $first_n's ($first_ms ms); N ratio $(printf '%.1f' "$(echo "$last_n / $first_n" | bc -l)")"
