#!/usr/bin/env bash
# Hybrid-mode launch on a real Slurm cluster started here (scripts/slurm-cluster.sh: each
# simulated node in its own network and UTS namespace where possible, UCX over tcp): for
# every cell of a grid of k nodes x n ranks per node, the time until every rank is connected
# and until the job ends, for
#   srun -N k --ntasks-per-node=1 hyrun -n n --timings -- hello
# against srun starting the same k*n ranks natively (--ntasks-per-node=n) with a program
# that exchanges UCX addresses through PMIx (bench/pmix_ucx_hello.cpp), runs alternated in
# the same run, as a ratio; then where hyrun's time goes (its --timings steps); then the
# PMIx fence alone (pmix-probe). Medians over --reps runs. Needs root.
#
#   bench/launch-slurm.sh [--cluster N] [--nodes "K..."] [--per-node "n..."] [--reps R]
#                         [--plot FILE.png] [--keep DIR] [--reference BUILD_DIR] [--startup-ms MS]
#
#   --cluster N     slurmd nodes to start (default: the largest of --nodes)
#   --nodes         the node counts k of the grid (default "2 4")
#   --per-node      the ranks per node n of the grid (default "1 2 4 8")
#   --reps R        runs of each launcher per cell (default 5); the median is shown
#   --plot FILE     also a PNG plot (gnuplot) of the job's end against total ranks: hyrun and
#                   native, one line per ranks-per-node (default: none)
#   --keep DIR      the output of every run goes here (default: a temporary dir, removed)
#   --reference DIR another build's hyrun and hello (e.g. of an older commit), run alternately
#                   with the others: its end and this build's end / its end in two more columns
#   --startup-ms MS every rank (hello and the native program alike) first sleeps MS before it
#                   connects, as a program that initialises CUDA or loads a model (default 0)
#
# Every run is bounded (timeout 300 s). A failed run is counted in the table's "failed"
# column, and its output kept; the script then exits 1.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
cluster_nodes=0 nodes="2 4" per_node="1 2 4 8" reps=5 plot="" keep="" reference="" startup_ms=0
usage() { bench_usage >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case $1 in
    --cluster) cluster_nodes=$2 ;;
    --nodes) nodes=$2 ;;
    --per-node) per_node=$2 ;;
    --reps) reps=$2 ;;
    --plot) plot=$2 ;;
    --keep) keep=$2 ;;
    --reference) reference=$2 ;;
    --startup-ms) startup_ms=$2 ;;
    *) usage ;;
  esac
  shift 2
done
count_ok() { [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "launch-slurm: $1 must be a whole number >= 1, got '$2'" >&2; exit 2; }; }
largest=0
for k in $nodes; do
  count_ok --nodes "$k"
  [ "$k" -le "$largest" ] || largest=$k
done
for n in $per_node; do count_ok --per-node "$n"; done
count_ok --reps "$reps"
[[ $startup_ms =~ ^[0-9]+$ ]] || { echo "launch-slurm: --startup-ms must be a whole number of ms, got '$startup_ms'" >&2; exit 2; }
[ "$largest" -gt 0 ] || { echo "launch-slurm: --nodes names no node count" >&2; exit 2; }
[ "$cluster_nodes" != 0 ] || cluster_nodes=$largest
count_ok --cluster "$cluster_nodes"
[ "$largest" -le "$cluster_nodes" ] \
  || { echo "launch-slurm: --nodes $largest is more than the cluster's $cluster_nodes nodes (--cluster)" >&2; exit 2; }
hyrun=$build/launcher/hyrun hello=$build/examples/hello
native=$build/bench/pmix-ucx-hello probe=$build/tests/pmix/pmix-probe
for b in "$hyrun" "$hello" "$native" "$probe"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh" >&2; exit 1; }; done
ref_hyrun="" ref_hello=""
if [ -n "$reference" ]; then
  ref_hyrun=$reference/launcher/hyrun ref_hello=$reference/examples/hello
  for b in "$ref_hyrun" "$ref_hello"; do [ -x "$b" ] || { echo "launch-slurm: --reference: no $b" >&2; exit 2; }; done
fi
[ -z "$plot" ] || command -v gnuplot >/dev/null || { echo "launch-slurm: --plot needs gnuplot (scripts/install-deps.sh)" >&2; exit 1; }

work=${keep:-$(mktemp -d)}
mkdir -p "$work"
cluster=$(bash "$root/scripts/slurm-cluster.sh" up auto "$cluster_nodes" 8 2>/dev/null | tail -1)
cleanup() {
  bash "$root/scripts/slurm-cluster.sh" down "$cluster" >/dev/null 2>&1 || true
  [ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=/dev/null  # written by scripts/slurm-cluster.sh up
. "$cluster/cluster.env"
export UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.0f", a[int((NR+1)/2)]; else printf "-"}'; }

# run NAME CMD...: one run, its output in $work/NAME.{out,err}; prints "connect_ms end_ms
# first_connect_ms" (connect: the last rank's connected_ns; first: the first rank's),
# or nothing when it failed (and leaves $work/NAME.failed).
run() {
  local name=$1 t0 t1 last first
  shift
  t0=$(now_ns)
  if ! timeout 300 "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    touch "$work/$name.failed"
    return 0
  fi
  t1=$(now_ns)
  last=$(sed -n 's/^connected_ns=\([0-9]*\).*/\1/p' "$work/$name.out" | sort -n | tail -1)
  first=$(sed -n 's/^connected_ns=\([0-9]*\).*/\1/p' "$work/$name.out" | sort -n | head -1)
  if [ -z "$last" ]; then
    echo "no connected_ns in the output" >>"$work/$name.err"
    touch "$work/$name.failed"
    return 0
  fi
  echo "$(((last - t0) / 1000000)) $(((t1 - t0) / 1000000)) $(((first - t0) / 1000000))"
}

# step NAME FILE...: the latest time of hyrun's --timings step NAME over every node's line of
# every file (one file a run), one number a run.
step() {
  local name=$1 f
  shift
  for f in "$@"; do
    grep -h 'timings on' "$f" | sed -n "s/.*[:,] $name \([0-9][0-9.]*\).*/\1/p" | sort -n | tail -1
  done
}

m() { printf '%s\n' "$@" | median; }
# steps_row K N BUILD SPREAD FILE...: the medians of hyrun's --timings steps over the runs'
# stderr files (the reference's too: a build without a step prints "-" there), and SPREAD.
steps_row() {
  local k=$1 n=$2 build=$3 spread=$4
  shift 4
  [ $# -gt 0 ] || return 0
  printf '%5s %3s %5s | %11s ms %7s ms %7s ms %7s ms %7s ms %8s ms %7s ms | %8s ms\n' "$k" "$n" "$build" \
    "$(step 'ranks started' "$@" | median)" "$(step 'rank 0 address' "$@" | median)" \
    "$(step fence "$@" | median)" "$(step 'root record' "$@" | median)" \
    "$(step link "$@" | median)" "$(step 'ranks given the root' "$@" | median)" \
    "$(step 'job end' "$@" | median)" "$spread" >>"$steps"
}
# ratio A B: A / B to two decimals, "-" where either is missing.
ratio() { if [[ $1 =~ ^[0-9]+$ && $2 =~ ^[1-9][0-9]*$ ]]; then printf '%.2f' "$(echo "$1 / $2" | bc -l)"; else echo -; fi; }

failed=0
table=$work/table.txt data=$work/plot.dat steps=$work/steps.txt
: >"$data"
header="hybrid launch on a Slurm cluster of $cluster_nodes simulated nodes ($HYRUN_CLUSTER_MODE mode, UCX_TLS=$UCX_TLS), $(nproc) cores, median of $reps alternated runs, ranks start in ${startup_ms} ms, $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%s\n' "$header" >"$table"
ref_head=""
[ -z "$reference" ] || ref_head=$(printf ' | %9s %8s' "ref end" "end/ref")
printf '%5s %3s %5s | %10s %10s | %11s %11s | %6s %6s%s | %s\n' nodes n ranks "hyrun conn" "hyrun end" \
  "native conn" "native end" "conn x" "end x" "$ref_head" failed >>"$table"
printf '%5s %3s %5s | %14s %10s %10s %10s %10s %11s %10s | %11s\n' nodes n build "ranks started" "rank0 addr" "fence" \
  "root rec" "link" "given root" "job end" "spread" >"$steps"
for k in $nodes; do
  for n in $per_node; do
    hc=() he=() nc=() ne=() re=() herr=() rerr=() hsp=() rsp=() fails=0
    for r in $(seq "$reps"); do
      h=$(run "h-$k-$n-$r" srun --mpi=pmix -N "$k" --ntasks-per-node=1 "$hyrun" -n "$n" --timings -- "$hello" --timestamps --bytes 1024 --startup-ms "$startup_ms")
      s=$(run "s-$k-$n-$r" srun --mpi=pmix -N "$k" --ntasks-per-node="$n" "$native" --startup-ms "$startup_ms")
      if [ -n "$h" ]; then
        read -r c e f <<<"$h"
        hc+=("$c") he+=("$e") hsp+=($((c - f))) herr+=("$work/h-$k-$n-$r.err")
      else fails=$((fails + 1)); fi
      if [ -n "$s" ]; then read -r c e f <<<"$s"; nc+=("$c") ne+=("$e"); else fails=$((fails + 1)); fi
      if [ -n "$reference" ]; then
        x=$(run "r-$k-$n-$r" srun --mpi=pmix -N "$k" --ntasks-per-node=1 "$ref_hyrun" -n "$n" --timings -- "$ref_hello" --timestamps --bytes 1024 --startup-ms "$startup_ms")
        if [ -n "$x" ]; then
          read -r c e f <<<"$x"
          re+=("$e") rsp+=($((c - f))) rerr+=("$work/r-$k-$n-$r.err")
        else fails=$((fails + 1)); fi
      fi
    done
    failed=$((failed + fails))
    mhc=$(m "${hc[@]}") mhe=$(m "${he[@]}") mnc=$(m "${nc[@]}") mne=$(m "${ne[@]}") ref_cols=""
    if [ -n "$reference" ]; then
      mre=$(m "${re[@]}")
      ref_cols=$(printf ' | %6s ms %8s' "$mre" "$(ratio "$mhe" "$mre")")
    fi
    printf '%5s %3s %5s | %7s ms %7s ms | %8s ms %8s ms | %6s %6s%s | %s\n' "$k" "$n" $((k * n)) "$mhc" "$mhe" \
      "$mnc" "$mne" "$(ratio "$mhc" "$mnc")" "$(ratio "$mhe" "$mne")" "$ref_cols" "$fails" >>"$table"
    echo "$n $((k * n)) $mhe $mne" >>"$data"
    echo "$k $n $mhe $mne ${mre:--}" >>"$work/cells"
    steps_row "$k" "$n" this "$(m "${hsp[@]}")" "${herr[@]}"
    steps_row "$k" "$n" ref "$(m "${rsp[@]}")" "${rerr[@]}"
    tail -1 "$table" >&2  # progress
  done
done

cat "$table"
echo
echo "where hyrun's time goes (--timings: ms from each hyrun's own start, the latest node of a run, median"
echo "of the runs; rank0 addr on the root, root rec and link (to the root's hyrun) on the other nodes; ranks"
echo "started before the exchange under --bootstrap=ucx, given the root = given rank 0's address and the token;"
echo "build: this one, or the reference (--reference); spread: from the first rank connected to the last):"
cat "$steps"
echo
echo "PMIx fence alone (pmix-probe fence_ms, max over ranks; median of $reps):"
for k in $nodes; do
  f=()
  for _ in $(seq "$reps"); do
    f+=("$(timeout 60 srun --mpi=pmix -N "$k" --ntasks-per-node=1 "$probe" 2>/dev/null | sed -n 's/.*fence_ms=\([0-9]*\).*/\1/p' | sort -n | tail -1)")
  done
  echo "  $k nodes: $(printf '%s\n' "${f[@]}" | median) ms"
done

if [ -n "$plot" ]; then
  # One line per launcher and ranks per node: the job's end (median) against the total ranks.
  plots=()
  for n in $per_node; do
    awk -v n="$n" '$1 == n && $3 != "-" {print $2, $3}' "$data" >"$work/hyrun-$n.dat"
    awk -v n="$n" '$1 == n && $4 != "-" {print $2, $4}' "$data" >"$work/native-$n.dat"
    plots+=("'$work/hyrun-$n.dat' with linespoints lw 2 title 'hyrun, $n per node'")
    plots+=("'$work/native-$n.dat' with linespoints dt 2 lw 2 title 'native srun, $n per node'")
  done
  joined=$(IFS=,; echo "${plots[*]}")
  gnuplot <<EOF
set terminal pngcairo size 900,600
set output '$plot'
set title "Launch on Slurm ($cluster_nodes-node test bed, $(nproc) cores): srun to job end, median of $reps"
set xlabel 'total ranks'
set ylabel 'ms'
set key top left
set grid
set logscale x 2
set yrange [0:*]
set offsets graph 0.05, graph 0.05, 0, 0
plot $joined
EOF
  echo "plot: $plot"
fi
# The rows: the grid's first and last cells.
bench_row_machine="$cluster_nodes-node $HYRUN_CLUSTER_MODE Slurm testbed, $(nproc)-core $(hostname)"
for cell in "$(head -1 "$work/cells")" "$(tail -1 "$work/cells")"; do
  read -r k n he ne re <<<"$cell"
  ref=""; [ -z "$reference" ] || ref="; $(ratio "$he" "$re") of the reference's ($re ms)"
  bench_row "hybrid launch on Slurm (\`bench/launch-slurm.sh\`), $k node(s) x $n rank(s) ($((k * n))), hello, ranks start in ${startup_ms} ms" \
    "job end (srun to return), median of $reps" "$he ms" "$(ratio "$he" "$ne") of srun native ($ne ms)$ref"
  [ "$(wc -l <"$work/cells")" -gt 1 ] || break
done

if [ "$failed" -gt 0 ]; then
  echo "launch-slurm: $failed run(s) failed; their output: $work" >&2
  keep=$work  # keep it for the user
  exit 1
fi
