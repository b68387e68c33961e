#!/usr/bin/env bash
# Rank 1 never reaches the fence under Open MPI's mpirun. Open MPI's PMIx server honours
# PMIX_TIMEOUT (unlike Slurm 22.05), so either the server or Client::fence's own deadline
# reports the timeout first; both must name the fence and its 2000 ms limit, the job must
# be aborted and mpirun must exit non-zero long before the stalled rank would wake (30 s).
. "$(dirname "$0")/cluster-env.sh"
unset SLURM_CONF
run_bounded 25 mpirun --allow-run-as-root --oversubscribe -np 3 "$PMIX_PROBE" \
  --skip-fence-on-rank 1 --stall-seconds 30 --fence-timeout-ms 2000
[ "$RUN_RC" != 0 ] || fail "mpirun succeeded although rank 1 skipped the fence"
[ "$RUN_MS" -lt 12000 ] || fail "took $RUN_MS ms; expected about 2 s for the fence limit plus the abort"
grep -Eq 'fence over all 3 processes of PMIx namespace .*(within 2000 ms|limit 2000 ms)' <<<"$RUN_OUT" ||
  fail "no clear fence-timeout message"
check_no_leftovers "$PMIX_PROBE"
