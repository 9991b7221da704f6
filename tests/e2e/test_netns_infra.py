"""The virtual cluster of tests/netns.py, on which the multi-node tests run:
nodes reach each other over TCP at their own addresses, have their own
hostnames and (when asked) a CLOCK_MONOTONIC 1000 s ahead, a real gloo
DDP job spans two nodes (one of them skewed), a link taken down stalls a
TCP connection without resetting it and a link brought up resumes it, and
nothing the cluster made outlives it.

Each node has its own port space, so the fixed ports below collide with
nothing on the host.  Runs when root (an error if root cannot build the
cluster, unless STEPSCOPE_NETNS=skip); skipped, with the reason, otherwise.
"""
import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import netns  # noqa: E402
from conftest import SOURCE  # noqa: E402

RUN, WHY = netns.should_run()
pytestmark = pytest.mark.skipif(not RUN, reason=WHY)

PY = sys.executable
OFFSET = 1000  # seconds node 1's CLOCK_MONOTONIC runs ahead
PORT = 29400

# Echo server: accepts one connection on ADDR:PORT, prints the peer's
# address, then echoes every line back until the peer closes.
SERVER = r"""
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
c, peer = s.accept()
print("peer", peer[0], flush=True)
f = c.makefile("rwb", buffering=0)
for line in f:
    f.write(line)
"""

# Client driven line by line on stdin: "send WORD" sends WORD and waits up
# to TIMEOUT s for its echo, printing "echo WORD" or "stalled"; "wait"
# waits (60 s at most) for an echo still owed.
CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.settimeout(float(sys.argv[3]))
buf = b""
def recv_line(deadline_s):
    global buf
    c.settimeout(deadline_s)
    while b"\n" not in buf:
        data = c.recv(4096)
        if not data:
            raise SystemExit("closed")
        buf += data
    line, buf = buf.split(b"\n", 1)
    return line.decode()
print("connected", flush=True)
for cmd in sys.stdin:
    words = cmd.split()
    try:
        if words[0] == "send":
            c.sendall(words[1].encode() + b"\n")
            print("echo", recv_line(float(sys.argv[3])), flush=True)
        else:
            print("echo", recv_line(60.0), flush=True)
    except socket.timeout:
        print("stalled", flush=True)
"""


def node_python(cluster, k, code, *args, **kwargs):
    return cluster.popen(k, [PY, "-c", code, *map(str, args)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         **kwargs)


def ask(proc, line=None):
    """Writes LINE to PROC (if any) and returns its next line of output."""
    if line is not None:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    out = proc.stdout.readline().strip()
    assert out, f"no answer; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    return out


@pytest.fixture
def cluster():
    with netns.Cluster(2, time_offsets={1: OFFSET}) as c:
        yield c


def connect(cluster, timeout_s):
    server = node_python(cluster, 0, SERVER, cluster.addr(0), PORT)
    assert ask(server) == "listening"
    client = node_python(cluster, 1, CLIENT, cluster.addr(0), PORT, timeout_s)
    assert ask(client) == "connected"
    return server, client


def test_tcp_between_nodes(cluster):
    assert cluster.addr(0) != cluster.addr(1)
    server, client = connect(cluster, 5)
    # The server sees the client's own address: the packet crossed the
    # bridge from node 1, it did not come from loopback.
    assert ask(server) == f"peer {cluster.addr(1)}"
    assert ask(client, "send hello") == "echo hello"


def test_hostnames_differ_and_resolve(cluster):
    names = []
    for k in (0, 1):
        r = cluster.run(k, ["sh", "-c", "hostname; getent hosts node0 node1"],
                        capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split("\n")
        names.append(lines[0])
        assert f"{cluster.addr(0)}" in r.stdout and f"{cluster.addr(1)}" in r.stdout
    assert names == ["node0", "node1"]
    assert socket.gethostname() not in names  # the host's own is untouched


def test_time_namespace_offsets_monotonic(cluster):
    code = "import time; print(time.monotonic())"
    host = time.monotonic()
    clocks = [float(cluster.run(k, [PY, "-c", code], capture_output=True, text=True,
                                timeout=30).stdout) for k in (0, 1)]
    assert abs(clocks[0] - host) < 20, "node 0 has no offset"
    assert abs(clocks[1] - clocks[0] - OFFSET) < 20, clocks


def test_link_down_stalls_tcp_and_link_up_resumes(cluster):
    server, client = connect(cluster, 1.5)
    assert ask(server) == f"peer {cluster.addr(1)}"
    assert ask(client, "send before") == "echo before"
    cluster.link_down(1)
    # Neither an echo nor an error: the connection just stalls.
    assert ask(client, "send during") == "stalled"
    assert client.poll() is None
    cluster.link_up(1)
    # TCP retransmits what was sent while the link was down.
    assert ask(client, "wait") == "echo during"
    assert ask(client, "send after") == "echo after"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed for this Python")
def test_gloo_ddp_across_nodes(cluster):
    """Two nodes x two ranks of examples/ddp_train.py, env set by hand as
    torchrun would; node 1's monotonic clock is 1000 s ahead.  gloo finds
    its interface by resolving the hostname (node<k>, in the node's hosts
    file); GLOO_SOCKET_IFNAME=eth0 would do as well."""
    per_node, world = 2, 4
    procs = []
    for k in (0, 1):
        for local in range(per_node):
            env = dict(os.environ, RANK=str(k * per_node + local), WORLD_SIZE=str(world),
                       LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(per_node),
                       MASTER_ADDR=cluster.addr(0), MASTER_PORT=str(PORT),
                       OMP_NUM_THREADS="1")
            env.pop("GLOO_SOCKET_IFNAME", None)
            procs.append(cluster.popen(
                k, [PY, str(SOURCE / "examples" / "ddp_train.py"), "--steps", "10",
                    "--samples", "1024", "--warmup", "2"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    assert "ddp_train: rank=0 steps=10" in outs[0]


def test_close_removes_everything():
    before = set(netns._netns_list())
    with pytest.raises(KeyboardInterrupt):
        with netns.Cluster(2, time_offsets={0: 5}) as c:
            sleeper = c.popen(1, ["sleep", "600"])
            names = c.namespaces + [c.hub]
            assert set(names) <= set(netns._netns_list())
            raise KeyboardInterrupt
    assert sleeper.returncode is not None, "a process left in a node outlived it"
    assert set(netns._netns_list()) == before
    for ns in names:
        assert not os.path.exists(os.path.join(netns.NETNS_ETC, ns))
