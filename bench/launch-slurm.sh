#!/usr/bin/env bash
# Hybrid-mode launch on a real Slurm cluster (started here: scripts/slurm-cluster.sh, each
# node in its own network namespace, UCX over tcp): for k = 2, 4 nodes and n = 1, 2, 4, 8
# ranks per node, the time until every rank is connected and until the job ends, for
#   srun -N k --ntasks-per-node=1 hyrun -n n -- hello
# against srun starting the same k*n ranks natively (--ntasks-per-node=n) with a program
# that exchanges UCX addresses through PMIx (bench/pmix_ucx_hello.cpp), in the same run,
# as a ratio; also the PMIx fence alone (pmix-probe). Medians over REPS runs. Needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
REPS=${REPS:-5}
NODES=${NODES:-"2 4"}
PER_NODE=${PER_NODE:-"1 2 4 8"}
hyrun=$build/launcher/hyrun; hello=$build/examples/hello
native=$build/bench/pmix-ucx-hello; probe=$build/tests/pmix/pmix-probe
for b in "$hyrun" "$hello" "$native" "$probe"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh" >&2; exit 1; }; done

cluster=$(bash "$root/scripts/slurm-cluster.sh" up auto 4 8 2>/dev/null | tail -1)
trap 'bash "$root/scripts/slurm-cluster.sh" down "$cluster" >/dev/null 2>&1' EXIT
# shellcheck source=/dev/null  # written by scripts/slurm-cluster.sh up
. "$cluster/cluster.env"
export UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]}'; }

# measure CMD...: one run; prints "connect_ms total_ms" (connect = the last rank's connected_ns)
measure() {
  local t0 out t1 last
  t0=$(now_ns)
  out=$(timeout 120 "$@" 2>/dev/null) || { echo "failed: $*" >&2; exit 1; }
  t1=$(now_ns)
  last=$(printf '%s\n' "$out" | sed -n 's/^connected_ns=\([0-9]*\).*/\1/p' | sort -n | tail -1)
  [ -n "$last" ] || { echo "no connected_ns from: $*" >&2; exit 1; }
  echo "$(( (last - t0) / 1000000 )) $(( (t1 - t0) / 1000000 ))"
}

# stats CMD...: medians over REPS runs: "connect_ms total_ms"
stats() {
  local c=() t=() m
  for _ in $(seq "$REPS"); do m=$(measure "$@") || exit 1; c+=("${m% *}"); t+=("${m#* }"); done
  echo "$(printf '%s\n' "${c[@]}" | median) $(printf '%s\n' "${t[@]}" | median)"
}

echo "hybrid launch on a Slurm 22.05 cluster of simulated nodes ($HYRUN_CLUSTER_MODE mode, UCX_TLS=$UCX_TLS), $(nproc) cores, median of $REPS, $(date -u +%Y-%m-%d)"
printf '%5s %3s %5s | %12s %12s | %12s %12s | %7s %7s\n' nodes n ranks "hyrun conn" "hyrun end" "native conn" "native end" "conn x" "end x"
for k in $NODES; do
  for n in $PER_NODE; do
    h=$(stats srun --mpi=pmix -N "$k" --ntasks-per-node=1 "$hyrun" -n "$n" -- "$hello" --timestamps --bytes 1024)
    s=$(stats srun --mpi=pmix -N "$k" --ntasks-per-node="$n" "$native")
    printf '%5s %3s %5s | %9s ms %9s ms | %9s ms %9s ms | %7.2f %7.2f\n' "$k" "$n" $((k * n)) "${h% *}" "${h#* }" "${s% *}" "${s#* }" \
      "$(echo "${h% *} / ${s% *}" | bc -l)" "$(echo "${h#* } / ${s#* }" | bc -l)"
  done
done
echo
echo "PMIx fence alone (pmix-probe fence_ms, max over ranks; median of $REPS):"
for k in $NODES; do
  f=()
  for _ in $(seq "$REPS"); do
    f+=("$(timeout 60 srun --mpi=pmix -N "$k" --ntasks-per-node=1 "$probe" 2>/dev/null | sed -n 's/.*fence_ms=\([0-9]*\).*/\1/p' | sort -n | tail -1)")
  done
  echo "  $k nodes: $(printf '%s\n' "${f[@]}" | median) ms"
done
