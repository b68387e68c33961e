#!/usr/bin/python3
"""A PMIx client whose handshake fails half-way: pmix_handshake_cut.py [--forge] CLIENT [ARGS...].

Runs CLIENT with its PMIx server address pointing here and takes its connect-ack. Then:
- by default, hands it to the job's real server and closes both ends before the server
  answers, as when a rank is killed during PMIx_Init. The order is fixed: a second connection
  that sends one byte of a header holds libpmix's handshake thread until the cut connection
  is closed, so the server always answers a client that is gone;
- with --forge, hands it on with its security module's name changed, as a process of the job
  that forges a handshake would: libpmix takes it past the rank's record and then refuses it.
Prints one line saying what was done; exit 0, or 2 when a step did not happen in time.
"""
import os
import socket
import subprocess
import sys
import time


def say(what):
    print(f"handshake-cut: {what}", flush=True)


def server_address():
    uri = os.environ["PMIX_SERVER_URI41"]
    host, port = uri.split(";")[1].split("tcp4://")[1].split(":")
    return uri.split(";")[0], host, int(port)


def accept_queue(port):
    """Connections waiting in the listener's accept queue (rx_queue of its LISTEN row)."""
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            f = line.split()
            if int(f[1].split(":")[1], 16) == port and f[3] == "0A":
                return int(f[4].split(":")[1], 16)
    return 0


def connect_accepted(host, port):
    """A connection the server has taken from its accept queue."""
    s = socket.create_connection((host, port))
    deadline = time.monotonic() + 60
    while accept_queue(port) > 0:
        if time.monotonic() > deadline:
            say("the server did not accept within 60 s")
            sys.exit(2)
        time.sleep(0.005)
    return s


def main():
    forge = sys.argv[1] == "--forge"
    command = sys.argv[2:] if forge else sys.argv[1:]
    prefix, host, port = server_address()
    here = socket.socket()
    here.bind(("127.0.0.1", 0))
    here.listen(1)
    env = {k: (f"{prefix};tcp4://127.0.0.1:{here.getsockname()[1]}" if k.startswith("PMIX_SERVER_URI") else v)
           for k, v in os.environ.items()}
    holder = None if forge else connect_accepted(host, port)
    if holder:
        holder.send(b"\xff")  # one byte of a 16-byte header: the server's handshake thread waits for the rest
    client = subprocess.Popen(command, env=env)
    here.settimeout(60)
    c, _ = here.accept()
    c.settimeout(60)
    message = b""
    while len(message) < 16 or len(message) < 16 + int.from_bytes(message[8:16], "little"):
        part = c.recv(65536)
        if not part:
            say("the client closed before its connect-ack was whole")
            sys.exit(2)
        message += part
    cut = connect_accepted(host, port)
    if forge:
        at = message.index(b"native\0", 16)  # the first field: the client's security module
        cut.sendall(message[:at] + b"bogus!" + message[at + 6:])
        cut.settimeout(60)
        refused = cut.recv(4) == b""
        cut.close()
        c.close()
        client.wait()
        say(f"{len(message)} bytes of connect-ack forged (security module 'bogus!'), "
            f"{'refused' if refused else 'answered'}; the client exited {client.returncode}")
        return
    cut.sendall(message)
    cut.close()
    c.close()
    holder.close()  # the server now reads the cut connection's message and answers nobody
    client.wait()
    say(f"{len(message)} bytes of connect-ack handed on, then closed before the answer; the client exited "
        f"{client.returncode}")


main()
