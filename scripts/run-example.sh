#!/usr/bin/env bash
# The main job on its embedded default: builds everything, then runs the elastic EP benchmark
# on this machine without any PMIx server: 8 ranks, the reference expansion/contraction plan
# (ranks 4-7 join, rank 6 is killed mid-phase and rank 5 leaves, both come back), host backend,
# sizes small enough to finish in seconds on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh" >/dev/null
cmd=("$build/launcher/hyrun" -n 8 -- "$build/worker/ep/elastic/ep-bench"
     --plan "$root/examples/plans/expansion_contraction.json" --backend host
     --num-tokens 32 --hidden-dim 2048 --num-topk 4 --warmup 5 --iters 20 --validate-phase-failures)
echo "+ hyrun -n 8 -- ep-bench --plan examples/plans/expansion_contraction.json --backend host --num-tokens 32 --hidden-dim 2048 --num-topk 4 --warmup 5 --iters 20 --validate-phase-failures"
exec "${cmd[@]}"
