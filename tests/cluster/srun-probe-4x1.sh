#!/usr/bin/env bash
# srun --mpi=pmix -N4 --ntasks-per-node=1: 4 records exchanged across 4 nodes, every
# hostname and node id distinct.
. "$(dirname "$0")/cluster-env.sh"
run_probe_job 30 4 srun --mpi=pmix -N4 --ntasks-per-node=1 "$PMIX_PROBE" --expect-hosts 4
[ "$(probe_distinct rank)" = 4 ] || fail "ranks not 0..3"
[ "$(probe_distinct host)" = 4 ] || fail "hostnames not distinct"
[ "$(probe_distinct node)" = 4 ] || fail "node ids not distinct"
probe_lines | grep -q ' size=4 ' || fail "job size is not 4"
[ "$(probe_lines | grep -c 'peers_ok=3$')" = 4 ] || fail "not every process read 3 peer records"
check_no_leftovers "$PMIX_PROBE"
