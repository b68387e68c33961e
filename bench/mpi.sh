#!/usr/bin/env bash
# MPI programs under hyrun against the MPI's own launcher, in the same run: Open MPI under
# hyrun's PMIx server against its mpirun (issue 23), or MPICH under hyrun's PMI-1 server
# against its mpirun, hydra (MPI=mpich, issue 38). MPI_Init and Init..Finalize (max over
# ranks) and wall time, median of REPS alternated runs per N; then a ping-pong curve between
# ranks 0 and 1 (one node: shared memory), medians of PP_REPS runs, with the ratio
# hyrun/launcher (bandwidth: higher is better).
#   bench/mpi.sh                  MPI=openmpi|mpich SIZES="2 4" REPS=5 PP_REPS=3
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
REPS=${REPS:-5}
PP_REPS=${PP_REPS:-3}
SIZES=${SIZES:-"2 4"}
MPI=${MPI:-openmpi}
hyrun=$build/launcher/hyrun
case $MPI in
openmpi)
  prog=$build/bench/mpi-pingpong launcher=mpirun what="Open MPI (PMIx server) and mpirun"
  command -v mpirun.openmpi >/dev/null || { echo "mpirun.openmpi not found (openmpi-bin)" >&2; exit 1; }
  version="Open MPI $(mpirun.openmpi --version 2>/dev/null | head -1 | awk '{print $NF}')"
  mpirun_cmd() { local n=$1; shift; mpirun.openmpi --allow-run-as-root --oversubscribe -np "$n" "$@"; } ;;
mpich)
  prog=$build/bench/mpich-pingpong launcher=hydra what="MPICH (PMI-1 server) and hydra (mpirun.mpich)"
  command -v mpirun.mpich >/dev/null || { echo "mpirun.mpich not found (mpich)" >&2; exit 1; }
  version="MPICH $(mpichversion 2>/dev/null | awk '/MPICH Version/ {print $NF}')"
  mpirun_cmd() { local n=$1; shift; mpirun.mpich -np "$n" "$@"; } ;;
*) echo "MPI=$MPI: expected openmpi or mpich" >&2; exit 2 ;;
esac
for b in "$hyrun" "$prog"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
hyrun_cmd() { local n=$1; shift; "$hyrun" -n "$n" -- "$@"; }

# shellcheck source=bench/mpi-tables.sh
. "$root/bench/mpi-tables.sh"
run() { local launcher=$1 n=$2 file=$3; shift 3; mpi_run "$file" "$out/log" "${launcher}_cmd" "$n" "$prog" "$@"; }

echo "MPI under hyrun: $what, $version, $(nproc) cores, median of $REPS alternated runs, $(date -u +%Y-%m-%d)"
launch_header N "hyrun/$launcher"
for n in $SIZES; do
  for _ in $(seq "$REPS"); do
    run hyrun "$n" "$out/h$n" --no-pingpong
    run mpirun "$n" "$out/m$n" --no-pingpong
  done
  launch_rows "$n" "$out/h$n" "$out/m$n" hyrun "$launcher"
done
launch_footer

echo
echo "ping-pong between ranks 0 and 1 of 2 (one node), median of $PP_REPS alternated runs"
for _ in $(seq "$PP_REPS"); do
  run hyrun 2 "$out/hp"
  run mpirun 2 "$out/mp"
done
pingpong_table "$out/hp" "$out/mp" hyrun "$launcher"
hb=$(pp_median "$out/hp.pp" 65536 4) mb=$(pp_median "$out/mp.pp" 65536 4)
if [ -n "$hb" ] && [ -n "$mb" ]; then
  bench_row "$version under hyrun against $launcher, one node (\`bench/mpi.sh\`)" \
    "64 KiB ping-pong between ranks 0 and 1, median of $PP_REPS" "$hb MB/s" "$(ratio "$hb" "$mb") times $launcher's ($mb MB/s)"
fi
for n in $SIZES; do :; done  # the last N of SIZES
hw=$(median_col "$out/h$n" 1) mw=$(median_col "$out/m$n" 1)
bench_row "the same" "wall time of a $n-rank job (init to finalize and exit), median of $REPS" "$hw ms" \
  "$(ratio "$hw" "$mw") of $launcher's ($mw ms)"
