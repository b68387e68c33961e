# shellcheck shell=bash
# Helpers for the integration tests: run real binaries, check what a user would check.
# Each test sources this file; HYRUN, HELLO and TEST_RANK name the binaries under test.
set -uo pipefail

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hyrun-test.XXXXXX")
# HYRUN_TEST_KEEP=1 keeps the work folder (logs of a failure) and names it on stderr.
if [ -n "${HYRUN_TEST_KEEP:-}" ]; then trap 'echo "kept $WORK" >&2' EXIT; else trap 'rm -rf "$WORK"' EXIT; fi
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# run_job SECONDS cmd... : runs with a hard time limit; sets RC, OUT (stdout file), ERR (stderr file), ELAPSED.
run_job() {
  local limit=$1; shift
  OUT=$WORK/out.$RANDOM; ERR=$WORK/err.$RANDOM
  local t0; t0=$(date +%s.%N)
  timeout --kill-after=5 "$limit" "$@" >"$OUT" 2>"$ERR"
  RC=$?
  ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  [ "$RC" -eq 124 ] && [ "$(echo "$ELAPSED >= $limit" | bc)" -eq 1 ] && fail "timed out after ${limit}s: $*"
  return 0
}

expect_rc() { [ "$RC" -eq "$1" ] && pass "exit code $1" || { fail "exit code $RC, expected $1"; show_output; }; }
expect_stderr() { grep -qE -- "$1" "$ERR" && pass "stderr has /$1/" || { fail "stderr lacks /$1/"; show_output; }; }
expect_stdout() { grep -qE -- "$1" "$OUT" && pass "stdout has /$1/" || { fail "stdout lacks /$1/"; show_output; }; }
expect_faster() { [ "$(echo "$ELAPSED < $1" | bc)" -eq 1 ] && pass "took ${ELAPSED}s (< $1 s)" || fail "took ${ELAPSED}s, expected < $1 s"; }
show_output() { echo "--- stdout (tail)"; tail -c 2000 "$OUT"; echo "--- stderr (tail)"; tail -c 2000 "$ERR"; echo "---"; }

# A process is gone when /proc has no entry (a zombie still has one).
# reserve_port: sets PORT to a TCP port no other test of this machine holds, for this
# script's lifetime. A port found free by bind-and-close is a race: tests run in parallel and
# the kernel hands ports of the ephemeral range (ip_local_port_range, 32768-60999 by default)
# to every outgoing connection and port-0 bind. So the port comes from below that range, and
# a lock file held open (flock) until the script exits keeps other tests off it. The lock
# files stay (removing a file others may lock is a race) in one directory of their own, not
# among /tmp's entries, which every hyrun launch reads (PrivateDirectory).
reserve_port() {
  local p fd locks
  locks=/tmp/hyrun-test-ports-$(id -u)
  mkdir -p "$locks" || return 1
  for p in $(shuf -i 20000-32000 -n 400); do
    exec {fd}>"$locks/$p.lock" || continue
    if flock -n "$fd" && python3 -c 'import socket,sys; s=socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1])))' "$p" 2>/dev/null; then
      # shellcheck disable=SC2034  # read by the test that sources this file
      PORT=$p
      return 0
    fi
    exec {fd}>&-
  done
  echo "reserve_port: no free port in 20000-32000" >&2
  return 1
}
pid_gone() { [ ! -e "/proc/$1" ]; }

# expect_all_gone DIR : every pid recorded in DIR (rank.* and child.* files) is gone.
expect_all_gone() {
  local f pid n=0
  for f in "$1"/rank.* "$1"/child.*; do
    [ -e "$f" ] || continue
    pid=$(cat "$f"); n=$((n + 1))
    for _ in $(seq 50); do pid_gone "$pid" && break; sleep 0.1; done
    pid_gone "$pid" || { fail "process $pid ($(basename "$f")) survived: $(cat "/proc/$pid/stat" 2>/dev/null)"; kill -9 "$pid" 2>/dev/null; }
  done
  [ "$n" -gt 0 ] && pass "all $n recorded processes are gone" || fail "no pid files in $1"
}

# wait_for_files DIR PATTERN COUNT SECONDS
wait_for_files() {
  for _ in $(seq $(( $4 * 10 ))); do
    [ "$(find "$1" -maxdepth 1 -name "$2" ! -name '*.tmp' | wc -l)" -ge "$3" ] && return 0
    sleep 0.1
  done
  fail "only $(find "$1" -maxdepth 1 -name "$2" | wc -l) of $3 files $2 appeared in $4 s"
  return 1
}

finish() {
  if [ "$failures" -eq 0 ]; then echo "PASSED"; exit 0; fi
  echo "FAILED ($failures checks)"; exit 1
}
