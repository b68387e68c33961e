# shellcheck shell=bash
# Sourced by cluster tests (bash). Gives them the test cluster and a few checks.
#
# In:  HYRUN_CLUSTER_POINTER (file holding the cluster directory, set by CTest) or
#      HYRUN_CLUSTER_DIR (the directory printed by `scripts/slurm-cluster.sh up`).
# Out: SLURM_CONF and HYRUN_CLUSTER_{DIR,MODE,NODES,CPUS,NETNS,UCX_TLS,UCX_NET_DEVICES}
#      exported (see scripts/slurm-cluster.sh write_env), and the functions below.
# A test that runs without the cluster (mpirun only) may source this with neither set:
# then only the functions are defined.
set -euo pipefail

if [ -z "${HYRUN_CLUSTER_DIR:-}" ] && [ -n "${HYRUN_CLUSTER_POINTER:-}" ] && [ -f "$HYRUN_CLUSTER_POINTER" ]; then
  HYRUN_CLUSTER_DIR=$(cat "$HYRUN_CLUSTER_POINTER")
fi
if [ -n "${HYRUN_CLUSTER_DIR:-}" ]; then
  [ -f "$HYRUN_CLUSTER_DIR/cluster.env" ] || { echo "FAIL: no test cluster in '$HYRUN_CLUSTER_DIR'" >&2; exit 1; }
  # shellcheck disable=SC1091
  . "$HYRUN_CLUSTER_DIR/cluster.env"
fi

fail() { echo "FAIL: $*" >&2; exit 1; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Runs "$@" with a hard limit of $1 seconds (then KILL 5 s later); sets RUN_RC, RUN_MS and
# RUN_OUT (stdout+stderr), echoes the output. Never fails by itself.
run_bounded() {
  local limit=$1 start; shift
  start=$(now_ms)
  set +e
  RUN_OUT=$(timeout -k 5 "$limit" "$@" 2>&1)
  RUN_RC=$?
  set -e
  RUN_MS=$(( $(now_ms) - start ))
  printf '%s\n' "$RUN_OUT"
  echo "[rc=$RUN_RC after ${RUN_MS} ms: $*]"
}

# The "pmix-probe rank=..." lines of RUN_OUT, sorted by rank.
probe_lines() { printf '%s\n' "$RUN_OUT" | grep '^pmix-probe rank=' | sort -t= -k2 -n || true; }
# Distinct values of field $1 (rank, host, node, ...) over the probe lines.
probe_distinct() { probe_lines | grep -o " $1=[^ ]*" | sort -u | wc -l; }

# Runs the pmix-probe job "$@" (bounded by $1 seconds) and fails unless its launcher, $3,
# exited 0 and the job printed $2 probe lines (one per process).
run_probe_job() {
  local limit=$1 lines=$2; shift 2
  run_bounded "$limit" "$@"
  [ "$RUN_RC" = 0 ] || fail "$1 exited $RUN_RC"
  [ "$(probe_lines | wc -l)" = "$lines" ] || fail "expected $lines probe lines"
}

# PIDs whose executable is $1 (exact path: other builds' probes are not ours).
pids_of_exe() {
  local want p; want=$(readlink -f "$1")
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}

# Processes inside the cluster's namespaces other than its slurmd daemons.
pids_in_cluster_netns() {
  local ns pid daemons=" "
  for pid in "$HYRUN_CLUSTER_DIR"/run/slurmd-*.pid; do daemons+="$(cat "$pid") "; done
  for ns in ${HYRUN_CLUSTER_NETNS:-}; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      [[ $daemons == *" $pid "* ]] || echo "$pid"
    done
  done
}

# Fails unless, within 15 s, the cluster has no job left and no process of the given
# executables (and, in netns mode, nothing but slurmd in the node namespaces) is alive.
check_no_leftovers() {
  local deadline=$(( $(date +%s) + 15 )) jobs pids exe
  while :; do
    jobs=""; pids=""
    [ -n "${SLURM_CONF:-}" ] && jobs=$(squeue -h -o '%i %T' 2>/dev/null || echo "squeue-failed")
    for exe in "$@"; do pids+=$(pids_of_exe "$exe"); done
    [ -n "${HYRUN_CLUSTER_DIR:-}" ] && pids+=$(pids_in_cluster_netns)
    [ -z "$jobs" ] && [ -z "$pids" ] && { echo "no leftovers"; return 0; }
    if [ "$(date +%s)" -ge $deadline ]; then
      [ -n "$pids" ] && ps -o pid,ppid,etime,args -p "$(echo "$pids" | xargs | tr ' ' ',')" >&2 || true
      fail "left over after 15 s: jobs [$jobs] processes [$pids]"
    fi
    sleep 0.2
  done
}
