#!/usr/bin/env python3
"""Holds every thread of a process but its main one, for a test that must control a race.

    hold_threads.py PID HELD_FILE GONE_PID [THEN_S]

ptrace stops one thread at a time (PTRACE_SEIZE + PTRACE_INTERRUPT), where SIGSTOP stops the
whole process: with it a test holds libpmix's threads in hyrun (its progress thread reads the
clients' messages) while hyrun's main thread runs on. Once every other thread is held, it
writes HELD_FILE; once GONE_PID has left /proc (reaped) and THEN_S more seconds (default 1)
have passed, it lets them go. Exits 0 then; 1 when GONE_PID is still there after 60 s, or
when a thread could not be held (it lets go of the others first); 77 when this process may
not trace PID (it needs CAP_SYS_PTRACE or to be PID's ancestor).
"""
import ctypes
import errno
import os
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000  # __WALL: wait for any thread, not only children
LIMIT_S = 60

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def ptrace(request, tid):
    if libc.ptrace(request, tid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ptrace({request:#x}, {tid}): {os.strerror(err)}")


def main():
    pid, held_file, gone_pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    then_s = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    held = []
    try:
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            if tid == pid:
                continue
            ptrace(PTRACE_SEIZE, tid)
            held.append(tid)
            ptrace(PTRACE_INTERRUPT, tid)
            os.waitpid(tid, WALL)  # the thread is stopped once this returns
        if not held:
            print(f"hold_threads: process {pid} has no thread but its main one", file=sys.stderr)
            return 1
        with open(held_file + ".tmp", "w") as f:
            f.write(" ".join(map(str, held)) + "\n")
        os.rename(held_file + ".tmp", held_file)
        deadline = time.monotonic() + LIMIT_S
        while os.path.exists(f"/proc/{gone_pid}"):
            if time.monotonic() > deadline:
                print(f"hold_threads: process {gone_pid} still there after {LIMIT_S} s", file=sys.stderr)
                return 1
            time.sleep(0.01)
        time.sleep(then_s)
        return 0
    except OSError as e:
        print(f"hold_threads: {e}", file=sys.stderr)
        return 77 if e.errno == errno.EPERM and not held else 1
    finally:
        for tid in held:
            try:
                ptrace(PTRACE_DETACH, tid)
            except OSError as e:
                print(f"hold_threads: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
