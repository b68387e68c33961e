#!/usr/bin/env bash
# MPI programs under hyrun's PMIx server against Open MPI's own mpirun, in the same run
# (issue 23): MPI_Init and Init..Finalize (max over ranks) and wall time, median of REPS
# alternated runs per N; then a ping-pong curve between ranks 0 and 1 (one node: shared
# memory), medians of PP_REPS runs, with the ratio hyrun/mpirun (bandwidth: higher is better).
#   bench/mpi.sh                  SIZES="2 4" REPS=5 PP_REPS=3
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
REPS=${REPS:-5}
PP_REPS=${PP_REPS:-3}
SIZES=${SIZES:-"2 4"}
hyrun=$build/launcher/hyrun; prog=$build/bench/mpi-pingpong
for b in "$hyrun" "$prog"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
command -v mpirun >/dev/null || { echo "mpirun not found (openmpi-bin)" >&2; exit 1; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
mpirun_cmd() { local n=$1; shift; mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"; }
hyrun_cmd() { local n=$1; shift; "$hyrun" -n "$n" -- "$@"; }

# run LAUNCHER N FILE ARGS... : one run; appends "wall_ms init_max run_max" to FILE
run() {
  local launcher=$1 n=$2 file=$3; shift 3
  local t0 t1 log=$out/log
  t0=$(date +%s%N)
  "${launcher}_cmd" "$n" "$prog" "$@" >"$log" 2>&1 || { echo "failed: $launcher -n $n:"; cat "$log"; exit 1; } >&2
  t1=$(date +%s%N)
  awk -v wall=$(( (t1 - t0) / 1000000 )) '/^times rank/ { if ($5 > i) i = $5; if ($7 > r) r = $7 }
    END { printf "%d %.1f %.1f\n", wall, i, r }' "$log" >>"$file"
  grep '^pingpong' "$log" >>"$file.pp" || true
}
median_col() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "MPI under hyrun (PMIx server) and mpirun, Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), $(nproc) cores, median of $REPS alternated runs, $(date -u +%Y-%m-%d)"
printf '%3s | %-7s | %10s | %18s | %8s | %s\n' N launcher "MPI_Init ms" "Init..Finalize ms" "wall ms" "wall hyrun/mpirun"
printf -- '----+---------+-------------+--------------------+----------+------------------\n'
for n in $SIZES; do
  for _ in $(seq "$REPS"); do
    run hyrun "$n" "$out/h$n" --no-pingpong
    run mpirun "$n" "$out/m$n" --no-pingpong
  done
  for l in hyrun mpirun; do
    f=$out/${l:0:1}$n
    ratio=""
    [ "$l" = mpirun ] && ratio=$(echo "$(median_col "$out/h$n" 1) / $(median_col "$out/m$n" 1)" | bc -l | xargs printf '%.2f')
    printf '%3s | %-7s | %11s | %18s | %8s | %s\n' "$n" "$l" "$(median_col "$f" 2)" "$(median_col "$f" 3)" "$(median_col "$f" 1)" "$ratio"
  done
done

echo
echo "ping-pong between ranks 0 and 1 of 2 (one node), median of $PP_REPS alternated runs"
for _ in $(seq "$PP_REPS"); do
  run hyrun 2 "$out/hp"
  run mpirun 2 "$out/mp"
done
printf '%9s | %14s | %15s | %5s | %14s | %15s | %5s\n' bytes "hyrun lat us" "mpirun lat us" ratio "hyrun MB/s" "mpirun MB/s" ratio
printf -- '----------+----------------+-----------------+-------+----------------+-----------------+------\n'
while read -r bytes; do
  med() { awk -v b="$bytes" -v c="$2" '$2 == b {print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  hl=$(med "$out/hp.pp" 3); ml=$(med "$out/mp.pp" 3); hb=$(med "$out/hp.pp" 4); mb=$(med "$out/mp.pp" 4)
  printf '%9s | %14s | %15s | %5.2f | %14s | %15s | %5.2f\n' "$bytes" "$hl" "$ml" "$(echo "$hl / $ml" | bc -l)" "$hb" "$mb" "$(echo "$hb / $mb" | bc -l)"
done < <(awk '{print $2}' "$out/hp.pp" | sort -n -u)
