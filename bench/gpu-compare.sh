#!/usr/bin/env bash
# Times builds of ep-bench-gpu against each other in one run on a GPU machine: the same
# kernels before and after a change, measured in the same device call (docs/performance.md).
#
#   bench/gpu-compare.sh --bundle DIR --variant NAME=PATH [--variant NAME=PATH ...]
#                        [--ranks "1 8"] [--rounds 2] [--sizes "reference cloudai"] [--logs DIR]
#
# The first variant is the reference. PATH: an ep-bench-gpu binary (built from another
# commit with scripts/gpu-bundle.sh; it runs with DIR's libraries and hyrun); NAME: letters,
# digits, '.', '_' or '-'. Sizes: reference (128 tokens, hidden 7168, top-8, 2 experts per
# rank) and cloudai (CloudAI's example: 256 tokens, hidden 8192, top-6, 4 experts per rank).
# Every rank count runs through CUDA IPC; counts above 1 also --kernel-only. All under one
# private MPS daemon (ranks sharing the GPU run concurrently, as hyrun's --mps auto makes
# them), timed as the reference times (bench/gpu.sh). The variants alternate launch by
# launch, round after round, so a drift of the machine touches all of them alike.
# The table: per size, ranks, mode and variant, the dispatch + combine median (averaged
# over the ranks; the median over the rounds, each round's in brackets: the spread), the
# summed EP bandwidth over a device-to-device copy of the same bytes in the same launch, and
# "x ref": the reference's time over the variant's (above 1: faster than the reference).
# Logs: DIR/<size>-<variant>-n<ranks>-<mode>-r<round>.log and DIR/table.md (default: a
# temporary folder, removed at exit).
# Exit codes: 0, 1 a launch failed, 2 usage, 3 no GPU.
set -euo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
bundle=""; ranks="1 8"; rounds=2; sizes="reference cloudai"; logs=""; names=(); paths=()
usage() { bench_usage; }
while [ $# -gt 0 ]; do
  case $1 in
  --bundle) bundle=$2; shift 2 ;;
  --variant)
    [[ $2 =~ ^([A-Za-z0-9._-]+)=(.+)$ ]] ||
      { echo "gpu-compare.sh: --variant '$2': expected NAME=PATH (NAME of letters, digits, '.', '_', '-')" >&2; exit 2; }
    names+=("${BASH_REMATCH[1]}"); paths+=("${BASH_REMATCH[2]}"); shift 2 ;;
  --ranks) ranks=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --sizes) sizes=$2; shift 2 ;;
  --logs) logs=$2; shift 2 ;;
  -h|--help) usage; exit 0 ;;
  *) echo "gpu-compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$bundle" ] && [ -x "$bundle/run" ] && [ -f "$bundle/MANIFEST" ] ||
  { echo "gpu-compare.sh: --bundle DIR: a folder made by scripts/gpu-bundle.sh is needed ('$bundle' is not one)" >&2; exit 2; }
[ ${#names[@]} -ge 2 ] || { echo "gpu-compare.sh: give two --variant NAME=PATH or more (the first is the reference)" >&2; exit 2; }
for p in "${paths[@]}"; do [ -x "$p" ] || { echo "gpu-compare.sh: --variant: '$p' is not an executable" >&2; exit 2; }; done
for v in $ranks "$rounds"; do [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "gpu-compare.sh: '$v' is not a positive number" >&2; exit 2; }; done
size_args() {
  case $1 in
  reference) echo "--tokens 128 --hidden 7168 --topk 8 --experts-per-rank 2" ;;
  cloudai) echo "--tokens 256 --hidden 8192 --topk 6 --experts-per-rank 4" ;;
  *) return 1 ;;
  esac
}
for s in $sizes; do size_args "$s" >/dev/null || { echo "gpu-compare.sh: --sizes: '$s' is not reference or cloudai" >&2; exit 2; }; done
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-compare.sh: no GPU (nvidia-smi)" >&2; exit 3; }

bundle=$(cd "$bundle" && pwd)
eval "$("$bundle/run" --print-env)"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-compare.XXXXXX")
logs=${logs:-$work/logs}
mkdir -p "$logs" "$work/mps-pipe" "$work/mps-log"
export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
cleanup() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
nvidia-cuda-mps-control -d || { echo "gpu-compare.sh: could not start the MPS daemon" >&2; exit 1; }
echo "== gpu-compare: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u '+%Y-%m-%d %H:%M UTC'); variants ${names[*]} (reference ${names[0]}); ranks $ranks; $rounds rounds"

failed=0
: >"$work/rows"
for round in $(seq "$rounds"); do
  for s in $sizes; do
    read -r -a args <<<"$(size_args "$s")"
    for n in $ranks; do
      modes=ipc; [ "$n" -gt 1 ] && modes="ipc kernel-only"
      for mode in $modes; do
        extra=(); [ "$mode" = kernel-only ] && extra=(--kernel-only)
        for i in "${!names[@]}"; do
          log=$logs/$s-${names[$i]}-n$n-$mode-r$round.log
          if timeout --kill-after=10 120 "$bundle/bin/hyrun" -n "$n" --mps auto -- "${paths[$i]}" "${args[@]}" "${extra[@]}" \
            >"$log" 2>&1 && row=$(awk -v n="$n" -v mode="$mode" -f "$root/bench/gpu-row.awk" "$log" | grep -v '^CAST'); then
            echo "$s ${names[$i]} $round $row" >>"$work/rows"
          else
            echo "FAIL $s ${names[$i]} n=$n $mode round $round (log $log):"; tail -5 "$log" | sed 's/^/  | /'; failed=1
          fi
        done
      done
    done
  done
done

# rows: size variant round n mode per_rank summed dispatch combine median min max copy ratio
{
  echo "| size | ranks | mode | variant | dispatch+combine us (median over rounds) | each round | dispatch us | combine us | summed / copy | x ref |"
  echo "|---|---:|---|---|---:|---|---:|---:|---:|---:|"
  awk -v ref="${names[0]}" -v order="${names[*]}" '
    # (insertion sort: mawk, the awk of Debian and Ubuntu images, has no asort)
    function median(list,   a, i, j, m, x) {
      m = split(list, a, " ")
      for (i = 2; i <= m; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    { key = $1 SUBSEP $4 SUBSEP $5 SUBSEP $2
      t[key] = t[key] " " $10; d[key] = d[key] " " $8; c[key] = c[key] " " $9; q[key] = q[key] " " $14
      if (!(($1 SUBSEP $4 SUBSEP $5) in seen)) { seen[$1 SUBSEP $4 SUBSEP $5] = 1; groups[++ng] = $1 SUBSEP $4 SUBSEP $5 } }
    END {
      nv = split(order, vs, " ")
      for (g = 1; g <= ng; g++) {
        split(groups[g], gk, SUBSEP)
        rk = groups[g] SUBSEP ref
        for (v = 1; v <= nv; v++) {
          key = groups[g] SUBSEP vs[v]
          if (!(key in t)) continue
          x = (rk in t) ? sprintf("%.2f", median(t[rk]) / median(t[key])) : "-"
          printf "| %s | %s | %s | %s | %.1f | %s | %.1f | %.1f | %.3f | %s |\n", gk[1], gk[2], gk[3], vs[v],
                 median(t[key]), substr(t[key], 2), median(d[key]), median(c[key]), median(q[key]), x
        }
      }
    }' "$work/rows"
} | tee "$logs/table.md"

# The rows: the last variant against the reference, through IPC, each size and rank count.
bench_row_machine="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | sed 's/, */, driver /'), $(nproc)-core $(hostname)"
bench_row_bundle_commit "$bundle"
last=${names[${#names[@]} - 1]}
while read -r size n med x ref_med; do
  bench_row "EP CUDA, $last against ${names[0]} (\`bench/gpu-compare.sh\`), $n rank(s) through IPC, $size sizes" \
    "dispatch + combine, median of $rounds round(s)" "$med us" "x ref $x: ${names[0]}'s $ref_med us over this one's"
done < <(awk -F' *[|] *' -v ref="${names[0]}" -v last="$last" '$4 == "ipc" && $5 == ref { r[$2 " " $3] = $6 }
  $4 == "ipc" && $5 == last { print $2, $3, $6, $11, r[$2 " " $3] }' "$logs/table.md")
[ "$failed" -eq 0 ] || { echo "gpu-compare.sh: some launches FAILED" >&2; exit 1; }
