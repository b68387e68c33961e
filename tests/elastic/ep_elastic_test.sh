#!/usr/bin/env bash
# ep-elastic (elastic.py's command line) on one machine, as CloudAI drives it:
# ep_elastic_test.sh CASE [PLAN]. Judged with CloudAI's own rules (cloudai_nixl_ep.py).
source "$(dirname "$0")/../integration/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
cloudai=$here/cloudai_nixl_ep.py
small=(--num-tokens 16 --hidden-dim 512 --num-topk 4 --num-experts-per-rank 2 --warmup 2 --iters 6 --timeout-ms 20000)
# A port of our own: tests run in parallel, and 9999 may be taken.
reserve_port || exit 1
port=$PORT
log=$WORK/nixl-ep-node-0.log

# The readiness probe; also done when the first launch already ended (a one-phase plan can
# end before the first probe: its join server is closed again by then).
wait_port() {
  for _ in $(seq 200); do
    timeout 1 bash -c ": > /dev/tcp/127.0.0.1/$port" 2>/dev/null && return 0
    kill -0 "$root" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}
wait_end_phase() {  # PHASE: CloudAI's wait, without its 1 s polling
  for _ in $(seq 600); do grep -Fq -- "-> end phase $1" "$log" && return 0; kill -0 "$root" 2>/dev/null || return 1; sleep 0.05; done
  return 1
}
verdict() { python3 "$cloudai" check "$WORK" 1 "$@"; }

# two_launches NAME PLAN_JSON LATER_LOG ARGS...: the first launch (2 ranks, in the background:
# $root) until the end of its phase 0, then the later one (2 ranks, in the background:
# $later_pid, with the variables of later_env), its output in LATER_LOG (node 0's log where it is $log).
later_env=()
two_launches() {
  local name=$1 plan_json=$2 later_log=$3
  shift 3
  plan=$WORK/plan-$name.json; echo "$plan_json" >"$plan"
  : >"$log"
  timeout -k 5 100 "$EP_ELASTIC" --plan "$plan" --num-processes 2 --port "$port" "$@" >>"$log" 2>&1 &
  root=$!
  wait_port || fail "plan $name: no join server"
  wait_end_phase 0 || fail "plan $name: no end of phase 0"
  env "${later_env[@]}" timeout -k 5 100 python3 "$ELASTIC_PY" --plan "$plan" --num-processes 2 --tcp-server 127.0.0.1 \
    --port "$port" "$@" >>"$later_log" 2>&1 &
  later_pid=$!
}

# staged PLAN [extra...]: CloudAI's single-node waves: the first launch, then one launch per
# wave once node 0's log shows the end of the phase before it, appended to the same log.
staged() {
  local plan=$1; shift
  local pids=() trigger n first=1
  : >"$log"
  while read -r trigger n; do
    if [ "$first" = 1 ]; then
      timeout -k 5 120 "$EP_ELASTIC" --plan "$plan" --num-processes "$n" --port "$port" "${small[@]}" "$@" >>"$log" 2>&1 &
      root=$!; pids+=("$root"); first=0
      wait_port || fail "the join server never answered on port $port"
    else
      wait_end_phase "$trigger" || { fail "no end of phase $trigger in node 0's log"; break; }
      timeout -k 5 120 python3 "$ELASTIC_PY" --plan "$plan" --num-processes "$n" --tcp-server 127.0.0.1 --port "$port" \
        "${small[@]}" "$@" >>"$log" 2>&1 &
      pids+=("$!")
    fi
  done < <(python3 "$cloudai" waves "$plan")
  RC=0
  for p in "${pids[@]}"; do wait "$p" || RC=$?; echo "$RC" >>"$WORK/step-rcs"; done
  OUT=$log; ERR=$log
}

# The token file is written beside the plan: a copy in the test's own directory, never the source tree.
[ -n "${2:-}" ] && cp "$PLANS_DIR/$2.json" "$WORK/$2.json"

case $1 in
one-launch)  # every rank of the plan in one launch; ranks start when their phase begins
  plan=$WORK/$2.json
  n=$(python3 -c "import json,sys; print(max(abs(r) for ph in json.load(open(sys.argv[1])) for r in ph) + 1)" "$plan")
  HYRUN_LOG_LEVEL=info run_job 120 "$EP_ELASTIC" --plan "$plan" --num-processes "$n" --port "$port" --restart-returning \
    --kineto --validate-phase-failures "${small[@]}"
  cat "$OUT" "$ERR" >"$log"
  expect_rc 0
  verdict "$plan" && pass "CloudAI's verdict: successful" || { fail "CloudAI's verdict"; show_output; }
  python3 - "$plan" "$OUT" "$ERR" <<'PY' && pass "every process after the launch was started on rank 0's request, for its phase" || fail "late starts"
import json, re, sys
plan = json.load(open(sys.argv[1])); out = open(sys.argv[2]).read(); err = open(sys.argv[3]).read()
processes, alive = {}, set()
for p, phase in enumerate(plan):
    active = {abs(r) for r in phase}
    alive &= active                      # omitted ranks leave at the phase's start
    for r in active - alive:             # a new process for each rank not running
        processes[r] = processes.get(r, 0) + 1
        alive.add(r)
    alive -= {-r for r in phase if r < 0}  # killed during the phase
at_launch = {abs(r) for r in plan[0]}
requested = {}
for r, k in re.findall(r"starting rank (\d+) on rank 0's request \(process (\d+) of the rank\)", err):
    requested[int(r)] = max(requested.get(int(r), 0), int(k))
for r, n in processes.items():
    if n > (1 if r in at_launch else 0):
        assert requested.get(r) == n, f"rank {r}: {n} processes, the last one asked for: {requested.get(r)}"
    else:
        assert r not in requested, f"rank {r} was started on request, though it runs from the launch"
for r in {abs(r) for ph in plan for r in ph} - at_launch:
    p = next(i for i, ph in enumerate(plan) if r in ph)
    starts = [int(x) for x in re.findall(rf'global_rank={r}, local_rank=\d+ -> start phase (\d+)', out)]
    assert starts and min(starts) == p, (r, starts, p)
PY
  python3 - "$plan" "$OUT" <<'PY' && pass "a joining rank's 'adding connections' line lists every other active rank" || fail "connection lines"
import json, re, sys
plan = json.load(open(sys.argv[1])); lines = open(sys.argv[2]).read().splitlines()
alive = set()
for p, phase in enumerate(plan):
    active = {abs(r) for r in phase}
    alive &= active
    for r in sorted(active - alive):
        mine = [l for l in lines if l.startswith(f"global_rank={r}, ")]
        at = next(i for i, l in enumerate(mine) if l.endswith(f"-> start phase {p}"))
        want = ", ".join(str(x) for x in sorted(active - {r}))
        assert mine[at + 1].endswith(f"-> adding connections to ranks [{want}]"), (r, p, mine[at + 1])
    alive |= active
    alive -= {-r for r in phase if r < 0}
PY
  grep -qE '^\[rank [0-9]+\] Dispatch bandwidth: [0-9.]+ GB/s, avg_t=[0-9.]+ us \| Combine bandwidth: [0-9.]+ GB/s, avg_t=[0-9.]+ us$' "$OUT" \
    && pass "--kineto prints the reference's split line" || fail "no split line"
  ;;
staged)  # CloudAI's waves on one node: later launches join through --tcp-server
  plan=$WORK/$2.json
  staged "$plan"
  expect_rc 0
  verdict "$plan" && pass "CloudAI's verdict: successful" || { fail "CloudAI's verdict"; show_output; }
  [ ! -e "$(dirname "$plan")/.hyrun-ep-token-$port" ] && pass "the token file is gone after the run" || fail "token file left"
  # One node: each launch's ranks take local ranks (binding slots: GPU i) not in use, as the
  # reference's rank server gives them; with these plans that is local rank = rank.
  python3 - "$log" <<'PY' && pass "launches sharing the node never share a local rank" || fail "local ranks collide"
import re, sys
pairs = set(re.findall(r"global_rank=(\d+), local_rank=(\d+) ->", open(sys.argv[1]).read()))
assert pairs and all(g == l for g, l in pairs), sorted(pairs)
PY
  ;;
staged-other-host)  # a later launch from another host (a UTS namespace: another host name, so another node)
  # Its ranks and the first launch's must agree on how their endpoints handle errors (UCX
  # refuses a pair that does not: "asymmetric endpoint configuration"), and a death of one
  # of its ranks reaches the first launch's ranks through the transport, not their timeout.
  command -v unshare >/dev/null && unshare --uts true 2>/dev/null || { echo "SKIP: no UTS namespaces here"; exit 77; }
  plan=$WORK/plan.json; echo '[[0,1],[0,1,2,3],[0,1,-2,3],[0,3]]' >"$plan"
  : >"$log"
  timeout -k 5 120 "$EP_ELASTIC" --plan "$plan" --num-processes 2 --port "$port" "${small[@]}" >>"$log" 2>&1 &
  root=$!
  wait_port || fail "no join server"
  wait_end_phase 0 || fail "no end of phase 0"
  timeout -k 5 120 unshare --uts sh -c 'hostname launch-b && exec "$@"' sh python3 "$ELASTIC_PY" --plan "$plan" \
    --num-processes 2 --tcp-server 127.0.0.1 --port "$port" "${small[@]}" >>"$log" 2>&1; later_rc=$?
  wait "$root"; RC=$?
  [ "$later_rc" = 0 ] && pass "the later launch succeeded" || fail "the later launch exited $later_rc"
  OUT=$log; ERR=$log
  expect_rc 0
  ! grep -q "asymmetric endpoint configuration" "$log" && pass "no endpoint mismatch" || fail "UCX: asymmetric endpoint configuration"
  grep -q "host launch-b (127.0.0.1) joins with rank(s) 2, 3" "$log" || grep -q "launch-b" "$log" \
    && pass "the later launch ran as host launch-b" || fail "no sign of host launch-b"
  verdict "$plan" && pass "CloudAI's verdict: successful" || { fail "CloudAI's verdict"; show_output; }
  python3 - "$log" <<'PY' && pass "every survivor detected rank 2's death without waiting for its timeout" || fail "a death waited for --timeout-ms"
import re, sys
times = [float(t) for t in re.findall(r"detected failed ranks \[2\] in ([0-9.]+) ms", open(sys.argv[1]).read())]
print("detection times (ms):", times)
assert len(times) == 3 and all(t < 10000 for t in times), times
PY
  ;;
same-host-deaths)  # two launches on this host: a death in either reaches the other's ranks at once
  # Ranks of one host reach each other through shared memory, whose endpoints report no
  # peer's death (UCX 1.13); each launch's hyrun tells only its own ranks. Both directions:
  # a later launch's rank killed (plan a), a first launch's rank killed (plan b). With
  # --timeout-ms 20000, a survivor that only times out reports about 20000 ms.
  for case in 'a [[0,1],[0,1,2,3],[0,1,-2,3],[0,1,3]] 2' 'b [[0,1],[0,1,2,3],[0,-1,2,3],[0,2,3]] 1'; do
    read -r name plan_json dead <<<"$case"
    two_launches "$name" "$plan_json" "$log" "${small[@]}"
    wait "$later_pid"; later_rc=$?
    wait "$root"; RC=$?
    cp "$log" "$WORK/log-$name"
    [ "$later_rc" = 0 ] && [ "$RC" = 0 ] && pass "plan $name: both launches succeeded" \
      || fail "plan $name: the launches exited $RC and $later_rc"
    OUT=$log; ERR=$log
    verdict "$plan" && pass "plan $name: CloudAI's verdict: successful" || { fail "plan $name: CloudAI's verdict"; show_output; }
    python3 - "$log" "$dead" <<'PY' && pass "plan $name: every survivor of both launches detected rank $dead's death without waiting for its timeout" || fail "plan $name: a death waited for --timeout-ms"
import re, sys
times = [float(t) for t in re.findall(rf"detected failed ranks \[{sys.argv[2]}\] in ([0-9.]+) ms", open(sys.argv[1]).read())]
print("detection times (ms):", times)
assert len(times) == 3 and all(t < 10000 for t in times), times
PY
  done
  # A later launch that dies whole (its ep-elastic SIGKILLed: its ranks go with it) ends
  # the first at once, naming a dead rank, not after --timeout-ms (600 s here: past this
  # test's own limit) and --bootstrap-timeout. The later launch's ranks hold themselves in
  # their first phase (phase 1), so that phase is still running when the launch is killed,
  # however fast or slow the machine (a long phase instead took more than the wait for
  # phase 0's end on a loaded machine).
  printf '#!/bin/sh\nexec "%s" "$@" --test-stop-in-first-phase 2,3\n' "$EP_BENCH" >"$WORK/held-ep-bench"
  chmod +x "$WORK/held-ep-bench"
  later_env=("HYRUN_EP_BENCH=$WORK/held-ep-bench")
  two_launches c '[[0,1],[0,1,2,3],[0,1,2,3]]' "$WORK/later-c.log" "${small[@]}" --timeout-ms 600000
  later_env=()
  held=0  # both of the later launch's ranks stopped inside phase 1
  for _ in $(seq 1200); do
    held=$(for p in $(pgrep -f "plan-c.json.*--test-stop-in-first-phase"); do awk '{print $3}' "/proc/$p/stat" 2>/dev/null; done | grep -c T)
    [ "$held" = 2 ] && break; kill -0 "$later_pid" 2>/dev/null || break; sleep 0.05
  done
  [ "$held" = 2 ] && pass "plan c: the later launch's ranks are held in phase 1" || fail "plan c: $held of 2 ranks held in phase 1"
  later=$(pgrep -f "ep-elastic.*--tcp-server.*$port")
  [ -n "$later" ] && kill -KILL "$later" && pass "plan c: the later launch's ep-elastic was killed in phase 1" \
    || fail "plan c: no later launch to kill"
  wait "$root"; RC=$?
  cp "$log" "$WORK/log-c"
  [ "$RC" != 0 ] && [ "$RC" != 124 ] && pass "plan c: the first launch failed by itself (exit $RC)" \
    || fail "plan c: the first launch exited $RC"
  grep -Eq "rank [23] failed \(its process ended\)" "$log" \
    && pass "plan c: the first launch names a rank of the dead launch" || { fail "plan c: no dead rank named"; show_output; }
  ;;
wrong-token)  # a launch with another token is refused and logged; the run ends naming the missing ranks
  plan=$WORK/plan.json; echo '[[0,1],[0,1,2,3]]' >"$plan"
  timeout -k 5 60 "$EP_ELASTIC" --plan "$plan" --num-processes 2 --port "$port" "${small[@]}" --timeout-ms 3000 >"$log" 2>&1 &
  root=$!
  wait_port || fail "no join server"
  wait_end_phase 0 || fail "no end of phase 0"
  HYRUN_EP_TOKEN=not-the-token run_job 30 python3 "$ELASTIC_PY" --plan "$plan" --num-processes 2 --tcp-server 127.0.0.1 --port "$port"
  expect_rc 1
  expect_stderr "refused this launch: its proof does not match this job's token"
  wait "$root"; root_rc=$?
  [ "$root_rc" -ne 0 ] && pass "the first launch failed ($root_rc)" || fail "the first launch succeeded"
  grep -q "join server: refused a join from 127.0.0.1: its proof does not match" "$log" && pass "the refusal is logged" || fail "refusal not logged"
  grep -q "rank(s) 2, 3 that phase 1 of plan 1 needs did not join within 3000 ms" "$log" && pass "the error names the missing ranks" \
    || { fail "no error naming ranks 2, 3"; cat "$log"; }
  ! verdict >/dev/null && pass "CloudAI's verdict: failed" || fail "CloudAI's verdict passed a failed run"
  ;;
later-launch-never-joins)  # a later launch whose ranks never join gives them back: a retry brings them
  plan=$WORK/plan.json; echo '[[0,1],[0,1,2,3]]' >"$plan"
  timeout -k 5 100 "$EP_ELASTIC" --plan "$plan" --num-processes 2 --port "$port" "${small[@]}" --timeout-ms 60000 \
    >"$log" 2>&1 &
  root=$!
  wait_port || fail "no join server"
  wait_end_phase 0 || fail "no end of phase 0"
  # The first try's ranks fail before they join (their program exits at once): it is given
  # ranks 2 and 3, and ends.
  printf '#!/bin/sh\nexit 3\n' >"$WORK/no-join"; chmod +x "$WORK/no-join"
  HYRUN_EP_BENCH=$WORK/no-join run_job 60 python3 "$ELASTIC_PY" --plan "$plan" --num-processes 2 \
    --tcp-server 127.0.0.1 --port "$port" "${small[@]}"
  [ "$RC" -ne 0 ] && pass "the first try failed (exit $RC)" || fail "the first try exited 0"
  expect_stderr "rank [23] \(pid [0-9]+\) exited with code 3"
  # The retry the timeout message invites, while rank 0 still waits: the same ranks.
  run_job 60 python3 "$ELASTIC_PY" --plan "$plan" --num-processes 2 --tcp-server 127.0.0.1 --port "$port" \
    "${small[@]}"
  expect_rc 0
  expect_stdout "global_rank=2, local_rank=[0-9]+ -> end phase 1"
  expect_stdout "global_rank=3, local_rank=[0-9]+ -> end phase 1"
  cat "$OUT" "$ERR" >>"$log"
  wait "$root"; root_rc=$?
  [ "$root_rc" = 0 ] && pass "the first launch succeeded" || { fail "the first launch exited $root_rc"; tail -20 "$log"; }
  grep -q "join server: the launch on host .* ended before rank(s) 2, 3 joined; another launch may bring them" "$log" \
    && pass "rank 0 said it took the ranks back" || fail "no line saying the ranks were taken back"
  verdict >/dev/null && pass "CloudAI's verdict: passed" || fail "CloudAI's verdict failed ($(verdict))"
  ;;
late-step-never-comes)  # nobody brings the ranks of phase 1: the run ends within --timeout-ms, naming them
  plan=$WORK/plan.json; echo '[[0,1],[0,1,2]]' >"$plan"
  run_job 60 "$EP_ELASTIC" --plan "$plan" --num-processes 2 --port "$port" "${small[@]}" --timeout-ms 2000
  [ "$RC" -ne 0 ] && pass "exit code $RC" || fail "exit code 0"
  expect_stderr "rank\(s\) 2 that phase 1 of plan 1 needs did not join within 2000 ms; \[2\] must come from a later launch: ep-elastic --tcp-server"
  expect_stderr "Exited with exit code"
  ;;
unplanned-death)  # a rank killed outside the plan: CloudAI's check must fail the run
  plan=$WORK/plan.json; echo '[[0,1,2,3]]' >"$plan"
  "$EP_ELASTIC" --plan "$plan" --num-processes 4 --port "$port" "${small[@]}" --iters 200000 >"$log" 2>&1 &
  root=$!
  for _ in $(seq 200); do grep -q 'start phase 0' "$log" && break; sleep 0.05; done
  victim=""
  for _ in $(seq 100); do
    victim=$(for p in $(pgrep -f "$EP_BENCH"); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'HYRUN_RANK=2' \
      && grep -qx "HYRUN_JOB_TOKEN=.*" <(tr '\0' '\n' <"/proc/$p/environ") && [ "$(ps -o ppid= -p "$p" | tr -d ' ')" = "$root" ] && echo "$p"; done)
    [ -n "$victim" ] && break; sleep 0.05
  done
  [ -n "$victim" ] || fail "no process of rank 2"
  kill -9 "$victim"; wait "$root"; RC=$?
  expect_rc 137
  grep -q "rank 2 (pid $victim) was killed by signal 9" "$log" && pass "hyrun names the dead rank" || fail "no line naming rank 2"
  ! verdict >/dev/null && pass "CloudAI's verdict: failed ($(verdict))" || fail "CloudAI's verdict passed an unplanned death"
  ;;
later-launch-signalled)  # a later launch waiting for its join server ends at once on SIGTERM, SIGINT or SIGHUP
  # Two waits: nothing listens on the port; a port whose backlog is full (its kernel drops
  # the handshake, which a blocking connect would retry for two minutes).
  python3 - "$WORK/full-port" <<'PY' &
import os, socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(0)
fillers = []
for _ in range(4):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(listener.getsockname())
    except BlockingIOError:
        pass
    fillers.append(s)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(listener.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
PY
  holder=$!
  for _ in $(seq 100); do [ -s "$WORK/full-port" ] && break; sleep 0.1; done
  full=$(cat "$WORK/full-port") || fail "no full port"
  for target in "$port" "$full"; do
    for sig in TERM INT HUP; do  # docs/security.md: SIGTERM, SIGINT or SIGHUP
      late_log=$WORK/late-$target-$sig.log
      HYRUN_EP_TOKEN=t HYRUN_LOG_LEVEL=info "$EP_ELASTIC" --plan '[[0,1]]' --num-processes 1 --tcp-server 127.0.0.1 \
        --port "$target" --timeout-ms 120000 >"$late_log" 2>&1 &
      late=$!
      # Signalled once it waits (its signals are taken over before it says so).
      for _ in $(seq 300); do grep -q "asking the join server" "$late_log" && break; sleep 0.05; done
      grep -q "asking the join server" "$late_log" || fail "port $target: the later launch never started to wait"
      kill -s "$sig" "$late"
      for _ in $(seq 100); do kill -0 "$late" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$late" 2>/dev/null; then fail "port $target: SIG$sig ignored for 10 s"; kill -9 "$late"; fi
      wait "$late"; rc=$?
      want=$((128 + $(kill -l "$sig")))
      [ "$rc" = "$want" ] && pass "port $target: SIG$sig ends the wait with exit $rc" || fail "port $target: SIG$sig gave exit $rc, not $want"
      grep -q "received SIG$sig while waiting for the join server at 127.0.0.1:$target; nothing was started" "$late_log" \
        && pass "the message names the signal and the server" || { fail "no message naming SIG$sig"; cat "$late_log"; }
    done
  done
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  ;;
bad-options)  # elastic.py's options only (and hyrun's extras); anything else: exit 2, one clear line
  run_job 20 "$EP_ELASTIC" --plan '[[0,1]]' --num-procs 2
  expect_rc 2
  expect_stderr "^ep-elastic: The following arguments? (was|were) not expected: .*--num-procs.*; see ep-elastic --help$"
  run_job 20 "$EP_ELASTIC" --plan '[[0,1]]' --timeout-ms -5
  expect_rc 2
  run_job 20 "$EP_ELASTIC" --plan '[[0,"x"]]'
  expect_rc 2
  expect_stderr "is not an integer rank"
  run_job 20 python3 "$ELASTIC_PY" --help
  expect_rc 0
  for o in --plan --num-processes --num-tokens --num-experts-per-rank --hidden-dim --num-topk --tcp-server --kineto \
           --disable-ll-nvlink --timeout-ms --validate-phase-failures; do
    grep -q -- "$o" "$OUT" || fail "--help lacks elastic.py's $o"
  done
  pass "every option of elastic.py is accepted"
  ;;
*) echo "unknown case $1" >&2; exit 2 ;;
esac
finish
