#!/usr/bin/env bash
# mpirun inside `salloc -N2`, one process per node: Open MPI starts its daemons through
# Slurm. PMIx node ids there need not start at 0 (node 0 can be mpirun's own host).
. "$(dirname "$0")/cluster-env.sh"
run_probe_job 60 2 salloc -N2 mpirun --allow-run-as-root -npernode 1 "$PMIX_PROBE" --expect-hosts 2
[ "$(probe_distinct host)" = 2 ] || fail "expected 2 distinct hosts"
[ "$(probe_distinct node)" = 2 ] || fail "expected 2 distinct node ids"
echo "node ids under mpirun: $(probe_lines | grep -o ' node=[^ ]*' | tr '\n' ' ')"
check_no_leftovers "$PMIX_PROBE"
