#!/usr/bin/env bash
# The first runs of the CUDA EP path on a GPU machine (issue 9, item 5), from a bundle
# made by scripts/gpu-bundle.sh, with nothing installed there but the NVIDIA driver.
# Every step has a time limit and its output in the log folder; the summary says PASS,
# FAIL or NOT RUN (with why) per step, for docs/performance.md.
#
#   bench/h100-session.sh --bundle DIR [--logs DIR] [--budget-s 560] [--step-cap-s S] [--part PART[,PART...]]
#
# PART: correctness, plans, kill, plans-mps, sanitizer, timing, timing-mps, binding,
# hyrun-mps, profile, or all (default; in that order, most important first). --budget-s bounds the whole run (a device call has 10
# minutes): a step that would start too late is NOT RUN "(time budget)", and a later call
# runs the parts left with --part. --step-cap-s caps every step but the timing one (a first
# run on a new machine, where a hang should cost little of the budget). Parts:
#   correctness  ep-cuda-selftest; ep-check --backend cuda with 1, 2, 4, 8 ranks (CUDA IPC,
#                ranks sharing the GPU) and with 2 ranks --disable-ll-nvlink (staged, UCX)
#   sanitizer    ep-cuda-selftest --small under compute-sanitizer --tool memcheck and
#                --tool racecheck (NOT RUN when compute-sanitizer is absent)
#   plans        every examples/plans/*.json with --backend cuda --validate
#                --validate-phase-failures on 8 ranks sharing the GPU
#   kill         a rank SIGKILLed outside the plan: the job must stop with hyrun naming the
#                rank, no process may stay on the GPU, ep-cuda-selftest must pass afterwards
#   plans-mps    the plans again under a private MPS daemon (nvidia-cuda-mps-control -d)
#   timing       bench/gpu.sh --bundle DIR --timing-only (CUDA events, L2 flushed)
#   timing-mps   the same under MPS, at the reference sizes and at CloudAI's example sizes
#                (256 tokens, hidden 8192, top-6, 4 experts per rank), and with every call
#                cold (--cold-calls)
#   binding      bench/gpu-binding.sh: hyrun's plan against what each rank sees (PCI bus
#                id of its CUDA device, CPUs, memory nodes); the machine's hwloc XML
#   hyrun-mps    8 ranks with hyrun's default --mps auto: hyrun must start a private MPS
#                daemon, say so, and leave no MPS process behind; then --mps off (a warning)
#   profile      Nsight Compute (ncu) over one kernel-only rank (two calls of its warm-up):
#                per-kernel time and memory throughput (NOT RUN when ncu is absent)
# Logs: DIR/summary.txt (also printed) and one file per step. Default DIR: $OUT/h100 when
# $OUT is set (the device tool brings it back; at most 8 files come back, so the step logs
# are then packed into $OUT/h100-logs.tar.gz), else ./h100-logs.
# Exit codes: 0 every step that ran passed, 1 a step failed, 2 usage, 3 no GPU.
set -uo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
bundle=""; logs=""; part=all; budget=560; cap=
while [ $# -gt 0 ]; do
  case $1 in
  --bundle) bundle=$2; shift 2 ;;
  --logs) logs=$2; shift 2 ;;
  --part) part=$2; shift 2 ;;
  --budget-s) budget=$2; shift 2 ;;
  --step-cap-s) cap=$2; shift 2 ;;
  -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "h100-session.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "h100-session.sh: --budget-s '$budget' is not a number of seconds" >&2; exit 2; }
[[ -z $cap || $cap =~ ^[0-9]+$ ]] || { echo "h100-session.sh: --step-cap-s '$cap' is not a number of seconds" >&2; exit 2; }
[ "$part" = all ] && part=correctness,plans,kill,plans-mps,sanitizer,timing,timing-mps,binding,hyrun-mps,profile
IFS=, read -r -a parts <<<"$part"
for p in "${parts[@]}"; do
  case $p in correctness|plans|kill|plans-mps|sanitizer|timing|timing-mps|binding|hyrun-mps|profile) ;;
  *) echo "h100-session.sh: --part '$p': expected correctness, plans, kill, plans-mps, sanitizer, timing, timing-mps, binding, hyrun-mps, profile or all" >&2; exit 2 ;;
  esac
done
[ -n "$bundle" ] && [ -x "$bundle/run" ] && [ -f "$bundle/MANIFEST" ] ||
  { echo "h100-session.sh: --bundle DIR: a folder made by scripts/gpu-bundle.sh is needed ('${bundle}' is not one)" >&2; exit 2; }
bundle=$(cd "$bundle" && pwd)
logs=${logs:-${OUT:+$OUT/h100}}
logs=${logs:-$PWD/h100-logs}
mkdir -p "$logs" || { echo "h100-session.sh: cannot create $logs" >&2; exit 2; }
summary=$logs/summary.txt
eval "$("$bundle/run" --print-env)"
B=$bundle/bin
failed=0

note() { echo "$*" | tee -a "$summary"; }
# step NAME LIMIT_S CMD...: runs CMD with a time limit (within the budget), output in
# $logs/NAME.log.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc left=$((budget - SECONDS))
  if [ "$left" -lt 30 ]; then not_run "$name" "time budget (${budget} s) spent; run it with --part"; return 0; fi
  [ -n "$cap" ] && [[ $name != gpu-bench* ]] && [ "$limit" -gt "$cap" ] && limit=$cap
  [ "$limit" -gt "$left" ] && limit=$left
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    note "PASS    $name ($((SECONDS - t0)) s)"
  else
    [ "$rc" -eq 124 ] && note "FAIL    $name: no end within ${limit} s" || note "FAIL    $name: exit $rc ($((SECONDS - t0)) s)"
    tail -15 "$logs/$name.log" | sed 's/^/        | /' | tee -a "$summary"
    failed=1
  fi
  return $rc
}
not_run() { note "NOT RUN $1: $2"; }

# The machine
if ! command -v nvidia-smi >/dev/null || ! gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1) ||
  [ -z "$gpu" ]; then
  echo "h100-session.sh: no GPU: nvidia-smi ${gpu:-is missing}; run this on a GPU machine" >&2
  exit 3
fi
note "== $(date -u '+%Y-%m-%d %H:%M UTC') $(hostname): $gpu; $(nproc) cores; part $part"
note "   bundle: $(sed -n 2p "$bundle/MANIFEST"); $(grep -m1 '^nvcc' "$bundle/MANIFEST")"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
[ "${driver%%.*}" -ge 580 ] 2>/dev/null || note "   WARNING: driver $driver: the bundled CUDA 13 runtime needs >= 580"
sanitizer=$(command -v compute-sanitizer || find /usr/local/cuda*/bin -maxdepth 1 -name compute-sanitizer 2>/dev/null | head -1)
ncu=$(command -v ncu || find /usr/local/cuda*/bin /opt/nvidia/nsight-compute/* -maxdepth 1 -name ncu 2>/dev/null | head -1)

correctness() {
  note "== correctness"
  step selftest 180 "$B/ep-cuda-selftest"
  for n in 1 2 4 8; do
    step "ep-check-cuda-np$n" 240 "$B/hyrun" -n "$n" -- "$B/ep-check" --backend cuda
  done
  step ep-check-cuda-staged-np2 240 "$B/hyrun" -n 2 -- "$B/ep-check" --backend cuda --disable-ll-nvlink
  grep -h '^ep-check: SUMMARY' "$logs"/ep-check-cuda-*.log 2>/dev/null | sed 's/^/   /' | tee -a "$summary"
}

sanitize() {
  note "== compute-sanitizer"
  if [ -n "$sanitizer" ]; then
    step selftest-memcheck 280 "$sanitizer" --tool memcheck --error-exitcode 1 "$B/ep-cuda-selftest" --small
    step selftest-racecheck 280 "$sanitizer" --tool racecheck --error-exitcode 1 "$B/ep-cuda-selftest" --small
  else
    not_run selftest-memcheck "compute-sanitizer is not on this machine (CUDA toolkit absent)"
    not_run selftest-racecheck "compute-sanitizer is not on this machine (CUDA toolkit absent)"
  fi
}

mps_dir=""
mps_start() {
  mps_dir=$(mktemp -d "${TMPDIR:-/tmp}/h100-mps.XXXXXX")
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
  nvidia-cuda-mps-control -d
}
mps_stop() {
  [ -n "$mps_dir" ] || return 0
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  rm -rf "$mps_dir"
  mps_dir=""
}
trap mps_stop EXIT

run_plans() {  # run_plans TAG [HYRUN OPTIONS]
  local p name tag=$1; shift
  for p in "$bundle"/plans/*.json; do
    name=$(basename "$p" .json)
    step "plan-$tag-$name" 240 "$B/hyrun" -n 8 "$@" -- "$B/ep-bench" --plan "$p" --backend cuda --validate \
      --validate-phase-failures --timeout-ms 20000
    grep -h 'Dispatch + combine bandwidth' "$logs/plan-$tag-$name.log" | head -1 | sed "s/^/   $name: /" | tee -a "$summary"
  done
}

plans() {
  note "== plans: 8 ranks on the GPU without MPS (--mps off), --backend cuda --validate --validate-phase-failures"
  run_plans plain --mps off
}

plans_mps() {
  note "== plans under MPS"
  if command -v nvidia-cuda-mps-control >/dev/null && mps_start >"$logs/mps-start.log" 2>&1; then
    note "   MPS daemon started"
    run_plans mps
    mps_stop
  else
    not_run "plans under MPS" "nvidia-cuda-mps-control is missing or did not start ($(tail -1 "$logs/mps-start.log" 2>/dev/null))"
  fi
}

kill_rank() {
  note "== a rank SIGKILLed outside the plan"
  if [ $((budget - SECONDS)) -lt 90 ]; then not_run unplanned-kill "time budget (${budget} s) spent; run it with --part kill"; return; fi
  local log=$logs/unplanned-kill.log hy victim rc
  "$B/hyrun" -n 8 -- "$B/ep-bench" --plan '[[0,1,2,3,4,5,6,7]]' --backend cuda --iters 1000000 --timeout-ms 20000 >"$log" 2>&1 &
  hy=$!
  for _ in $(seq 600); do grep -q 'start phase 0' "$log" && break; sleep 0.1; done
  sleep 2
  victim=$(pgrep -P "$hy" | while read -r p; do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'HYRUN_RANK=2' && echo "$p"; done)
  if [ -z "$victim" ]; then
    note "FAIL    unplanned-kill: rank 2's process not found"; failed=1; kill -TERM $hy 2>/dev/null
  else
    local t0=$SECONDS
    kill -9 "$victim"
    timeout 120 tail --pid=$hy -f /dev/null
    if kill -0 "$hy" 2>/dev/null; then  # every wait has a limit: hyrun must be gone by now
      note "FAIL    unplanned-kill: hyrun still runs 120 s after the kill; stopping it"; failed=1
      kill -TERM "$hy"; sleep 5; kill -KILL "$hy" 2>/dev/null
    fi
    wait $hy; rc=$?
    if [ "$rc" -ne 0 ] && grep -q "hyrun: rank 2 (pid $victim) was killed by signal 9" "$log"; then
      note "PASS    unplanned-kill: hyrun stopped the job in $((SECONDS - t0)) s (exit $rc) naming rank 2"
    else
      note "FAIL    unplanned-kill: exit $rc; see $log"; failed=1
    fi
  fi
  sleep 2
  local left
  left=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>&1 | grep -v '^$' || true)
  [ -z "$left" ] && note "PASS    unplanned-kill: no process left on the GPU" ||
    { note "FAIL    unplanned-kill: processes left on the GPU: $left"; failed=1; }
  step selftest-after-kill 180 "$B/ep-cuda-selftest"
}

timing() {
  note "== timing (bench/gpu.sh --bundle)"
  step gpu-bench 540 "$root/bench/gpu.sh" --bundle "$bundle" --timing-only
  sed -n '/^| ranks/,/^$/p' "$logs/gpu-bench.log" | tee -a "$summary"
}

timing_mps() {
  note "== timing under MPS (bench/gpu.sh --bundle --mps)"
  step gpu-bench-mps 270 "$root/bench/gpu.sh" --bundle "$bundle" --timing-only --mps
  sed -n '/^| ranks/,/^$/p' "$logs/gpu-bench-mps.log" | tee -a "$summary"
  note "   CloudAI's example sizes: 256 tokens, hidden 8192, top-6, 4 experts per rank"
  step gpu-bench-mps-cloudai 270 "$root/bench/gpu.sh" --bundle "$bundle" --timing-only --mps --tokens 256 \
    --hidden 8192 --topk 6 --experts-per-rank 4
  sed -n '/^| ranks/,/^$/p' "$logs/gpu-bench-mps-cloudai.log" | tee -a "$summary"
  note "   every call cold (--cold-calls: the L2 flushed and a barrier before each)"
  step gpu-bench-mps-cold 270 "$root/bench/gpu.sh" --bundle "$bundle" --timing-only --mps --cold-calls
  sed -n '/^| ranks/,/^$/p' "$logs/gpu-bench-mps-cold.log" | tee -a "$summary"
}

binding() {
  note "== binding: hyrun's plan against what each rank sees"
  step gpu-binding 120 "$root/bench/gpu-binding.sh" --bundle "$bundle" --out "$logs/binding"
  grep -E '^(MATCH|MISMATCH|topology saved|gpu-binding.sh:)' "$logs/gpu-binding.log" | sed 's/^/   /' | tee -a "$summary"
}

hyrun_mps() {
  note "== hyrun's own MPS daemon (--mps auto, the default)"
  if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || [ -e /tmp/nvidia-mps/control ]; then
    not_run hyrun-mps "an MPS daemon already runs here"; return
  fi
  step hyrun-mps-auto 120 "$B/hyrun" -n 8 -- "$B/ep-bench-gpu" --iters 100
  grep -h 'hyrun started a private MPS daemon' "$logs/hyrun-mps-auto.log" | head -1 | sed 's/^/   /' | tee -a "$summary"
  grep -q 'hyrun started a private MPS daemon' "$logs/hyrun-mps-auto.log" ||
    { note "FAIL    hyrun-mps: no line saying hyrun started a daemon"; failed=1; }
  grep -h 'Dispatch + combine bandwidth' "$logs/hyrun-mps-auto.log" | head -2 | sed 's/^/   /' | tee -a "$summary"
  sleep 1
  local left
  left=$(pgrep -a -f 'nvidia-cuda-mps-(control|server)' || true)
  [ -z "$left" ] && note "PASS    hyrun-mps: no MPS process left after the job" ||
    { note "FAIL    hyrun-mps: MPS processes left: $left"; failed=1; }
  step hyrun-mps-off 120 "$B/hyrun" -n 2 --mps off -- "$B/ep-bench-gpu" --iters 20
  grep -h 'share the GPU at' "$logs/hyrun-mps-off.log" | head -1 | sed 's/^/   /' | tee -a "$summary"
}

profile() {
  note "== Nsight Compute"
  if [ -z "$ncu" ]; then not_run profile "ncu is not on this machine"; return; fi
  # 16 kernels after the first 16 (two dispatch+combine calls of the warm-up): ncu replays
  # each profiled kernel. ncu runs as the rank (hyrun starts it; it starts ep-bench-gpu):
  # profiling hyrun's whole process tree never ended within the limit.
  step ncu-kernel-only 150 "$B/hyrun" -n 1 -- "$ncu" --launch-skip 16 --launch-count 16 --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,launch__grid_size \
    "$B/ep-bench-gpu" --kernel-only --warmup 2 --iters 4
  grep -E '^\s+[a-z_]+_kernel|gpu__time_duration|dram__|launch__grid' "$logs/ncu-kernel-only.log" | head -120 >"$logs/ncu-summary.txt"
}

for p in "${parts[@]}"; do
  case $p in
  correctness) correctness ;;
  plans) plans ;;
  kill) kill_rank ;;
  plans-mps) plans_mps ;;
  sanitizer) sanitize ;;
  timing) timing ;;
  timing-mps) timing_mps ;;
  binding) binding ;;
  profile) profile ;;
  hyrun-mps) hyrun_mps ;;
  esac
done
note "== $([ "$failed" -eq 0 ] && echo 'every step that ran passed' || echo 'some steps FAILED'); logs in $logs"
# The rows: this session's steps, then the rows of the benches it ran (their logs).
bench_row_machine="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), driver $driver, $(nproc)-core $(hostname)"
bench_row_bundle_commit "$bundle"
bench_row "EP CUDA on a GPU (\`bench/h100-session.sh\`), parts $part" "steps PASS / FAIL / NOT RUN" \
  "$(grep -c '^PASS' "$summary") / $(grep -c '^FAIL' "$summary") / $(grep -c '^NOT RUN' "$summary")" "-" | tee -a "$summary"
for log in "$logs"/gpu-bench*.log "$logs"/gpu-binding.log; do
  [ -f "$log" ] && sed -n '/^current-numbers row/,$p' "$log" | grep '^| ' | tee -a "$summary"
done
# The device tool brings back at most 8 files from $OUT: one archive holds every step's log.
if [ -n "${OUT:-}" ] && [[ $logs == "$OUT"/* ]]; then
  tar -czf "$OUT/h100-logs.tar.gz" -C "$(dirname "$logs")" "$(basename "$logs")" && find "$logs" -name '*.log' -delete
fi
exit $failed
