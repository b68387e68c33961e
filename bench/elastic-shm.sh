#!/usr/bin/env bash
# Elastic EP on one node against a plain EP run in the same session: does the elastic
# benchmark (ep-bench, World with peer error handling) get the transports and bandwidth of a
# run that does not handle deaths (ep-bench-host)?
#
#   bench/elastic-shm.sh [RANKS...]      (default: 2 4)
#   env: BUILD_DIR (build), REPEATS (5), TOKENS/HIDDEN/TOPK (128/7168/8), ITERS (30), WARMUP (5)
#
# For each world size, REPEATS rounds of: one ep-bench run (plan: every rank, one phase) and
# one ep-bench-host run with the same sizes and experts (4 per rank with 2 ranks, else 2),
# default UCX_TLS. Figures are the benchmarks' logical GB/s (ep-bench's "Overall mean",
# ep-bench-host's average over ranks), medians of the rounds; ratio = elastic / plain.
# Last, the transports UCX picks for each (UCX_LOG_LEVEL=info, "ep_cfg" lines).
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
REPEATS=${REPEATS:-5}; TOKENS=${TOKENS:-128}; HIDDEN=${HIDDEN:-7168}; TOPK=${TOPK:-8}
ITERS=${ITERS:-30}; WARMUP=${WARMUP:-5}
RANKS=("$@"); [ ${#RANKS[@]} -gt 0 ] || RANKS=(2 4)
hyrun=$build/launcher/hyrun; elastic=$build/worker/ep/programs/ep-bench; plain=$build/worker/ep/programs/ep-bench-host
for b in "$hyrun" "$elastic" "$plain"; do [ -x "$b" ] || { echo "bench/elastic-shm.sh: missing $b: build first" >&2; exit 1; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/elastic-shm.XXXXXX"); trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
experts_for() { [ "$1" -le 2 ] && echo 4 || echo 2; }  # top-8 needs 8 experts in all
run_elastic() {  # N [hyrun options]: prints the overall GB/s
  local n=$1; shift
  "$hyrun" -n "$n" "$@" -- "$elastic" --plan "[[$(seq -s, 0 $((n - 1)))]]" --num-tokens "$TOKENS" --hidden-dim "$HIDDEN" \
    --num-topk "$TOPK" --num-experts-per-rank "$(experts_for "$n")" --warmup "$WARMUP" --iters "$ITERS" >"$work/out" 2>&1 ||
    { cat "$work/out" >&2; exit 1; }
  sed -n 's/^Overall mean dispatch + combine bandwidth: \([0-9.]*\) GB\/s.*/\1/p' "$work/out"
}
run_plain() {  # N [hyrun options]: prints the GB/s averaged over ranks
  local n=$1; shift
  "$hyrun" -n "$n" "$@" -- "$plain" --tokens "$TOKENS" --hidden "$HIDDEN" --topk "$TOPK" \
    --experts-per-rank "$(experts_for "$n")" --iters "$ITERS" --warmup "$WARMUP" >"$work/out" 2>&1 ||
    { cat "$work/out" >&2; exit 1; }
  awk '/Dispatch \+ combine bandwidth:/ { g += $7; n++ } END { printf "%.3f\n", g / n }' "$work/out"
}

echo "elastic (ep-bench) vs plain (ep-bench-host) EP on one node: T=$TOKENS H=$HIDDEN K=$TOPK, $ITERS iterations after $WARMUP warm-up, median of $REPEATS rounds"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(ucx_info -v 2>/dev/null | head -1 | sed 's/^# *//')"
echo
echo "| ranks | elastic GB/s | plain GB/s | ratio elastic/plain |"
echo "|---:|---:|---:|---:|"
for n in "${RANKS[@]}"; do
  : >"$work/e"; : >"$work/p"
  for ((i = 0; i < REPEATS; i++)); do run_elastic "$n" >>"$work/e"; run_plain "$n" >>"$work/p"; done
  e=$(median <"$work/e"); p=$(median <"$work/p")
  awk -v n="$n" -v e="$e" -v p="$p" 'BEGIN { printf "| %d | %.2f | %.2f | %.2f |\n", n, e, p, e / p }'
  awk -v n="$n" -v e="$e" -v p="$p" 'BEGIN { printf "%d %.2f %.2f %.2f\n", n, e, p, e / p }' >>"$work/rows"
done
echo
n=${RANKS[0]}
transports() { grep -ho 'ep_cfg\[[0-9]*\]: .*' "$work/out" | sed 's/^ep_cfg\[[0-9]*\]: //' | sort | uniq -c | sed 's/^ */    /'; }
ITERS=2 WARMUP=0 run_elastic "$n" -x UCX_LOG_LEVEL=info >/dev/null || true
echo "transports of the elastic run, $n ranks (UCX_LOG_LEVEL=info; count: endpoint configuration):"; transports
ITERS=2 WARMUP=0 run_plain "$n" -x UCX_LOG_LEVEL=info >/dev/null || true
echo "transports of the plain run, $n ranks:"; transports
while read -r n e p ratio; do
  bench_row "elastic EP on one node against a plain run (\`bench/elastic-shm.sh\`), $n ranks, T=$TOKENS H=$HIDDEN top-$TOPK" \
    "elastic (ep-bench) GB/s, median of $REPEATS rounds" "$e GB/s" "$ratio of the plain run's (ep-bench-host, $p GB/s)"
done <"$work/rows"
