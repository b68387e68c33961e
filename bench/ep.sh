#!/usr/bin/env bash
# EP host backend bandwidth across hyrun ranks, against ucx_perftest in the same run.
#
#   bench/ep.sh [RANKS...]            (default: 2 4 8)
#   env: BUILD_DIR (build), TLS ("shm tcp"), TOKENS/HIDDEN/TOPK/EXPERTS (128/7168/8/2),
#        ITERS (30), WARMUP (5), PERF_ITERS (5000), REPEATS (3)
#
# Every figure is the median of REPEATS runs (this machine is shared: single runs vary).
# avg_t is the mean time of one dispatch + combine, min_t the fastest one (on a loaded
# machine the mean is dominated by waiting for the peer to be scheduled; min_t is the
# call when nothing had to wait); "EP GB/s at min_t" is the bandwidth at min_t.
# First table: --kernel-only with one rank (hyrun -n 1) against a single-core memcpy of
# 64 MiB (memcpy-baseline) measured in the same run.
#
# For each transport and world size: ep-bench-host prints per-rank dispatch (FP8) +
# combine (BF16) bandwidth in logical bytes (every valid selection, self traffic
# included); the table shows the average over ranks. --kernel-only runs the same
# routing with every expert local (the host packing/cast/reduction without the network).
# ucx_perftest ucp_put_bw (one server/client pair, same UCX_TLS) is run at the sizes the
# backend actually puts: one FP8 dispatch message (H + H/128*4 + 16 bytes) and one BF16
# combine row (2H bytes); "perftest" is their byte-weighted combination
# (D + C) / (D/bw_dispatch + C/bw_combine) with rank 0's D and C, and ratio = EP / perftest.
# ucx_perftest's "MB/s" are MiB/s; they are converted to GB/s (1e9 bytes).
# Bound: a rank must at least write each logical byte once (D + C, its messages into the
# regions and its combine rows into the sources; the reduction then reads C again), so
# even at the speed of a single-core memcpy of D + C bytes (memcpy-baseline, rounded up to
# whole MiB, measured in the same run) EP GB/s cannot pass that memcpy figure:
# "bound ratio" = memcpy(D + C) / perftest is the highest ratio EP/perftest that a rank
# moving its bytes at memcpy speed could show.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
TLS=${TLS:-"shm tcp"}
TOKENS=${TOKENS:-128}; HIDDEN=${HIDDEN:-7168}; TOPK=${TOPK:-8}; EXPERTS=${EXPERTS:-2}
ITERS=${ITERS:-30}; WARMUP=${WARMUP:-5}; PERF_ITERS=${PERF_ITERS:-5000}; REPEATS=${REPEATS:-3}
RANKS=("$@"); [ ${#RANKS[@]} -gt 0 ] || RANKS=(2 4 8)
hyrun=$build/launcher/hyrun; bench=$build/worker/ep/programs/ep-bench-host; memcpy_bench=$build/bench/memcpy-baseline
for b in "$hyrun" "$bench" "$memcpy_bench"; do [ -x "$b" ] || { echo "bench/ep.sh: missing $b: build first (cmake --build $build)" >&2; exit 1; }; done
command -v ucx_perftest >/dev/null || { echo "bench/ep.sh: ucx_perftest not found (Debian: ucx-utils)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ep-bench.XXXXXX"); trap 'rm -rf "$work"' EXIT

ucx_tls() { case $1 in shm) echo "shm,self" ;; *) echo "$1" ;; esac; }

# perftest_gbps TLS SIZE : ucp_put_bw average bandwidth in GB/s
perftest_gbps() {
  local tls port out
  tls=$(ucx_tls "$1")
  for _ in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    UCX_TLS=$tls timeout 60 ucx_perftest -t ucp_put_bw -s "$2" -n "$PERF_ITERS" -w 500 -p "$port" -f >"$work/server" 2>&1 &
    local spid=$!
    sleep 0.3
    if out=$(UCX_TLS=$tls timeout 60 ucx_perftest localhost -t ucp_put_bw -s "$2" -n "$PERF_ITERS" -w 500 -p "$port" -f 2>&1); then
      wait "$spid" || true
      echo "$out" | awk -v n="$PERF_ITERS" '$1 == n { printf "%.3f", $5 * 1048576 / 1e9; found = 1 } END { if (!found) exit 1 }' && return 0
    fi
    kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
  done
  echo "bench/ep.sh: ucx_perftest failed (UCX_TLS=$tls, size $2): $out" >&2
  return 1
}

# ep_run N TLS [--kernel-only] : runs ep-bench-host; leaves its output in $work/ep.out
ep_run() {
  local n=$1 tls=$2; shift 2
  "$hyrun" -n "$n" -x "UCX_TLS=$(ucx_tls "$tls")" -- "$bench" --tokens "$TOKENS" --hidden "$HIDDEN" --topk "$TOPK" \
    --experts-per-rank "$EXPERTS" --iters "$ITERS" --warmup "$WARMUP" "$@" >"$work/ep.out" 2>"$work/ep.err" ||
    { echo "bench/ep.sh: ep-bench-host failed (n=$n, $tls):" >&2; cat "$work/ep.err" >&2; exit 1; }
}
# avg of "[rank r] Dispatch + combine bandwidth: X GB/s, avg_t=Y us, min_t=Z us" over ranks:
# "X Y Z X*Y/Z" (the last: GB/s at min_t)
ep_avg() {
  awk '/Dispatch \+ combine bandwidth:/ { sub(/avg_t=/, "", $9); sub(/min_t=/, "", $11)
         g += $7; t += $9; m += $11; gm += $7 * $9 / $11; n++ }
       END { printf "%.3f %.0f %.0f %.3f\n", g / n, t / n, m / n, gm / n }' "$work/ep.out"
}
# median of the numbers on stdin (one a line)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# ep_median N TLS [args] : "GB/s avg_t min_t GB/s@min_t" medians over REPEATS runs (rank-averaged each);
# not in a subshell, so that a failed run ends the script
ep_median() {
  local i
  : >"$work/runs"
  for ((i = 0; i < REPEATS; i++)); do ep_run "$@"; ep_avg >>"$work/runs"; done
  local f out=""
  for f in 1 2 3 4; do out+="$(cut -d' ' -f"$f" "$work/runs" | median) "; done
  echo "$out"
}
perftest_median() {
  local i
  for ((i = 0; i < REPEATS; i++)); do perftest_gbps "$@"; echo; done | median
}
rank0_field() { grep '^\[rank 0\] accounting:' "$work/ep.out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "EP host backend: dispatch FP8 + combine BF16, T=$TOKENS H=$HIDDEN K=$TOPK E=$EXPERTS, $ITERS iterations after $WARMUP warm-up, median of $REPEATS runs"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(ucx_info -v | head -1 | sed 's/^# *//')"
echo
: >"$work/memcpy"
for ((i = 0; i < REPEATS; i++)); do "$memcpy_bench" 64 15 | sed -n 's/.*median_gbps=\([0-9.]*\).*/\1/p' >>"$work/memcpy"; done
mc=$(median <"$work/memcpy")
ep_median 1 shm --kernel-only >"$work/med"; read -r ko1_gbps ko1_us ko1_min ko1_gmin <"$work/med"
echo "| kernel-only, 1 rank: EP GB/s | EP avg_t (us) | EP min_t (us) | EP GB/s at min_t | memcpy 64 MiB, 1 core: GB/s | ratio EP/memcpy |"
echo "|---:|---:|---:|---:|---:|---:|"
awk -v e="$ko1_gbps" -v us="$ko1_us" -v mn="$ko1_min" -v gm="$ko1_gmin" -v m="$mc" \
  'BEGIN { printf "| %.3f | %.0f | %.0f | %.3f | %.2f | %.3f |\n", e, us, mn, gm, m, e / m }'
echo
echo "| ranks | transport | EP GB/s (avg over ranks) | EP avg_t (us) | EP min_t (us) | EP GB/s at min_t | kernel-only GB/s | perftest dispatch msg GB/s | perftest combine msg GB/s | perftest GB/s (weighted) | ratio EP/perftest | ratio at min_t | memcpy of D+C, 1 core: GB/s | bound ratio memcpy/perftest |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for tls in $TLS; do
  for n in "${RANKS[@]}"; do
    ep_median "$n" "$tls" >"$work/med"; read -r ep_gbps ep_us ep_min ep_gmin <"$work/med"
    D=$(rank0_field dispatch_bytes); C=$(rank0_field combine_bytes)
    dmsg=$(rank0_field dispatch_msg_bytes); cmsg=$(rank0_field combine_msg_bytes)
    ep_median "$n" "$tls" --kernel-only >"$work/med"; read -r ko_gbps _ <"$work/med"
    pd=$(perftest_median "$tls" "$dmsg"); pc=$(perftest_median "$tls" "$cmsg")
    mib=$(( (D + C + 1048575) / 1048576 ))
    : >"$work/memcpy"
    for ((i = 0; i < REPEATS; i++)); do "$memcpy_bench" "$mib" 15 | sed -n 's/.*median_gbps=\([0-9.]*\).*/\1/p' >>"$work/memcpy"; done
    mcb=$(median <"$work/memcpy")
    first=0; [ "$n" != "${RANKS[0]}" ] || first=1
    awk -v first="$first" -v rows="$work/rows" -v n="$n" -v tls="$tls" -v e="$ep_gbps" -v us="$ep_us" -v mn="$ep_min" -v gm="$ep_gmin" -v k="$ko_gbps" \
      -v pd="$pd" -v pc="$pc" -v D="$D" -v C="$C" -v dm="$dmsg" -v cm="$cmsg" -v mcb="$mcb" -v mib="$mib" 'BEGIN {
        w = (D + C) / (D / pd + C / pc)
        printf "| %d | %s | %.3f | %.0f | %.0f | %.3f | %.3f | %.2f (%d B) | %.2f (%d B) | %.2f | %.3f | %.3f | %.2f (%d MiB) | %.3f |\n",
          n, tls, e, us, mn, gm, k, pd, dm, pc, cm, w, e / w, gm / w, mcb, mib, mcb / w
        # the current-numbers row of the first rank count: "tls n avg_t min_t reference"
        if (first) printf "%s %d %.0f %.0f %.3f of ucx_perftest (%.2f GB/s); %.3f at min_t; memcpy bound %.3f\n",
          tls, n, us, mn, e / w, w, gm / w, mcb / w >>rows }'
  done
done
while read -r tls n us mn ref; do
  bench_row "EP host (\`bench/ep.sh\`), $n ranks over $tls, T=$TOKENS H=$HIDDEN top-$TOPK" \
    "dispatch + combine avg_t / min_t, median of $REPEATS" "$us / $mn us" "$ref"
done <"$work/rows"
