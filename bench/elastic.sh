#!/usr/bin/env bash
# Phase changes of the elastic EP benchmark, measured: for every reference plan, one launch of
# hyrun -n N -- ep-bench in local mode; per phase the largest join time (phase sent to rank
# ready) and failure-detection time over the ranks, and the phase's wall time, next to what
# the reference benchmark spends there: a fixed 5 s sleep per phase change, and a 30 s
# timeout before a killed rank is noticed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
hyrun=$build/launcher/hyrun; bench=$build/worker/ep/elastic/ep-bench
for b in "$hyrun" "$bench"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
ARGS=${ARGS:-"--num-tokens 32 --hidden-dim 2048 --num-topk 4 --warmup 5 --iters 20"}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

echo "elastic phase changes, ep-bench host backend ($ARGS), local mode, $(nproc) cores, $(date -u +%Y-%m-%d)"
printf '%-28s %5s  %-22s %9s %11s %11s  %s\n' plan phase ranks "join ms" "detect ms" "phase ms" "reference"
for plan in no_expansion single_expansion double_expansion expansion_contraction expansion_fault_contraction; do
  file=$root/examples/plans/$plan.json
  n=$(python3 -c "import json,sys; print(max(abs(r) for ph in json.load(open(sys.argv[1])) for r in ph) + 1)" "$file")
  # shellcheck disable=SC2086
  "$hyrun" -n "$n" -- "$bench" --plan "$file" $ARGS --validate-phase-failures --report-dir "$work/$plan" >/dev/null
  python3 - "$plan" "$work/$plan/results.json" <<'PY'
import json, sys
name, results = sys.argv[1], json.load(open(sys.argv[2]))
fmt = lambda v: "-" if v is None else f"{v:.1f}"
for ph in results["phases"]:
    ref = []
    if ph["phase"] > 0: ref.append("5000 ms sleep")
    if ph["killed"]: ref.append("30000 ms timeout")
    print(f"{name:28s} {ph['phase']:5d}  {json.dumps(ph['entries']):22s} {fmt(ph['max_join_ms']):>9s} "
          f"{fmt(ph['max_detect_ms']):>11s} {fmt(ph['duration_ms']):>11s}  {' + '.join(ref) or '-'}")
PY
done
