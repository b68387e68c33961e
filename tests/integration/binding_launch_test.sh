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
  # A word the option does not know is named with the words it knows; any case of one is taken.
  run_job 30 "$HYRUN" -n 2 --bind-to bogus -- /bin/true
  expect_rc 2
  expect_stderr "^hyrun: --bind-to: 'bogus' is not one of core, none, numa, partition; see hyrun --help$"
  run_job 30 "$HYRUN" -n 2 --mem-bind maybe -- /bin/true
  expect_rc 2
  expect_stderr "^hyrun: --mem-bind: 'maybe' is not one of off, on; see hyrun --help$"
  run_job 30 "$HYRUN" -n 2 --bind-to NUMA --mem-bind OFF --topology 'pack:1 core:4 pu:1' --dry-run --report-bindings -- /bin/true
  expect_rc 0
  expect_stdout "numa: .*memory not bound \(--mem-bind off\)"
  ;;
topology-cache-cgroup)  # a cached topology is restricted by the job's cpuset cgroup exactly as a discovered one
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a cpuset cgroup"; exit 77; }
  last=$(( $(getconf _NPROCESSORS_ONLN) - 1 ))
  [ "$last" -ge 1 ] || { echo "SKIP: needs 2 CPUs"; exit 77; }
  group=hyrun-test-$$
  if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then  # cgroup v1
    cg=/sys/fs/cgroup/cpuset/$group
    mkdir "$cg" && echo "$last" > "$cg/cpuset.cpus" && cat /sys/fs/cgroup/cpuset/cpuset.mems > "$cg/cpuset.mems"
  elif grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then  # cgroup v2
    cg=/sys/fs/cgroup/$group
    echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir "$cg" && echo "$last" > "$cg/cpuset.cpus"
  else
    echo "SKIP: no cpuset cgroup controller"; exit 77
  fi || { fail "could not make the cpuset cgroup $cg"; finish; }
  trap 'rmdir "$cg" 2>/dev/null; rm -rf "$WORK"' EXIT
  # "${in_cgroup[@]}" CMD...: CMD runs restricted to the last CPU, as a job step restricted by Slurm's cgroup.
  # shellcheck disable=SC2016  # $$ and $@ belong to the inner shell
  in_cgroup=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
  plan() {  # plan NAME CACHE [in_cgroup...]: the -n 2 plan with HYRUN_TOPOLOGY_CACHE=CACHE, into $WORK/NAME.json
    local name=$1 cache=$2
    shift 2
    run_job 60 env HYRUN_TOPOLOGY_CACHE="$cache" "$@" "$HYRUN" -n 2 --dry-run --report-bindings=json -- /bin/true
    expect_rc 0
    cp "$OUT" "$WORK/$name.json"
  }
  plan whole-fresh off
  plan whole-stores "$WORK/cache"
  [ -s "$WORK/cache/topology-$(hostname).xml" ] && pass "the first launch stored the topology" || fail "no cache entry"
  plan restricted-fresh off "${in_cgroup[@]}"
  plan restricted-cached "$WORK/cache" "${in_cgroup[@]}"
  plan restricted-stores "$WORK/cache2" "${in_cgroup[@]}"
  plan whole-from-restricted "$WORK/cache2"
  python3 - "$WORK" "$last" <<'PY' && pass "cached plans equal discovered plans, inside and outside the cgroup" || fail "a cached plan differs"
import json, sys
work, last = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{work}/{name}.json"))
assert load("whole-stores") == load("whole-fresh")
assert load("whole-from-restricted") == load("whole-fresh"), "an entry stored inside the cgroup restricted a launch outside it"
assert load("restricted-cached") == load("restricted-fresh"), "the cgroup did not restrict the cached topology"
assert load("restricted-stores") == load("restricted-fresh")
for entry in load("restricted-cached"):
    assert set(entry["cpus"]) <= {last}, entry
assert {c for e in load("whole-fresh") for c in e["cpus"]} != {last}
print("restricted cpus:", [e["cpus"] for e in load("restricted-cached")])
PY
  # The launch itself: a rank started from the cached topology inside the cgroup runs on the allowed CPU.
  run_job 60 env HYRUN_TOPOLOGY_CACHE="$WORK/cache" "${in_cgroup[@]}" "$HYRUN" -n 1 -- "$HELLO"
  expect_rc 0
  expect_stdout "hello from rank 0 of 1.*: cpus=$last mem="
  ;;
hwloc-plugins)  # hyrun loads only the hwloc plugins its plans use, and its ranks' environment stays the user's
  plugins=$(pkg-config --variable=libdir hwloc 2>/dev/null)/hwloc
  for p in hwloc_xml_libxml hwloc_opencl hwloc_gl; do
    [ -f "$plugins/$p.so" ] || { echo "SKIP: hwloc has no $p plugin here ($plugins)"; exit 77; }
  done
  unused='lib(xml2|icuuc|OpenCL|X11)\.so'
  # shellcheck disable=SC2016  # $PPID belongs to the rank's shell: its parent is hyrun
  rank=(sh -c 'grep -o "[^/]*\.so[.0-9]*$" /proc/$PPID/maps | sort -u; env | grep "^HWLOC_" || true')
  for cache in "$WORK/cache" "$WORK/cache" off; do  # discovered and stored, loaded from the cache, cache off
    run_job 60 env HYRUN_TOPOLOGY_CACHE="$cache" "$HYRUN" -n 1 --bootstrap=none -- "${rank[@]}"
    expect_rc 0
    expect_stdout '^libhwloc\.so'
    if grep -qE "^$unused|^HWLOC_" "$OUT"; then
      fail "cache $cache: hyrun loaded a plugin no plan uses, or its rank saw an HWLOC_ variable: $(grep -E "^$unused|^HWLOC_" "$OUT" | tr '\n' ' ')"
    else
      pass "cache $cache: no libxml2, ICU, OpenCL or X11 in hyrun; no HWLOC_ variable in the rank"
    fi
  done
  # A user who configures hwloc keeps that configuration: hyrun then chooses nothing.
  run_job 60 env HWLOC_HIDE_ERRORS=1 "$HYRUN" -n 1 --bootstrap=none -- "${rank[@]}"
  expect_rc 0
  expect_stdout '^libxml2\.so'
  expect_stdout '^HWLOC_HIDE_ERRORS=1$'
  grep -q '^HWLOC_PLUGINS' "$OUT" && fail "the rank saw hyrun's plugin choice" || pass "the rank's HWLOC_ variables are the user's"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
