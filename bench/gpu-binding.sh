#!/usr/bin/env bash
# Checks hyrun's binding decisions on a real GPU machine from inside the ranks (issue 10):
# for every rank count, hyrun's plan (--dry-run --report-bindings) is compared with what each
# rank reports about itself (cuda-device-report: cudaDeviceGetPCIBusId of its CUDA device,
# its allowed CPUs and memory nodes). Also saves the machine's hwloc topology (XML, I/O
# devices kept) when the bundle has lstopo-no-graphics, for a binding test fixture.
#
#   bench/gpu-binding.sh --bundle DIR [--ranks "1 2 4 8"] [--out DIR]
#
# Output: per rank count, the plan table, the reports, and MATCH or MISMATCH per rank, then the
# current-numbers row (bench/row.sh);
# DIR/topology.xml, DIR/plan-N.txt, DIR/report-N.jsonl, DIR/matches.txt (the MATCH lines).
# Exit codes: 0 every rank got what the plan says, 1 a mismatch or a failed run, 2 usage.
set -uo pipefail
# shellcheck source=bench/row.sh
. "$(dirname "$0")/row.sh"
bundle=""; ranks="1 2 4 8"; out=${OUT:-$PWD}/gpu-binding
while [ $# -gt 0 ]; do
  case $1 in
  --bundle) bundle=$2; shift 2 ;;
  --ranks) ranks=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu-binding.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$bundle" ] && [ -x "$bundle/run" ] ||
  { echo "gpu-binding.sh: --bundle DIR: a folder made by scripts/gpu-bundle.sh is needed" >&2; exit 2; }
for n in $ranks; do [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "gpu-binding.sh: --ranks: '$n' is not a rank count" >&2; exit 2; }; done
bundle=$(cd "$bundle" && pwd)
eval "$("$bundle/run" --print-env)"
B=$bundle/bin
mkdir -p "$out"
: >"$out/matches.txt"
failed=0
if [ -x "$B/lstopo-no-graphics" ]; then
  "$B/lstopo-no-graphics" --of xml "$out/topology.xml" && echo "topology saved: $out/topology.xml" ||
    { echo "gpu-binding.sh: lstopo-no-graphics failed"; failed=1; }
fi
for n in $ranks; do
  echo "== $n rank(s)"
  if ! "$B/hyrun" -n "$n" --dry-run --report-bindings -- true >"$out/plan-$n.txt" 2>&1; then
    echo "FAIL plan: $(tail -3 "$out/plan-$n.txt")"; failed=1; continue
  fi
  cat "$out/plan-$n.txt"
  if ! "$B/hyrun" -n "$n" --bootstrap=none -- "$B/cuda-device-report" >"$out/report-$n.jsonl" 2>&1; then
    echo "FAIL run: $(tail -3 "$out/report-$n.jsonl")"; failed=1; continue
  fi
  sort "$out/report-$n.jsonl"
  # Plan table: RANK LOCAL GPU PCI-BUS-ID CPUS NUMA ...; a report line: {"cpus":..,"mems":..,
  # "pci_bus_ids":[first,..],"rank":..} (nlohmann sorts the keys).
  awk -v n="$n" '
    FNR == NR { if ($1 ~ /^[0-9]+$/) { pci[$1] = tolower($4); cpus[$1] = $5; numa[$1] = $6 }; next }
    /^\{/ {
      match($0, /"rank":[0-9]+/); r = substr($0, RSTART + 7, RLENGTH - 7)
      match($0, /"pci_bus_ids":\["[^"]*"/); got_pci = tolower(substr($0, RSTART + 16, RLENGTH - 17))
      match($0, /"cpus":"[^"]*"/); got_cpus = substr($0, RSTART + 8, RLENGTH - 9)
      match($0, /"mems":"[^"]*"/); got_mems = substr($0, RSTART + 8, RLENGTH - 9)
      seen[r] = 1
      ok = (got_pci == pci[r] && got_cpus == cpus[r] && got_mems == numa[r])
      printf "%s rank %s: plan GPU %s CPUs %s NUMA %s; rank sees GPU %s CPUs %s NUMA %s\n", ok ? "MATCH   " : "MISMATCH", r,
             pci[r], cpus[r], numa[r], got_pci, got_cpus, got_mems
      if (!ok) bad = 1
    }
    END { for (r in pci) if (!(r in seen)) { print "MISMATCH rank " r ": no report"; bad = 1 }
          exit bad }' "$out/plan-$n.txt" "$out/report-$n.jsonl" | tee -a "$out/matches.txt" || failed=1
done
[ "$failed" -eq 0 ] && echo "gpu-binding.sh: every rank got what the plan says" || echo "gpu-binding.sh: MISMATCH or failure (above)"
bench_row_machine="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | sed 's/, */, driver /'), $(nproc)-core $(hostname)"
bench_row_bundle_commit "$bundle"
bench_row "GPU binding (\`bench/gpu-binding.sh\`), ${ranks// /, } ranks" \
  "ranks whose GPU, CPUs and memory nodes match hyrun's plan" \
  "$(grep -c '^MATCH' "$out/matches.txt" || true) of $(grep -c ' rank ' "$out/matches.txt" || true)$([ "$failed" -eq 0 ] || echo ', a run FAILED')" \
  "the plan: hyrun --dry-run --report-bindings, the same run"
exit $failed
