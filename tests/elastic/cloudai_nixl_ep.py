#!/usr/bin/env python3
"""CloudAI's NixlEP workload, as the tests need it: its launch script and its verdict.

    cloudai_nixl_ep.py script OUTPUT_DIR PLAN_JSON NUM_NODES PROCS_PER_NODE PYTHON SCRIPT [--key value ...]
        prints the bash script CloudAI generates for an allocation (waves, srun options,
        readiness probe, end-phase waits, append mode); extra --key value pairs are what
        CloudAI passes from unknown TOML keys.
    cloudai_nixl_ep.py waves PLAN_JSON
        CloudAI's launch waves on one node: "TRIGGER_PHASE COUNT" per wave ("-" for the first).
    cloudai_nixl_ep.py check OUTPUT_DIR NUM_NODES [PLAN_JSON]
        CloudAI's was_run_successful on the logs (failure patterns in every node log and in
        stdout.txt/stderr.txt, every node log present, the steps' exit codes standing in for
        slurm-job.toml, bandwidth lines); with PLAN_JSON also that every rank of every phase
        printed its end-phase line (killed ranks excepted). Exit 0 = successful.

Rewritten from CloudAI (src/cloudai/workloads/nixl_ep, v. 5b5c0f72 and later) for the test
cluster: no container, so CloudAI's srun prefix is `srun --export=ALL --mpi=pmix`.
"""
import json
import os
import re
import shlex
import sys
from pathlib import Path

FLOAT = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
COMBINED_BW = re.compile(rf"\[rank (?P<rank>\d+)\] Dispatch \+ combine bandwidth: (?P<bandwidth>{FLOAT}) GB/s, "
                         rf"avg_t=(?P<avg_time>{FLOAT}) us, min_t=(?P<min_time>{FLOAT}) us, max_t=(?P<max_time>{FLOAT}) us")
KINETO_BW = re.compile(rf"\[rank (?P<rank>\d+)\] Dispatch bandwidth: (?P<d>{FLOAT}) GB/s \| Combine bandwidth: (?P<c>{FLOAT}) GB/s")
FAILURE_PATTERNS = (
    "python3: can't open file", "Traceback (most recent call last):", "Timed out waiting for NIXL EP master services",
    "no plan phases were found for rank", "recvValueWithTimeout failed", "timed out after 300000ms",
    "Failed to prepare remote memory view", "srun: error:", "Exited with exit code",
)
STORE_PORT = 9999
SERVICE_STARTUP_TIMEOUT = 60
PHASE_TRANSITION_TIMEOUT = 600


def launch_waves(plan):
    positive = [{r for r in phase if r >= 0} for phase in plan]
    waves = [(None, len(positive[0]))]
    for p in range(1, len(positive)):
        added = positive[p] - positive[p - 1]
        if added:
            waves.append((p - 1, len(added)))
    return waves


def packed_waves(plan, num_nodes, capacity):
    waves = launch_waves(plan)
    if sum(n for _, n in waves) > capacity * num_nodes:
        raise SystemExit(f"plan needs {sum(n for _, n in waves)} workers, {num_nodes} nodes x {capacity} give fewer")
    remaining = [capacity] * num_nodes
    packed = []
    for trigger, total in waves:
        sizes = [0] * num_nodes
        for node in range(num_nodes):
            if total == 0:
                break
            take = min(remaining[node], total)
            sizes[node] = take
            remaining[node] -= take
            total -= take
        packed.append((trigger, sizes))
    return packed


# The script's two waits, as CloudAI writes them.
WAIT_FUNCTIONS = [
    f"""wait_for_master_services() {{
    local timeout={SERVICE_STARTUP_TIMEOUT}
    local interval=1
    local end_time=$(($(date +%s) + timeout))
    while [ "$(date +%s)" -lt "$end_time" ]; do
        if timeout 1 bash -c ": > /dev/tcp/$master_ip/{STORE_PORT}" >/dev/null 2>&1; then
            echo "NIXL EP master services are ready on $master_ip"
            return 0
        fi
        sleep "$interval"
    done
    echo "Timed out waiting for NIXL EP master services on $master_ip"
    return 1
}}""",
    "",
    f"""wait_for_phase_completion() {{
    local phase="$1"
    local log_file="$2"
    local primary_pid="$3"
    local timeout={PHASE_TRANSITION_TIMEOUT}
    local interval=1
    local end_time=$(($(date +%s) + timeout))
    while [ "$(date +%s)" -lt "$end_time" ]; do
        if [ -f "$log_file" ] && grep -Fq -- "-> end phase $phase" "$log_file"; then
            echo "Detected completion of phase $phase in $log_file"
            return 0
        fi
        if [ -f "$log_file" ] && grep -Fq -- "no plan phases were found for rank" "$log_file"; then
            echo "Detected an early NIXL EP failure while waiting for phase $phase"
            return 1
        fi
        if ! kill -0 "$primary_pid" >/dev/null 2>&1; then
            echo "Primary NIXL EP launch exited before phase $phase completed"
            return 1
        fi
        sleep "$interval"
    done
    echo "Timed out waiting for phase $phase to complete"
    return 1
}}""",
    "",
]


def script(out, plan_path, num_nodes, procs, python, elastic, extra):
    plan = json.loads(Path(plan_path).read_text())
    out = Path(out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    generated = out / "nixl-ep-plan.json"
    generated.write_text(json.dumps(plan, indent=2) + "\n")
    # CloudAI writes its final_env_vars here; the tests pass theirs (UCX_*) in CLOUDAI_ENV.
    (out / "env_vars.sh").write_text("".join(f"export {kv}\n" for kv in os.environ.get("CLOUDAI_ENV", "").split()))
    prefix = "srun --export=ALL --mpi=pmix"

    def command(n, tcp):
        parts = [python, elastic, "--plan", str(generated), "--num-processes", str(n)]
        if tcp:
            parts += ["--tcp-server", "$master_ip"]
        parts += extra
        return " ".join(parts)

    def launch(node, n, tcp=None, append=False):
        if tcp is None:
            tcp = node != 0
        target = "--nodelist=$SLURM_JOB_MASTER_NODE" if node == 0 else f"--relative={node}"
        mode = " --open-mode=append" if append else ""
        body = f"source {shlex.quote(str(out / 'env_vars.sh'))}; {command(n, tcp)}".replace('"', '\\"')
        return (f"{prefix} --overlap {target} --ntasks-per-node=1 --ntasks=1 -N1{mode} "
                f"--output={out / f'nixl-ep-node-{node}.log'} bash -c \"{body}\"")

    primary_log = out / "nixl-ep-node-0.log"
    lines = [
        "nodes=( $( scontrol show hostnames $SLURM_JOB_NODELIST ) )",
        "nodes_array=($nodes)",
        "master_node=${nodes_array[0]}",
        'master_ip=$(srun --nodes=1 --ntasks=1 -w "$master_node" hostname --ip-address | awk \'{print $1}\')',
        # Not in CloudAI's script: its Slurm sets it; the test cluster's salloc may not.
        ': "${SLURM_JOB_MASTER_NODE:=$master_node}"',
        "",
        *WAIT_FUNCTIONS,
        "worker_pids=()",
    ]
    if num_nodes == 1:
        waves = launch_waves(plan)
        lines += ['echo "Starting initial NIXL EP wave on the master node..."', launch(0, waves[0][1]) + " &",
                  "primary_pid=$!", "worker_pids+=($primary_pid)"]
        for i, (trigger, n) in enumerate(waves[1:], start=1):
            lines += ["", f'echo "Waiting for phase {trigger} before starting wave {i}..."',
                      f'wait_for_phase_completion "{trigger}" "{primary_log}" "$primary_pid" || exit 1',
                      f'echo "Starting NIXL EP wave {i} on the master node..."',
                      launch(0, n, tcp=True, append=True) + " &", "worker_pids+=($!)"]
    else:
        waves = packed_waves(plan, num_nodes, procs)
        first = waves[0][1]
        lines += ['echo "Starting initial NIXL EP wave on the master node..."', launch(0, first[0]) + " &",
                  "primary_pid=$!", "worker_pids+=($primary_pid)", "",
                  'echo "Waiting for NIXL EP master services..."', "wait_for_master_services || exit 1"]
        if any(n > 0 for n in first[1:]):
            lines += ["", 'echo "Starting initial NIXL EP wave on follower nodes..."']
            for node, n in enumerate(first[1:], start=1):
                if n > 0:
                    lines += [launch(node, n) + " &", "worker_pids+=($!)"]
        for i, (trigger, sizes) in enumerate(waves[1:], start=1):
            lines += ["", f'echo "Waiting for phase {trigger} before starting wave {i}..."',
                      f'wait_for_phase_completion "{trigger}" "{primary_log}" "$primary_pid" || exit 1',
                      f'echo "Starting NIXL EP wave {i} across allocated nodes..."']
            for node, n in enumerate(sizes):
                if n > 0:
                    lines += [launch(node, n, tcp=True, append=True) + " &", "worker_pids+=($!)"]
    # Each step's exit code, in place of the slurm-job.toml that CloudAI reads from sacct.
    lines += ["", "rc=0", 'for pid in "${worker_pids[@]}"; do', '    wait "$pid"; step_rc=$?',
              f'    echo "$step_rc" >> {shlex.quote(str(out / "step-rcs"))}',
              '    [ "$step_rc" -eq 0 ] || rc=$step_rc', "done", "", "exit $rc"]
    print("\n".join(lines))


def check(out, num_nodes, plan_path=None):
    out = Path(out)
    logs = [out / f"nixl-ep-node-{i}.log" for i in range(num_nodes)]
    for path in [*logs, out / "stdout.txt", out / "stderr.txt"]:
        if path.is_file():
            text = path.read_text(errors="ignore")
            for pattern in FAILURE_PATTERNS:
                if pattern in text:
                    return f"failure pattern {pattern!r} in {path.name}"
    missing = [p.name for p in logs if not p.is_file()]
    if missing:
        return f"node logs missing: {', '.join(missing)}"
    rcs = out / "step-rcs"
    if rcs.is_file() and any(line.strip() != "0" for line in rcs.read_text().split()):
        return f"a step did not complete (exit codes {rcs.read_text().split()})"
    samples = [m for p in logs for m in (list(COMBINED_BW.finditer(p.read_text(errors='ignore'))) +
                                         list(KINETO_BW.finditer(p.read_text(errors='ignore'))))]
    if not samples:
        return "no bandwidth line in any node log"
    if plan_path:
        plan = json.loads(Path(plan_path).read_text())
        text = "".join(p.read_text(errors="ignore") for p in logs)
        ends = {(int(a), int(b)) for a, b in re.findall(r"global_rank=(\d+), local_rank=\d+ -> end phase (\d+)", text)}
        for p, phase in enumerate(plan):
            for r in phase:
                if r >= 0 and (r, p) not in ends:
                    return f"rank {r} printed no end of phase {p}"
                if r < 0 and (-r, p) in ends:
                    return f"killed rank {-r} ended phase {p}"
    return None


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "waves":  # one line per wave: "TRIGGER_PHASE COUNT" (- for the first)
        for trigger, n in launch_waves(json.loads(Path(sys.argv[2]).read_text())):
            print("-" if trigger is None else trigger, n)
        return 0
    if len(sys.argv) >= 7 and sys.argv[1] == "script":
        script(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8:])
        return 0
    if len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        problem = check(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) == 5 else None)
        print(f"cloudai verdict: {'failed: ' + problem if problem else 'successful'}")
        return 1 if problem else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
