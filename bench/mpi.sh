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

# shellcheck source=bench/mpi-tables.sh
. "$root/bench/mpi-tables.sh"
run() { local launcher=$1 n=$2 file=$3; shift 3; mpi_run "$file" "$out/log" "${launcher}_cmd" "$n" "$prog" "$@"; }

echo "MPI under hyrun (PMIx server) and mpirun, Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), $(nproc) cores, median of $REPS alternated runs, $(date -u +%Y-%m-%d)"
launch_header N hyrun/mpirun
for n in $SIZES; do
  for _ in $(seq "$REPS"); do
    run hyrun "$n" "$out/h$n" --no-pingpong
    run mpirun "$n" "$out/m$n" --no-pingpong
  done
  launch_rows "$n" "$out/h$n" "$out/m$n" hyrun mpirun
done

echo
echo "ping-pong between ranks 0 and 1 of 2 (one node), median of $PP_REPS alternated runs"
for _ in $(seq "$PP_REPS"); do
  run hyrun 2 "$out/hp"
  run mpirun 2 "$out/mp"
done
pingpong_table "$out/hp" "$out/mp" hyrun mpirun
