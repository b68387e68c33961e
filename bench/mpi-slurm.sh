#!/usr/bin/env bash
# MPI programs under hyrun in hybrid mode against srun's native launch, on a real Slurm
# cluster started here (scripts/slurm-cluster.sh: each simulated node in its own network
# namespace where possible, Open MPI over tcp between nodes, shared memory within one):
#  1. for every cell of a grid of k nodes x n ranks per node, MPI_Init and Init..Finalize
#     (max over ranks) and the wall time of
#       srun -N k --ntasks-per-node=1 hyrun -n n -- mpi-pingpong --no-pingpong
#     against srun starting the same k*n ranks itself (--ntasks-per-node=n), alternated, with
#     the ratio hyrun/native of the wall time;
#  2. a ping-pong curve (latency, bandwidth) between ranks 0 and 1 on one node (shared
#     memory: 1 node x 2 ranks) and on two nodes (tcp: 2 nodes x 1 rank), hyrun against native.
# Medians over --reps runs. Needs root (the cluster). hyrun runs with --bind-to none, as srun
# does here: the simulated nodes share this machine's cores, and each node's own binding
# would put ranks of different nodes on one core (a ping-pong across nodes then waits ~4 ms,
# a scheduler slice, per message).
#
#   bench/mpi-slurm.sh [--nodes "K..."] [--per-node "n..."] [--reps R] [--pp-reps R] [--fences "F..."]
#                      [--reference BUILD_DIR]
#
#   --nodes      the node counts k of the grid (default "2 4"); the cluster has the largest
#   --per-node   the ranks per node n (default "1 2 4")
#   --reps R     runs of each launcher per cell (default 5)
#   --pp-reps R  runs of each launcher per ping-pong curve (default 3)
#   --fences F   hyrun's --fences for the grid, each beside the native launch in the same
#                runs (default "auto"; "outer link" compares the two routes)
#   --reference  another build's hyrun (e.g. of an older commit), in the same runs with the
#                first of --fences; its rows follow, with the ratios this build / the reference
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
nodes="2 4" per_node="1 2 4" reps=5 pp_reps=3 fences=auto reference=""
usage() { bench_usage >&2; exit 2; }
# shellcheck source=bench/options.sh
. "$root/bench/options.sh"
bench_options "--nodes:nodes --per-node:per_node --reps:reps --pp-reps:pp_reps --fences:fences --reference:reference" "$@"
count_ok() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "mpi-slurm: $1 must be a whole number >= 1, got '$2'" >&2; exit 2; }; }
largest=2  # the ping-pong across nodes needs two
for k in $nodes; do count_ok --nodes "$k"; [ "$k" -le "$largest" ] || largest=$k; done
for n in $per_node; do count_ok --per-node "$n"; done
count_ok --reps "$reps"; count_ok --pp-reps "$pp_reps"
for f in $fences; do
  case $f in auto | outer | link) ;; *) echo "mpi-slurm: --fences takes auto, outer and link, got '$f'" >&2; exit 2 ;; esac
done
hyrun=$build/launcher/hyrun prog=$build/bench/mpi-pingpong
for b in "$hyrun" "$prog"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
ref_hyrun=""
if [ -n "$reference" ]; then
  ref_hyrun=$reference/launcher/hyrun
  [ -x "$ref_hyrun" ] || { echo "mpi-slurm: --reference: no $ref_hyrun" >&2; exit 2; }
fi
out=$(mktemp -d)
# The simulated nodes share this machine's cores, and each Slurm task is a session of its
# own: with the kernel's autogroup scheduling a busy-polling rank can hold a core for seconds
# while ranks of other sessions pinned to it get none, and native runs of 16 x 1 hung until
# their limit (tests/cluster/README.md). Real nodes do not share cores, so the bench turns
# autogroup off while it runs and puts it back after.
autogroup=/proc/sys/kernel/sched_autogroup_enabled was_autogroup=""
if [ -w "$autogroup" ] && [ "$(cat "$autogroup")" = 1 ]; then was_autogroup=1; echo 0 >"$autogroup"; fi
cluster=$("$root/scripts/slurm-cluster.sh" up auto "$largest" 8)
trap '"$root/scripts/slurm-cluster.sh" down "$cluster" >/dev/null 2>&1 || true; rm -rf "$out"; [ -z "$was_autogroup" ] || echo 1 >"$autogroup"' EXIT
# shellcheck disable=SC1091
. "$cluster/cluster.env"
export UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES
# Open MPI's tcp component on the nodes' own interface (the simulated nodes share one kernel).
export OMPI_MCA_btl_tcp_if_include=$HYRUN_CLUSTER_UCX_NET_DEVICES

# command LAUNCHER K N: the launch of K nodes x N ranks, as words (the program follows).
command() {
  case $1 in
    hyrun) echo srun --mpi=pmix -N"$2" --ntasks-per-node=1 "$hyrun" -n "$3" --bind-to none --fences "${4:-auto}" -- ;;
    ref) echo srun --mpi=pmix -N"$2" --ntasks-per-node=1 "$ref_hyrun" -n "$3" --bind-to none --fences "${4:-auto}" -- ;;
    native) echo srun --mpi=pmix -N"$2" --ntasks-per-node="$3" ;;
  esac
}

# shellcheck source=bench/mpi-tables.sh
. "$root/bench/mpi-tables.sh"
run() {
  local launcher=$1 k=$2 n=$3 file=$4 route=auto; shift 4
  case $launcher in hyrun-* | ref-*) route=${launcher#*-}; launcher=${launcher%%-*} ;; esac
  # shellcheck disable=SC2046  # the launch's words, split on purpose (no spaces inside them)
  EXPECT_RANKS=$((k * n)) mpi_run "$file" "$out/log" timeout -k 5 300 $(command "$launcher" "$k" "$n" "$route") "$prog" "$@"
}

echo "MPI under hyrun (hybrid mode, its PMIx server) and srun's native launch, Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), $HYRUN_CLUSTER_MODE cluster of $largest nodes, $(nproc) cores, median of $reps alternated runs, $(date -u '+%Y-%m-%d %H:%M UTC')"
launch_header "k x n" hyrun/native
for k in $nodes; do
  for n in $per_node; do
    for _ in $(seq "$reps"); do
      for f in $fences; do run "hyrun-$f" "$k" "$n" "$out/h$k.$n.$f" --no-pingpong; done
      [ -z "$reference" ] || run "ref-${fences%% *}" "$k" "$n" "$out/r$k.$n" --no-pingpong
      run native "$k" "$n" "$out/s$k.$n" --no-pingpong
    done
    for f in $fences; do
      label="${k}x$n"
      [ "$fences" = auto ] || label="${k}x$n $f"
      launch_rows "$label" "$out/h$k.$n.$f" "$out/s$k.$n" hyrun native
    done
    [ -z "$reference" ] || launch_rows "${k}x$n" "$out/h$k.$n.${fences%% *}" "$out/r$k.$n" hyrun ref
  done
done
launch_footer
[ -z "$reference" ] || echo "ref: the hyrun of $reference, with --fences ${fences%% *}; its row's ratios are this build's over it."

# Two processes only, so that neither waits for a core (this machine may have two).
for where in "same node:1:2" "next node:2:1"; do
  IFS=: read -r label k n <<<"$where"
  echo
  echo "ping-pong between ranks 0 and 1 ($label: $k node(s) x $n rank(s)), median of $pp_reps alternated runs"
  for _ in $(seq "$pp_reps"); do
    run hyrun "$k" "$n" "$out/hp$k" --peer 1
    run native "$k" "$n" "$out/sp$k" --peer 1
  done
  pingpong_table "$out/hp$k" "$out/sp$k" hyrun native
done

# The rows: the grid's first and last cells (every route), then the 64 KiB ping-pongs.
version="Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')"
bench_row_machine="$largest-node $HYRUN_CLUSTER_MODE Slurm testbed, $(nproc)-core $(hostname)"
read -r first_k _ <<<"$nodes"; read -r first_n _ <<<"$per_node"
for k in $nodes; do :; done; for n in $per_node; do :; done
cells=("$first_k $first_n"); [ "$first_k $first_n" = "$k $n" ] || cells+=("$k $n")
for cell in "${cells[@]}"; do
  read -r k n <<<"$cell"
  for f in $fences; do
    h=$out/h$k.$n.$f s=$out/s$k.$n
    bench_row "$version, hybrid mode against srun native (\`bench/mpi-slurm.sh\`), $k node(s) x $n rank(s), --fences $f" \
      "MPI_Init / wall time, median of $reps" "$(median_col "$h" 2) / $(median_col "$h" 1) ms" \
      "wall $(ratio "$(median_col "$h" 1)" "$(median_col "$s" 1)") of native's ($(median_col "$s" 2) / $(median_col "$s" 1) ms)"
  done
done
for where in "1 node x 2 ranks (shared memory):1" "2 nodes x 1 rank (tcp):2"; do
  IFS=: read -r label k <<<"$where"
  hb=$(pp_median "$out/hp$k.pp" 65536 4) sb=$(pp_median "$out/sp$k.pp" 65536 4)
  [ -n "$hb" ] && [ -n "$sb" ] || continue
  bench_row "the same, $label" "64 KiB ping-pong between ranks 0 and 1, median of $pp_reps" "$hb MB/s" \
    "$(ratio "$hb" "$sb") of native's ($sb MB/s)"
done
