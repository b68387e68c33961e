#!/usr/bin/env bash
# Runs things many times, quiet and with a CPU hog on every core, and prints a table of passes:
# a run that fails once in N is a bug, and this is how it shows.
#
#   bench/soak.sh [--main N] [--ctest REGEX --repeat K] [--hybrid M --hybrid-runs R [--per-node n]]
#                 [--load quiet|hog|both] [--keep DIR]
#
#   --main N         the README's main job (scripts/main-job.sh) N times
#   --ctest REGEX    the ctest selection REGEX (ctest -R), --repeat K times (default 10)
#   --hybrid M       srun --mpi=pmix -N M --ntasks-per-node=1 hyrun -n n -- hello on an M-node
#                    Slurm testbed (scripts/slurm-cluster.sh, netns mode where possible),
#                    --hybrid-runs R times (default 10), n = --per-node (default 4); needs root
#   --load           quiet, hog (a busy loop on every core) or both (default)
#   --keep DIR       the output of every failed run goes here (default: a fresh temporary dir)
#
# Uses what is built in build/ (or $BUILD_DIR). Every run is bounded (timeout 300 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
main_runs=0 ctest_regex="" ctest_repeat=10 hybrid_nodes=0 hybrid_runs=10 per_node=4 load=both keep=""
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --main) main_runs=$2; shift 2 ;;
    --ctest) ctest_regex=$2; shift 2 ;;
    --repeat) ctest_repeat=$2; shift 2 ;;
    --hybrid) hybrid_nodes=$2; shift 2 ;;
    --hybrid-runs) hybrid_runs=$2; shift 2 ;;
    --per-node) per_node=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) usage ;;
  esac
done
for v in "$main_runs" "$ctest_repeat" "$hybrid_nodes" "$hybrid_runs" "$per_node"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "soak: '$v' is not a count (a whole number >= 0)" >&2; exit 2; }
done
case $load in quiet) loads=(quiet) ;; hog) loads=(hog) ;; both) loads=(quiet hog) ;; *) usage ;; esac
[ "$main_runs" -gt 0 ] || [ -n "$ctest_regex" ] || [ "$hybrid_nodes" -gt 0 ] || usage
[ -x "$build/launcher/hyrun" ] || { echo "soak: no $build/launcher/hyrun: run scripts/build.sh first" >&2; exit 1; }
keep=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/hyrun-soak.XXXXXX")}
mkdir -p "$keep"

hogs=() cluster=""
hog_start() { for _ in $(seq "$(nproc)"); do (while :; do :; done) & hogs+=($!); done; }
hog_stop() { [ ${#hogs[@]} -eq 0 ] || { kill "${hogs[@]}" 2>/dev/null || true; wait "${hogs[@]}" 2>/dev/null || true; }; hogs=(); }
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  hog_stop
  [ -z "$cluster" ] || bash "$root/scripts/slurm-cluster.sh" down "$cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rows=()
# row WHAT LOAD PASSED RUNS FIRST_FAILURE
row() { rows+=("$(printf '| %-44s | %-5s | %4s of %-4s | %s |' "$1" "$2" "$3" "$4" "${5:--}")"); }

soak_main() {  # LOAD
  local ok=0 first="" i
  for i in $(seq "$main_runs"); do
    if HYRUN_MAIN_JOB_QUIET=1 timeout -k 5 300 bash "$root/scripts/main-job.sh" >"$keep/main.$1.$i.log" 2>&1; then
      ok=$((ok + 1)); rm -f "$keep/main.$1.$i.log"
    else
      [ -n "$first" ] || first="run $i: $(grep -E '^hyrun' "$keep/main.$1.$i.log" | tail -1 | cut -c1-120) ($keep/main.$1.$i.log)"
    fi
  done
  row "main job (scripts/main-job.sh)" "$1" "$ok" "$main_runs" "$first"
}

soak_ctest() {  # LOAD: per test, how many of the K runs passed (a skipped run, exit 77, is not counted)
  local i name
  declare -A passed=() skipped=() first_of=()
  for i in $(seq "$ctest_repeat"); do
    ctest --test-dir "$build" -R "$ctest_regex" --timeout 300 --output-on-failure >"$keep/ctest.$1.$i.log" 2>&1 || true
    while read -r name verdict; do  # verdict: 1 passed, 2 skipped, 0 failed
      passed[$name]=$(( ${passed[$name]:-0} + (verdict == 1) ))
      skipped[$name]=$(( ${skipped[$name]:-0} + (verdict == 2) ))
      [ "$verdict" != 0 ] || [ -n "${first_of[$name]:-}" ] || first_of[$name]="run $i ($keep/ctest.$1.$i.log)"
    done < <(awk '/Test +#[0-9]+: / { for (f = 1; f <= NF; f++) if ($f ~ /^#[0-9]+:$/) name = $(f + 1);
                                      print name, ($0 ~ / Passed /) ? 1 : ($0 ~ /\*\*\*Skipped/) ? 2 : 0 }' "$keep/ctest.$1.$i.log")
    grep -qE '(Failed|Timeout|Exception)' "$keep/ctest.$1.$i.log" || rm -f "$keep/ctest.$1.$i.log"
  done
  [ ${#passed[@]} -gt 0 ] || { row "ctest -R '$ctest_regex'" "$1" 0 "$ctest_repeat" "no test matched"; return; }
  for name in $(printf '%s\n' "${!passed[@]}" | sort); do
    local runs=$((ctest_repeat - skipped[$name])) note=${first_of[$name]:-}
    [ "${skipped[$name]}" = 0 ] || note="${skipped[$name]} skipped (exit 77)${note:+; $note}"
    row "$name" "$1" "${passed[$name]}" "$runs" "$note"
  done
}

soak_hybrid() {  # LOAD
  local ok=0 first="" i world=$((hybrid_nodes * per_node)) log
  for i in $(seq "$hybrid_runs"); do
    log="$keep/hybrid.$1.$i.log"
    if UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES timeout -k 5 300 \
         srun --mpi=pmix -N "$hybrid_nodes" --ntasks-per-node=1 "$build/launcher/hyrun" -n "$per_node" -- \
         "$build/examples/hello" >"$log" 2>&1 && grep -q "^rank 0: ring of $world ranks ok" "$log"; then
      ok=$((ok + 1)); rm -f "$log"
    else
      [ -n "$first" ] || first="run $i: $(grep -E 'hyrun|error' "$log" | tail -1 | cut -c1-120) ($log)"
    fi
  done
  row "hybrid hello ${hybrid_nodes} nodes x ${per_node} ranks" "$1" "$ok" "$hybrid_runs" "$first"
}

if [ "$hybrid_nodes" -gt 0 ]; then
  cluster=$(bash "$root/scripts/slurm-cluster.sh" up auto "$hybrid_nodes" 8 2>/dev/null | tail -1)
  # shellcheck source=/dev/null  # written by scripts/slurm-cluster.sh up
  . "$cluster/cluster.env"
fi
started=$(date +%s)
for l in "${loads[@]}"; do
  [ "$l" = hog ] && hog_start
  [ "$main_runs" -eq 0 ] || soak_main "$l"
  [ -z "$ctest_regex" ] || soak_ctest "$l"
  [ "$hybrid_nodes" -eq 0 ] || soak_hybrid "$l"
  hog_stop
done

echo "soak on $(nproc) cores, $(date -u +%Y-%m-%d), $(( $(date +%s) - started )) s; failed runs' output in $keep"
printf '| %-44s | %-5s | %-12s | %s |\n' "what" "load" "passed" "first failure"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 46))" "-------" "--------------" "---------------"
printf '%s\n' "${rows[@]}"
printf '%s\n' "${rows[@]}" | grep -q ' | run ' || exit 0
# The end of each first failure's output, so that a CI log shows why.
for log in $(printf '%s\n' "${rows[@]}" | sed -nE 's/.*\((\/[^)]*\.log)\) \|$/\1/p'); do
  echo "--- the end of $log"; tail -n 30 "$log"
done
exit 1
