#!/usr/bin/env bash
# CloudAI's NixlEP workload on the real test cluster, running hyrun's elastic.py (ep-elastic):
# the script CloudAI generates (waves of `srun --overlap` steps, per-node logs appended,
# readiness probe on the port, waits for "-> end phase P-1" in node 0's log), judged with
# CloudAI's own rules (tests/elastic/cloudai_nixl_ep.py).
#   cloudai-elastic-test.sh plan PLAN NODES | unplanned-kill | wrong-token | late-step
. "$(dirname "$0")/cluster-env.sh"
cloudai=$(dirname "$0")/../elastic/cloudai_nixl_ep.py
out=$(mktemp -d "${TMPDIR:-/tmp}/hyrun-cloudai.XXXXXX")
trap 'rm -rf "$out"' EXIT
export CLOUDAI_ENV="UCX_TLS=$HYRUN_CLUSTER_UCX_TLS UCX_NET_DEVICES=$HYRUN_CLUSTER_UCX_NET_DEVICES"
extra=(--num-tokens 16 --hidden-dim 512 --num-topk 4 --warmup 2 --iters 6 --timeout-ms 20000)

# Smallest per-node capacity at which CloudAI's packing gives every node a launch (it needs a
# log from every node of the allocation); none: CloudAI cannot run PLAN on NODES nodes.
capacity_for() {
  python3 - "$1" "$2" "$cloudai" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("c", sys.argv[3]); c = importlib.util.module_from_spec(spec); spec.loader.exec_module(c)
plan = json.load(open(sys.argv[1])); nodes = int(sys.argv[2])
total = sum(n for _, n in c.launch_waves(plan))
for cap in range(-(-total // nodes), total + 1):
    used = [0] * nodes
    for _, sizes in c.packed_waves(plan, nodes, cap):
        used = [u + s for u, s in zip(used, sizes)]
    if all(used):
        print(cap); break
PY
}

# The one change to CloudAI's script: the test cluster's node names do not resolve, so the
# master's address comes from its interfaces (hostname -I) instead of its name (--ip-address).
master_ip_fix() { sed 's/hostname --ip-address/hostname -I/'; }

run_cloudai() {  # PLAN NODES CAPACITY EXTRA... : generate CloudAI's script and run it in an allocation
  local plan=$1 nodes=$2 cap=$3; shift 3
  python3 "$cloudai" script "$out" "$plan" "$nodes" "$cap" python3 "$ELASTIC_PY" "$@" | master_ip_fix >"$out/run.sh"
  run_bounded 80 salloc -N"$nodes" bash -c "bash $out/run.sh >$out/stdout.txt 2>$out/stderr.txt"
  echo "--- stdout.txt"; cat "$out/stdout.txt"; echo "--- stderr.txt"; cat "$out/stderr.txt"
  for f in "$out"/nixl-ep-node-*.log; do echo "--- $(basename "$f")"; grep -v '^\[rank' "$f" | tail -20; done
}

case $1 in
plan)
  plan=$EXAMPLES/plans/$2.json nodes=$3
  cap=$(capacity_for "$plan" "$nodes")
  [ -n "$cap" ] || fail "CloudAI gives some of the $nodes nodes no launch for $2 at any capacity (it then misses that node's log): not a run to register (tests/cluster/CMakeLists.txt)"
  run_cloudai "$plan" "$nodes" "$cap" "${extra[@]}" --validate-phase-failures --kineto
  [ "$RUN_RC" = 0 ] || fail "CloudAI's script exited $RUN_RC"
  python3 "$cloudai" check "$out" "$nodes" "$out/nixl-ep-plan.json" || fail "CloudAI's verdict"
  # CloudAI's report reads 0 GB/s as no bandwidth: however slow, a phase that ran reads positive.
  ! grep -hE 'bandwidth: [0.]+ GB/s' "$out"/nixl-ep-node-*.log | head -3 | grep . || fail "a bandwidth line reads 0 GB/s"
  launches=$(grep -c '^srun .* bash -c' "$out/run.sh")
  echo "ok: $launches launches of ep-elastic over $nodes nodes, every rank ended every phase"
  ;;
unplanned-kill)  # a rank killed outside the plan: CloudAI's verdict must be failed
  plan=$EXAMPLES/plans/single_expansion.json
  python3 "$cloudai" script "$out" "$plan" 2 4 python3 "$ELASTIC_PY" "${extra[@]}" --iters 600 | master_ip_fix >"$out/run.sh"
  timeout -k 5 80 salloc -N2 bash -c "bash $out/run.sh >$out/stdout.txt 2>$out/stderr.txt" &
  job=$!
  victim=""
  for _ in $(seq 1200); do
    if grep -q 'global_rank=5, local_rank=1 -> start phase 1' "$out/nixl-ep-node-1.log" 2>/dev/null; then
      for p in $(pids_of_exe "$EP_BENCH"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'HYRUN_RANK=5' && victim=$p
      done
      [ -n "$victim" ] && break
    fi
    sleep 0.05
  done
  [ -n "$victim" ] || { kill $job; fail "rank 5 never started phase 1"; }
  kill -9 "$victim"
  wait $job || true
  grep -v '^\[rank' "$out/nixl-ep-node-1.log" | tail
  grep -q "rank 5 (pid $victim) was killed by signal 9" "$out/nixl-ep-node-1.log" || fail "node 1's log does not name rank 5"
  if python3 "$cloudai" check "$out" 2 "$out/nixl-ep-plan.json"; then fail "CloudAI's verdict passed an unplanned kill"; fi
  echo "ok: CloudAI's verdict fails the run"
  ;;
wrong-token)  # a step of another job (wrong token) is refused and logged; the run ends naming the ranks
  plan=$out/plan.json; echo '[[0,1],[0,1,2,3]]' >"$plan"
  run_bounded 60 env UCX_TLS="$HYRUN_CLUSTER_UCX_TLS" UCX_NET_DEVICES="$HYRUN_CLUSTER_UCX_NET_DEVICES" salloc -N2 bash -c "
    master=\$(srun -N1 -n1 -w \$(scontrol show hostnames \$SLURM_JOB_NODELIST | head -1) hostname -I | awk '{print \$1}')
    srun --overlap --relative=0 -N1 -n1 --output=$out/node-0.log python3 $ELASTIC_PY --plan $plan --num-processes 2 ${extra[*]} --timeout-ms 4000 &
    root=\$!
    for i in \$(seq 100); do timeout 1 bash -c \": > /dev/tcp/\$master/9999\" 2>/dev/null && break; sleep 0.1; done
    HYRUN_EP_TOKEN=another-job srun --overlap --relative=1 -N1 -n1 --output=$out/node-1.log python3 $ELASTIC_PY --plan $plan --num-processes 2 --tcp-server \$master ${extra[*]}
    echo follower=\$?
    wait \$root; echo root=\$?"
  cat "$out/node-0.log" "$out/node-1.log"
  grep -q 'follower=1' <<<"$RUN_OUT" || fail "the follower was not refused"
  grep -q "refused this launch: its proof does not match this job's token" "$out/node-1.log" || fail "no refusal in the follower's log"
  grep -q "join server: refused a join from .*: its proof does not match" "$out/node-0.log" || fail "the refusal is not logged on node 0"
  grep -q "rank(s) 2, 3 that phase 1 of plan 1 needs did not join within 4000 ms" "$out/node-0.log" || fail "no error naming ranks 2, 3"
  grep -q 'root=0' <<<"$RUN_OUT" && fail "the first launch succeeded"
  echo "ok: refused, logged, and the run ended naming the missing ranks"
  ;;
late-step)  # the step of phase 1 never comes: the first launch ends within --timeout-ms, naming the rank
  plan=$out/plan.json; echo '[[0,1],[0,1,2]]' >"$plan"
  run_bounded 60 env UCX_TLS="$HYRUN_CLUSTER_UCX_TLS" UCX_NET_DEVICES="$HYRUN_CLUSTER_UCX_NET_DEVICES" \
    srun -N1 -n1 --output="$out/node-0.log" python3 "$ELASTIC_PY" --plan "$plan" --num-processes 2 "${extra[@]}" --timeout-ms 3000
  cat "$out/node-0.log"
  [ "$RUN_RC" != 0 ] || fail "srun exited 0"
  grep -q "rank(s) 2 that phase 1 of plan 1 needs did not join within 3000 ms" "$out/node-0.log" || fail "no error naming rank 2"
  [ "$RUN_MS" -lt 30000 ] || fail "took $RUN_MS ms"
  ;;
*) echo "unknown case $1" >&2; exit 2 ;;
esac
check_no_leftovers "$EP_BENCH" "$EP_ELASTIC"
