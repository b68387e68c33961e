#!/usr/bin/env bash
# How hyrun supervises its ranks when the world around it misbehaves (issue 12): reused
# pids, closed or stalled output, a terminal, stopped ranks, inherited fds, fd limits, a user
# with no inotify instance left, SIGHUP. supervision_test.sh CASE
# shellcheck disable=SC2016  # the sh -c programs are single-quoted on purpose: they expand in the child
source "$(dirname "$0")/lib.sh"
case_name=$1; shift

# start_bg CMD... : starts hyrun in the background with output to $WORK/o, $WORK/e; sets HY.
start_bg() { "$@" >"$WORK/o" 2>"$WORK/e" & HY=$!; }
# stop_and_time SIGNAL : sends SIGNAL to $HY, waits for it; sets RC, ELAPSED, OUT, ERR.
stop_and_time() {
  local t0; t0=$(date +%s.%N)
  kill -"$1" "$HY"
  # Bounded: a hyrun that ignores the signal is killed after 30 s (and the test fails on time).
  for _ in $(seq 300); do kill -0 "$HY" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$HY" 2>/dev/null && kill -KILL "$HY"
  wait "$HY"; RC=$?
  ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  OUT=$WORK/o; ERR=$WORK/e
}

case $case_name in
reused-pid)  # cleanup never signals a group whose number now belongs to an unrelated process
  # A private pid namespace makes the pid reuse certain: the victim gets rank 1's old pid
  # and its own session (so its own group with that number) after rank 1 was reaped.
  unshare -pf --mount-proc true 2>/dev/null || { echo "SKIP: cannot make a pid namespace (unshare -p)"; exit 77; }
  run_job 60 unshare -pf --mount-proc bash -c '
    "$0" -n 2 --bootstrap=none --label -- sh -c "echo \$\$; [ \$HYRUN_RANK = 1 ] || sleep 3" >"$1/pr.txt" &
    for i in $(seq 100); do grep -q "^1: " "$1/pr.txt" 2>/dev/null && break; sleep 0.05; done
    sleep 0.3  # rank 1 has exited and been reaped
    p=$(sed -n "s/^1: //p" "$1/pr.txt")
    echo $((p - 1)) >/proc/sys/kernel/ns_last_pid
    setsid sleep 100 & v=$!
    [ "$v" = "$p" ] && echo "victim has rank 1 pid $p" || echo "victim got pid $v, not $p"
    wait %1; echo "hyrun exit $?"
    sleep 0.2
    kill -0 $v 2>/dev/null && echo "victim survived" || echo "victim KILLED"
    kill -9 $v 2>/dev/null' "$HYRUN" "$WORK"
  expect_stdout "^victim has rank 1 pid [0-9]+$"
  expect_stdout "^hyrun exit 0$"
  expect_stdout "^victim survived$"
  ;;
closed-stdout)  # `hyrun ... | head -1` ends like a pipeline: ranks get SIGPIPE, hyrun exits 141
  run_job 30 bash -c '"$0" -n 2 --bootstrap=none -- yes | head -1; echo "status ${PIPESTATUS[*]}"' "$HYRUN"
  expect_stdout "^y$"
  expect_stdout "^status 141 0$"
  expect_stderr "^hyrun: rank [01] \(pid [0-9]+\) was killed by signal 13 \(SIGPIPE\) after the reader of hyrun's stdout went away"
  # A stdout that was closed before hyrun started is no reader going away: output is dropped.
  run_job 30 bash -c 'exec "$0" -n 2 --bootstrap=none -- sh -c "echo lost; echo kept >&2" >&-' "$HYRUN"
  expect_rc 0
  expect_stderr "^kept$"
  ;;
stalled-stdout)  # a reader that takes nothing does not stop hyrun from honouring SIGTERM
  mkfifo "$WORK/fifo"
  # shellcheck disable=SC2217  # the reader holds the FIFO open and never reads: that is the point
  sleep 120 <"$WORK/fifo" & reader=$!
  "$HYRUN" -n 2 --bootstrap=none --grace-period 30 -- yes >"$WORK/fifo" 2>"$WORK/e" & HY=$!
  sleep 2  # the FIFO's 64 KiB are full by now: every further write would block
  stop_and_time TERM
  kill $reader 2>/dev/null
  expect_rc 143
  expect_faster 10
  expect_stderr "received SIGTERM; forwarding it to 2 rank"
  # The same with stderr on the stalled FIFO too (2>&1): hyrun's own lines must not block it.
  # shellcheck disable=SC2217  # as above
  sleep 120 <"$WORK/fifo" & reader=$!
  "$HYRUN" -n 2 --bootstrap=none --grace-period 30 -- yes >"$WORK/fifo" 2>&1 & HY=$!
  sleep 2
  stop_and_time TERM
  kill $reader 2>/dev/null
  expect_rc 143
  expect_faster 10
  # Many flooding ranks: a round of hyrun's loop reads up to 1 MiB from each; their lines must
  # queue, not cost a failed write each (at 64 ranks, 32 Mi writes held SIGTERM past 10 s, session 37).
  # shellcheck disable=SC2217  # as above
  sleep 120 <"$WORK/fifo" & reader=$!
  "$HYRUN" -n 64 --bootstrap=none --grace-period 30 -- yes >"$WORK/fifo" 2>&1 & HY=$!
  sleep 2
  # The slow reader holds the ranks back as a pipeline would: hyrun reads about its 1 MiB queue
  # (OutputForwarder::kBackpressure), not a round's 1 MiB a rank (49 MB read, session 39).
  read_bytes=$(awk '/^rchar:/ {print $2}' "/proc/$HY/io")
  [ "$read_bytes" -lt $((3 << 20)) ] && pass "hyrun read $read_bytes bytes from the stalled ranks (< 3 MiB)" ||
    fail "hyrun read $read_bytes bytes from its ranks for a stalled reader, expected < 3 MiB (1 MiB queued)"
  stop_and_time TERM
  kill $reader 2>/dev/null
  expect_rc 143
  expect_faster 10
  ;;
stalled-stderr-own-lines)  # hyrun's own lines (--log-level debug) on a stalled stderr do not hold SIGTERM; on a late reader, none is lost or spliced
  # Before, they were written to fd 2 with blocking stdio: the first debug line after the pipe
  # filled held hyrun in write(2), deaf to SIGTERM, until the reader went away (20 s of 20).
  mkfifo "$WORK/fifo"
  # shellcheck disable=SC2217  # the reader holds the FIFO open and never reads: that is the point
  sleep 120 <"$WORK/fifo" & reader=$!
  "$HYRUN" -n 2 --bootstrap=none --log-level debug --grace-period 30 -- yes >"$WORK/fifo" 2>&1 & HY=$!
  sleep 2
  stop_and_time TERM
  kill $reader 2>/dev/null
  expect_rc 143
  # The ranks' output gets 2 s (the drain limit); hyrun's own last lines 5 s more (OwnStderr::kExitLimit).
  expect_faster 15
  # A reader that starts late, behind 4 MB of the ranks' stderr: hyrun's own lines join the
  # ranks' in one queue, so every one comes, whole, and no rank's line is cut by one.
  run_job 60 bash -c '"$0" -n 4 --bootstrap=none --log-level debug -- python3 -c "import sys
for i in range(10000): print(\"e\" * 99, file=sys.stderr)" 2>&1 | (sleep 2; cat)' "$HYRUN"
  expect_rc 0
  for r in 0 1 2 3; do expect_stdout "^hyrun: debug: rank $r \(pid [0-9]+\) exited normally$"; done
  lines=$(grep -c '^e\{99\}$' "$OUT")
  [ "$lines" = 40000 ] && pass "40000 whole rank lines" || { fail "$lines whole rank lines of 40000"; grep -v '^e\{99\}$' "$OUT" | grep -v '^hyrun: ' | head -3; }
  ;;
terminal-stdin)  # rank 0 reads a terminal stdin through hyrun instead of being stopped by SIGTTIN
  command -v script >/dev/null || { echo "SKIP: no script(1)"; exit 77; }
  run_job 30 bash -c 'printf "typed line\n" | script -qec "$0 -n 2 --bootstrap=none --label -- cat" /dev/null' "$HYRUN"
  expect_rc 0
  expect_stdout "^0: typed line"
  ! grep -q "^1: " "$OUT" && pass "rank 1 read nothing (its stdin is /dev/null)" || fail "rank 1 read the terminal"
  # A rank that opens the terminal itself cannot use it: named, not a hang.
  run_job 30 script -qec "$HYRUN -n 1 --bootstrap=none -- sh -c 'read x </dev/tty'" /dev/null
  expect_rc 149
  expect_stdout "rank 0 \(pid [0-9]+\) was stopped by signal 21 \(SIGTTIN\) for using the terminal"
  ;;
stopped-rank)  # a SIGSTOPped rank is named; SIGTERM to hyrun still ends it at once
  mkdir "$WORK/pids"
  start_bg "$HYRUN" -n 2 --grace-period 30 -- "$TEST_RANK" --pid-dir "$WORK/pids" --sleep 60
  wait_for_files "$WORK/pids" 'rank.*' 2 20
  kill -STOP "$(cat "$WORK/pids/rank.1")"
  for _ in $(seq 50); do grep -q "stopped by signal" "$WORK/e" && break; sleep 0.1; done
  stop_and_time TERM
  expect_stderr "^hyrun: rank 1 \(pid [0-9]+\) was stopped by signal 19 \(SIGSTOP\); the job waits until it continues"
  expect_rc 143
  expect_faster 10  # the grace period is 30 s: the stopped rank got SIGCONT with the SIGTERM
  expect_all_gone "$WORK/pids"
  ;;
kill-reaped-with-fallout)  # a rank killed from outside and a rank failing because of it, reaped together: the kill is named
  # hyrun is stopped while rank 1 is SIGKILLed and rank 0 then exits 1 (as a peer of a
  # killed rank does), so that both are reaped in one batch, rank 0 (the older child) first.
  # Reaped apart, the kill is named (its verdict waits, and later failures are its fallout);
  # reaped together, it must be too.
  mkdir "$WORK/pids"
  start_bg "$HYRUN" -n 2 --bootstrap=none -- sh -c '
    echo $$ >"$0/rank.$HYRUN_RANK.tmp"; mv "$0/rank.$HYRUN_RANK.tmp" "$0/rank.$HYRUN_RANK"
    if [ "$HYRUN_RANK" = 0 ]; then while [ ! -e "$0/go" ]; do sleep 0.05; done; exit 1; fi
    exec sleep 60' "$WORK/pids"
  wait_for_files "$WORK/pids" 'rank.*' 2 20
  kill -STOP "$HY"
  kill -KILL "$(cat "$WORK/pids/rank.1")"
  touch "$WORK/pids/go"
  r0=$(cat "$WORK/pids/rank.0")
  for _ in $(seq 100); do [ "$(awk '{print $3}' "/proc/$r0/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
  [ "$(awk '{print $3}' "/proc/$r0/stat" 2>/dev/null)" = Z ] || fail "rank 0 did not end while hyrun was stopped"
  kill -CONT "$HY"
  wait "$HY"; RC=$?; OUT=$WORK/o; ERR=$WORK/e
  expect_stderr "^hyrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\); stopping"
  grep -q "rank 0 (pid [0-9]*) exited with code 1" "$ERR" && fail "rank 0's fallout was named as the job's failure"
  expect_rc 137
  ;;
inherited-fds)  # fds hyrun inherits from its parent do not reach the ranks
  # 4 is the rank's control socket and 5 its PMI socket (PMI_FD); nothing else.
  run_job 30 bash -c 'exec 7</dev/null 8>/dev/null; exec "$0" -n 2 --label --bootstrap=none -- sh -c "for f in 3 6 7 8 9; do [ -e /proc/\$\$/fd/\$f ] && echo fd \$f open; done; [ \$PMI_FD = 5 ] && readlink /proc/\$\$/fd/5; echo checked"' "$HYRUN"
  expect_rc 0
  for r in 0 1; do expect_stdout "^$r: checked$"; expect_stdout "^$r: socket:\[[0-9]+\]$"; done
  ! grep -q "open" "$OUT" && pass "no rank has an fd beyond 0, 1, 2, its control socket and its PMI socket" || { fail "fds leaked into ranks"; show_output; }
  ;;
many-inherited-fds)  # hyrun started with more than 1 000 fds open: its PMIx server is refused by name, no abort
  # libpmix 4.2.2's PMIx server listens with select(), which takes fds below 1024 only; with
  # every one of those taken, glibc aborted hyrun ("bit out of range 0 - FD_SETSIZE on
  # fd_set"). A parent that leaks fds is the cause. hyrun names it and what to do, and goes on
  # without the server, as when it cannot start for any other reason (docs/pmix.md).
  [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2048 ] || { echo "SKIP: hard fd limit $(ulimit -Hn) < 2048"; exit 77; }
  run_job 30 bash -c 'ulimit -n 2048; for ((f = 3; f < 1100; f++)); do eval "exec $f</dev/null"; done; exec "$0" -n 2 --bootstrap=none -- true' "$HYRUN"
  expect_rc 0
  expect_stderr "^hyrun: warning: hyrun's PMIx server is not available.*: [0-9]+ of the 1024 file descriptors below 1024 are open.*close-on-exec"
  ! grep -q "FD_SETSIZE" "$ERR" && pass "no abort in libpmix's select()" || { fail "hyrun aborted"; show_output; }
  # A parent that left a few fds open is no such case.
  run_job 30 bash -c 'for ((f = 3; f < 40; f++)); do eval "exec $f</dev/null"; done; exec "$0" -n 2 --bootstrap=none -- true' "$HYRUN"
  expect_rc 0
  ! grep -q "not available" "$ERR" && pass "the server started" || { fail "the server did not start"; show_output; }
  ;;
fd-limit)  # a soft limit of 1024 does not stop hyrun at a few hundred ranks; a real shortage is named
  [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ] || { echo "SKIP: hard fd limit $(ulimit -Hn) < 4096"; exit 77; }
  run_job 120 bash -c 'ulimit -Sn 1024; "$0" -n 400 --label --bootstrap=none -- sh -c "[ \$HYRUN_RANK = 399 ] && ulimit -Sn; true"' "$HYRUN"
  expect_rc 0
  expect_stdout "^399: 1024$"  # ranks get the soft limit hyrun was started with
  run_job 60 bash -c 'ulimit -n 64; exec "$0" -n 40 --bootstrap=none -- true' "$HYRUN"
  expect_rc 1
  expect_stderr "^hyrun: out of file descriptors starting rank [0-9]+: hyrun holds 5 per rank and its limit is 64"
  ;;
inotify-used-up)  # a user with no inotify instance left still starts ranks that wait for rank 0's address
  # The kernel allows a user fs.inotify.max_user_instances (128 on Debian), shared by all its
  # processes: 128 ranks of one user on a machine waiting for rank 0's address used them up
  # ("inotify_init1 ...: Too many open files"). A user of the test's own holds every one of its
  # instances, then runs the job: the ranks wait by looking at the directory instead.
  # A child holds them, not hyrun: where the limit is raised (8192) hyrun would start with
  # thousands of fds open, a case of its own (many-inherited-fds).
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (a user of the test's own)"; exit 77; }
  cat >"$WORK/use-up.py" <<'PY'
import ctypes, errno, os, resource, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
if os.fork() == 0:  # the holder: every instance of the user's, until the job's process ends
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the parent becomes hyrun and ends with the job
    os.close(ready_r)
    # Its own fd limit must not end the loop first: that too is EMFILE.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = 0
    while libc.inotify_init1(os.O_CLOEXEC) >= 0:
        held += 1
    why = ctypes.get_errno()
    if why == errno.EMFILE and held + 16 >= hard:
        why = errno.ENFILE  # the fd limit, not the user's instances: reported as not used up
    os.write(ready_w, f"{held} {why}".encode())
    os.close(ready_w)
    signal.pause()
    os._exit(0)
os.close(ready_w)
held, why = (int(word) for word in os.read(ready_r, 64).split())
os.close(ready_r)
assert why == errno.EMFILE, f"inotify_init: {os.strerror(why)} (wanted EMFILE: the user's instances used up)"
print(f"holding {held} inotify instances, none left", flush=True)
os.execv(sys.argv[1], sys.argv[1:])
PY
  chmod 755 "$WORK" "$WORK/use-up.py"
  # uid 65533: no other test runs as it, so no other test is short of instances meanwhile.
  run_job 60 setpriv --reuid=65533 --regid=65533 --clear-groups /usr/bin/python3 "$WORK/use-up.py" "$HYRUN" -n 4 -- "$HELLO"
  expect_rc 0
  expect_stdout "^holding [0-9]+ inotify instances, none left$"
  for r in 0 1 2 3; do expect_stdout "^hello from rank $r of 4 "; done
  expect_stdout "^rank 0: ring of 4 ranks ok"
  ;;
sighup-ucx)  # SIGHUP ends ranks that use UCX (whose debug signal it is) at once
  mkdir "$WORK/pids"
  start_bg "$HYRUN" -n 2 --grace-period 30 -- "$TEST_RANK" --pid-dir "$WORK/pids" --sleep 60
  wait_for_files "$WORK/pids" 'rank.*' 2 20
  sleep 0.5
  stop_and_time HUP
  expect_rc 129
  expect_faster 10
  ! grep -q "still running" "$ERR" && pass "no SIGKILL was needed" || fail "ranks outlived SIGHUP until SIGKILL"
  expect_all_gone "$WORK/pids"
  ;;
setsid-descendant)  # a rank's descendant in its own session ends with the job (hyrun adopted it)
  run_job 30 "$HYRUN" -n 2 --bootstrap=none -- sh -c \
    'setsid sh -c "echo \$\$ >$0/child.\$HYRUN_RANK.tmp; mv $0/child.\$HYRUN_RANK.tmp $0/child.\$HYRUN_RANK; exec sleep 100" </dev/null >/dev/null 2>&1 &
     while [ ! -e $0/child.$HYRUN_RANK ]; do sleep 0.05; done' "$WORK"
  expect_rc 0
  expect_all_gone "$WORK"
  ;;
large-plan)  # the binding plan of many ranks is near-linear (it was quadratic: minutes here)
  run_job 120 "$HYRUN" -n 200000 --dry-run --bootstrap=none -- true
  expect_rc 0
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
