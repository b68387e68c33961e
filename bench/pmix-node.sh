#!/usr/bin/env bash
# PMIx on one node with many ranks: `hyrun -n N -- pmix-bare-client put 500` (each rank puts
# 500 bytes, one collect-data fence, every rank's value read back: MPI_Init's modex), and
# what it costs hyrun itself, its PMIx server and its door (docs/security.md) serving N ranks.
# Prints, for each N, the medians of hyrun's own CPU (bench/own-cpu: user + system of the
# hyrun process, 10 ms ticks) and of the job's wall time, against the hyrun of another build
# run alternated with it in the same rounds.
#
#   bench/pmix-node.sh --reference BUILD [--ranks "N..."] [--reps K]
#     --reference  the build to compare with (its launcher/hyrun; the client is this build's)
#     --ranks      default "64 128 256"
#     --reps       rounds, each runs both builds once (default 3)
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
usage() {
  bench_usage >&2
  exit 2
}
# shellcheck source=bench/options.sh
. "$(dirname "$0")/options.sh"
reference="" ranks="64 128 256" reps=3
bench_options "--reference:reference --ranks:ranks --reps:reps" "$@"
[ -n "$reference" ] || usage
reference=$(cd "$reference" && pwd)
client=$build/tests/integration/pmix-bare-client own_cpu=$build/bench/own-cpu
for b in "$build/launcher/hyrun" "$reference/launcher/hyrun" "$client" "$own_cpu"; do
  [ -x "$b" ] || { echo "pmix-node: missing $b: build it first (scripts/build.sh)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run BUILD N: "<wall ms> <hyrun CPU ms>" of one job (it must succeed)
run() {
  local t0 t1
  rm -f "$work/cpu"
  t0=$(date +%s%N)
  "$own_cpu" "$work/cpu" -- "$1/launcher/hyrun" -n "$2" -- "$client" put 500 >/dev/null 2>"$work/err" \
    || { echo "pmix-node: failed: $1/launcher/hyrun -n $2 (its output: $(tail -3 "$work/err"))" >&2; exit 1; }
  t1=$(date +%s%N)
  echo "$(((t1 - t0) / 1000000)) $(awk '{print $2}' "$work/cpu")"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "hyrun -n N -- pmix-bare-client put 500 on one node, $(nproc) cores, median of $reps alternated rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "reference: the hyrun of $reference"
header="    N |  hyrun CPU ms | ref CPU ms | this/ref |   wall ms | ref wall ms | this/ref"
echo "$header"
echo "$header" | sed 's/[^|]/-/g; s/|/+/g'
for n in $ranks; do
  : >"$work/this" && : >"$work/ref"
  for _ in $(seq "$reps"); do
    run "$build" "$n" >>"$work/this"
    run "$reference" "$n" >>"$work/ref"
  done
  cpu=$(awk '{print $2}' "$work/this" | median) ref_cpu=$(awk '{print $2}' "$work/ref" | median)
  wall=$(awk '{print $1}' "$work/this" | median) ref_wall=$(awk '{print $1}' "$work/ref" | median)
  printf '%5s | %13s | %10s | %8s | %9s | %11s | %8s\n' "$n" "$cpu" "$ref_cpu" "$(ratio "$cpu" "$ref_cpu")" \
    "$wall" "$ref_wall" "$(ratio "$wall" "$ref_wall")"
done
bench_row "PMIx on one node (\`bench/pmix-node.sh\`), $n ranks of pmix-bare-client put 500" \
  "hyrun's own CPU / the job's wall time, median of $reps" "$cpu ms / $wall ms" \
  "the reference build: $ref_cpu ms / $ref_wall ms ($(ratio "$cpu" "$ref_cpu") and $(ratio "$wall" "$ref_wall"))"
