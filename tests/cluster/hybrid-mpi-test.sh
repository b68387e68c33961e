#!/usr/bin/env bash
# MPI programs under hyrun in hybrid mode (issue 23): one hyrun per Slurm task (or mpirun
# process) serves PMIx to its ranks, the whole job one namespace, fences relayed over the
# node link (or, CASE-outer, through the outer launcher's fence). hybrid-mpi-test.sh CASE. MPI_CHECK is tests/integration/mpi_check.cpp, built
# with Debian's Open MPI; mpi4py is Debian's python3-mpi4py.
# shellcheck disable=SC2016  # the sh -c programs are single-quoted on purpose: they expand in the child
. "$(dirname "$0")/cluster-env.sh"
MPI4PY_CHECK=$(cd "$(dirname "$0")/../integration" && pwd)/mpi4py_check.py
case_name=$1
# CASE-outer: the same case with the ranks' fences through srun's own PMIx fence (--fences
# outer) instead of hyrun's node link (what --fences auto takes for a job of 2 to 4 nodes).
hy=("$HYRUN") fences=link
if [[ $case_name == *-outer ]]; then
  case_name=${case_name%-outer}
  hy=("$HYRUN" --fences outer) fences=outer
fi
: "${MPI_CHECK:?set by CTest}"
ucx=(env UCX_TLS="${HYRUN_CLUSTER_UCX_TLS:-}" UCX_NET_DEVICES="${HYRUN_CLUSTER_UCX_NET_DEVICES:-}")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hyrun-hybrid-mpi.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# expect_ok N: every rank 0..N-1 said once that it saw a world of N and its data arrived intact.
expect_ok() {
  local n=$1 r
  for r in $(seq 0 $((n - 1))); do
    [ "$(grep -c "^rank $r of $n: ok$" <<<"$RUN_OUT")" = 1 ] || fail "rank $r did not say once 'rank $r of $n: ok'"
  done
  ! grep -q "of 1: ok" <<<"$RUN_OUT" || fail "a rank ran as a singleton"
}

# expect_abort PROGRAM API RANKS_A_NODE RANK STATUS EXIT: on 2 nodes, RANK calls MPI_Abort
# with STATUS; the job exits EXIT and the second node's hyrun names the rank and its status.
expect_abort() {
  local program=$1 api=$2 per=$3 rank=$4 status=$5 want=$6
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" "${hy[@]}" -n "$per" -- \
    "$program" --abort-rank "$rank" --abort-code "$status"
  [ "$RUN_RC" = "$want" ] || fail "srun exited $RUN_RC, expected $want"
  grep -Eq "^hyrun\[[^]]+\]: rank $rank \(pid [0-9]+\) called MPI_Abort/${api}_Abort with status $status" < <(errors_of 1) \
    || fail "the second node's hyrun did not name rank $rank's MPI_Abort"
  check_no_leftovers "$HYRUN" "$program"
}

# hyrun's own lines of task T, from the per-task error file: srun drops output still in
# flight when a step is aborted (docs/pmix.md), so failure lines are read where slurmstepd
# wrote them.
errors_of() { cat "$WORK/err.$1" 2>/dev/null || true; }

case $case_name in
2x2 | 4x2)  # collectives and 1 MiB with every peer, across nodes and within them
  nodes=${case_name%x*} per=${case_name#*x}
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N"$nodes" --ntasks-per-node=1 "${hy[@]}" -n "$per" -- "$MPI_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok $((nodes * per))
  check_no_leftovers "$HYRUN" "$MPI_CHECK"
  ;;
dmodex)  # Open MPI's direct modex: fences carry no data; each rank's data is got from its node on demand
  # 4 nodes, so that some requests are between two nodes that are not the root: they go
  # straight to the holder, on a connection of the asking node's own (docs/pmix.md).
  run_bounded 60 "${ucx[@]}" OMPI_MCA_pmix_base_async_modex=1 OMPI_MCA_pmix_base_collect_data=0 \
    srun --mpi=pmix -N4 --ntasks-per-node=1 "${hy[@]}" -n 2 --log-level debug -- "$MPI_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok 8
  ! grep -Eq "PMIx fence 0: complete, [1-9][0-9]* bytes" <<<"$RUN_OUT" || fail "the first fence carried data: no direct modex"
  # Every node wants the ranks of the three others (at least those it sends to): from each holder.
  holders=$(grep -Eo "PMIx direct modex [0-9]+: rank [0-9]+'s data, from [^ ]+" <<<"$RUN_OUT" | awk '{print $NF}' | sort -u)
  echo "direct modex served from: $(echo "$holders" | xargs)"
  [ "$(echo "$holders" | grep -c .)" = 4 ] || fail "not every node's ranks were got by direct modex"
  ! grep -q "PMIx direct modex [0-9]*: no data" <<<"$RUN_OUT" || fail "a direct modex found no data"
  direct=$(grep -c "connected (its direct modex)" <<<"$RUN_OUT" || true)
  echo "direct modex connections between nodes that are not the root: $direct"
  [ "$direct" -ge 1 ] || fail "no request went straight to the holder"
  ;;
mpi4py)  # Debian's mpi4py, unchanged: random values reduced across 2 nodes, every element checked
  /usr/bin/python3 -c 'import mpi4py' 2>/dev/null || { echo "python3-mpi4py is not installed"; exit 77; }
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 -- /usr/bin/python3 "$MPI4PY_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok 4
  ;;
large-put)  # a rank's PMIx_Put of 4 MiB on every node of 2, read back whole by every rank across nodes
  : "${PMIX_CLIENT:?set by CTest}"
  run_bounded 90 srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 --bootstrap=none -- "$PMIX_CLIENT" put 4194304
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  for r in 0 1 2 3; do
    grep -q "^pmix-bare-client: rank $r read every rank's 4194304 bytes$" <<<"$RUN_OUT" || fail "rank $r did not read every value"
  done
  check_no_leftovers "$HYRUN" "$PMIX_CLIENT"
  ;;
large-fence)  # one collect-data fence of 48 MiB across 2 nodes (12 MiB a rank): relayed in pieces, read back whole
  # Before issue 37 item 4 the root's "fenced" line (hex, 2 bytes a byte) passed the link's 64 MiB
  # line limit at 32 MiB for the whole job, and the nodes were "lost" for a protocol violation.
  : "${PMIX_CLIENT:?set by CTest}"
  bytes=$((12 << 20))
  run_bounded 120 srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" "${hy[@]}" -n 2 --bootstrap=none -- \
    "$PMIX_CLIENT" put "$bytes"
  errors_of 0; errors_of 1
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  for r in 0 1 2 3; do
    grep -q "^pmix-bare-client: rank $r read every rank's $bytes bytes$" <<<"$RUN_OUT" || fail "rank $r did not read every value"
  done
  check_no_leftovers "$HYRUN" "$PMIX_CLIENT"
  ;;
fence-limit)  # a fence of 280 MiB across 2 nodes, past the 256 MiB hyrun relays: it fails on every rank, said once, no hang
  : "${PMIX_CLIENT:?set by CTest}"
  bytes=$((140 << 20))
  run_bounded 120 srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" "${hy[@]}" -n 1 --bootstrap=none -- \
    "$PMIX_CLIENT" put "$bytes"
  errors_of 0; errors_of 1
  [ "$RUN_RC" != 0 ] || fail "srun exited 0"
  # The fence failed as too much (exit 5 of the client: a PMIx call failed), no rank hung or read anything.
  said="PMIx fence 0 failed: its data from every node is 280(\.[0-9])? MiB, more than the 256 MiB that hyrun relays between nodes in one fence"
  ! grep -q "read every rank" <<<"$RUN_OUT" || fail "a rank read the values of a fence that failed"
  if [ "$fences" = link ]; then
    # Over the link the root judges and tells the other node at once: every rank's fence
    # fails, and each hyrun says why once.
    for r in 0 1; do
      grep -q "^pmix-bare-client: rank $r: PMIx_Fence failed: OUT-OF-RESOURCE" <<<"$RUN_OUT" || fail "rank $r's fence did not fail as too large"
    done
    for t in 0 1; do
      [ "$(grep -Ec "^hyrun: error: $said" < <(errors_of $t))" = 1 ] || fail "task $t's hyrun did not say once which fence failed and the limit"
    done
  else
    # Through the outer launcher's fence each node judges the same data itself, when it has
    # it: the first rank whose fence failed ends the job, which may kill the other node's
    # before its fence ends. At least one rank's fence failed as too large, and a hyrun that
    # judged said why once.
    grep -q "^pmix-bare-client: rank [01]: PMIx_Fence failed: OUT-OF-RESOURCE" <<<"$RUN_OUT" || fail "no rank's fence failed as too large"
    said_by=0
    for t in 0 1; do
      n=$(grep -Ec "^hyrun: error: $said" < <(errors_of $t) || true)
      [ "$n" -le 1 ] || fail "task $t's hyrun said $n times why the fence failed"
      said_by=$((said_by + n))
    done
    [ "$said_by" -ge 1 ] || fail "no hyrun said which fence failed and the limit"
  fi
  ! grep -q "not the node link's protocol" <<<"$(errors_of 0)$(errors_of 1)" || fail "the limit was taken for a protocol violation"
  check_no_leftovers "$HYRUN" "$PMIX_CLIENT"
  ;;
pmix-keys)  # every key docs/pmix.md lists, read back across 2 nodes; an allgather and an alltoall in one fence
  : "${PMIX_KEYS_CLIENT:?set by CTest}"
  run_bounded 60 srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 --bootstrap=none -- "$PMIX_KEYS_CLIENT" 2 2
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  for r in 0 1 2 3; do
    grep -q "^pmix-keys: rank $r of 4: ok$" <<<"$RUN_OUT" || fail "rank $r did not read every key right"
  done
  ;;
pmix-keys-2-tasks-per-node)  # two hyrun tasks a node: each task is a PMIx node of its own, and each rank reads its own task's keys
  # Before issue 38 item 3 libpmix filed each server's node keys under the machine's host
  # name, and the ranks of a host's second task read the first task's local peers and leader.
  : "${PMIX_KEYS_CLIENT:?set by CTest}"
  run_bounded 60 srun --mpi=pmix -N2 --ntasks-per-node=2 "${hy[@]}" -n 2 --bootstrap=none -- "$PMIX_KEYS_CLIENT" 4 2
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  for r in $(seq 0 7); do
    grep -q "^pmix-keys: rank $r of 8: ok$" <<<"$RUN_OUT" || fail "rank $r did not read every key right"
  done
  ;;
2x2-2-tasks-per-node)  # Open MPI and mpi4py with two hyrun tasks a node: collectives and 1 MiB with every peer
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=2 "${hy[@]}" -n 1 -- "$MPI_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok 4
  check_no_leftovers "$HYRUN" "$MPI_CHECK"
  if /usr/bin/python3 -c 'import mpi4py' 2>/dev/null; then
    run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=2 "${hy[@]}" -n 1 -- /usr/bin/python3 "$MPI4PY_CHECK"
    [ "$RUN_RC" = 0 ] || fail "mpi4py: srun exited $RUN_RC"
    expect_ok 4
  fi
  ;;
mpich)  # Debian's MPICH (PMI-1 over PMI_FD) across 2 nodes, as native srun --mpi=pmi2 runs it: collectives, 1 MiB with every peer
  : "${MPICH_CHECK:?set by CTest}"
  # UCX over shared memory between the simulated nodes (one machine): over UCX 1.13's tcp,
  # MPICH 4.0.2's MPI_Finalize can wait for ever for peers already in its finalize barrier,
  # under native srun --mpi=pmi2 as under hyrun (3 runs in 4 with 4 ranks; once in 10 with 2
  # under a CPU hog). With sm, 24 of 24 under the hog. The PMI traffic is the same either way.
  run_bounded 60 env UCX_TLS=sm,self srun --mpi=pmi2 -N2 --ntasks-per-node=2 "$MPICH_CHECK"
  [ "$RUN_RC" = 0 ] || fail "native srun --mpi=pmi2 exited $RUN_RC"
  expect_ok 4
  run_bounded 60 env UCX_TLS=sm,self srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 -- "$MPICH_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok 4
  check_no_leftovers "$HYRUN" "$MPICH_CHECK"
  ;;
pmi2)  # Slurm's libpmi2 (PMI-2 over PMI_FD) across 2 nodes: every rank's line as under native srun --mpi=pmi2
  : "${PMI2_CLIENT:?set by CTest}"
  seed=$RANDOM
  run_bounded 60 srun --mpi=pmi2 -N2 --ntasks-per-node=2 "$PMI2_CLIENT" "$seed"
  [ "$RUN_RC" = 0 ] || fail "native srun --mpi=pmi2 exited $RUN_RC"
  native=$(grep '^pmi2:' <<<"$RUN_OUT" | sort)
  [ "$(grep -c ': ok$' <<<"$native")" = 4 ] || fail "native srun --mpi=pmi2: not 4 ranks ok: $native"
  run_bounded 60 srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 -- "$PMI2_CLIENT" "$seed"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  diff <(echo "$native") <(grep '^pmi2:' <<<"$RUN_OUT" | sort) \
    || fail "the ranks' lines differ from native srun --mpi=pmi2's (< native, > hyrun)"
  # Two hyrun tasks a node: each task is a node of its own (docs/pmix.md, "Several tasks on one
  # machine"), so its node attributes are its own and MPICH's mapping says so.
  run_bounded 60 srun --mpi=pmix -N2 --ntasks-per-node=2 "${hy[@]}" -n 1 -- "$PMI2_CLIENT" "$seed"
  [ "$RUN_RC" = 0 ] || fail "2 tasks a node: srun exited $RUN_RC"
  for r in 0 1 2 3; do
    grep -qxF "pmi2: rank $r of 4: node ranks $r-$r, mapping (vector,(0,4,1)), read 4 keys: ok" <<<"$RUN_OUT" \
      || fail "2 tasks a node: rank $r did not read every key as a node of its own"
  done
  check_no_leftovers "$HYRUN" "$PMI2_CLIENT"
  ;;
pmi2-abort)  # PMI2_Abort on the second node ends the job with 1 (the client exits 1; PMI-2 carries no status); its hyrun names the rank
  : "${PMI2_CLIENT:?set by CTest}"
  run_bounded 60 srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" "${hy[@]}" -n 2 -- \
    "$PMI2_CLIENT" "$RANDOM" --abort-rank 3
  [ "$RUN_RC" = 1 ] || fail "srun exited $RUN_RC, expected 1"
  grep -Eq "^hyrun\[[^]]+\]: rank 3 \(pid [0-9]+\) called MPI_Abort/PMI2_Abort with status 1: pmi2-client: aborting as asked" \
    < <(errors_of 1) || fail "the second node's hyrun did not name rank 3's PMI2_Abort"
  check_no_leftovers "$HYRUN" "$PMI2_CLIENT"
  ;;
mpich-abort)  # MPICH's MPI_Abort(comm, 7) on the second node ends the job with 7 (native srun --mpi=pmi2: 137); its hyrun names the rank
  : "${MPICH_CHECK:?set by CTest}"
  ucx=(env "UCX_TLS=sm,self")  # see the case above
  expect_abort "$MPICH_CHECK" PMI 2 3 7 7
  ;;
abort)  # MPI_Abort(comm, 7) on the second node ends the job with 7; its hyrun names the rank
  expect_abort "$MPI_CHECK" PMIx 2 3 7 7
  ;;
abort-256)  # MPI_Abort with status 256 on the second node: the job fails with 1, never 0
  expect_abort "$MPI_CHECK" PMIx 2 3 256 1
  ;;
no-finalize)  # a rank that exits 0 without MPI_Finalize fails the job
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" "${hy[@]}" -n 2 -- \
    "$MPI_CHECK" --no-finalize-rank 3
  [ "$RUN_RC" = 1 ] || fail "srun exited $RUN_RC, expected 1"
  errors_of 1
  grep -Eq "^hyrun\[[^]]+\]: rank 3 \(pid [0-9]+\) exited 0 without finalizing PMIx" < <(errors_of 1) \
    || fail "the second node's hyrun did not name rank 3"
  check_no_leftovers "$HYRUN" "$MPI_CHECK"
  ;;
fence-node-lost)  # a node whose hyrun dies before its ranks join MPI_Init's fence: the root names them
  # Task 1's ranks sleep before MPI_Init; the root's ranks wait in the fence for them.
  ( set +e; "${ucx[@]}" timeout -k 5 60 srun --mpi=pmix -N2 --ntasks-per-node=1 --error="$WORK/err.%t" bash -c \
      'p=$0; [ "$SLURM_PROCID" = 1 ] && exec "$@" -n 2 -- "$p" --sleep-before-init 50; exec "$@" -n 2 -- "$p"' \
      "$MPI_CHECK" "${hy[@]}" >"$WORK/out" 2>&1; echo $? >"$WORK/rc" ) &
  victim=""
  for _ in $(seq 200); do
    for p in $(pids_of_exe "$HYRUN"); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = hyrun ] || continue
      grep -qx 'SLURM_PROCID=1' < <(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) && victim=$p
    done
    # The root's ranks are in the fence once the root has the node's link and both its ranks connected.
    [ -n "$victim" ] && [ "$(pgrep -c -f "^$MPI_CHECK\$" || true)" -ge 2 ] && break
    sleep 0.1
  done
  [ -n "$victim" ] || fail "no hyrun of task 1 found"
  sleep 1
  victim_host=$(tr '\0' '\n' <"/proc/$victim/environ" | sed -n 's/^SLURMD_NODENAME=//p')
  kill -9 "$victim"
  for _ in $(seq 300); do [ -s "$WORK/rc" ] && break; sleep 0.1; done
  wait || true
  cat "$WORK/out"; errors_of 0
  [ -s "$WORK/rc" ] || fail "the job did not end"
  [ "$(cat "$WORK/rc")" != 0 ] || fail "srun exited 0"
  # Over the link the root knows which ranks the fence waits for; through the outer launcher's
  # fence only that it was open.
  open_fence="waits for ranks 2-3 on $victim_host"
  [ "$fences" = link ] || open_fence="was open, in the outer launcher's fence"
  grep -Eq "^hyrun\[[^]]+\]: lost the hyrun of task 1 on node $victim_host \(connection closed\); PMIx fence 0 \(MPI_Init, MPI_Finalize\) $open_fence" < <(errors_of 0) \
    || fail "the root did not name the lost node and the open fence ($open_fence)"
  check_no_leftovers "$HYRUN" "$MPI_CHECK"
  ;;
cleanup)  # the job's PMIx sockets and MPI segments go, also when it is aborted
  # The aborting node removes its own before the abort; Slurm SIGKILLs the other node's hyrun,
  # whose directories the next hyrun on that host removes (their owner has ended).
  dirs() { find "${TMPDIR:-/tmp}" /dev/shm -maxdepth 2 \( -name 'hyrun-pmix-*' -o -name 'hyrun-shm-*' -o -name 'hyrun-pending-*' \) 2>/dev/null | sort; }
  before=$(dirs)
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 -- "$MPI_CHECK" --abort-rank 3 --abort-code 7
  [ "$RUN_RC" = 7 ] || fail "srun exited $RUN_RC, expected 7"
  left=$(comm -13 <(echo "$before") <(dirs) | grep -c . || true)
  echo "directories left by the aborted job's killed nodes: $left"
  [ "$left" -le 2 ] || fail "more than the killed node's two directories were left: $(comm -13 <(echo "$before") <(dirs))"
  run_bounded 60 "${ucx[@]}" srun --mpi=pmix -N2 --ntasks-per-node=1 "${hy[@]}" -n 2 -- "$MPI_CHECK"
  [ "$RUN_RC" = 0 ] || fail "srun exited $RUN_RC"
  expect_ok 4
  # (Directories of earlier jobs' killed hyrun may have gone too: the next hyrun removes them.)
  left=$(comm -13 <(echo "$before") <(dirs))
  [ -z "$left" ] || fail "directories left after the next job: $left"
  ;;
mpirun)  # under Open MPI's mpirun: 2 hyrun processes x 2 ranks, one MPI job
  run_bounded 60 "${ucx[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 "${hy[@]}" -n 2 -- "$MPI_CHECK"
  [ "$RUN_RC" = 0 ] || fail "mpirun exited $RUN_RC"
  expect_ok 4
  ;;
*) echo "unknown case $case_name" >&2; exit 2 ;;
esac
echo PASSED
