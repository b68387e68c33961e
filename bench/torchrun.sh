#!/usr/bin/env bash
# hyrun against torchrun (Debian's python3-torch 1.13) on this machine, in the same run:
#  - launch: wall time of a no-op job (torchrun --no-python vs hyrun --bootstrap=none) and of a
#    torch.distributed gloo all-reduce job (tests/integration/gloo_allreduce.py), N ranks;
#  - failure: one rank exits 3 while the others sleep 60 s: how long from that exit until the
#    launcher has returned, the job's exit status, and whether a rank process is left behind.
# Prints medians over REPS runs; ratios are torchrun / hyrun.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
REPS=${REPS:-5}
N=${N:-4}
hyrun=$build/launcher/hyrun
python=/usr/bin/python3
prog=$root/tests/integration/gloo_allreduce.py
[ -x "$hyrun" ] || { echo "missing $hyrun: run scripts/build.sh first" >&2; exit 1; }
"$python" -c 'import torch.distributed' 2>/dev/null || { echo "python3-torch is not installed (scripts/install-deps.sh)" >&2; exit 1; }

# Debian's torchrun 1.13 fails on Python 3.11 before it starts anything: Std.from_str("0")
# iterates the IntFlag Std, which on 3.11 no longer yields NONE (0), and returns None. The
# one-line fix, applied here only (never in hyrun): look values up by value.
torchrun=("$python" -c 'import sys; from torch.distributed.elastic.multiprocessing import api; api.Std.from_str = classmethod(lambda c, vm: c(int(vm)) if ":" not in vm else {int(k): c(int(v)) for k, v in (p.split(":") for p in vm.split(","))}); from torch.distributed.run import main; sys.argv[0] = "torchrun"; sys.exit(main())')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hyrun-torchrun.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# median_ms CMD... : median wall time (ms) over REPS runs; each must succeed.
median_ms() {
  local times=() t0 t1
  for _ in $(seq "$REPS"); do
    t0=$(date +%s%N)
    "$@" >"$WORK/out" 2>&1 || { echo "failed: $*" >&2; tail -20 "$WORK/out" >&2; exit 1; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

# failure CMD... : "ms rc left": time from rank 1's exit 3 (the others sleep 60 s) until CMD
# has returned, its status, and how many of its sleeping ranks survive it.
failure() {
  local tag t0 t1 rc left
  tag="hyrun-bench-$RANDOM$RANDOM"
  rm -f "$WORK/failed_at"
  set +e
  timeout -k 5 90 "$@" sh -c "if [ \"\$RANK\" = 1 ]; then date +%s%N >$WORK/failed_at; exit 3; fi; exec sleep 60 # $tag" >"$WORK/out" 2>&1
  rc=$?
  set -e
  t1=$(date +%s%N)
  t0=$(cat "$WORK/failed_at" 2>/dev/null || echo "$t1")
  sleep 0.5
  local pids
  pids=$(pgrep -f -- "$tag" || true)
  left=$(printf '%s' "$pids" | grep -c . || true)
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done  # this run's leftovers, by pid
  echo "$(( (t1 - t0) / 1000000 )) $rc $left"
}

ratio() { echo "scale=2; $1 / $2" | bc; }

version=$("$python" -c 'import torch; print(torch.__version__)')
echo "hyrun vs torchrun ($version), $N ranks, median of $REPS runs, $(nproc) cores, $(date -u +%Y-%m-%d)"
printf '%-28s | %12s | %15s | %6s\n' "job" "hyrun (ms)" "torchrun (ms)" "ratio"
printf -- '-----------------------------+--------------+-----------------+-------\n'
h=$(median_ms "$hyrun" -n "$N" --bootstrap=none -- /bin/true)
t=$(median_ms "${torchrun[@]}" --standalone --nproc_per_node "$N" --no_python /bin/true)
printf '%-28s | %12s | %15s | %6s\n' "no-op (/bin/true)" "$h" "$t" "$(ratio "$t" "$h")"
noop_h=$h noop_t=$t
h=$(median_ms env -u MASTER_ADDR -u MASTER_PORT "$hyrun" -n "$N" --bootstrap=none -- "$python" "$prog")
t=$(median_ms "${torchrun[@]}" --standalone --nproc_per_node "$N" "$prog")
printf '%-28s | %12s | %15s | %6s\n' "gloo all-reduce (python)" "$h" "$t" "$(ratio "$t" "$h")"

echo
echo "rank 1 exits 3, the others sleep 60 s (one run each)"
printf '%-10s | %16s | %11s | %18s\n' "launcher" "ended after (ms)" "exit status" "ranks left behind"
printf -- '-----------+------------------+-------------+-------------------\n'
read -r ms rc left < <(failure "$hyrun" -n "$N" --bootstrap=none --)
printf '%-10s | %16s | %11s | %18s\n' hyrun "$ms" "$rc" "$left"
fail_h="$ms ms, exit $rc" left_h=$left
read -r ms rc left < <(failure "${torchrun[@]}" --standalone --nproc_per_node "$N" --no_python)
printf '%-10s | %16s | %11s | %18s\n' torchrun "$ms" "$rc" "$left"

bench_row "hyrun against torchrun $version (\`bench/torchrun.sh\`), $N ranks" "no-op job wall time, median of $REPS" "$noop_h ms" \
  "torchrun $noop_t ms (ratio $(ratio "$noop_t" "$noop_h")); gloo all-reduce $h ms against $t ($(ratio "$t" "$h"))"
bench_row "the same, rank 1 exits 3" "launcher ends after (one run)" "$fail_h" \
  "torchrun $ms ms, exit $rc; rank processes left behind: $left_h (hyrun), $left (torchrun)"
