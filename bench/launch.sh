#!/usr/bin/env bash
# Launch overhead of hyrun in local mode: wall time of `hyrun -n N` for a no-op program
# and for hello (UCX bootstrap, ring, barrier), against plain fork/exec of N processes
# measured in the same run. Prints a table of medians over REPS runs; every command of a
# row runs once per round, in turn, so that all of them meet the same load.
#
#   bench/launch.sh [--reference BUILD_DIR] [--mpirun]
#     --reference DIR  also hyrun's hello from another build (e.g. of an older commit:
#                      git worktree add ../old COMMIT && cmake -S ../old -B ../old/build &&
#                      cmake --build ../old/build --target hyrun hello), and the ratio this/that
#     --mpirun         also Open MPI's MPI_Init..MPI_Finalize under mpirun -np N
#                      (bench/mpi-pingpong --no-pingpong), and the ratio hyrun hello/mpirun
#   REPS (default 9) and SIZES (default "1 2 4 8 16") from the environment.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
REPS=${REPS:-9}
SIZES=${SIZES:-"1 2 4 8 16"}
reference="" with_mpirun=0
while [ $# -gt 0 ]; do
  case $1 in
    --reference) reference=$(cd "$2" && pwd); shift 2 ;;
    --mpirun) with_mpirun=1; shift ;;
    *) echo "usage: bench/launch.sh [--reference BUILD_DIR] [--mpirun]" >&2; exit 2 ;;
  esac
done
hyrun=$build/launcher/hyrun; hello=$build/examples/hello; base=$build/bench/fork-exec-baseline
need=("$hyrun" "$hello" "$base")
[ -z "$reference" ] || need+=("$reference/launcher/hyrun" "$reference/examples/hello")
[ "$with_mpirun" = 0 ] || need+=("$build/bench/mpi-pingpong")
for b in "${need[@]}"; do [ -x "$b" ] || { echo "missing $b: build it first (scripts/build.sh)" >&2; exit 1; }; done
[ "$with_mpirun" = 0 ] || command -v mpirun >/dev/null || { echo "mpirun not found (openmpi-bin)" >&2; exit 1; }

# wall_us CMD... : wall time of one run in microseconds (it must succeed)
wall_us() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
median_ms() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'; }
ratio() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }

header="   N | fork/exec (ms) | hyrun no-op (ms) |  ratio | hyrun hello (ms) |  ratio"
[ -z "$reference" ] || header+=" | reference hello (ms) | this/ref"
[ "$with_mpirun" = 0 ] || header+=" | mpirun MPI hello (ms) | hello/mpirun"
echo "hyrun local-mode launch, median of $REPS rounds, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
[ -z "$reference" ] || echo "reference: the build in $reference"
echo "$header"
echo "$header" | sed 's/[^|]/-/g; s/|/+/g'
for n in $SIZES; do
  b=() h=() w=() r=() m=()
  for _ in $(seq "$REPS"); do
    b+=("$(wall_us "$base" "$n" /bin/true)")
    h+=("$(wall_us "$hyrun" -n "$n" --bootstrap=none -- /bin/true)")
    w+=("$(wall_us "$hyrun" -n "$n" -- "$hello" --bytes 65536)")
    [ -z "$reference" ] || r+=("$(wall_us "$reference/launcher/hyrun" -n "$n" -- "$reference/examples/hello" --bytes 65536)")
    [ "$with_mpirun" = 0 ] \
      || m+=("$(wall_us mpirun --allow-run-as-root --oversubscribe -np "$n" "$build/bench/mpi-pingpong" --no-pingpong)")
  done
  bm=$(median_ms "${b[@]}") hm=$(median_ms "${h[@]}") wm=$(median_ms "${w[@]}")
  line=$(printf '%4s | %14s | %16s | %6s | %16s | %6s' "$n" "$bm" "$hm" "$(ratio "$hm" "$bm")" "$wm" "$(ratio "$wm" "$bm")")
  if [ -n "$reference" ]; then rm_=$(median_ms "${r[@]}"); line+=$(printf ' | %20s | %8s' "$rm_" "$(ratio "$wm" "$rm_")"); fi
  if [ "$with_mpirun" = 1 ]; then mm=$(median_ms "${m[@]}"); line+=$(printf ' | %21s | %12s' "$mm" "$(ratio "$wm" "$mm")"); fi
  echo "$line"
  # The row: N = 8, or the largest N when SIZES has no 8.
  if [ "$n" = 8 ] || [ "${row_n:-}" != 8 ]; then
    row_n=$n
    row_ref="$(ratio "$hm" "$bm") / $(ratio "$wm" "$bm") of fork/exec ($bm ms)"
    [ -z "$reference" ] || row_ref+="; hello $(ratio "$wm" "$rm_") of the reference's ($rm_ ms)"
    [ "$with_mpirun" = 0 ] || row_ref+="; $(ratio "$wm" "$mm") of mpirun's MPI hello ($mm ms)"
    row_value="$hm / $wm ms"
  fi
done
bench_row "local launch (\`bench/launch.sh\`), N = $row_n" "no-op / hello wall time, median of $REPS" "$row_value" "$row_ref"
