"""An agent joining through strangers (docs/multinode.md, "Strangers on the
agent port"): real `stepscope run` processes of a two-node job on loopback
(the C example's ranks, one per node), with a fake listener, a Python
socket, on the controller's port before the controller.

  - the fake refuses the agent without a MAC (its reason carries C1
    control characters), then answers a CHALLENGE with a proof it cannot
    have made, then goes away; the real controller starts on that port:
    the agent, which retried, joins and the job completes, and the reason
    was printed with its control characters replaced;
  - a fake that accepts and never says a word: the agent gives up at its
    --join-timeout, not later.
"""
import os
import socket
import struct
import subprocess
import threading
import time

from conftest import STEPSCOPE, example
from jobs import free_port  # noqa: E402

JOIN_REJECT, CHALLENGE = 5, 2
EVIL = b"evil \x9b31m red \xc2\x9b2J done"  # CSI raw and as UTF-8


def frame(kind, payload):
    return struct.pack("<IBBH", len(payload), kind, 0, 0) + payload


def node(k, tmp_path, ports, extra=()):
    master, ctl = ports
    args = [str(STEPSCOPE), "run", "--nnodes", "2", "--node-rank", str(k),
            "--master-addr", "127.0.0.1", "--master-port", str(master),
            "--controller-port", str(ctl), "-n", "1", "--token-file",
            str(tmp_path / "token"), "--job-id", "join-test", "--grace", "2",
            "--log-dir", str(tmp_path / f"logs{k}")]
    if k == 0:
        args += ["--db", str(tmp_path / "store.db"), "--no-http"]
    args += [*extra, "--", *example("--steps", "5", "--compute-ms", "20")]
    return subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def secret(tmp_path):
    fd = os.open(tmp_path / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(24).hex() + "\n")


def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)
    s.settimeout(30)
    return s


def test_fake_answers_are_retried_until_the_controller_comes(tmp_path):
    secret(tmp_path)
    ports = (free_port(), free_port())
    fake = listener(ports[1])
    answers = []

    def serve():
        # 1: a refusal anyone could send; 2: a proof nobody could check
        for answer in (frame(JOIN_REJECT, bytes([len(EVIL)]) + EVIL),
                       frame(CHALLENGE, os.urandom(64))):
            c, _ = fake.accept()
            c.settimeout(10)
            c.recv(4096)  # the agent's hello
            c.sendall(answer)
            answers.append(answer[4])
            try:
                c.recv(4096)  # until the agent hangs up
            except OSError:
                pass
            c.close()
        fake.close()

    t = threading.Thread(target=serve)
    t.start()
    agent = node(1, tmp_path, ports, ("--join-timeout", "60"))
    procs = [agent]
    try:
        t.join(timeout=30)
        assert answers == [JOIN_REJECT, CHALLENGE], answers
        procs.append(node(0, tmp_path, ports, ("--join-timeout", "60")))
        _, err1 = agent.communicate(timeout=90)
        _, err0 = procs[1].communicate(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        fake.close()
    assert procs[1].returncode == 0, err0.decode(errors="replace")
    assert agent.returncode == 0, err1.decode(errors="replace")
    text = err1.decode(errors="replace")
    assert "refused before proving it knows the run's secret: " \
           "evil ?31m red ?2J done" in text, text
    assert b"\x9b" not in err1, err1
    assert "did not prove it knows the run's secret" in text, text
    assert "clock offset" in text or "joined" in text, text


def test_a_silent_listener_ends_at_the_join_timeout(tmp_path):
    secret(tmp_path)
    ports = (free_port(), free_port())
    fake = listener(ports[1])
    held = []

    def hold():
        try:
            c, _ = fake.accept()
            held.append(c)  # never answered
        except OSError:
            pass

    t = threading.Thread(target=hold)
    t.start()
    t0 = time.monotonic()
    agent = node(1, tmp_path, ports, ("--join-timeout", "3"))
    try:
        _, err = agent.communicate(timeout=20)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        t.join(timeout=5)
        for c in held:
            c.close()
        fake.close()
    took = time.monotonic() - t0
    text = err.decode(errors="replace")
    assert agent.returncode == 1, text
    assert held, "the agent never connected"
    assert f"could not join the controller at 127.0.0.1:{ports[1]} " \
           "within 3 s" in text, text
    assert 2.5 <= took < 6, took
