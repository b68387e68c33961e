#!/usr/bin/env bash
# An elastic phase after kills, on a Slurm cluster of simulated nodes (issue 20): per phase,
# the dispatch + combine call time of ep-bench (avg_t, averaged over the phase's ranks, and
# the smallest min_t), and its ratio to phase 0, the phase before the kill, in the same run.
# 2 nodes x 4 ranks over tcp; ranks killed in phase 1 come back in phase 3, so their new
# processes (hyrun restarts them at once) wait through phase 2 beside the working ranks.
#   HYRUN_CLUSTER_DIR=DIR  use that cluster (scripts/slurm-cluster.sh up); else one is started
#   BUILD_DIR, ARGS, PLANS (space-separated plans), RUNS (runs per plan, default 3)
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
hyrun=$build/launcher/hyrun; bench=$build/worker/ep/programs/ep-bench
for b in "$hyrun" "$bench"; do [ -x "$b" ] || { echo "missing $b: build hyrun and ep-bench first" >&2; exit 1; }; done
ARGS=${ARGS:-"--num-tokens 16 --hidden-dim 512 --num-topk 4 --warmup 2 --iters 20"}
PLANS=${PLANS:-"[[0,1,2,3,4,5,6,7],[0,1,2,3,4,5,-6,-7],[0,1,2,3,4,5],[0,1,2,3,4,5,6,7]] [[0,1,2,3,4,5,6,7],[0,1,-2,-3,4,5,6,7],[0,1,4,5,6,7],[0,1,2,3,4,5,6,7]]"}
RUNS=${RUNS:-3}
work=$(mktemp -d)
: >"$work/rows"
cluster=""
cleanup() {
  [ -n "$cluster" ] && bash "$root/scripts/slurm-cluster.sh" down "$cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${HYRUN_CLUSTER_DIR:-}" ]; then
  cluster=$(bash "$root/scripts/slurm-cluster.sh" up netns 2 8 | tail -1)
  HYRUN_CLUSTER_DIR=$cluster
fi
# shellcheck disable=SC1091
. "$HYRUN_CLUSTER_DIR/cluster.env"

echo "elastic phases after a kill, 2 nodes x 4 ranks, UCX_TLS=$HYRUN_CLUSTER_UCX_TLS, ep-bench ($ARGS), $(nproc) cores, $(date -u +%Y-%m-%d)"
echo "avg ms: avg_t averaged over the phase's ranks; min ms: the smallest min_t; x: avg / phase 0's avg"
printf '%-4s %-60s %5s %10s %10s %8s\n' run plan phase "avg ms" "min ms" x
for plan in $PLANS; do
  for run in $(seq "$RUNS"); do
    out=$work/out
    # shellcheck disable=SC2086
    UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES timeout 300 srun --mpi=pmix -N2 \
      --ntasks-per-node=1 "$hyrun" -n 4 -- "$bench" --plan "$plan" $ARGS >"$out" 2>&1 || { tail -20 "$out"; exit 1; }
    python3 - "$run" "$plan" "$out" "$work/rows" <<'PY'
import re, sys
run, plan, path, rows_file = sys.argv[1:]
phase, rows = {}, {}
for line in open(path):
    if m := re.match(r"global_rank=(\d+), local_rank=\d+ -> start phase (\d+)", line):
        phase[int(m[1])] = int(m[2])
    elif m := re.match(r"\[rank (\d+)\] Dispatch \+ combine bandwidth: .* avg_t=([\d.]+) us, min_t=([\d.]+) us", line):
        rows.setdefault(phase[int(m[1])], []).append((float(m[2]), float(m[3])))
base = sum(a for a, _ in rows[0]) / len(rows[0])
for p in sorted(rows):
    avg = sum(a for a, _ in rows[p]) / len(rows[p])
    print(f"{run:<4} {plan:60s} {p:5d} {avg / 1000:10.1f} {min(m for _, m in rows[p]) / 1000:10.1f} {avg / base:8.2f}")
# For the current-numbers row: the run's slowest phase after phase 0, "plan run phase avg_ms base_ms x".
later = [(sum(a for a, _ in rows[p]) / len(rows[p]), p) for p in rows if p > 0]
if later:
    avg, p = max(later)
    with open(rows_file, "a") as f:
        f.write(f"{plan} {run} {p} {avg / 1000:.1f} {base / 1000:.1f} {avg / base:.2f}\n")
PY
  done
done
# One row a plan: its last run's slowest phase after phase 0.
for plan in $PLANS; do
  read -r _ run phase avg base x < <(awk -v plan="$plan" '$1 == plan' "$work/rows" | tail -1) || continue
  bench_row "elastic phase after kills on Slurm (\`bench/elastic-slurm.sh\`), 2 nodes x 4 ranks, $HYRUN_CLUSTER_UCX_TLS, plan $plan" \
    "the slowest phase after phase 0 (phase $phase, run $run): dispatch + combine avg_t over its ranks" "$avg ms" \
    "$x of phase 0 ($base ms)"
done
