#!/usr/bin/env bash
# CTest fixture of the cluster suite: `up` starts the 4-node test cluster and records its
# directory in $HYRUN_CLUSTER_POINTER; `down` stops it and removes the record.
set -euo pipefail
: "${HYRUN_CLUSTER_POINTER:?set by CTest}" "${HYRUN_SLURM_CLUSTER_SCRIPT:?set by CTest}"
cluster=$HYRUN_SLURM_CLUSTER_SCRIPT

stop_recorded() {
  [ -f "$HYRUN_CLUSTER_POINTER" ] || return 0
  local dir; dir=$(cat "$HYRUN_CLUSTER_POINTER")
  if [ -d "$dir" ]; then "$cluster" down "$dir"; fi
  rm -f "$HYRUN_CLUSTER_POINTER"
}

case ${1:-} in
  up)
    stop_recorded   # a cluster left by an interrupted run (ctest killed before cleanup)
    start=$(date +%s%N)
    dir=$(AUTH=${HYRUN_TEST_CLUSTER_AUTH:-munge} "$cluster" up "${HYRUN_TEST_CLUSTER_MODE:-auto}" 4 4)
    echo "$dir" > "$HYRUN_CLUSTER_POINTER"
    cat "$dir/cluster.env"
    echo "cluster up in $(( ($(date +%s%N) - start) / 1000000 )) ms"
    ;;
  down)
    start=$(date +%s%N)
    stop_recorded
    echo "cluster down in $(( ($(date +%s%N) - start) / 1000000 )) ms"
    ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
