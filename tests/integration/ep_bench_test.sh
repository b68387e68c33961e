#!/usr/bin/env bash
# ep-bench under hyrun in local mode, as a user and CloudAI see it: ep_bench_test.sh CASE [PLAN]
source "$(dirname "$0")/lib.sh"
case_name=$1
plans=$PLANS_DIR
small=(--num-tokens 16 --hidden-dim 512 --num-topk 4 --num-experts-per-rank 2 --warmup 2 --iters 6 --timeout-ms 20000)

# cloudai_check PLAN_JSON: CloudAI's regexes find an end-phase line for every rank in every
# phase it runs to the end, and bandwidth lines; none of CloudAI's failure patterns appear.
cloudai_check() {
  python3 - "$1" "$OUT" "$ERR" <<'PY'
import json, re, sys
plan = json.load(open(sys.argv[1]))
out = open(sys.argv[2]).read()
err = open(sys.argv[3]).read()
F = r'[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?'
bw = re.compile(r'\[rank (?P<rank>\d+)\] Dispatch \+ combine bandwidth: (?P<bandwidth>' + F + r') GB/s, avg_t=(?P<avg_time>' + F +
                r') us, min_t=(?P<min_time>' + F + r') us, max_t=(?P<max_time>' + F + r') us')
end = re.compile(r'global_rank=(\d+), local_rank=\d+ -> end phase (\d+)')
ends = {(int(m.group(1)), int(m.group(2))) for m in end.finditer(out)}
for p, phase in enumerate(plan):
    for r in phase:
        if r >= 0:
            assert (r, p) in ends, f"no end-phase line for rank {r} in phase {p}"
        else:
            assert (-r, p) not in ends, f"killed rank {-r} ended phase {p}"
found = list(bw.finditer(out))
rates = [float(m.group('bandwidth')) for m in found]
# However slow tiny shapes on 2 busy cores run, a phase that moved bytes reads a positive bandwidth.
assert all(r > 0 for r in rates), f"a bandwidth line reads 0 GB/s: {[m.group(0) for m in found if float(m.group('bandwidth')) <= 0][:2]}"
assert found and all(float(m.group('avg_time')) > 0 and float(m.group('min_time')) <= float(m.group('avg_time')) <= float(m.group('max_time'))
                     for m in found), "no sane bandwidth line"
for pattern in ('Traceback (most recent call last):', 'no plan phases were found for rank', 'srun: error:', 'Exited with exit code'):
    assert pattern not in out and pattern not in err, f"failure pattern {pattern!r} printed"
print(f"cloudai: {len(ends)} end-phase lines, {len(rates)} bandwidth lines, mean {sum(rates)/len(rates):.3f} GB/s")
PY
}

case $case_name in
plan)  # one reference plan: phases run, kills detected as planned, CloudAI parses everything
  plan=$plans/$2.json
  n=$(python3 -c "import json,sys; print(max(abs(r) for ph in json.load(open(sys.argv[1])) for r in ph) + 1)" "$plan")
  run_job 240 "$HYRUN" -n "$n" -- "$EP_BENCH" --plan "$plan" "${small[@]}" --validate --validate-phase-failures --report-dir "$WORK/report"
  [ "$(grep -c "validation passed" "$OUT")" -gt 0 ] && ! grep -q "validation FAILED" "$OUT" && pass "every validated phase passed the reference checks" || fail "validation"
  expect_rc 0
  cloudai_check "$plan" && pass "CloudAI's regexes find every rank and phase" || { fail "CloudAI check"; show_output; }
  python3 - "$plan" "$OUT" <<'PY' && pass "every killed rank detected by every survivor" || fail "kill detection"
import json, re, sys
plan = json.load(open(sys.argv[1])); out = open(sys.argv[2]).read()
for p, phase in enumerate(plan):
    killed = sorted(-r for r in phase if r < 0)
    if not killed: continue
    for r in (r for r in phase if r >= 0):
        m = re.search(rf'global_rank={r}, local_rank=\d+ -> detected failed ranks \[([0-9, ]*)\] in ([0-9.]+) ms', out)
        assert m, f"rank {r} did not report the failure of {killed} in phase {p}"
        assert sorted(int(x) for x in m.group(1).split(',')) == killed, (r, m.group(1), killed)
PY
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d" "$WORK/report/results.json" && pass "results.json parses" || fail "results.json"
  [ -s "$WORK/report/plan.json" ] && pass "plan.json written" || fail "no plan.json"
  ;;
two-plans)  # two plans one after the other in one launch, a result set each
  run_job 240 "$HYRUN" -n 4 -- "$EP_BENCH" --plan '[[0,1],[0,1,2,3]]' --plan "$plans/no_expansion.json" "${small[@]}" --report-dir "$WORK/r"
  expect_rc 0
  [ -s "$WORK/r/plan-1/results.json" ] && [ -s "$WORK/r/plan-2/results.json" ] && pass "a result set per plan" || fail "result sets"
  [ "$(grep -ci 'overall mean' "$OUT")" -ge 2 ] && pass "a summary per plan" || { fail "summaries"; show_output; }
  ;;
progress)  # hyrun on a terminal: rank 0's progress shows as lines; on a pipe, none
  command -v script >/dev/null || { echo "script(1) is missing"; exit 77; }
  run_job 120 script -qec "$(printf '%q ' "$HYRUN" -n 2 -- "$EP_BENCH" --plan '[[0],[0,1]]' "${small[@]}")" /dev/null
  expect_rc 0
  expect_stdout "phase 1 of 2: plan 1 of 1"
  expect_stdout "phase 2 of 2: plan 1 of 1"
  run_job 120 "$HYRUN" -n 2 -- "$EP_BENCH" --plan '[[0],[0,1]]' "${small[@]}"
  expect_rc 0
  ! grep -q "phase 1 of 2" "$OUT" && pass "no progress line on a pipe" || { fail "a progress line on a pipe"; show_output; }
  ;;
shm-deaths-from-hyrun)  # one node: shared memory between ranks, and the kill of rank 2 learned from hyrun or its process
  run_job 240 "$HYRUN" -n 4 -x UCX_LOG_LEVEL=info -x HYRUN_LOG_LEVEL=debug -- "$EP_BENCH" \
    --plan "$plans/expansion_fault_contraction.json" "${small[@]}" --validate-phase-failures
  expect_rc 0
  # UCX says at info level (on stdout) which transports each endpoint configuration uses.
  cfg=$(cat "$OUT" "$ERR" | grep 'ep_cfg\[[0-9]*\]: tag(' || true)
  [ -n "$cfg" ] || { fail "UCX printed no endpoint configuration"; show_output; }
  echo "$cfg" | grep -qE 'sysv|posix|cma' && ! echo "$cfg" | grep -q 'tcp' \
    && pass "every endpoint between the ranks uses shared memory, none tcp" || { fail "transports"; echo "$cfg"; }
  # Each rank learns of the death from hyrun's report or from its watch of rank 2's process on
  # this host, whichever comes first: a rank that leaves after phase 2 (rank 1) may exit before
  # a loaded hyrun has reaped rank 2 (session 37). Never from a failed UCX endpoint.
  for r in 0 1 3; do
    grep -Eq "hyrun-worker\[$r\]: debug: rank $r: (hyrun reports that rank 2 died|rank 2's process (on this host|[0-9]+ has) ended)" "$ERR" \
      || fail "rank $r was not told of rank 2's death"
    expect_stdout "global_rank=$r, local_rank=$r -> detected failed ranks \[2\] in"
  done
  ! grep -q "the endpoint to rank 2 failed" "$OUT" "$ERR" && pass "no rank learned it from a failed endpoint" \
    || fail "a rank learned of rank 2's death from a failed UCX endpoint"
  ! grep -q '^hyrun: warning' "$ERR" && pass "hyrun warned of nothing" || { fail "hyrun warned"; grep '^hyrun: warning' "$ERR"; }
  ;;
deaths-before-a-restart)  # a restarted process is told of deaths that came before it started
  # Rank 3 is killed for good in phase 1; rank 2 is killed in phase 2 and comes back in
  # phase 3: its new process must learn of rank 3's death from hyrun when it joins, as the
  # old one did when it happened (so it never waits for rank 3).
  run_job 240 "$HYRUN" -n 4 -x HYRUN_LOG_LEVEL=debug -- "$EP_BENCH" --plan '[[0,1,2,3],[0,1,2,-3],[0,1,-2],[0,1,2]]' \
    "${small[@]}" --validate-phase-failures
  expect_rc 0
  [ "$(grep -c 'hyrun-worker\[2\]: debug: rank 2: hyrun reports that rank 3 died' "$ERR")" = 2 ] \
    && pass "both processes of rank 2 were told that rank 3 died" || { fail "rank 2's processes were not both told"; grep 'hyrun reports' "$ERR"; }
  expect_stdout "global_rank=2, local_rank=2 -> end phase 3"
  ;;
control-fd-closed)  # a wrapper closed the control socket: the World says so and lets UCX report deaths
  # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
  run_job 120 "$HYRUN" -n 2 -- sh -c 'exec 4>&-; exec "$0" "$@"' "$EP_BENCH" --plan '[[0,1]]' "${small[@]}"
  expect_rc 0
  grep -q "asking hyrun for peers' deaths on HYRUN_CONTROL_FD (fd 4): Bad file descriptor; every endpoint uses UCX peer error handling instead" "$ERR" \
    && pass "the closed control socket is named" || { fail "no warning naming the closed control socket"; show_output; }
  ;;
unused-rank)  # a rank of the world that no phase uses exits 0 with a note
  run_job 120 "$HYRUN" -n 3 -- "$EP_BENCH" --plan '[[0,1]]' "${small[@]}"
  expect_rc 0
  expect_stdout "global_rank=2, local_rank=2 -> no phase of the plan uses this rank"
  ;;
unplanned-death)  # a rank dying outside the plan fails the job with its name
  mkdir "$WORK/p"
  "$HYRUN" -n 4 -- "$EP_BENCH" --plan '[[0,1,2,3]]' --num-tokens 16 --hidden-dim 512 --num-topk 4 --warmup 2 \
    --iters 1000000 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  for _ in $(seq 100); do grep -q 'start phase 0' "$WORK/o" 2>/dev/null && break; sleep 0.1; done
  sleep 0.5
  victim=$(pgrep -P "$hy" | while read -r p; do grep -qx 'HYRUN_RANK=2' < <(tr '\0' '\n' <"/proc/$p/environ") && echo "$p"; done)
  [ -n "$victim" ] || fail "no process of rank 2"
  kill -9 "$victim"; wait "$hy"; RC=$?; OUT=$WORK/o; ERR=$WORK/e
  expect_rc 137
  expect_stderr "^hyrun: rank 2 \(pid $victim\) was killed by signal 9 \(SIGKILL\)"
  ;;
cuda-without-gpu)  # --backend cuda on a machine without a GPU fails at once, saying why
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then echo "SKIPPED: a GPU answers"; exit 77; fi
  run_job 60 "$HYRUN" -n 2 -- "$EP_BENCH" --plan '[[0,1]]' --backend cuda "${small[@]}"
  [ "$RC" -eq 2 ] && pass "refused with exit 2 (usage)" || { fail "exit $RC"; show_output; }
  grep -qE "^ep-bench: --backend cuda: (no CUDA device|this build has no CUDA backend).*use --backend host" "$ERR" &&
    pass "the message says why: $(grep -m1 -- '--backend cuda' "$ERR")" || { fail "no clear message"; show_output; }
  ! grep -q "start phase" "$OUT" && pass "no phase started" || fail "a phase started"
  ;;
bad-plans)  # every plan error is named before anything runs
  for bad in 'not json' '[]' '[[]]' '[[0,"x"]]' '[[0,1],[0,9]]' '[[1,2]]' '[[0,1],[0,-3]]' '[[0,0]]'; do
    run_job 60 "$HYRUN" -n 4 -- "$EP_BENCH" --plan "$bad" "${small[@]}"
    [ "$RC" -eq 2 ] && pass "plan '$bad' refused with exit 2" || { fail "plan '$bad': exit $RC"; show_output; }
    grep -qi "plan" "$ERR" && pass "the message names the plan: $(grep -i plan "$ERR" | head -1)" || fail "no message for '$bad'"
  done
  ;;
bad-options)  # option errors exit 2 (not CLI11's 105/109/114) with ep-bench's message and no wrong hyrun hint
  for bad in '--iters 0' '--no-such-option' '--num-topk 65' '--backend gpu'; do
    # shellcheck disable=SC2086
    run_job 60 "$HYRUN" -n 2 -- "$EP_BENCH" --plan '[[0,1]]' "${small[@]}" $bad
    [ "$RC" -eq 2 ] && pass "'$bad' refused with exit 2" || { fail "'$bad': exit $RC"; show_output; }
    grep -q "^ep-bench: " "$ERR" && pass "ep-bench named the error: $(grep '^ep-bench: ' "$ERR" | head -1)" \
      || fail "no ep-bench message for '$bad'"
    ! grep -q -- "--bootstrap=none" "$ERR" && pass "no --bootstrap=none hint" || fail "hyrun gave the --bootstrap=none hint for '$bad'"
  done
  # More experts per token than the plan has (2 ranks x 1 expert)
  run_job 60 "$HYRUN" -n 2 -- "$EP_BENCH" --plan '[[0,1]]' --num-tokens 16 --hidden-dim 512 --num-topk 3 \
    --num-experts-per-rank 1 --warmup 2 --iters 6
  expect_rc 2
  expect_stderr "--num-topk 3 is larger than the 2 experts of plan"
  ;;
report-dir-checked-first)  # a --report-dir that cannot be written, or that others can write, fails before the first phase
  printf 'x\n' >"$WORK/a-file"
  mkdir -m 0777 "$WORK/shared" && chmod 0777 "$WORK/shared"  # chmod: the umask does not decide
  for dir in "$WORK/a-file" "$WORK/a-file/sub" "$WORK/shared"; do
    run_job 60 "$HYRUN" -n 4 -- "$EP_BENCH" --plan "$plans/expansion_contraction.json" "${small[@]}" --report-dir "$dir"
    expect_rc 2
    expect_stderr "^ep-bench: --report-dir $dir: "
    ! grep -q -- '-> end phase\|start phase' "$OUT" && pass "no phase ran" || fail "phases ran before the report directory was refused"
    ! grep -q -- "--bootstrap=none" "$ERR" && pass "no --bootstrap=none hint" || fail "hyrun gave the --bootstrap=none hint"
    expect_faster 10
  done
  [ "$(cat "$WORK/a-file")" = x ] && pass "the file is untouched" || fail "the file named as --report-dir was changed"
  [ -z "$(ls -A "$WORK/shared")" ] && pass "nothing written into the shared directory" || fail "files written into a directory others can write"
  grep -q "chmod go-w $WORK/shared" "$ERR" && pass "the refusal says what would be right" || fail "no 'chmod go-w' advice"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
