#!/usr/bin/env bash
# The README's main job, with what is built in build/ (or $BUILD_DIR), no build step: 8 ranks
# of the elastic EP benchmark on this machine, the reference expansion/contraction plan (ranks
# 4-7 join, rank 6 is killed mid-phase and rank 5 leaves, both come back), host backend, sizes
# small enough to finish in seconds on 2 cores. The one definition of the main job:
# scripts/run-example.sh, bench/soak.sh and the suite's main-job.repeat test run it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
args=(--plan "$root/examples/plans/expansion_contraction.json" --backend host
      --num-tokens 32 --hidden-dim 2048 --num-topk 4 --warmup 5 --iters 20 --validate-phase-failures)
[ "${HYRUN_MAIN_JOB_QUIET:-0}" = 1 ] || echo "+ hyrun -n 8 -- ep-bench ${args[*]/#$root\//}"
exec "$build/launcher/hyrun" -n 8 -- "$build/worker/ep/programs/ep-bench" "${args[@]}"
