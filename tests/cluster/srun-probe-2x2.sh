#!/usr/bin/env bash
# srun --mpi=pmix -N2 --ntasks-per-node=2: two PMIx clients per node, local ranks 0 and 1.
. "$(dirname "$0")/cluster-env.sh"
run_probe_job 30 4 srun --mpi=pmix -N2 --ntasks-per-node=2 "$PMIX_PROBE" --expect-hosts 2
[ "$(probe_distinct host)" = 2 ] || fail "expected 2 distinct hosts"
[ "$(probe_lines | grep -c ' local=[01]/2 ')" = 4 ] || fail "local rank/size not n/2 on every process"
[ "$(probe_distinct local)" = 2 ] || fail "local ranks not 0 and 1"
check_no_leftovers "$PMIX_PROBE"
