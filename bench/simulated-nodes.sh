#!/usr/bin/env bash
# A sweep over simulated nodes (issue 39): N nodes of one hybrid job on this machine, hyrun
# under hyrun (docs/pmix.md, "Simulated nodes"): the outer hyrun serves PMIx to N inner ones,
# each a node of the job with R ranks of its own. For each N and R it runs the job with the
# ranks' fences over the node link (--fences link: the star whose hub is the root's hyrun,
# hyrun's only route before issue 39) and through the outer launcher's fence (--fences outer),
# alternated, and prints from each node's --timings what the root's hyrun and the median
# node's did: CPU ms (hyrun, and its PMIx client helper), bytes sent on the node link, and the
# job's wall time. The nodes share this machine's cores, so the wall times are those of every
# process of the job on them; the root's bytes and CPU against the median node's are what a
# real cluster would see.
#
#   bench/simulated-nodes.sh [--nodes "N..."] [--per-node "R..."] [--reps K] [--program keys|hello|dmodex|modex]
#                            [--routes "link outer"] [--tree-widths "W..."] [--reference BUILD] [--plot FILE.png]
#                            [--limit-s S]
#     --nodes      default "16 32 64 128 256"
#     --per-node   default "1 4"
#     --routes     the --fences routes to run, alternated (default "link outer")
#     --tree-widths  the node link's --tree-width values to run, alternated with the routes
#                  (default "32", hyrun's; 1048576 is the star: the root beats with every node)
#     --reference  also runs, alternated with the routes, the hyrun of another build (route
#                  "star": the star of 7ebfc1b, the build issue 39 was filed on, has no
#                  --fences, --tree-width nor CPU in its --timings). Each of its nodes' hyrun
#                  runs under own-cpu, which reads the process's own CPU at its end; its bytes
#                  are not known ("-"). The hello is that build's own; the PMIx clients are
#                  this build's (the reference may have none)
#     --reps       runs of each route per cell, the median shown (default 1)
#     --program    keys: tests' pmix-keys-client (every key, an allgather and an alltoall of
#                  one key a peer in one collect-data fence; default); hello: the worker
#                  library's hello (UCX bootstrap through rank 0's address); dmodex: tests'
#                  pmix-bare-client put-dmodex 65536 (each rank puts 64 KiB, fences without
#                  the data and reads every rank's: direct modex between every two nodes);
#                  modex: tests' pmix-bare-client put 500 (MPI_Init's modex as the issue models
#                  it: each rank puts 500 bytes, one collect-data fence, every value read back;
#                  runs at 512 nodes, where keys' alltoall of N squared keys on every node does
#                  not fit 24 GB)
#     --plot       also draws the root's bytes sent and CPU against N with gnuplot
#     --limit-s    the limit of one job in seconds (default 900); modex at 512 x 4 has its 2 048
#                  ranks read 4.2 million values from their nodes' servers, on this machine's cores
# Both hyrun levels run with --bootstrap-timeout 600, and the nodes with --node-timeout 300:
# hundreds of nodes starting on a few shared cores take long to reach the exchange fence
# (512 nodes on 2 cores: it completed after 43 s in one run and passed the default 60 s in
# another), and a node that reads the others' records from the outer hyrun, one process
# serving them all, may be slow to beat for a child that linked before it (512 x 4: a node
# read them for 66 s; nodes were taken for lost at the default 30 s). A real cluster's nodes
# start in parallel, each reading from its own PMIx server.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
nodes="16 32 64 128 256" per_node="1 4" reps=1 program=keys plot="" routes="link outer" widths=32 limit_s=900 reference=""
usage() { bench_usage >&2; exit 2; }
# shellcheck source=bench/options.sh
. "$root/bench/options.sh"
bench_options "--nodes:nodes --per-node:per_node --reps:reps --program:program --plot:plot --routes:routes --tree-widths:widths --limit-s:limit_s --reference:reference" "$@"
for v in $nodes $per_node $reps $widths $limit_s; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "simulated-nodes: '$v' is not a whole number >= 1" >&2; exit 2; }
done
hyrun=$build/launcher/hyrun
case $program in
  keys) prog=$build/tests/integration/pmix-keys-client ;;
  hello) prog=$build/examples/hello ;;
  dmodex | modex) prog=$build/tests/integration/pmix-bare-client ;;
  *) usage ;;
esac
for route in $routes; do
  case $route in link | outer) ;; *) echo "simulated-nodes: route '$route' is not link or outer" >&2; exit 2 ;; esac
done
own_cpu=$build/bench/own-cpu
for b in "$hyrun" "$prog"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
if [ -n "$reference" ]; then
  ref_hyrun=$reference/launcher/hyrun ref_prog=$prog
  [ "$program" != hello ] || ref_prog=$reference/examples/hello
  for b in "$ref_hyrun" "$ref_prog" "$own_cpu"; do
    [ -x "$b" ] || { echo "simulated-nodes: --reference: missing $b" >&2; exit 1; }
  done
  # The reference's commit, from the source its build was configured from.
  ref_source=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$reference/CMakeCache.txt" 2>/dev/null || true)
  ref_name=$(git -C "${ref_source:-$reference}" rev-parse --short HEAD 2>/dev/null || echo "$reference")
fi
# The series of each cell: every route with every tree width, then the reference.
series=()
for route in $routes; do for w in $widths; do series+=("$route.$w"); done; done
[ -z "$reference" ] || series+=(star.ref)
out=$(mktemp -d)
# Every simulated node's tcp connections share this kernel's loopback device. Its input queue
# (net.core.netdev_max_backlog, 1000 by default) overflowed at 512 ranks of the hello
# (2026-11-29: about 1.1 million packets dropped), and connections whose keepalive probes were
# dropped failed with ETIMEDOUT. A real cluster's nodes each have their own queue. The bench
# raises it while it runs and puts it back after.
# So do their inotify instances (fs.inotify.max_user_instances, 128 by default): a rank
# started before the exchange waits for its environment file with one, and without one it
# looks every 10 ms. 512 such ranks on 2 cores spent half the machine's CPU looking
# (2026-11-29); a real node has its own 128 for its few ranks. Raised the same way.
backlog=/proc/sys/net/core/netdev_max_backlog was_backlog=""
inotify=/proc/sys/fs/inotify/max_user_instances was_inotify=""
if [ -w "$backlog" ] && [ "$(cat "$backlog")" -lt 100000 ]; then was_backlog=$(cat "$backlog"); echo 100000 >"$backlog"; fi
if [ -w "$inotify" ] && [ "$(cat "$inotify")" -lt 8192 ]; then was_inotify=$(cat "$inotify"); echo 8192 >"$inotify"; fi
trap 'rm -rf "$out"; [ -z "$was_backlog" ] || echo "$was_backlog" >"$backlog"; [ -z "$was_inotify" ] || echo "$was_inotify" >"$inotify"' EXIT

# run N R ROUTE WIDTH FILE: one job; appends "wall_ms root_cpu root_helper root_sent median_cpu
# median_helper median_sent" to FILE, from the root's timings line and its summary (the
# reference's: from own-cpu's lines, bytes "-"; a failed run of it: "failed").
run() {
  local n=$1 r=$2 route=$3 width=$4 file=$5 args=() t0 t1 outer=$hyrun p=$prog
  local node=("$hyrun" -n "$r")
  if [ "$route" = star ]; then
    outer=$ref_hyrun p=$ref_prog node=("$own_cpu" "$out/cpu" -- "$ref_hyrun" -n "$r")
    rm -f "$out/cpu"
  fi
  case $program in
    keys) args=("$p" "$n" "$r") inner=(--bootstrap=none) ;;
    dmodex) args=("$p" put-dmodex 65536) inner=(--bootstrap=none) ;;
    modex) args=("$p" put 500) inner=(--bootstrap=none) ;;
    *) args=("$p") inner=() ;;
  esac
  inner+=(--bootstrap-timeout 600 --node-timeout 300)
  [ "$route" = star ] || inner+=(--fences "$route" --tree-width "$width" --timings)
  t0=$(date +%s%N)
  if ! timeout -k 5 "$limit_s" "$outer" -n "$n" --bootstrap=none --bootstrap-timeout 600 -- "${node[@]}" "${inner[@]}" \
    -- "${args[@]}" >"$out/log" 2>&1; then
    kept=${TMPDIR:-/tmp}/simulated-nodes.$n.$r.$route.$width.log
    cp "$out/log" "$kept"
    echo "simulated-nodes: $n x $r ($route, tree width $width) failed; its last lines (all of them: $kept):" >&2
    tail -5 "$out/log" >&2
    # The reference's failures are results (7ebfc1b failed at 256 nodes): its row says so.
    [ "$route" = star ] || exit 1
    echo "failed - - - - - -" >>"$file"
    return
  fi
  t1=$(date +%s%N)
  if [ "$route" = star ]; then  # own-cpu's lines: "<PMIX_RANK> <ms>", one a node
    sort -n -k2,2 "$out/cpu" | awk -v wall=$(((t1 - t0) / 1000000)) -v n="$n" '$1 == 0 { root = $2 } { v[NR] = $2 }
      END { if (NR != n || root == "") exit 1; print wall, root, "-", "-", v[int((NR + 1) / 2)], "-", "-" }' \
      >>"$file" || { echo "simulated-nodes: own-cpu did not report every node of $n x $r (star)" >&2; exit 1; }
    return
  fi
  awk -v wall=$(((t1 - t0) / 1000000)) '
    /timings on .* \(task 0 of / { match($0, /CPU ms hyrun [0-9.]+, helper [0-9.]+/); split(substr($0, RSTART, RLENGTH), c, /[ ,]+/)
      cpu = c[4]; helper = c[6]; match($0, /bytes sent [0-9]+/); sent = substr($0, RSTART + 11, RLENGTH - 11) }
    /timings of [0-9]+ nodes/ { match($0, /CPU ms hyrun max [^;]*/); split(substr($0, RSTART, RLENGTH), a, / /); mcpu = a[9]
      match($0, /helper max [^;]*/); split(substr($0, RSTART, RLENGTH), h, / /); mhelper = h[7]
      match($0, /bytes sent max [^;]*/); split(substr($0, RSTART, RLENGTH), s, / /); msent = s[8] }
    END { if (cpu == "" || mcpu == "") exit 1; print wall, cpu, helper, sent, mcpu, mhelper, msent }' "$out/log" >>"$file" \
    || { echo "simulated-nodes: no --timings lines in $n x $r ($route)" >&2; exit 1; }
}

# median FILE COLUMN
median() { sort -n -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }

echo "simulated nodes: hyrun -n N --bootstrap=none -- hyrun -n R --fences ROUTE --tree-width W --timings -- $program, $(nproc) cores, median of $reps, $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%-8s | %-5s | %7s | %8s | %14s | %16s | %14s | %16s | %17s\n' "N x R" route width "wall ms" "root CPU ms" \
  "root helper ms" "median CPU ms" "root link bytes" "median link bytes"
echo "---------+-------+---------+----------+----------------+------------------+----------------+------------------+------------------"
for r in $per_node; do
  for n in $nodes; do
    for _ in $(seq "$reps"); do
      for k in "${series[@]}"; do run "$n" "$r" "${k%.*}" "${k##*.}" "$out/$n.$r.$k"; done
    done
    for k in "${series[@]}"; do
      f=$out/$n.$r.$k
      if grep -q '^failed' "$f"; then
        printf '%-8s | %-5s | %7s | %8s |\n' "${n}x$r" "${k%.*}" "${k##*.}" "failed $(grep -c '^failed' "$f") of $reps"
        continue
      fi
      printf '%-8s | %-5s | %7s | %8s | %14s | %16s | %14s | %16s | %17s\n' "${n}x$r" "${k%.*}" "${k##*.}" \
        "$(median "$f" 1)" "$(median "$f" 2)" "$(median "$f" 3)" "$(median "$f" 5)" "$(median "$f" 4)" "$(median "$f" 7)"
      sent=$(median "$f" 4)
      echo "$n $r $k $(median "$f" 1) $(median "$f" 2) ${sent/-/NaN}" >>"$out/plot.dat"
    done
  done
done
row_n=$n row_r=$r  # the last cell, for the row

if [ -n "$plot" ]; then
  command -v gnuplot >/dev/null || { echo "simulated-nodes: gnuplot not found (gnuplot-nox)" >&2; exit 1; }
  for r in $per_node; do
    for k in "${series[@]}"; do awk -v r="$r" -v k="$k" '$2 == r && $3 == k' "$out/plot.dat" >"$out/$r.$k.dat"; done
  done
  {
    echo "set terminal png size 1200,500; set output '$plot'; set multiplot layout 1,2"
    echo "set logscale xy; set xlabel 'simulated nodes'; set key left top"
    plots=() cpu=()
    for r in $per_node; do
      for k in "${series[@]}"; do
        title="${k%.*}, tree width ${k##*.}, $r a node"
        [ "$k" != star.ref ] || title="the star of $ref_name, $r a node"
        # A log scale has no place for 0 bytes (a short job's root may send none): such a
        # point is left out, and a series without any other.
        [ "$k" != star.ref ] && awk '$6 + 0 > 0 { found = 1 } END { exit !found }' "$out/$r.$k.dat" &&
          plots+=("'$out/$r.$k.dat' using 1:(\$6 > 0 ? \$6 : 1/0) with linespoints title '$title'")
        cpu+=("'$out/$r.$k.dat' using 1:5 with linespoints title '$title'")
      done
    done
    echo "set title \"the root's bytes sent on the node link\"; set ylabel 'bytes'"
    if [ ${#plots[@]} -gt 0 ]; then (IFS=,; echo "plot ${plots[*]}"); else
      echo "set label 1 'none sent' at graph 0.5, 0.5 center; plot [1:2] [1:2] 1.5 notitle lc rgb 'white'"
      echo "unset label 1; set autoscale xy"
    fi
    echo "set title \"the root hyrun's CPU\"; set ylabel 'ms'"
    (IFS=,; echo "plot ${cpu[*]}")
  } | gnuplot
  echo "plot: $plot"
fi

# The row: the last cell (the last R, the last N), the last route and width against the
# reference, or without one against the first route and width.
routed=("${series[@]}")
[ -z "$reference" ] || unset 'routed[-1]'
first=${series[0]} last=${routed[${#routed[@]} - 1]}
[ -z "$reference" ] || first=star.ref
o=$out/$row_n.$row_r.$last l=$out/$row_n.$row_r.$first
against="$first: $(median "$l" 4) bytes / $(median "$l" 2) ms; wall $(median "$o" 1) against $(median "$l" 1) ms; the median node's CPU $(median "$o" 5) against $(median "$l" 5) ms"
[ "$first" != star.ref ] || against="the star of $ref_name: $(median "$l" 2) ms (own-cpu); wall $(median "$o" 1) against $(median "$l" 1) ms; the median node's CPU $(median "$o" 5) against $(median "$l" 5) ms"
! grep -q '^failed' "$l" || against="$first: failed $(grep -c '^failed' "$l") of $reps runs; wall $(median "$o" 1) ms"
bench_row "simulated nodes (\`bench/simulated-nodes.sh\`), $row_n nodes x $row_r rank(s), $program" \
  "the root hyrun's bytes sent on the node link / its CPU, median of $reps" \
  "$(median "$o" 4) bytes / $(median "$o" 2) ms, fences $last (route.tree width)" "$against"
