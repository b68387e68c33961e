#!/usr/bin/env bash
# One call on a GPU machine: build with CUDA, run the CUDA correctness tests, then time the
# CUDA EP backend with CUDA events and print the tables for docs/performance.md.
#
#   bench/gpu.sh [--bundle DIR | --build-dir DIR] [--skip-build] [--build-only] [--ranks "1 2 4 8"]
#                [--warmup 50] [--iters 200] [--tokens 128] [--hidden 7168] [--topk 8]
#                [--experts-per-rank 2] [--jobs N] [--mps] [--timing-only] [--cold-calls]
#
# --bundle DIR runs every program from a bundle made by scripts/gpu-bundle.sh (no build,
# nothing installed but the NVIDIA driver): the machines with GPUs have no package registry.
# Steps: 1. configure + build (-DHYRUN_CUDA=ON; not with --bundle); 2. fail (exit 3) unless a CUDA device
# answers; 3. ep-cuda-selftest (CUDA backend bit-identical to the host backend);
# 4. hyrun -n N -- ep-check --backend cuda for every N (ranks share the GPU through CUDA
# IPC; ranks share the GPU without any flag, up to 8 per GPU), and once with
# --disable-ll-nvlink (staged through pinned memory over UCX);
# 5. hyrun -n N -- ep-bench-gpu, through IPC and --kernel-only, for every N (warm-up,
# iterations, median/min/max with CUDA events; rank 0 adds a device-to-device copy and the
# FP8 cast kernel alone, measured in the same run); 6. the tables.
# --timing-only skips steps 3-4 (bench/h100-session.sh runs them itself).
# Timing is the reference's (L2 flushed once, then the calls back to back); --cold-calls
# flushes the L2 and meets in a barrier before every call instead (ep-bench-gpu --cold-calls).
# --mps starts a private MPS control daemon for the run (ranks sharing one GPU then run
# their kernels concurrently instead of time-sliced) and stops it at exit; without it the
# timed runs pass --mps off to hyrun (which would otherwise start a daemon of its own).
# Exit codes: 0 all passed, 1 a test or a run failed, 2 usage, 3 no GPU.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
build=$root/build-gpu; bundle=""; skip_build=0; build_only=0; timing_only=0; ranks="1 2 4 8"
warmup=50; iters=200; tokens=128; hidden=7168; topk=8; experts=2; jobs=$(nproc); mps=0; cold=0

usage() { bench_usage; }
while [ $# -gt 0 ]; do
  case $1 in
  --build-dir) build=$2; shift 2 ;;
  --bundle) bundle=$2; shift 2 ;;
  --skip-build) skip_build=1; shift ;;
  --build-only) build_only=1; shift ;;
  --ranks) ranks=$2; shift 2 ;;
  --warmup) warmup=$2; shift 2 ;;
  --iters) iters=$2; shift 2 ;;
  --tokens) tokens=$2; shift 2 ;;
  --hidden) hidden=$2; shift 2 ;;
  --topk) topk=$2; shift 2 ;;
  --experts-per-rank) experts=$2; shift 2 ;;
  --jobs) jobs=$2; shift 2 ;;
  --mps) mps=1; shift ;;
  --timing-only) timing_only=1; shift ;;
  --cold-calls) cold=1; shift ;;
  -h|--help) usage; exit 0 ;;
  *) echo "bench/gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$warmup" "$iters" "$tokens" "$hidden" "$topk" "$experts" "$jobs" $ranks; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "bench/gpu.sh: '$v' is not a number" >&2; exit 2; }
done

# 1. build (or the bundle's programs)
if [ -n "$bundle" ]; then
  [ -x "$bundle/run" ] && [ -f "$bundle/MANIFEST" ] ||
    { echo "bench/gpu.sh: --bundle $bundle: not a bundle (make one with scripts/gpu-bundle.sh DIR)" >&2; exit 2; }
  bundle=$(cd "$bundle" && pwd)
  eval "$("$bundle/run" --print-env)"
  skip_build=1
fi
if [ "$skip_build" -eq 0 ]; then
  echo "== configure and build ($build, -DHYRUN_CUDA=ON)"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DHYRUN_CUDA=ON >"$build/gpu-configure.log" 2>&1 ||
    { tail -30 "$build/gpu-configure.log" >&2; echo "bench/gpu.sh: configure failed (log: $build/gpu-configure.log)" >&2; exit 1; }
  cmake --build "$build" -j "$jobs" --target hyrun ep-check ep-bench-gpu ep-cuda-selftest
fi
hyrun=$build/launcher/hyrun; check=$build/worker/ep/programs/ep-check; bench=$build/worker/ep/programs/ep-bench-gpu
selftest=$build/worker/ep/programs/ep-cuda-selftest
if [ -n "$bundle" ]; then
  hyrun=$bundle/bin/hyrun; check=$bundle/bin/ep-check; bench=$bundle/bin/ep-bench-gpu; selftest=$bundle/bin/ep-cuda-selftest
fi
for b in "$hyrun" "$check" "$bench" "$selftest"; do
  [ -x "$b" ] || { echo "bench/gpu.sh: missing $b (build with CUDA first)" >&2; exit 1; }
done
[ "$build_only" -eq 1 ] && { echo "bench/gpu.sh: built; --build-only, stopping before the GPU steps"; exit 0; }

# 2. a GPU must answer
if ! command -v nvidia-smi >/dev/null || ! gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1) || [ -z "$gpu" ]; then
  echo "bench/gpu.sh: no GPU: nvidia-smi is missing or reports no device${gpu:+ ($gpu)}; run this on a GPU machine" >&2
  exit 3
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bench.XXXXXX")
cleanup() {
  if [ "$mps" -eq 1 ]; then echo quit | CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe nvidia-cuda-mps-control >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$mps" -eq 1 ]; then
  mkdir -p "$work/mps-pipe" "$work/mps-log"
  export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
  nvidia-cuda-mps-control -d || { echo "bench/gpu.sh: could not start the MPS daemon" >&2; exit 1; }
fi
echo "== GPU: $gpu; $(date -u '+%Y-%m-%d %H:%M UTC'); $(hostname); $(nproc) cores; MPS: $([ "$mps" -eq 1 ] && echo on || echo off)${bundle:+; bundle $bundle}"

failed=0
step() {  # step NAME CMD... : runs, keeps the output, reports PASS/FAIL
  local name=$1; shift
  if "$@" >"$work/step.out" 2>&1; then echo "PASS $name"; else echo "FAIL $name (exit $?)"; tail -20 "$work/step.out"; failed=1; fi
  cat "$work/step.out" >>"$work/all.out"
}

# 3.-4. correctness
if [ "$timing_only" -eq 0 ]; then
  echo "== correctness"
  step "ep-cuda-selftest" "$selftest"
  for n in $ranks; do
    step "ep-check --backend cuda, $n rank(s), CUDA IPC" "$hyrun" -n "$n" -- "$check" --backend cuda
  done
  step "ep-check --backend cuda --disable-ll-nvlink, 2 ranks" "$hyrun" -n 2 -- "$check" --backend cuda --disable-ll-nvlink
  grep -h '^ep-check: SUMMARY' "$work/all.out" || true
fi

# 5. timing
echo "== timing: T=$tokens H=$hidden K=$topk E=$experts, $warmup warm-up, $iters iterations, CUDA events, $([ "$cold" -eq 1 ] && echo 'L2 flushed and a barrier before every call' || echo 'L2 flushed once, calls back to back (the reference)')"
args=(--tokens "$tokens" --hidden "$hidden" --topk "$topk" --experts-per-rank "$experts" --warmup "$warmup" --iters "$iters")
[ "$cold" -eq 1 ] && args+=(--cold-calls)
: >"$work/table"
for n in $ranks; do
  for mode in ipc kernel-only; do
    extra=(); [ "$mode" = kernel-only ] && extra=(--kernel-only)
    # Without --mps the ranks take turns on the GPU: hyrun must not start its own daemon.
    if "$hyrun" -n "$n" --mps "$([ "$mps" -eq 1 ] && echo auto || echo off)" -- "$bench" "${args[@]}" "${extra[@]}" \
      >"$work/b.out" 2>&1; then
      cat "$work/b.out" >>"$work/all.out"
      awk -v n="$n" -v mode="$mode" -f "$root/bench/gpu-row.awk" "$work/b.out" |
        awk '/^CAST/ { print; next } { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' \
        >>"$work/table" || { echo "FAIL ep-bench-gpu n=$n $mode: no result lines"; failed=1; }
    else
      echo "FAIL ep-bench-gpu n=$n $mode"; tail -20 "$work/b.out"; failed=1
    fi
  done
done
echo
echo "| ranks | mode | EP GB/s per rank (median, avg over ranks) | EP GB/s summed over ranks | dispatch us (median) | combine us (median) | dispatch+combine us (median) | min us | max us | D2D copy GB/s (same run) | ratio summed EP/copy |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
grep '^|' "$work/table" || true
echo
echo "FP8 cast kernel alone (rank 0, same runs):"
grep '^CAST' "$work/table" | sed 's/^CAST /  n=/' || true
echo
grep -h 'Dispatch + combine bandwidth' "$work/all.out" | head -40 || true
echo
echo "Send and receive halves (--kernel-only runs):"
grep -h 'gpu-bench halves' "$work/all.out" | head -40 || true

# The rows: 1 rank (the first count) and the most ranks (the last), through IPC.
bench_row_machine="${gpu%%,*}, driver $(echo "${gpu##*,}" | tr -d ' '), $(nproc)-core $(hostname)"
[ -z "$bundle" ] || bench_row_bundle_commit "$bundle"
what="T=$tokens H=$hidden top-$topk, $experts experts a rank"
[ "$mps" -eq 0 ] || what+=", under MPS"
[ "$cold" -eq 0 ] || what+=", every call cold"
read -r first_n _ <<<"$ranks"; for last_n in $ranks; do :; done
for n in $(printf '%s\n' "$first_n" "$last_n" | uniq); do
  # | n | mode | per rank | summed | dispatch | combine | median | min | max | copy | summed/copy |
  row=$(awk -F' *[|] *' -v n="$n" '$2 == n && $3 == "ipc" { print $8, $12, $11; exit }' "$work/table")
  [ -n "$row" ] || continue
  read -r us ratio copy <<<"$row"
  bench_row "EP CUDA (\`bench/gpu.sh\`), $n rank(s) sharing the GPU through IPC, $what" "dispatch + combine, median" "$us us" \
    "summed bandwidth $ratio of a D2D copy ($copy GB/s)"
done
if [ "$timing_only" -eq 0 ]; then
  bench_row "EP CUDA (\`bench/gpu.sh\`), every step: the selftest, ep-check with ${ranks// /, } rank(s) and staged, the timing runs" "PASS / FAIL" \
    "$(if [ "$failed" -eq 0 ]; then echo 'all PASS'; else echo 'some FAIL'; fi)" "-"
fi
[ "$failed" -eq 0 ] && echo "bench/gpu.sh: all steps passed" || { echo "bench/gpu.sh: some steps FAILED" >&2; exit 1; }
