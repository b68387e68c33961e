#!/usr/bin/env bash
# Rank 1 never reaches the fence. The others must give up after the fence time limit
# (2 s) with a clear message and abort the job; srun must exit non-zero well before the
# stalled rank would wake (30 s), and nothing of the job may be left.
#
# Why this matters: Slurm 22.05's pmix plugin ignores PMIX_TIMEOUT on fences and only
# gives up after its own 300 s collective timeout; Client::fence enforces the limit itself.
. "$(dirname "$0")/cluster-env.sh"
run_bounded 25 srun --mpi=pmix -N4 --ntasks-per-node=1 "$PMIX_PROBE" \
  --skip-fence-on-rank 1 --stall-seconds 30 --fence-timeout-ms 2000
[ "$RUN_RC" != 0 ] || fail "srun succeeded although rank 1 skipped the fence"
[ "$RUN_RC" != 124 ] && [ "$RUN_RC" != 137 ] || [ "$RUN_MS" -lt 20000 ] || fail "srun hung (killed by the test's limit)"
[ "$RUN_MS" -lt 12000 ] || fail "took $RUN_MS ms; expected about 2 s for the fence limit plus the abort"
[ "$RUN_MS" -ge 1900 ] || fail "gave up after $RUN_MS ms, before the 2000 ms fence limit"
grep -q 'fence over all 4 processes of PMIx namespace .* did not complete within 2000 ms' <<<"$RUN_OUT" ||
  fail "no clear fence-timeout message"
grep -q 'aborting the whole job' <<<"$RUN_OUT" || fail "the job was not aborted"
check_no_leftovers "$PMIX_PROBE"
