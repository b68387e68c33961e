#!/usr/bin/env bash
# Local-mode launches of real programs: hyrun_local_launch_test.sh CASE [ARG]
# shellcheck disable=SC2016  # the sh -c programs are single-quoted on purpose: they expand in the child
source "$(dirname "$0")/lib.sh"
case_name=$1; shift

case $case_name in
table-once-a-node)  # 3 simulated nodes of 3 ranks: one join message and one copy of the address table a node at rank 0
  run_job 60 env HYRUN_LOG_LEVEL=debug "$HYRUN" -n 3 --bootstrap=none -- "$HYRUN" -n 3 -- "$HELLO"
  expect_rc 0
  expect_stdout "^rank 0: ring of 9 ranks ok"
  # Its own node's ranks 1 and 2 join it each; ranks 3 and 6 carry their node's joins.
  expect_stderr "rank 0: admitted 8 joins in 4 messages$"
  for r in 3 6; do expect_stderr "rank $r: carried 3 joins of its node to rank 0$"; done
  expect_stderr "rank 0: sent the address table \([0-9]+ bytes\) to 4 of 8 start ranks$"
  for r in 3 6; do expect_stderr "rank $r: passed the address table on to 2 rank\(s\) of its node$"; done
  [ "$(grep -c "passed the address table on" "$ERR")" = 2 ] && pass "no other rank passed it on" \
    || { fail "$(grep -c "passed the address table on" "$ERR") ranks passed the table on, expected 2"; show_output; }
  ;;
one-connection-a-pair)  # every pair of ranks connects once, from the lower rank, also through node leaders
  # Before, both ranks of a pair connected at once: two tcp connections a pair, and at 512
  # simulated nodes UCX 1.13's tcp_cm.c:519 assertion. UCX accepts one connection a pair,
  # and one a rank for its endpoint to itself (the table holds it too).
  tcp=(-x "UCX_TLS=tcp,self" -x UCX_NET_DEVICES=lo -x UCX_LOG_LEVEL=debug)
  run_job 60 "$HYRUN" -n 6 "${tcp[@]}" -- "$HELLO"
  expect_rc 0
  expect_stdout "^rank 0: ring of 6 ranks ok"
  accepted=$(grep -c "accepted connection from" "$ERR" "$OUT" | awk -F: '{s += $NF} END {print s}')
  [ "$accepted" = 21 ] && pass "6 ranks: 21 tcp connections (15 pairs, 6 to themselves)" \
    || { fail "6 ranks: $accepted tcp connections accepted, expected 21 (15 pairs, 6 to themselves)"; show_output; }
  run_job 60 "$HYRUN" -n 2 --bootstrap=none -- "$HYRUN" -n 3 "${tcp[@]}" -- "$HELLO"
  expect_rc 0
  expect_stdout "^rank 0: ring of 6 ranks ok"
  accepted=$(grep -c "accepted connection from" "$ERR" "$OUT" | awk -F: '{s += $NF} END {print s}')
  [ "$accepted" = 21 ] && pass "2 x 3: 21 tcp connections (15 pairs, 6 to themselves)" \
    || { fail "2 x 3: $accepted tcp connections accepted, expected 21 (15 pairs, 6 to themselves)"; show_output; }
  ;;
hello)  # hello with N ranks: every rank reports once, the ring checks out
  n=$1
  run_job 60 "$HYRUN" -n "$n" -- "$HELLO"
  expect_rc 0
  for r in $(seq 0 $((n - 1))); do
    c=$(grep -c "^hello from rank $r of $n " "$OUT")
    [ "$c" -eq 1 ] && pass "rank $r reported once" || fail "rank $r reported $c times"
  done
  expect_stdout "^rank 0: ring of $n ranks ok"
  ;;
rendezvous-everywhere)  # every bootstrap message (join, table) and the ring go by UCX rendezvous
  run_job 60 "$HYRUN" -n 2 -x UCX_RNDV_THRESH=400 -- "$HELLO"
  expect_rc 0
  expect_stdout "^rank 0: ring of 2 ranks ok"
  run_job 60 "$HYRUN" -n 3 -x UCX_RNDV_THRESH=0 -x UCX_TLS=tcp,self -- "$HELLO" --bytes 64
  expect_rc 0
  expect_stdout "^rank 0: ring of 3 ranks ok"
  ;;
rogue-peer)  # a process that knows rank 0's address but not the job token is refused and logged; the job is unharmed
  # Rank 2 joins only after the attacks, so that rank 0 is still admitting joins when they arrive;
  # the forged collective and point-to-point messages wait in UCX until the ranks look for them.
  mkdir "$WORK/pids"
  # The ranks start before rank 0 has published (they take its address from hyrun later), so
  # its address is read where hyrun's debug log says it.
  timeout -k 5 90 "$HYRUN" -n 3 --log-level debug -- "$TEST_RANK" --pid-dir "$WORK/pids" --join-wait-rank 2 \
    --join-wait-file "$WORK/go" --exchange-bytes 4096 --exchange-rounds 200 --ring --report-peak-memory \
    >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/pids" 'rank.*' 3 20
  root=
  for _ in $(seq 200); do
    root=$(sed -n 's/.*rank 0 published its UCX worker address \([0-9a-f]*\)$/\1/p' "$WORK/e")
    [ -n "$root" ] && break
    sleep 0.1
  done
  [ -n "$root" ] && pass "read rank 0's address" || fail "hyrun's debug log never said rank 0's address"
  for attack in oversized-join impersonate garbage; do
    timeout -k 5 30 "$ROGUE_PEER" --address "$root" --attack $attack --claim-rank 2
    echo "rogue-peer $attack exited $?"
  done
  touch "$WORK/go"
  wait $hy; RC=$?
  OUT=$WORK/o; ERR=$WORK/e
  expect_rc 0
  for r in 0 1 2; do expect_stdout "^rank $r: exchange ok$"; expect_stdout "^rank $r: ring ok$"; done
  ! grep -q CORRUPTED "$OUT" && pass "no corrupted message" || fail "a forged message was accepted"
  expect_stderr "rank 0: refused a join message claiming rank 2 \(67108864 bytes\): larger than the [0-9]+ bytes allowed, not read"
  expect_stderr "rank 0: refused a join message claiming rank 2 \(300 bytes\): not sealed with this job.s key"
  expect_stderr "rank 0: refused a collective message claiming rank 2 \(4096 bytes\): not sealed with this job.s key"
  expect_stderr "rank 0: refused a point-to-point message claiming rank 2 \(22 bytes\): not sealed with this job.s key"
  expect_stderr "rank 0: refused a join message claiming rank [0-7] \([0-9]+ bytes\): not sealed"  # garbage joins
  peak=$(sed -n 's/^rank 0: peak memory \([0-9]*\) kB$/\1/p' "$OUT")
  [ -n "$peak" ] && [ "$peak" -lt 65536 ] && pass "rank 0 never held the 64 MiB join (peak ${peak} kB)" \
    || fail "rank 0's peak memory is '${peak}' kB: the 64 MiB join was read"
  ;;
timings)  # --timings: one line at the job's end with each launch step done, in order, ms from the launch's start
  run_job 60 "$HYRUN" -n 3 --timings -- "$HELLO"
  expect_rc 0
  expect_stderr "^hyrun: timings on [^ ]+ \(task 0 of 1\), ms: launch [0-9.]+, plan [0-9.]+, pmix server [0-9.]+, rank 0 started [0-9.]+, ranks started [0-9.]+, rank 0 address [0-9.]+, ranks given the root [0-9.]+, root record put [0-9.]+, fence [0-9.]+, job end [0-9.]+$"
  python3 - "$ERR" <<'PY' && pass "the steps' times never go back" || fail "a step's time goes back: $(grep timings "$ERR")"
import re, sys
line = next(l for l in open(sys.argv[1]) if "timings on" in l)
times = [float(t) for t in re.findall(r" ([0-9]+\.[0-9]) ?(?:,|$)", line.strip())]
assert len(times) == 10 and times == sorted(times), times
PY
  [ "$(grep -c 'timings on' "$ERR")" = 1 ] && pass "said once" || fail "said $(grep -c 'timings on' "$ERR") times"
  # A failed job still says how far it got; without the flag nothing is said.
  run_job 60 "$HYRUN" -n 2 --timings --bootstrap=none -- sh -c 'exit 3'
  expect_rc 3
  expect_stderr "^hyrun: timings on .*, ranks started [0-9.]+, job end [0-9.]+$"
  run_job 60 "$HYRUN" -n 2 -- "$HELLO"
  ! grep -q "timings on" "$ERR" && pass "no timings without --timings" || fail "timings printed without --timings"
  ;;
label)  # --label prefixes every line with its rank, -x passes variables
  run_job 60 "$HYRUN" -n 3 --label -x HYRUN_TEST_VALUE=42 --bootstrap=none -- sh -c 'echo "v=$HYRUN_TEST_VALUE r=$HYRUN_RANK/$WORLD_SIZE l=$LOCAL_RANK/$LOCAL_WORLD_SIZE"'
  expect_rc 0
  for r in 0 1 2; do expect_stdout "^$r: v=42 r=$r/3 l=$r/3\$"; done
  # srun's and mpirun's spellings: -l, --export=A=1,B=2 (split at commas), -np
  run_job 60 "$HYRUN" -np 2 -l --export=A=1,B=2 --bootstrap=none -- sh -c 'echo "A=$A B=$B"'
  expect_rc 0
  for r in 0 1; do expect_stdout "^$r: A=1 B=2\$"; done
  # mpirun's --timestamp-output: UTC time, then the label
  run_job 60 "$HYRUN" -n 2 --timestamp-output --label --bootstrap=none -- sh -c 'echo out; echo err >&2'
  expect_rc 0
  for r in 0 1; do
    expect_stdout "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z $r: out\$"
    expect_stderr "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z $r: err\$"
  done
  ;;
output-filename)  # mpirun's --output-filename DIR: every rank's lines also in DIR/rank.N/{stdout,stderr}, unprefixed
  run_job 60 "$HYRUN" -n 2 --label --output-filename "$WORK/out" --bootstrap=none -- sh -c 'echo "out $HYRUN_RANK"; echo "err $HYRUN_RANK" >&2'
  expect_rc 0
  for r in 0 1; do
    expect_stdout "^$r: out $r\$"
    [ "$(cat "$WORK/out/rank.$r/stdout")" = "out $r" ] && pass "rank.$r/stdout" || fail "rank.$r/stdout: $(cat "$WORK/out/rank.$r/stdout")"
    [ "$(cat "$WORK/out/rank.$r/stderr")" = "err $r" ] && pass "rank.$r/stderr" || fail "rank.$r/stderr: $(cat "$WORK/out/rank.$r/stderr")"
  done
  # A link planted in a shared directory is not followed; a file is not a directory.
  mkdir -p "$WORK/shared" "$WORK/elsewhere"; ln -s "$WORK/elsewhere" "$WORK/shared/rank.1"
  run_job 60 "$HYRUN" -n 2 --output-filename "$WORK/shared" --bootstrap=none -- echo hi
  expect_rc 2
  expect_stderr "^hyrun: --output-filename .*/shared: cannot create .*/shared/rank.1: "
  [ -z "$(ls -A "$WORK/elsewhere")" ] && pass "nothing written through the link" || fail "output written through the planted link"
  printf 'x\n' >"$WORK/a-file"
  run_job 60 "$HYRUN" -n 1 --output-filename "$WORK/a-file" --bootstrap=none -- echo hi
  expect_rc 2
  expect_stderr "^hyrun: --output-filename .*/a-file: cannot create"
  ;;
output-filename-fifo)  # a FIFO planted where a rank's output goes is refused at once, not opened and waited on
  mkdir -p "$WORK/fifo/rank.0"; mkfifo "$WORK/fifo/rank.0/stdout"
  run_job 20 "$HYRUN" -n 1 --output-filename "$WORK/fifo" --bootstrap=none -- echo hi
  expect_rc 2
  expect_stderr "^hyrun: --output-filename .*/fifo: .*/fifo/rank.0/stdout is a FIFO, not a regular file"
  expect_faster 10
  # docs/security.md: opened with O_NOFOLLOW, and anything but a regular file is refused, naming
  # the path: a link planted at rank.0/stderr is not written through; a device is refused.
  mkdir -p "$WORK/link/rank.0"; printf 'precious\n' >"$WORK/victim"; ln -s "$WORK/victim" "$WORK/link/rank.0/stderr"
  run_job 20 "$HYRUN" -n 1 --output-filename "$WORK/link" --bootstrap=none -- sh -c 'echo pwned >&2'
  expect_rc 2
  expect_stderr "^hyrun: --output-filename .*/link: cannot create .*/link/rank.0/stderr: "
  [ "$(cat "$WORK/victim")" = precious ] && pass "nothing written through the link" || fail "output written through the planted link"
  mkdir -p "$WORK/dev/rank.0"
  if mknod "$WORK/dev/rank.0/stdout" c 1 3 2>/dev/null; then  # /dev/null's numbers; needs CAP_MKNOD
    run_job 20 "$HYRUN" -n 1 --output-filename "$WORK/dev" --bootstrap=none -- echo hi
    expect_rc 2
    expect_stderr "^hyrun: --output-filename .*/dev: .*/dev/rank.0/stdout is a device or socket, not a regular file"
  else
    echo "skipped the device: mknod is not allowed here"
  fi
  ;;
merged-output-slow-reader)  # `hyrun ... 2>&1 | slow-reader`: stdout and stderr are one pipe; every line stays whole
  # A reader that starts late makes hyrun's writes partial: two queues on one pipe then
  # spliced one stream's lines into the middle of the other's (2 to 24 lines of these 40000 in 5 of 5 runs, before).
  slow=(bash -c 'set -o pipefail; "$@" 2>&1 | (sleep 1; cat)' _)
  run_job 60 "${slow[@]}" "$HYRUN" -n 2 --bootstrap=none -- python3 -c 'import sys
for i in range(10000):
    print(f"out {i:04d} " + "x" * 90); print(f"err {i:04d} " + "e" * 90, file=sys.stderr)'
  expect_rc 0
  total=$(wc -l <"$OUT")
  bad=$(grep -cvE '^(out [0-9]{4} x{90}|err [0-9]{4} e{90})$' "$OUT")
  [ "$total" = 40000 ] && [ "$bad" = 0 ] && pass "40000 whole lines" || { fail "$total lines, $bad of them not whole: $(grep -vE '^(out [0-9]{4} x{90}|err [0-9]{4} e{90})$' "$OUT" | head -2)"; }
  for r in out err; do
    [ "$(grep -c "^$r " "$OUT")" = 20000 ] && pass "20000 $r lines" || fail "$(grep -c "^$r " "$OUT") $r lines, not 20000"
  done
  ;;
output-filename-full)  # a file that cannot take more (ulimit -f: EFBIG; a full tmpfs: ENOSPC) is said once per file and fails a job that otherwise succeeded
  # Each rank writes 700 lines of 100 bytes per stream; the files may take 8 KiB. hyrun's own
  # stdout and stderr go to one pipe (no size limit; read as both OUT and ERR): the
  # terminal must get every line.
  prog=(python3 -c 'import sys
for i in range(700): print(f"out {i:04d} " + "x" * 90)
for i in range(700): print(f"err {i:04d} " + "e" * 90, file=sys.stderr)
import os
sys.exit(int(sys.argv[1]) if os.environ["HYRUN_RANK"] == sys.argv[2] else 0)')
  limited=(bash -c 'set -o pipefail; ( ulimit -f 8; exec "$@" ) 2>&1 | cat' _)
  run_job 60 "${limited[@]}" "$HYRUN" -n 2 --output-filename "$WORK/big" --bootstrap=none -- "${prog[@]}" 0 0
  ERR=$OUT
  expect_rc 1
  for r in 0 1; do
    for stream in stdout stderr; do
      n=$(grep -c "writing .*/big/rank.$r/$stream failed: File too large; that file misses the rest of rank $r's $stream" "$ERR")
      [ "$n" = 1 ] && pass "rank.$r/$stream: said once" || { fail "rank.$r/$stream: said $n times"; show_output; }
      f=$WORK/big/rank.$r/$stream
      size=$(stat -c %s "$f")
      [ "$size" -le 8192 ] && [ "$size" -gt 0 ] && pass "rank.$r/$stream holds $size bytes" || fail "rank.$r/$stream holds $size bytes"
    done
    # What the file holds is the start of what the rank wrote, byte for byte.
    python3 - "$WORK/big/rank.$r/stdout" <<'PY' && pass "rank.$r/stdout is the start of the rank's output" || fail "rank.$r/stdout is not the start of the rank's output"
import sys
got = open(sys.argv[1]).read()
want = "".join(f"out {i:04d} " + "x" * 90 + "\n" for i in range(700))
assert want.startswith(got), got[-200:]
PY
  done
  [ "$(grep -c '^out ' "$OUT")" = 1400 ] && pass "hyrun's stdout got all 1400 lines" || fail "hyrun's stdout got $(grep -c '^out ' "$OUT") of 1400 lines"
  [ "$(grep -c '^err ' "$ERR")" = 1400 ] && pass "hyrun's stderr got all 1400 lines" || fail "hyrun's stderr got $(grep -c '^err ' "$ERR") of 1400 lines"
  expect_stderr "^hyrun: error: every rank exited 0, but --output-filename lost output: .*/big/rank.[01]/std(out|err) \(File too large\)"
  # A rank's own failure keeps its exit code: the lost files are said, the verdict is the
  # rank's (rank 1 writes everything, then exits 3).
  run_job 60 "${limited[@]}" "$HYRUN" -n 2 --output-filename "$WORK/big2" --bootstrap=none -- "${prog[@]}" 3 1
  ERR=$OUT
  expect_rc 3
  expect_stderr "writing .*/big2/rank.1/stdout failed: File too large"
  # A full file system: ENOSPC (a 64 KiB tmpfs, where mounting is allowed).
  mkdir -p "$WORK/full"
  if mount -t tmpfs -o size=64k tmpfs "$WORK/full" 2>/dev/null; then
    run_job 60 "$HYRUN" -n 2 --output-filename "$WORK/full/out" --bootstrap=none -- "${prog[@]}" 0 0
    expect_rc 1
    expect_stderr "writing .*/full/out/rank.[01]/std(out|err) failed: No space left on device"
    expect_stderr "^hyrun: error: every rank exited 0, but --output-filename lost output: "
    [ "$(grep -c '^out ' "$OUT")" = 1400 ] && pass "a full disk: hyrun's stdout got all 1400 lines" || fail "a full disk: stdout lines lost"
    umount "$WORK/full"
  else
    echo "skipped the full tmpfs: mounting is not allowed here"
  fi
  ;;
output-filename-reader-gone)  # the reader of hyrun's stdout goes away: a rank's file still gets all hyrun read, its unfinished last line too
  # The reader closes its end, then says so; the rank writes only after that, in one write
  # (atomic in a pipe), so hyrun reads the whole line and the start of the next at once, and
  # its write of the whole line is what finds the reader gone. The unfinished part was read
  # too: before, it was dropped from the rank's file when hyrun closed the rank's stdout. The
  # rank writes again only once hyrun has closed that pipe (POLLERR on its end): SIGPIPE.
  rank=(python3 -c 'import os, select, signal, sys, time
gone = sys.argv[1]
for _ in range(600):
    if os.path.exists(gone): break
    time.sleep(0.05)
os.write(1, b"whole\npartial")
p = select.poll(); p.register(1, 0)
p.poll(30000)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
os.write(1, b"more\n")')
  run_job 60 bash -c '"$0" -n 1 --output-filename "$1/out" --bootstrap=none -- "${@:2}" "$1/gone" | (exec 0<&-; touch "$1/gone")
      echo "status ${PIPESTATUS[*]}"' "$HYRUN" "$WORK" "${rank[@]}"
  expect_stdout "^status 141 0$"
  expect_stderr "^hyrun: rank 0 \(pid [0-9]+\) was killed by signal 13 \(SIGPIPE\) after the reader of hyrun's stdout went away"
  got=$(od -c "$WORK/out/rank.0/stdout" | head -3)
  [ "$got" = "$(printf 'whole\npartial\n' | od -c | head -3)" ] \
    && pass "rank.0/stdout holds the whole line and the unfinished one, ended" || { fail "rank.0/stdout holds: $got"; show_output; }
  ;;
control-socket-unnamed)  # docs/security.md: a rank's control socket is a socketpair with its hyrun, nobody else can write to it
  # An unnamed AF_UNIX socket, connected to an unnamed peer: no path or address another process could connect to.
  run_job 30 "$HYRUN" -n 2 --label --bootstrap=none -- /usr/bin/python3 -c '
import os, socket
s = socket.socket(fileno=int(os.environ["HYRUN_CONTROL_FD"]))
print(s.family.name, repr(s.getsockname()), repr(s.getpeername()))
s.detach()'
  expect_rc 0
  for r in 0 1; do expect_stdout "^$r: AF_UNIX '' ''\$"; done
  ;;
rank-exit-code)  # a rank exiting 3 makes hyrun exit 3 and no other rank survives
  mkdir "$WORK/pids"
  run_job 60 "$HYRUN" -n 4 -- "$TEST_RANK" --pid-dir "$WORK/pids" --fail-rank 2 --exit-code 3 --sleep 60
  expect_rc 3
  expect_stderr "^hyrun: rank 2 \(pid [0-9]+\) exited with code 3; stopping 3 other ranks$"
  expect_faster 15
  expect_all_gone "$WORK/pids"
  ;;
rank-sigkill)  # SIGKILL of one rank gives 137 and names the signal
  mkdir "$WORK/pids"
  run_job 60 "$HYRUN" -n 3 -- "$TEST_RANK" --pid-dir "$WORK/pids" --signal-rank 1 --signal 9 --sleep 60
  expect_rc 137
  expect_stderr "^hyrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\); stopping 2 other ranks$"
  expect_all_gone "$WORK/pids"
  ;;
sigterm)  # SIGTERM to hyrun stops every rank within the grace period
  mkdir "$WORK/pids"
  "$HYRUN" -n 4 --grace-period 5 -- "$TEST_RANK" --pid-dir "$WORK/pids" --sleep 60 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/pids" 'rank.*' 4 20
  grep -q "rank 3 ready" <(sleep 0.5; cat "$WORK/o") || true
  t0=$(date +%s.%N); kill -TERM $hy; wait $hy; RC=$?; ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  OUT=$WORK/o; ERR=$WORK/e
  expect_rc 143
  expect_faster 5
  expect_stderr "received SIGTERM; forwarding it to 4 rank"
  expect_all_gone "$WORK/pids"
  ;;
sigterm-escalates)  # a rank that ignores SIGTERM gets SIGKILL after the grace period
  mkdir "$WORK/pids"
  "$HYRUN" -n 2 --grace-period 2 -- "$TEST_RANK" --pid-dir "$WORK/pids" --ignore-term --sleep 60 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/pids" 'rank.*' 2 20
  sleep 0.5
  t0=$(date +%s.%N); kill -TERM $hy; wait $hy; RC=$?; ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  OUT=$WORK/o; ERR=$WORK/e
  expect_rc 143
  [ "$(echo "$ELAPSED >= 1.9" | bc)" -eq 1 ] && pass "waited the grace period (${ELAPSED}s)" || fail "did not wait the grace period (${ELAPSED}s)"
  expect_faster 6
  expect_stderr "still running 2 s after they were asked to stop; sending SIGKILL"
  expect_all_gone "$WORK/pids"
  ;;
second-sigint)  # a second SIGINT kills at once
  mkdir "$WORK/pids"
  "$HYRUN" -n 2 --grace-period 30 -- "$TEST_RANK" --pid-dir "$WORK/pids" --ignore-term --sleep 60 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/pids" 'rank.*' 2 20
  sleep 0.5
  t0=$(date +%s.%N); kill -INT $hy; sleep 0.5; kill -INT $hy; wait $hy; RC=$?; ELAPSED=$(echo "$(date +%s.%N) - $t0" | bc)
  OUT=$WORK/o; ERR=$WORK/e
  expect_rc 130
  expect_faster 5
  expect_stderr "second SIGINT: killing"
  expect_all_gone "$WORK/pids"
  ;;
grandchildren)  # a rank's own children are stopped with it
  mkdir "$WORK/pids"
  run_job 60 "$HYRUN" -n 2 -- "$TEST_RANK" --pid-dir "$WORK/pids" --spawn-child
  expect_rc 0
  expect_all_gone "$WORK/pids"
  ;;
clean-signal-state)  # ranks start with no blocked and no ignored signal, whatever hyrun blocks itself
  # hyrun itself starts with SIGINT and SIGHUP ignored (as under nohup or a background shell)
  run_job 30 bash -c 'trap "" INT HUP; exec "$0" -n 2 --label --bootstrap=none -- grep -E "^Sig(Blk|Ign):" /proc/self/status' "$HYRUN"
  expect_rc 0
  for r in 0 1; do
    expect_stdout "^$r: SigBlk:[[:space:]]+0+\$"
    expect_stdout "^$r: SigIgn:[[:space:]]+0+\$"
  done
  ;;
hyrun-killed)  # ranks die with hyrun (parent-death signal), even when it cannot clean up
  mkdir "$WORK/pids"
  "$HYRUN" -n 3 -- "$TEST_RANK" --pid-dir "$WORK/pids" --sleep 60 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/pids" 'rank.*' 3 20
  kill -KILL $hy; wait $hy
  expect_all_gone "$WORK/pids"
  ;;
planned-exit)  # the exit a rank announced (code 9 here) is not a failure
  run_job 30 "$HYRUN" -n 3 --bootstrap=none -- "$TEST_RANK" --no-world --planned-exit-rank 1 --exit-code 9 --sleep 1
  expect_rc 0
  ! grep -q 'stopping' "$ERR" && pass "nothing was stopped" || fail "the planned exit was treated as a failure"
  ;;
planned-kill-with-unread-notice)  # a planned kill announced with a death notice unread is still planned (issue 20)
  # Rank 1 exits (planned); rank 2 waits until hyrun's notice of it is queued, leaves it
  # unread, and (hyrun stopped meanwhile, so that it reads nothing before the death)
  # announces a planned SIGKILL and dies: the announcement must not be lost.
  mkdir "$WORK/pids"; OUT=$WORK/out; ERR=$WORK/err
  timeout -k 5 30 "$HYRUN" -n 3 --bootstrap=none --log-level info -- "$TEST_RANK" --no-world --planned-exit-rank 1 \
    --exit-code 0 --kill-with-unread-notice-rank 2 --go-file "$WORK/go" --pid-dir "$WORK/pids" --sleep 3 \
    >"$OUT" 2>"$ERR" &
  hy=$!
  wait_for_files "$WORK" 'go.ready' 1 20
  victim=$(cat "$WORK/pids/rank.2"); hyrun_pid=$(awk '{print $4}' "/proc/$victim/stat")
  kill -STOP "$hyrun_pid"; touch "$WORK/go"
  for _ in $(seq 200); do [ "$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
  [ "$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)" = Z ] && pass "rank 2 died while hyrun was stopped" \
    || fail "rank 2 did not die while hyrun was stopped"
  kill -CONT "$hyrun_pid"
  wait $hy && RC=0 || RC=$?
  expect_rc 0
  expect_stderr "rank 2 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\), as it announced"
  ! grep -q 'stopping' "$ERR" && pass "nothing was stopped" || fail "the planned kill was treated as a failure"
  ;;
planned-exit-other-code)  # a planned exit covers only the code it announced: announced 0, exited 42
  run_job 30 "$HYRUN" -n 3 --bootstrap=none -- "$TEST_RANK" --no-world --planned-exit-rank 1 --announced-code 0 \
    --exit-code 42 --sleep 20
  expect_rc 42
  expect_stderr "^hyrun: rank 1 \(pid [0-9]+\) exited with code 42 after announcing a planned exit with code 0; stopping 2 other ranks$"
  expect_faster 15
  ;;
planned-exit-then-killed)  # rank 0 announces a planned exit and is SIGKILLed: a failure, 137
  run_job 30 "$HYRUN" -n 2 --bootstrap=none -- "$TEST_RANK" --no-world --announce-then-signal-rank 0 --signal 9 --sleep 20
  expect_rc 137
  expect_stderr "^hyrun: rank 0 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL\) after announcing a planned exit with code 0"
  expect_faster 15
  ;;
restart-budget)  # a rank asking to be restarted on every exit stops at --max-restarts
  # Rank 0 sleeps past run_job's limit: the job ends by itself (exit 1) only when hyrun stops
  # it at the budget; otherwise the limit ends it (124). No time threshold: under ASan on a
  # loaded machine 32 restarts took 17 s.
  run_job 60 "$HYRUN" -n 2 --bootstrap=none --max-restarts 3 -- "$TEST_RANK" --no-world --respawn-forever-rank 1 --sleep 600
  expect_rc 1
  expect_stderr "^hyrun: rank 1 \(pid [0-9]+\) exited normally and asked to be restarted once more, over --max-restarts 3 \(restarted 3 times\); stopping 1 other rank$"
  run_job 90 "$HYRUN" -n 2 --bootstrap=none -- "$TEST_RANK" --no-world --respawn-forever-rank 1 --sleep 600
  expect_rc 1
  expect_stderr "over --max-restarts 32 \(restarted 32 times\)"
  ;;
respawn)  # a rank that announces a restart and SIGKILLs itself comes back as a new process that rejoins
  run_job 60 "$HYRUN" -n 4 -- "$TEST_RANK" --respawn-rank 2
  expect_rc 0
  expect_stdout "^rank 2 incarnation 1 rejoined$"
  expect_stdout "^rank 0: rank 2 came back as incarnation 1$"
  ;;
unannounced-kill-still-fails)  # the same kill without the announcement is a failure
  run_job 30 "$HYRUN" -n 3 -- "$TEST_RANK" --signal-rank 2 --signal 9 --sleep 30
  expect_rc 137
  expect_stderr "rank 2 \(pid [0-9]+\) was killed by signal 9"
  ;;
missing-program)
  run_job 30 "$HYRUN" -n 2 -- /nonexistent/program
  expect_rc 127
  expect_stderr "^hyrun: cannot execute '/nonexistent/program': No such file or directory$"
  printf 'not executable\n' >"$WORK/plain"; chmod 644 "$WORK/plain"
  run_job 30 "$HYRUN" -n 2 -- "$WORK/plain"
  expect_rc 126
  expect_stderr "cannot execute '.*plain': Permission denied"
  ;;
rank0-exits-before-publish)
  run_job 30 "$HYRUN" -n 3 -- "$TEST_RANK" --exit-before-publish
  expect_rc 1
  expect_stderr "^hyrun: rank 0 \(pid [0-9]+\) exited normally before publishing its UCX address; .*--bootstrap=none"
  expect_faster 10
  run_job 30 "$HYRUN" -n 2 -- /bin/false
  expect_rc 1
  expect_stderr "rank 0 \(pid [0-9]+\) exited with code 1 before publishing"
  # A program that failed said why itself: the hint would be wrong (it may well use the worker library)
  ! grep -q -- "--bootstrap=none" "$ERR" && pass "no --bootstrap=none hint after a failure" || fail "the hint was given after a failure"
  ;;
rank0-never-publishes)
  mkdir "$WORK/pids"
  # 5 s: past the 3 s after which a rank 0 without the worker library would get the hint.
  run_job 30 "$HYRUN" -n 3 --bootstrap-timeout 5 -- "$TEST_RANK" --pid-dir "$WORK/pids" --no-world --sleep 60
  expect_rc 124
  expect_stderr "did not publish its UCX address within 5 s \(--bootstrap-timeout\)"
  ! grep -q "without loading the hyrun worker library" "$ERR" && pass "no hint: rank 0 loaded the library" \
    || fail "hint given although rank 0 uses the worker library"
  expect_faster 12
  expect_all_gone "$WORK/pids"
  ;;
no-worker-library-hint)  # a program without the worker library under --bootstrap=ucx is named within seconds
  # The limit is 60 s; the hint must come long before it (here: before the test's own 25 s).
  "$HYRUN" -n 2 --bootstrap-timeout 60 -- sleep 50 >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  OUT=$WORK/o; ERR=$WORK/e
  for _ in $(seq 250); do grep -q "without loading the hyrun worker library" "$ERR" && break; sleep 0.1; done
  kill -TERM $hy; wait $hy
  expect_stderr "^hyrun: rank 0 \(pid [0-9]+\) has run 3 s without loading the hyrun worker library, .*--bootstrap=none"
  ;;
torch-gloo)  # torch.distributed (env://, gloo) runs unchanged: hyrun gives what torchrun gives
  /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || { echo "python3-torch is not installed"; exit 77; }
  run_job 120 env -u MASTER_ADDR -u MASTER_PORT -u OMP_NUM_THREADS "$HYRUN" -n 2 --bootstrap=none -- \
    /usr/bin/python3 "$(dirname "$0")/gloo_allreduce.py"
  expect_rc 0
  for r in 0 1; do
    expect_stdout "^gloo rank $r/2 on .*: sum=3 expected=3 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_RANK=$r ROLE_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=[0-9]+ OMP_NUM_THREADS=[0-9]+ TORCHELASTIC_RUN_ID=hyrun-local-[0-9]+ cpus=[0-9]+\$"
  done
  # OMP_NUM_THREADS is the number of CPUs the rank is bound to.
  if grep -E '^gloo rank' "$OUT" | sed -E 's/.*OMP_NUM_THREADS=([0-9]+) .* cpus=([0-9]+)$/\1 \2/' | awk '$1 != $2 {bad=1} END {exit bad}'; then
    pass "OMP_NUM_THREADS equals each rank's CPU count"
  else
    fail "OMP_NUM_THREADS differs from a rank's CPU count"
  fi
  # The user's own values win over hyrun's defaults. The port is reserved (lib.sh): a random
  # one could be another test's, running at the same time.
  reserve_port || exit 1
  user_port=$PORT
  run_job 120 env OMP_NUM_THREADS=7 "$HYRUN" -n 2 --bootstrap=none -x MASTER_PORT="$user_port" -- \
    /usr/bin/python3 "$(dirname "$0")/gloo_allreduce.py"
  expect_rc 0
  port=$(grep -oE 'MASTER_PORT=[0-9]+' "$OUT" | sort -u)
  [ "$port" = "MASTER_PORT=$user_port" ] && pass "every rank has the user's $port" || fail "ranks saw $port, not the user's $user_port"
  expect_stdout "OMP_NUM_THREADS=7 "  # more than the CPUs of any rank here: not hyrun's default
  ;;
wrong-token)  # rank 0 admits only peers that present the job token
  run_job 30 "$HYRUN" -n 3 --bootstrap-timeout 3 -- "$TEST_RANK" --wrong-token-rank 2
  [ "$RC" -ne 0 ] && pass "job failed ($RC)" || fail "job with a wrong-token join succeeded"
  expect_stderr "rank 0: refused a join message claiming rank 2 \(.*\): not sealed with this job.s key"
  expect_faster 15
  ;;
long-line)  # a 10 MB line and a flood of lines block nobody; every byte arrives
  run_job 120 "$HYRUN" -n 4 -- "$TEST_RANK" --long-line-rank 1 --long-line-bytes 10000000 --flood-rank 2 --flood-lines 200000
  expect_rc 0
  whole=$(awk 'length($0) == 10000000 && /^x+$/' "$OUT" | wc -l)
  [ "$whole" -eq 1 ] && pass "the 10000000-byte line arrived whole" || fail "the 10000000-byte line did not arrive whole ($whole)"
  fl=$(grep -c '^flood line [0-9]* of rank 2$' "$OUT")
  [ "$fl" -eq 200000 ] && pass "all 200000 flood lines intact" || fail "$fl of 200000 flood lines intact"
  for r in 0 1 2 3; do expect_stdout "rank $r ready"; done
  ;;
flooding-ranks-in-turn)  # ranks flooding without end do not starve a quiet rank's one line
  # A round of hyrun's loop reads at most 1 MiB of all ranks (OutputForwarder::kRoundBudget) and
  # stops at the reader's backpressure mark, and one flooding rank can take that whole: the rounds
  # must serve the ranks in turn. Forms of session 39's change without the turn (each round from
  # rank 0's pipe), or with it after the budget but not after backpressure, held rank 3's line
  # 20-60 s. (Before that change every ready pipe was read in every round, 64 MiB at 64 ranks.)
  run_job 60 bash -c '"$0" -n 4 --bootstrap=none --label -- sh -c "[ \$HYRUN_RANK = 3 ] && { echo quiet rank says hello; exec sleep 60; }; exec yes" |
    grep -m1 "^3: quiet rank says hello$"; echo "status ${PIPESTATUS[*]}"' "$HYRUN"
  expect_stdout "^3: quiet rank says hello$"
  expect_stdout "^status 141 0$"  # the flooding ranks then end as a pipeline's writer does (SIGPIPE)
  expect_stderr "^hyrun: rank [0-2] \(pid [0-9]+\) was killed by signal 13 \(SIGPIPE\) after the reader of hyrun's stdout went away"
  ;;
partial-lines-budget)  # 8 ranks, 12 MiB each without a newline: hyrun holds at most its 64 MiB budget of them
  mkdir "$WORK/done"
  # Each rank writes its 12 MiB, says so, and ends its line only once the test says go.
  "$HYRUN" -n 8 --bootstrap=none -- sh -c 'head -c 12582912 /dev/zero | tr "\\0" x; touch "$0/$HYRUN_RANK"
    for _ in $(seq 1200); do [ -e "$0/go" ] && break; sleep 0.1; done; echo' "$WORK/done" >"$WORK/o" 2>"$WORK/e" &
  hy=$!
  wait_for_files "$WORK/done" '[0-7]' 8 60
  # Every byte was written into a pipe hyrun reads (each holds at most 64 KiB): beyond its budget
  # it must have forwarded 96 MiB - 64 MiB - 8 x 64 KiB while every line is still open.
  want=$((96 * 1048576 - 64 * 1048576 - 8 * 65536)) out=0
  for _ in $(seq 600); do
    out=$(stat -c %s "$WORK/o"); [ "$out" -ge "$want" ] && break; sleep 0.1
  done
  [ "$out" -ge "$want" ] && pass "$out bytes forwarded while every line was open" \
    || fail "only $out bytes forwarded while hyrun held 8 partial lines of 12 MiB (want $want)"
  touch "$WORK/done/go"
  wait $hy; rc=$?
  [ "$rc" -eq 0 ] && pass "exit code 0" || fail "exit code $rc"
  xs=$(tr -cd x <"$WORK/o" | wc -c)
  [ "$xs" -eq $((8 * 12582912)) ] && pass "every byte arrived" || fail "$xs of $((8 * 12582912)) bytes arrived"
  ;;
outside-hyrun)
  run_job 30 env -u HYRUN_RANK "$HELLO"
  expect_rc 1
  expect_stderr "not started by hyrun: HYRUN_RANK is not set"
  ;;
stale-pmix-environment)  # PMIX_* variables of an ended job: the message names them and the way out
  run_job 30 env PMIX_NAMESPACE=ended.job.7 "PMIX_SERVER_URI41=pmix-server.99999;tcp4://127.0.0.1:1" \
    "PMIX_SERVER_URI4=pmix-server.99999;tcp4://127.0.0.1:1" PMIX_RANK=0 "$HYRUN" -n 1 --bootstrap=none -- /bin/true
  expect_rc 1
  expect_stderr "names a PMIx server \(PMIX_NAMESPACE=ended\.job\.7, PMIX_SERVER_URI(41|4), PMIX_SERVER_URI(41|4)\)"
  expect_stderr "left from an ended job, unset them, or pass --mode=local"
  # The helper says why (the server is unreachable), rather than dying in libpmix's
  # PMIx_Finalize after that init ("the helper ... ended before it connected").
  expect_stderr "PMIx server of namespace ended\.job\.7 \(announced by PMIX_NAMESPACE and PMIX_SERVER_URI\*\) is unreachable"
  run_job 30 env PMIX_NAMESPACE=ended.job.7 "$HYRUN" -n 1 --bootstrap=none -- /bin/true
  expect_rc 1
  expect_stderr "PMIx_Init failed: .*names a PMIx server \(PMIX_NAMESPACE=ended\.job\.7\)"
  run_job 30 env PMIX_NAMESPACE=ended.job.7 "$HYRUN" -n 1 --mode=local --bootstrap=none -- /bin/true
  expect_rc 0
  # A server that takes the connection and never answers the handshake: hyrun's own
  # PMIx_Init is bounded by --bootstrap-timeout (the start's one limit), not by a limit of
  # its own that the option cannot raise.
  reserve_port
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); open(sys.argv[2] + "/silent-up", "w").close()
held = []
for i in range(8):
    held.append(s.accept()[0]); open(sys.argv[2] + "/silent-took." + str(i), "w").close()
time.sleep(120)' "$PORT" "$WORK" &
  silent=$!
  for _ in $(seq 100); do [ -e "$WORK/silent-up" ] && break; sleep 0.1; done
  silent_env=(env PMIX_NAMESPACE=silent.job.7 "PMIX_SERVER_URI41=pmix-server.99999;tcp4://127.0.0.1:$PORT"
    "PMIX_SERVER_URI4=pmix-server.99999;tcp4://127.0.0.1:$PORT" PMIX_RANK=0)
  run_job 30 "${silent_env[@]}" "$HYRUN" -n 1 --bootstrap=none --bootstrap-timeout 2 -- /bin/true
  expect_rc 124
  expect_stderr "PMIx_Init did not complete within 2 s \(--bootstrap-timeout\).*names a PMIx server \(PMIX_NAMESPACE=silent\.job\.7"
  # A signal while that PMIx_Init waits ends hyrun at once (it is blocked into a signalfd by then).
  # The connection the server takes next is this hyrun's: its helper connects after hyrun
  # blocked the signals, so the SIGTERM below comes while PMIx_Init waits.
  took=$(find "$WORK" -maxdepth 1 -name 'silent-took.*' | wc -l)
  "${silent_env[@]}" "$HYRUN" -n 1 --bootstrap=none -- /bin/true 2>"$WORK/err.term" &
  hy=$!
  for _ in $(seq 300); do [ -e "$WORK/silent-took.$took" ] && break; sleep 0.1; done
  [ -e "$WORK/silent-took.$took" ] || fail "hyrun's PMIx client helper never connected to the silent server"
  kill -TERM "$hy"
  wait "$hy"; rc=$?
  kill "$silent" 2>/dev/null; wait "$silent" 2>/dev/null
  [ "$rc" -eq 143 ] && pass "SIGTERM during PMIx_Init: exit code 143" || fail "SIGTERM during PMIx_Init: exit code $rc"
  grep -q "received SIGTERM while hyrun connected to the PMIx server; nothing was started" "$WORK/err.term" \
    && pass "SIGTERM during PMIx_Init is said" || { fail "SIGTERM during PMIx_Init is not said"; cat "$WORK/err.term"; }
  ;;
slow-pmix-finalize)  # hyrun's own PMIx_Finalize, late: it waits for it, as for its PMIx_Init
  # The inner hyrun is a node of a hybrid job that the outer one serves (docs/pmix.md,
  # "Simulated nodes"). Its rank stops the inner hyrun's PMIx client helper (its sibling, the
  # inner hyrun's other child) and exits; a timer resumes the helper 7 s later, and only then
  # does it say PMIx_Finalize. Before, hyrun killed its helper after a fixed 5 s, the helper
  # never finalized, and the outer hyrun failed the job: "exited 0 without finalizing PMIx".
  printf '#!/bin/sh\nfor p in $(pgrep -P "$PPID"); do [ "$p" = $$ ] || echo "$p"; done >"$1/helper.pid.tmp"\nmv "$1/helper.pid.tmp" "$1/helper.pid"\nkill -STOP $(cat "$1/helper.pid")\n' >"$WORK/stop-helper"
  chmod +x "$WORK/stop-helper"
  (for _ in $(seq 600); do [ -s "$WORK/helper.pid" ] && break; sleep 0.1; done
    sleep 7; kill -CONT "$(cat "$WORK/helper.pid")") &
  resumer=$!
  run_job 60 "$HYRUN" -n 1 --bootstrap=none -- "$HYRUN" -n 1 --bootstrap=none -- "$WORK/stop-helper" "$WORK"
  wait "$resumer"
  [ "$(wc -w <"$WORK/helper.pid")" = 1 ] && pass "the rank stopped the inner hyrun's helper" \
    || fail "the rank did not find one helper: '$(cat "$WORK/helper.pid")'"
  expect_rc 0
  ! grep -q "did not end within" "$ERR" && pass "the helper was not killed" || fail "the helper was killed: $(cat "$ERR")"
  ;;
late-pmix-finalize-read)  # a client's PMIx_Finalize read after its process was reaped still counts
  # The inner hyrun is the outer one's PMIx client. Its rank has a test helper hold every
  # thread of the outer hyrun but its main one (libpmix's progress thread reads the clients'
  # messages), then exits. The inner hyrun's PMIx_Finalize goes into its socket unread; libpmix
  # gives up on the answer after 2 s, and the inner hyrun exits 0. The outer hyrun's main
  # thread reaps it while libpmix is held, and the helper lets libpmix go a second later. Before,
  # the outer hyrun judged the end at once: "exited 0 without finalizing PMIx".
  printf '#!/bin/sh\nouter=$(cut -d" " -f4 /proc/$PPID/stat)\necho "$outer $PPID" >"$1/req.tmp"\nmv "$1/req.tmp" "$1/req"\nfor _ in $(seq 600); do [ -e "$1/held" ] && exit 0; sleep 0.1; done\nexit 3\n' >"$WORK/hold-outer"
  chmod +x "$WORK/hold-outer"
  (for _ in $(seq 600); do [ -s "$WORK/req" ] && break; sleep 0.1; done
    read -r outer inner <"$WORK/req"
    "$(dirname "$0")/hold_threads.py" "$outer" "$WORK/held" "$inner" 1 2>"$WORK/hold.err"; echo $? >"$WORK/hold.rc") &
  holder=$!
  run_job 60 "$HYRUN" -n 1 --bootstrap=none -- "$HYRUN" -n 1 --bootstrap=none -- "$WORK/hold-outer" "$WORK"
  wait "$holder"
  [ "$(cat "$WORK/hold.rc")" = 77 ] && { echo "SKIP: this process may not ptrace hyrun: $(cat "$WORK/hold.err")"; exit 77; }
  [ "$(cat "$WORK/hold.rc")" = 0 ] && pass "libpmix's threads were held until the inner hyrun was reaped" \
    || fail "the holder failed (rc $(cat "$WORK/hold.rc")): $(cat "$WORK/hold.err")"
  expect_rc 0
  ! grep -q "without finalizing" "$ERR" && pass "the late finalize counted" || { fail "judged before its finalize was read"; show_output; }
  ;;
usage)
  run_job 10 "$HYRUN" -- /bin/true
  expect_rc 2; expect_stderr "ranks is required"
  run_job 10 "$HYRUN" -n 2
  expect_rc 2; expect_stderr "no program given"
  run_job 10 "$HYRUN" -n 2 -x HYRUN_SURELY_UNSET_VAR -- /bin/true
  expect_rc 2; expect_stderr "HYRUN_SURELY_UNSET_VAR is not set in hyrun's environment"
  run_job 10 "$HYRUN" -n 0 -- /bin/true
  expect_rc 2; expect_stderr "ranks"
  run_job 10 "$HYRUN" -n 2 --timestamp-outptu -- /bin/true
  expect_rc 2; expect_stderr "^hyrun: unknown option '--timestamp-outptu' before the program"
  run_job 10 "$HYRUN" -n 2 --bootstrap-timeout 2200000 -- /bin/true
  expect_rc 2; expect_stderr "^hyrun: --bootstrap-timeout: 2200000 is out of range"
  run_job 10 "$HYRUN" --help
  expect_rc 0; expect_stdout "Examples:"; expect_stdout "^Usage: hyrun -n N \[options\] -- program \[args\.\.\.\]$"
  run_job 10 "$HYRUN" --version
  expect_rc 0; expect_stdout "^hyrun [0-9]+\.[0-9]+\.[0-9]+"
  ;;
mps)  # --mps: a bad value is a usage error; 'on' says exactly why it cannot start a daemon
  run_job 10 "$HYRUN" -n 1 --mps sometimes -- /bin/true
  expect_rc 2; expect_stderr "--mps"
  run_job 10 env CUDA_MPS_PIPE_DIRECTORY="$WORK/no-daemon" "$HYRUN" -n 1 --mps on --bootstrap=none -- /bin/true
  expect_rc 1; expect_stderr "^hyrun: --mps on: CUDA_MPS_PIPE_DIRECTORY is set to $WORK/no-daemon, where no daemon answers"
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    run_job 10 env -u CUDA_MPS_PIPE_DIRECTORY "$HYRUN" -n 1 --mps on --bootstrap=none -- /bin/true
    expect_rc 1; expect_stderr "^hyrun: --mps on: nvidia-cuda-mps-control is not in PATH"
  fi
  # No GPU is shared (none here): auto and off start nothing and say nothing about MPS.
  run_job 10 "$HYRUN" -n 2 --bootstrap=none -- /bin/true
  expect_rc 0
  grep -q MPS "$ERR" && fail "MPS mentioned without a shared GPU" || pass "no MPS line without a shared GPU"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
finish
