#!/usr/bin/env bash
# ep-check across real processes started by hyrun (local mode): ep_check_test.sh CASE N [TLS]
#   pass N [TLS]     : every rank passes every check, rank 0 prints an ALL PASSED summary
#   corruption N     : a byte flipped in one received row on rank 1 makes the job fail with
#                      a FAIL line naming rank 1 and the shape (the checks bite)
#   maxranks N       : buffers for --max-ranks 8 with a smaller world
#   cuda N           : --backend cuda (skipped with 77 when no GPU)
source "$(dirname "$0")/../integration/lib.sh"
case_name=$1; n=$2; tls=${3:-}
xenv=()
[ -n "$tls" ] && xenv=(-x "UCX_TLS=$tls")

# Small shapes for large worlds: 2 shared cores run 8 ranks.
case $n in
1|2) shapes=1:2048:1,7:2560:3,64:7168:8,128:4096:8,256:8192:6 ;;
4)   shapes=1:2048:1,32:4096:8,128:7168:8,256:2048:6 ;;
*)   shapes=1:2048:1,16:4096:8,64:2048:4 ;;
esac

case $case_name in
pass)
  # The silent rank's time limit is generous: on 2 busy cores a healthy rank can lag by
  # hundreds of milliseconds, and only the silent one may be reported.
  run_job 120 "$HYRUN" -n "$n" "${xenv[@]}" -- "$EP_CHECK" --shapes "$shapes" --seed 7 --silent-timeout-ms 3000
  expect_rc 0
  for r in $(seq 0 $((n - 1))); do
    c=$(grep -cE "^ep-check: rank $r .*: PASS" "$OUT")
    f=$(grep -cE "^ep-check: rank $r .*: FAIL" "$OUT")
    [ "$c" -gt 0 ] && [ "$f" -eq 0 ] && pass "rank $r: $c checks passed" || { fail "rank $r: $c passed, $f failed"; show_output; }
  done
  expect_stdout "^ep-check: SUMMARY $n ranks, .* ALL PASSED$"
  if [ "$n" -ge 2 ]; then
    expect_stdout "^ep-check: rank $((n - 1)) masked round \(rank $((n - 1)) inactive\).*: PASS nobody wrote"
    expect_stdout "^ep-check: rank 0 timeout round \(rank $((n - 1)) silent, 3000 ms\).*: PASS rank\(s\) $((n - 1)) reported"
  fi
  ;;
maxranks)  # buffers for a larger world than the job (--max-ranks), as an elastic job allocates them
  run_job 120 "$HYRUN" -n "$n" -- "$EP_CHECK" --shapes 16:2048:4,64:4096:8 --max-ranks 8
  expect_rc 0
  expect_stdout "^ep-check: SUMMARY $n ranks, .* ALL PASSED$"
  ;;
corruption)
  run_job 120 "$HYRUN" -n "$n" -- "$EP_CHECK" --shapes 32:2048:4,16:4096:8 --inject-corruption 1 --no-fault-rounds
  [ "$RC" -ne 0 ] && pass "non-zero exit ($RC)" || { fail "exit code 0 despite a corrupted row"; show_output; }
  expect_stdout "^ep-check: rank 1 T=32 H=2048 K=4 E=2 fp8 host/ucx: FAIL .*channel\(s\) wrong"
  expect_stdout "^ep-check: SUMMARY $n ranks, .* FAILED on rank\(s\) .*1"
  ;;
cuda)
  run_job 300 "$HYRUN" -n "$n" -- "$EP_CHECK" --backend cuda --shapes "$shapes"
  if [ "$RC" -eq 77 ]; then echo "SKIPPED: no GPU"; exit 77; fi
  expect_rc 0
  expect_stdout "^ep-check: SUMMARY $n ranks, .* ALL PASSED$"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
