#!/usr/bin/env bash
# Phase changes of the elastic EP benchmark, measured: for every reference plan, per phase the
# largest join time over the ranks that join it (from the phase's start to the rank being
# ready), the largest failure-detection time and the phase's wall time, in three launches:
#   all-at-launch  hyrun -n N -- ep-bench: every rank started at launch, joiners idle until their phase
#   one-launch     ep-elastic --num-processes N --restart-returning: a rank's process starts when
#                  its phase begins (hyrun starts it on rank 0's request): process start included
#   staged         CloudAI's single-node waves: ep-elastic for phase 0, and one more ep-elastic
#                  --tcp-server per wave once node 0's log shows the previous phase's end (polled
#                  every 10 ms here, every 1 s by CloudAI): launch, join and process start included
# next to what the reference spends there: a fixed 5 s sleep per phase change, and a 30 s
# timeout before a killed rank is noticed.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
hyrun=$build/launcher/hyrun; bench=$build/worker/ep/programs/ep-bench; elastic=$build/worker/ep/programs/ep-elastic
waves=$root/tests/elastic/cloudai_nixl_ep.py
for b in "$hyrun" "$bench" "$elastic"; do [ -x "$b" ] || { echo "missing $b: run scripts/build.sh first" >&2; exit 1; }; done
ARGS=${ARGS:-"--num-tokens 32 --hidden-dim 2048 --num-topk 4 --warmup 5 --iters 20"}
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# staged PLAN DIR: CloudAI's waves on this machine; the first launch writes DIR/results.json.
staged() {
  local plan=$1 dir=$2 log=$2.log trigger n root="" pids=()
  : >"$log"
  while read -r trigger n; do
    if [ -z "$root" ]; then
      # shellcheck disable=SC2086
      "$elastic" --plan "$plan" --num-processes "$n" --port "$PORT" $ARGS --validate-phase-failures --report-dir "$dir" >>"$log" 2>&1 &
      root=$!; pids+=("$root")
      # The readiness probe (a one-phase plan may end, closing the port, before it answers).
      until timeout 1 bash -c ": > /dev/tcp/127.0.0.1/$PORT" 2>/dev/null || ! kill -0 "$root" 2>/dev/null; do sleep 0.01; done
    else
      until grep -Fq -- "-> end phase $trigger" "$log"; do kill -0 "$root" || return 1; sleep 0.01; done
      # shellcheck disable=SC2086
      "$elastic" --plan "$plan" --num-processes "$n" --port "$PORT" --tcp-server 127.0.0.1 $ARGS >>"$log" 2>&1 &
      pids+=("$!")
    fi
  done < <(python3 "$waves" waves "$plan")
  for p in "${pids[@]}"; do wait "$p"; done
}

echo "elastic phase changes, ep-bench host backend ($ARGS), $(nproc) cores, $(date -u +%Y-%m-%d)"
echo "join ms: largest over the ranks joining the phase, from the phase's start to the rank being ready"
printf '%-28s %5s  %-20s %14s %11s %11s %11s %11s  %s\n' plan phase ranks "all-at-launch" "one-launch" "staged" \
  "detect ms" "phase ms" "reference"
for plan in no_expansion single_expansion double_expansion expansion_contraction expansion_fault_contraction; do
  file=$work/$plan.json  # a copy: ep-elastic writes its token file beside the plan
  cp "$root/examples/plans/$plan.json" "$file"
  n=$(python3 -c "import json,sys; print(max(abs(r) for ph in json.load(open(sys.argv[1])) for r in ph) + 1)" "$file")
  # shellcheck disable=SC2086
  "$hyrun" -n "$n" -- "$bench" --plan "$file" $ARGS --validate-phase-failures --report-dir "$work/$plan.all" >/dev/null
  # shellcheck disable=SC2086
  "$elastic" --plan "$file" --num-processes "$n" --port "$PORT" --restart-returning $ARGS --validate-phase-failures \
    --report-dir "$work/$plan.one" >/dev/null
  staged "$file" "$work/$plan.staged"
  python3 - "$plan" "$work/$plan.all/results.json" "$work/$plan.one/results.json" "$work/$plan.staged/results.json" \
    "$work/phases" <<'PY'
import json, sys
name = sys.argv[1]
runs = [json.load(open(p)) for p in sys.argv[2:5]]
# For the current-numbers row: per phase of the staged run, "phase killed phase_ms detect_ms".
with open(sys.argv[5], "a") as rows:
    for i, ph in enumerate(runs[2]["phases"]):
        detect = ph["max_detect_ms"]
        rows.write(f"{ph['phase']} {int(bool(runs[0]['phases'][i]['killed']))} {ph['duration_ms'] or 0} "
                   f"{'-' if detect is None else detect}\n")
fmt = lambda v: "-" if v is None else f"{v:.1f}"
for i, ph in enumerate(runs[0]["phases"]):
    ref = []
    if ph["phase"] > 0: ref.append("5000 ms sleep")
    if ph["killed"]: ref.append("30000 ms timeout")
    joins = [fmt(r["phases"][i]["max_join_ms"]) for r in runs]
    print(f"{name:28s} {ph['phase']:5d}  {json.dumps(ph['entries']):20s} {joins[0]:>14s} {joins[1]:>11s} {joins[2]:>11s} "
          f"{fmt(runs[2]['phases'][i]['max_detect_ms']):>11s} {fmt(runs[2]['phases'][i]['duration_ms']):>11s}  {' + '.join(ref) or '-'}")
PY
done
read -r phase_ms changes < <(awk '{ ms += $3; if ($1 > 0) n++ } END { printf "%.1f %d\n", ms, n }' "$work/phases")
bench_row "elastic phase changes (\`bench/elastic.sh\`), every plan's phases summed" "phase time (staged), one run" \
  "$phase_ms ms" "the reference sleeps 5000 ms a phase change: $changes x 5000 = $((changes * 5000)) ms"
kills=$(awk '$2 == 1 && $4 != "-" { printf "%s%.1f", n++ ? ", " : "", $4 }' "$work/phases")
bench_row "the same, the kills" "death detected by the survivors (the largest over them), each kill" "${kills:--} ms" \
  "the reference: 30000 ms timeout"
