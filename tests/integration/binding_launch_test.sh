#!/usr/bin/env bash
# Binding as a user sees it through hyrun: binding_launch_test.sh CASE
source "$(dirname "$0")/lib.sh"
case_name=$1
fixtures=$BINDING_FIXTURES

case $case_name in
affinity-equals-plan)  # on this machine, every rank's own affinity (read back by the worker library) equals the plan
  run_job 60 "$HYRUN" -n 2 --dry-run --report-bindings=json -- "$HELLO"
  expect_rc 0
  cp "$OUT" "$WORK/plan.json"
  run_job 60 "$HYRUN" -n 2 -- "$HELLO"
  expect_rc 0
  python3 - "$WORK/plan.json" "$OUT" <<'PY' && pass "every rank's cpus and memory nodes equal the plan" || fail "affinity differs from the plan"
import json, re, sys
plan = json.load(open(sys.argv[1]))
def expand(text):
    out = []
    for part in text.split(','):
        a, _, b = part.partition('-')
        out += list(range(int(a), int(b or a) + 1))
    return out
seen = {}
for line in open(sys.argv[2]):
    m = re.match(r'hello from rank (\d+) of .*: cpus=(\S+) mem=(\S+)', line)
    if m:
        seen[int(m.group(1))] = (expand(m.group(2)), m.group(3))
assert len(plan) == 2 and len(seen) == 2, (plan, seen)
for entry in plan:
    cpus, mem = seen[entry['rank']]
    assert cpus == entry['cpus'], (entry['rank'], cpus, entry['cpus'])
    assert mem == ','.join(map(str, entry['numa_nodes'])), (entry['rank'], mem, entry['numa_nodes'])
    print(f"rank {entry['rank']}: cpus {cpus} mem {mem} as planned")
PY
  ;;
dgx-dry-run)  # hyrun --topology dgx.xml -n 8 --dry-run --report-bindings works anywhere
  run_job 30 "$HYRUN" --topology "$fixtures/dgx-h100.xml" -n 8 --dry-run --report-bindings=json -- /bin/true
  expect_rc 0
  python3 - "$OUT" <<'PY' && pass "8 ranks, 8 distinct GPUs, disjoint CPUs, one NIC each" || fail "dgx plan is wrong"
import json, sys
plan = json.load(open(sys.argv[1]))
assert [p['rank'] for p in plan] == list(range(8))
gpus = [p['gpus'][0]['pci_bus_id'] for p in plan]
assert len(set(gpus)) == 8, gpus
cpus = [set(p['cpus']) for p in plan]
for i in range(8):
    for j in range(i + 1, 8):
        assert not (cpus[i] & cpus[j]), (i, j)
assert all(len(p['nics']) == 1 and p['nics'][0].startswith('mlx5_') for p in plan), [p['nics'] for p in plan]
assert len({p['nics'][0] for p in plan}) == 8
PY
  run_job 30 "$HYRUN" --topology "$fixtures/dgx-h100.xml" -n 8 --dry-run --report-bindings -- /bin/true
  expect_rc 0
  expect_stdout "^RANK +LOCAL +GPU"
  ;;
foreign-topology-refused)  # a plan for another machine is never applied silently
  run_job 30 "$HYRUN" --topology "$fixtures/dgx-h100.xml" -n 2 -- /bin/true
  expect_rc 2
  expect_stderr "dry-run"
  ;;
bad-binding-input)
  run_job 30 "$HYRUN" -n 2 --gpus 0 -- /bin/true
  expect_rc 2
  expect_stderr "^hyrun: "
  run_job 30 "$HYRUN" -n 2 --topology "$WORK/missing.xml" --dry-run -- /bin/true
  expect_rc 2
  expect_stderr "missing.xml"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
