#!/usr/bin/env bash
# A private, throw-away Slurm 22.05 cluster of N simulated nodes on this one machine,
# for tests of `srun --mpi=pmix` and of mpirun inside an allocation.
#
#   slurm-cluster.sh up MODE N CPUS [DIR]   start; prints DIR (the cluster's only state)
#   slurm-cluster.sh down DIR               stop everything; leaves nothing behind
#   slurm-cluster.sh env DIR                prints the shell lines a test sources
#
#   MODE  multi : N slurmd on 127.0.0.1 (NodeName=n1..nN, one port each, same hostname)
#         netns : each node in its own network + UTS namespace (own IP, own hostname nI),
#                 joined by a private bridge; slurmd started through nsenter
#         auto  : netns when network namespaces can be created here, else multi
#   DIR   default: a fresh `mktemp -d` directory. Must not exist or be empty.
#   AUTH  munge (default: a private munged under DIR) | none (auth/none + cred/none)
#
# Everything lives under DIR: config, state, logs, spool and TmpFS per node (the pmix
# plugin needs a TmpFS per node), munge key and socket. Network names carry a random id
# and ports are picked free, so several clusters (other worktrees, CI jobs) coexist.
# Daemons are stopped by PID only; `down` also stops anything still running inside the
# cluster's namespaces or holding files in DIR (left-over slurmstepd and tasks), which is
# ours by construction.
set -euo pipefail

die() { echo "slurm-cluster: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }

usage() { sed -n '2,20p' "$0" >&2; exit 2; }

# --- helpers ---------------------------------------------------------------------------

port_in_use() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# A base port P with P..P+span free (ctld, slurmd ports). Random so that clusters
# started at the same time do not race for the same range.
pick_ports() {
  local span=$1 tries=0 base p ok
  while [ $tries -lt 50 ]; do
    base=$((20000 + (RANDOM % 120) * 100))   # below the ephemeral range (32768..)
    ok=1
    for p in $(seq "$base" $((base + span))); do port_in_use "$p" && { ok=0; break; }; done
    [ $ok = 1 ] && { echo "$base"; return 0; }
    tries=$((tries + 1))
  done
  die "no free range of $span ports found between 20000 and 32000"
}

# A 10.x.y.0/24 subnet that no interface or route of this machine uses.
pick_subnet() {
  local tries=0 net
  while [ $tries -lt 50 ]; do
    net="10.$((201 + RANDOM % 50)).$((RANDOM % 256))"
    if ! ip -o addr show | grep -q " $net\." && ! ip route show | grep -q "^$net\."; then
      echo "$net"; return 0
    fi
    tries=$((tries + 1))
  done
  die "no free 10.x.y.0/24 subnet found"
}

can_use_netns() {
  local probe="hyprobe$$"
  ip netns add "$probe" 2>/dev/null || return 1
  ip netns del "$probe"
}

# PIDs of processes that hold a file, a socket path or their cwd under $1.
pids_under_dir() {
  find /proc/[0-9]*/fd /proc/[0-9]*/cwd -maxdepth 1 \( -lname "$1" -o -lname "$1/*" \) 2>/dev/null |
    cut -d/ -f3 | sort -u | grep -vx "$$" || true
}

# Sends TERM, waits up to 5 s, then KILL, to the given PIDs.
stop_pids() {
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null || true
  local i pid alive
  for i in $(seq 50); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
}

wait_for_idle_nodes() {
  local n=$1 deadline=$((SECONDS + 30)) idle
  while :; do
    idle=$(sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$' || true)
    [ "$idle" -ge "$n" ] && return 0
    [ $SECONDS -ge $deadline ] && { sinfo -N >&2 || true; die "only $idle of $n nodes idle after 30 s (logs: $CL/log)"; }
    sleep 0.1
  done
}

# --- network namespaces ----------------------------------------------------------------

netns_up() {
  local i ns
  ip link add "$BRIDGE" type bridge
  ip addr add "$SUBNET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$N"); do
    ns="${NETID}n$i"
    ip netns add "$ns"
    echo "$ns" >> "$CL/netns.list"
    # Named eth0 inside so UCX and Open MPI see an ordinary NIC; the root-side end
    # carries the cluster id so it cannot clash with anyone else's.
    ip link add "${NETID}v$i" type veth peer name eth0 netns "$ns"
    ip link set "${NETID}v$i" master "$BRIDGE" up
    ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Only the bridge is reachable (no NAT): the root namespace, the other nodes.
    ip -n "$ns" route add default via "$SUBNET.1"
  done
}

netns_down() {
  local ns i
  if [ -f "$CL/netns.list" ]; then
    while read -r ns; do
      # shellcheck disable=SC2046  # PIDs: split on purpose
      stop_pids $(ip netns pids "$ns" 2>/dev/null)
      ip netns del "$ns" 2>/dev/null || true
    done < "$CL/netns.list"
  fi
  for i in $(seq 1 "${N:-0}"); do ip link del "${NETID}v$i" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
}

# --- munge -------------------------------------------------------------------------------

munge_up() {
  local m=$CL/munge
  mkdir -p "$m/etc"
  chmod 755 "$m"; chmod 700 "$m/etc"   # munged wants an a+x socket dir and a private key
  dd if=/dev/urandom of="$m/etc/munge.key" bs=1024 count=1 status=none
  chmod 400 "$m/etc/munge.key"
  munged -S "$m/munge.socket" --key-file="$m/etc/munge.key" --log-file="$m/munged.log" \
    --pid-file="$m/munged.pid" --seed-file="$m/munged.seed"
  munge -S "$m/munge.socket" -n | unmunge -S "$m/munge.socket" >/dev/null ||
    die "private munged does not answer (log: $m/munged.log)"
}

# --- up / down ---------------------------------------------------------------------------

write_conf() {
  local auth ctlhost i
  if [ "$AUTH" = none ]; then
    auth=$'AuthType=auth/none\nCredType=cred/none'   # test clusters only
  else
    auth="AuthType=auth/munge
AuthInfo=socket=$CL/munge/munge.socket
CredType=cred/munge"
  fi
  ctlhost="$HOST(127.0.0.1)"
  [ "$MODE" = netns ] && ctlhost="$HOST($SUBNET.1)"
  cat > "$SLURM_CONF" <<EOF
# Generated by slurm-cluster.sh for a private test cluster under $CL
ClusterName=hyrun$NETID
SlurmctldHost=$ctlhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
$auth
MailProg=/bin/true
StateSaveLocation=$CL/state
SlurmdSpoolDir=$CL/spool/%n
TmpFS=$CL/tmp/%n
SlurmctldPidFile=$CL/run/slurmctld.pid
SlurmdPidFile=$CL/run/slurmd-%n.pid
SlurmctldLogFile=$CL/log/slurmctld.log
SlurmdLogFile=$CL/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
# Fast teardown of killed steps (tests kill jobs on purpose)
KillWait=2
MinJobAge=5
EOF
  for i in $(seq 1 "$N"); do
    if [ "$MODE" = netns ]; then
      echo "NodeName=n$i NodeAddr=$SUBNET.$((10 + i)) CPUs=$CPUS RealMemory=1000 State=UNKNOWN"
    else
      # Multiple slurmd on one host (Debian builds Slurm with MULTIPLE_SLURMD): one port each.
      echo "NodeName=n$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((PORT + 1 + i)) CPUs=$CPUS RealMemory=1000 State=UNKNOWN"
    fi
  done >> "$SLURM_CONF"
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$SLURM_CONF"
}

write_env() {
  local ucx_dev=lo namespaces=
  if [ "$MODE" = netns ]; then
    ucx_dev=eth0
    [ -f "$CL/netns.list" ] && namespaces=$(tr '\n' ' ' < "$CL/netns.list" | sed 's/ $//')
  fi
  cat > "$CL/cluster.env" <<EOF
# Source this to use the cluster (written by slurm-cluster.sh up).
export SLURM_CONF='$SLURM_CONF'
export HYRUN_CLUSTER_DIR='$CL'
export HYRUN_CLUSTER_MODE='$MODE'
export HYRUN_CLUSTER_NODES='$N'
export HYRUN_CLUSTER_CPUS='$CPUS'
export HYRUN_CLUSTER_NETNS='$namespaces'
# Simulated nodes share one kernel: keep UCX on TCP over each node's own NIC.
export HYRUN_CLUSTER_UCX_TLS='tcp,self'
export HYRUN_CLUSTER_UCX_NET_DEVICES='$ucx_dev'
EOF
  cat > "$CL/cluster.state" <<EOF
MODE=$MODE
N=$N
NETID=$NETID
BRIDGE=$BRIDGE
SUBNET=$SUBNET
PORT=$PORT
EOF
}

up() {
  [ $# -ge 3 ] || usage
  MODE=$1 N=$2 CPUS=$3
  AUTH=${AUTH:-munge}
  [[ $N =~ ^[1-9][0-9]?$ ]] || die "N must be 1..99, got '$N'"
  [[ $CPUS =~ ^[1-9][0-9]*$ ]] || die "CPUS must be a positive number, got '$CPUS'"
  case $AUTH in munge | none) ;; *) die "AUTH must be munge or none, got '$AUTH'" ;; esac
  [ "$(id -u)" = 0 ] || die "must run as root (slurmd, network namespaces)"
  for tool in slurmctld slurmd sinfo ss ip nsenter unshare; do
    command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-deps.sh"
  done
  if [ "$MODE" = auto ]; then
    if can_use_netns; then MODE=netns; else MODE=multi; log "network namespaces unavailable: multi mode"; fi
  fi
  case $MODE in multi | netns) ;; *) die "MODE must be multi, netns or auto, got '$MODE'" ;; esac

  if [ -n "${4:-}" ]; then
    CL=$4
    mkdir -p "$CL"
    [ -z "$(ls -A "$CL")" ] || die "$CL is not empty"
  else
    CL=$(mktemp -d "${TMPDIR:-/tmp}/hyrun-cluster.XXXXXX")
  fi
  CL=$(cd "$CL" && pwd -P)
  chmod 755 "$CL"
  NETID=hy$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')   # 6 chars: names stay <= 15
  BRIDGE="${NETID}br"
  SUBNET=127.0.0
  [ "$MODE" = netns ] && SUBNET=$(pick_subnet)
  PORT=$(pick_ports $((N + 2)))
  HOST=$(hostname)
  export SLURM_CONF=$CL/etc/slurm.conf
  mkdir -p "$CL"/{etc,state,log,run}
  for i in $(seq 1 "$N"); do mkdir -p "$CL/spool/n$i" "$CL/tmp/n$i"; done
  write_env  # first: `down` needs the state even when `up` fails half-way

  # Any failure or interruption from here on tears down what was started.
  trap 'log "start failed; cleaning up"; down_dir "$CL" >&2 || true' ERR
  trap 'log "interrupted; cleaning up"; down_dir "$CL" >&2 || true; exit 130' INT TERM HUP
  [ "$MODE" = netns ] && netns_up
  write_env  # again, now with the namespace list
  [ "$AUTH" = munge ] && munge_up
  write_conf

  slurmctld -i   # daemonizes; -i: ignore (empty) saved state
  for i in $(seq 1 "$N"); do
    if [ "$MODE" = netns ]; then
      # nsenter, not `ip netns exec`: that remounts /sys without the cgroup mounts and
      # slurmd dies. unshare --uts gives the node its own hostname.
      nsenter --net="/run/netns/${NETID}n$i" unshare --uts sh -c "hostname n$i && exec slurmd -N n$i"
    else
      slurmd -N "n$i"
    fi
  done
  wait_for_idle_nodes "$N"
  trap - ERR INT TERM HUP
  log "up: $MODE, $N nodes x $CPUS cpus, auth $AUTH, ports $PORT.., dir $CL"
  echo "$CL"
}

# Stops every process of the cluster in $1 and removes its namespaces and the directory.
down_dir() {
  CL=$1
  # Finish the teardown even if our caller goes away half-way (Ctrl-C, closed pipe):
  # a half-done down would leave daemons behind.
  trap '' INT HUP PIPE
  [ -f "$CL/cluster.state" ] || die "$CL is not a cluster directory (no cluster.state)"
  # shellcheck disable=SC1091
  . "$CL/cluster.state"
  export SLURM_CONF=$CL/etc/slurm.conf

  local pids=() p pid munged=
  shopt -s nullglob
  for p in "$CL"/run/slurmd-*.pid "$CL"/run/slurmctld.pid; do
    pid=$(cat "$p" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] && pids+=("$pid")
  done
  shopt -u nullglob
  # munged last: slurm daemons may still authenticate while they stop.
  pid=$(cat "$CL/munge/munged.pid" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && munged=$pid
  stop_pids "${pids[@]+"${pids[@]}"}"
  # Left-over slurmstepd and tasks: everything inside our namespaces, then anything
  # still holding a file in our directory.
  [ "$MODE" = netns ] && netns_down
  # shellcheck disable=SC2046  # PIDs: split on purpose
  stop_pids $(pids_under_dir "$CL" | grep -vx "${munged:-x}" || true)
  [ -n "$munged" ] && stop_pids "$munged"
  rm -rf "$CL"
  # Prove it: nothing named after this cluster may remain.
  local left
  left=$( (ip netns list; ip -o link show) 2>/dev/null | grep -o "\b${NETID}[a-z0-9]*" | sort -u | tr '\n' ' ' || true)
  [ -z "$left" ] || die "down: still present after teardown: $left"
  [ ! -e "$CL" ] || die "down: $CL could not be removed"
  log "down: $CL removed"
}

down() {
  [ $# -ge 1 ] || usage
  down_dir "$1"
}

env_cmd() {
  [ $# -ge 1 ] && [ -f "$1/cluster.env" ] || die "give the cluster directory printed by 'up'"
  cat "$1/cluster.env"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  up) up "$@" ;;
  down) down "$@" ;;
  env) env_cmd "$@" ;;
  *) usage ;;
esac
