"""A controller that stops reading cannot grow a node agent's memory
(docs/protocol.md, "Framing" under "Agent link"): a real `stepscope run`
agent of a two-node job on loopback joins a scripted controller, a Python
socket that speaks the agent link (the proofs, the session key and the
MACs of docs/protocol.md), answers the agent's clock exchanges, and then
never reads again while keeping the connection open.  The node's one rank
writes 192 MiB into its connection to the agent as fast as it can.

The agent forwards those bytes until 64 MiB wait unsent, then loses the
controller with the reason, stops its rank and fails; its peak resident memory
stays near the cap (without the cap it would hold what the rank wrote).
The agent's heartbeat timeout is set long so that only the cap can end it.
"""
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import threading
import time

from conftest import STEPSCOPE
from jobs import free_port  # noqa: E402

AGENT_HELLO, CHALLENGE, PROOF, JOIN_OK = 1, 2, 3, 4
TIME_REQ, TIME_RESP, CLOCK = 20, 21, 22
MAC = 16
RANK_MIB = 192
RANK = ("import os, socket, time\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(os.environ['STEPSCOPE_ADDR'][len('unix:'):])\n"
        "chunk = b'x' * (1 << 20)\n"
        f"for _ in range({RANK_MIB}):\n"
        "    s.sendall(chunk)\n"
        "time.sleep(120)\n")


def recv_exact(c, n):
    out = b""
    while len(out) < n:
        got = c.recv(n - len(out))
        if not got:
            raise EOFError("the agent closed the link")
        out += got
    return out


def read_frame(c, keyed):
    length, kind, _, _ = struct.unpack("<IBBH", recv_exact(c, 8))
    payload = recv_exact(c, length)
    if keyed:
        recv_exact(c, MAC)
    return kind, payload


def lstr(b):
    return bytes([len(b)]) + b


class Controller:
    """The controller's side of one link, scripted."""

    def __init__(self, secret, port):
        self.secret = secret
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", port))
        self.server.listen(1)
        self.server.settimeout(60)
        self.conn = None
        self.key = None
        self.seq = 0
        self.stalled = threading.Event()
        self.error = None

    def digest(self, label, hello, nonce_c):
        magic, version, _, node, nnodes, nproc = struct.unpack_from(
            "<4sHHIII", hello)
        assert magic == b"SSAG"
        nonce_a = hello[20:52]
        rest = hello[52:]
        job = rest[1:1 + rest[0]]
        rest = rest[1 + rest[0]:]
        host = rest[1:1 + rest[0]]
        msg = (lstr(label) + nonce_a + nonce_c +
               struct.pack("<IIII", version, node, nnodes, nproc) +
               lstr(job) + lstr(host))
        return hmac.new(self.secret, msg, hashlib.sha256).digest()

    def send(self, kind, payload):
        frame = struct.pack("<IBBH", len(payload), kind, 0, 0) + payload
        if self.key:
            prefix = bytes([1]) + struct.pack("<Q", self.seq)
            # link version 3: a 16-byte keyed BLAKE2b
            frame += hashlib.blake2b(prefix + frame, key=self.key,
                                     digest_size=MAC).digest()
            self.seq += 1
        self.conn.sendall(frame)

    def serve(self):
        try:
            self.conn, _ = self.server.accept()
            self.conn.settimeout(60)
            kind, hello = read_frame(self.conn, False)
            assert kind == AGENT_HELLO, kind
            nonce_c = os.urandom(32)
            self.send(CHALLENGE, nonce_c + self.digest(
                b"stepscope agent link v1 controller", hello, nonce_c))
            kind, _ = read_frame(self.conn, False)
            assert kind == PROOF, kind
            self.key = self.digest(b"stepscope agent link v1 session key",
                                   hello, nonce_c)
            pad = hmac.new(self.key, b"token", hashlib.sha256).digest()
            sealed = bytes(a ^ b for a, b in zip(os.urandom(16), pad))
            # after the token: the aggregate byte (0: by rank; link
            # version 2) and the agent's node rank (version 5)
            node = struct.unpack_from("<I", hello, 8)[0]
            self.send(JOIN_OK, struct.pack("<IIq", 0, 2, time.monotonic_ns())
                      + sealed + bytes([0]) + struct.pack("<I", node)
                      + lstr(b"stalled-run"))
            while True:
                kind, payload = read_frame(self.conn, True)
                if kind == TIME_REQ:
                    t = time.monotonic_ns()
                    self.send(TIME_RESP, payload[:8] + struct.pack("<qq", t, t))
                elif kind == CLOCK:
                    break  # the ranks start now: read nothing more
            self.stalled.set()
        except Exception as e:  # reported by the test
            self.error = e
            self.stalled.set()

    def close(self):
        for s in (self.conn, self.server):
            if s:
                s.close()


def peak_rss_mib(pid):
    """The process's peak resident memory (VmHWM), MiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def test_a_controller_that_stops_reading_cannot_grow_the_agent(tmp_path):
    token = tmp_path / "token"
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    text = os.urandom(24).hex()
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    ctl_port = free_port()
    ctl = Controller(text.encode(), ctl_port)
    t = threading.Thread(target=ctl.serve, daemon=True)
    t.start()
    agent = subprocess.Popen(
        [str(STEPSCOPE), "run", "--nnodes", "2", "--node-rank", "1",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "--controller-port", str(ctl_port), "-n", "1",
         "--token-file", str(token), "--job-id", "stall", "--grace", "2",
         "--heartbeat-timeout", "300", "--join-timeout", "60",
         "--log-dir", str(tmp_path / "logs"), "--",
         "/usr/bin/python3", "-c", RANK],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL)
    peak = 0.0
    try:
        assert ctl.stalled.wait(60), "the agent never joined"
        assert ctl.error is None, ctl.error
        deadline = time.monotonic() + 120
        while agent.poll() is None and time.monotonic() < deadline:
            peak = max(peak, peak_rss_mib(agent.pid) or 0.0)
            time.sleep(0.05)
        _, err = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        ctl.close()
    err = err.decode(errors="replace")
    assert agent.returncode != 0, err  # 1, or its stopped rank's status
    assert "lost the controller at 127.0.0.1:%d: it stopped reading: " \
           "64.0 MiB waiting to be sent to it (at most 64.0 MiB)" % ctl_port \
        in err, err
    assert "stopping this node's ranks" in err, err
    print(f"agent peak resident memory {peak:.1f} MiB; the rank wrote "
          f"up to {RANK_MIB} MiB")
    if "ASAN_OPTIONS" not in os.environ:  # the sanitizer's own memory
        assert 0 < peak < 64 + 48, peak
