"""The agent links' shared secret never reaches what a run starts: a
health check that prints STEPSCOPE_TOKEN finds it unset, on node 0 and on
an agent (whose check's output crosses the network in a HEALTH frame), so
it is in no stderr and no health_check_failed event; and a process that
holds the secret is not dumpable (no core file carries it)."""
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

from conftest import STEPSCOPE, example
from jobs import free_port  # noqa: E402

SECRET = "the-shared-secret-of-this-test-0123456789"
# Prints the secret if the check can see it, then how printenv ended.
CHECK = "printenv STEPSCOPE_TOKEN; echo printenv-status-$?; exit 4"


def two_nodes(store, tmp_path, node0_extra=(), node1_extra=()):
    """A 2 x 1-rank job on loopback, the secret in STEPSCOPE_TOKEN; returns
    the (returncode, stderr) of both nodes."""
    env = dict(os.environ, STEPSCOPE_TOKEN=SECRET)
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port",
              str(free_port()), "--controller-port", str(free_port()), "-n",
              "1", "--job-id", "secret-test", "-q", "--join-timeout", "15"]
    cmd = ["--", *example("--steps", "20", "--compute-ms", "20")]
    node0 = subprocess.Popen(
        [str(STEPSCOPE), "run", "--node-rank", "0", "--db", str(store),
         "--no-http", "--log-dir", str(tmp_path / "l0"), *node0_extra,
         *common, *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.5)
    node1 = subprocess.Popen(
        [str(STEPSCOPE), "run", "--node-rank", "1",
         "--log-dir", str(tmp_path / "l1"), *node1_extra, *common, *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _, err0 = node0.communicate(timeout=120)
        _, err1 = node1.communicate(timeout=60)
    finally:
        for p in (node0, node1):
            if p.poll() is None:
                p.kill()
                p.communicate()
    return (node0.returncode, err0), (node1.returncode, err1)


def failed_events(store):
    con = sqlite3.connect(str(store))
    try:
        return [m for (m,) in con.execute(
            "SELECT message FROM events WHERE kind = 'health_check_failed'")]
    finally:
        con.close()


def test_node_0s_health_check_does_not_see_the_secret(store, tmp_path):
    (rc0, err0), (_, err1) = two_nodes(
        store, tmp_path, node0_extra=("--health-check", CHECK))
    assert rc0 == 1, err0
    assert "printenv-status-1" in err0, err0  # the check ran, saw nothing
    events = failed_events(store)
    assert events and all("printenv-status-1" in m for m in events), events
    for text in (err0, err1, *events):
        assert SECRET not in text


def test_an_agents_health_check_does_not_see_the_secret(store, tmp_path):
    (rc0, err0), (rc1, err1) = two_nodes(
        store, tmp_path, node1_extra=("--health-check", CHECK))
    assert rc1 == 1, err1
    assert "printenv-status-1" in err0, err0  # node 1's output, relayed
    events = failed_events(store)
    assert events and all("printenv-status-1" in m for m in events), events
    for text in (err0, err1, *events):
        assert SECRET not in text


def test_a_process_holding_the_secret_is_not_dumpable(tmp_path):
    """Node 0 waits for an agent that never comes: meanwhile its /proc
    files belong to root (the kernel's sign of a non-dumpable process; as
    root the test runs it as nobody so that this shows), and its
    environment no longer holds the secret."""
    env = dict(os.environ, STEPSCOPE_TOKEN=SECRET)
    user = {}
    home = tmp_path
    if os.geteuid() == 0:
        home = Path(tempfile.mkdtemp(prefix="stepscope-nobody-", dir="/tmp"))
        os.chown(home, 65534, 65534)
        user = {"user": 65534, "group": 65534}
        env["HOME"] = env["XDG_RUNTIME_DIR"] = str(home)
    store = home / "store.db"
    node0 = subprocess.Popen(
        [str(STEPSCOPE), "run", "--node-rank", "0", "--db", str(store),
         "--no-http", "--nnodes", "2", "--master-addr", "127.0.0.1",
         "--master-port", str(free_port()), "--controller-port",
         str(free_port()), "-n", "1", "--join-timeout", "30", "-q", "--",
         "/bin/true"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        **user)
    try:
        deadline = time.time() + 15
        while time.time() < deadline and not store.exists():
            time.sleep(0.05)
        assert store.exists(), node0.stderr.read() if node0.poll() else ""
        time.sleep(0.3)
        assert node0.poll() is None
        with open(f"/proc/{node0.pid}/environ", "rb") as f:
            environ = f.read()
        assert SECRET.encode() not in environ
        assert os.stat(f"/proc/{node0.pid}/environ").st_uid == 0
    finally:
        node0.kill()
        node0.communicate()
        if home != tmp_path:
            shutil.rmtree(home, ignore_errors=True)
