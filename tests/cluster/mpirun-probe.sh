#!/usr/bin/env bash
# Open MPI's mpirun as the PMIx server (no Slurm): 3 processes on this host.
. "$(dirname "$0")/cluster-env.sh"
unset SLURM_CONF  # plain mpirun on this machine; keep it away from any Slurm
run_probe_job 30 3 mpirun --allow-run-as-root --oversubscribe -np 3 "$PMIX_PROBE"
[ "$(probe_distinct node)" = 1 ] || fail "expected one node id for 3 local processes"
[ "$(probe_lines | grep -c ' local=[0-2]/3 ')" = 3 ] || fail "local size is not 3"
[ "$(probe_lines | grep -c 'peers_ok=2$')" = 3 ] || fail "not every process read 2 peer records"
check_no_leftovers "$PMIX_PROBE"
