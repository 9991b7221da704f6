"""Ctrl-C and SIGTERM during start-up waits (real `stepscope run`
processes; the C example's ranks): the controller acts within a second or
two and stores the run as interrupted, not as what the wait would have
ended in.

  - node 0 of a two-node job waits for an agent that never comes
    (--join-timeout 60): SIGINT ends the run at once; the attempt's cause
    is `interrupted`, node 1 is recorded as never joined because of the
    stop, and no `node_lost` failure is told;
  - a first health check `sleep 30`: SIGINT (and SIGTERM) kill the check,
    no rank starts, the run is stored `interrupted` with exit status 128 +
    the signal, and no health-check failure is recorded.
"""
import os
import signal
import sqlite3
import subprocess
import time

from conftest import STEPSCOPE, example
from jobs import free_port  # noqa: E402


def rows(store, sql, *args):
    con = sqlite3.connect(str(store))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def stop_and_time(proc, sig, after):
    """Sends SIG to PROC AFTER seconds; returns (seconds it took to end
    after the signal, stderr)."""
    time.sleep(after)
    assert proc.poll() is None, proc.communicate()[1]
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return time.monotonic() - t0, err


def test_ctrl_c_while_waiting_for_an_agent(tmp_path):
    token = tmp_path / "token"
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    store = tmp_path / "store.db"
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "--nnodes", "2", "--node-rank", "0",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "--controller-port", str(free_port()), "-n", "1", "--token-file",
         str(token), "--db", str(store), "--no-http", "--grace", "2",
         "--join-timeout", "60", "--",
         *example("--steps", "100000", "--compute-ms", "5")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    took, err = stop_and_time(proc, signal.SIGINT, 2)
    assert took < 3, (took, err)
    assert proc.returncode != 0, err
    assert "did not join" not in err, err
    (cause,), = rows(store, "SELECT cause FROM attempts")
    assert cause == "interrupted", (cause, err)
    (state, why), = rows(store, "SELECT state, lost_reason FROM nodes "
                         "WHERE node_rank = 1 ORDER BY rowid DESC LIMIT 1")
    assert state == "never_joined", state
    assert "stopped by Interrupt before it joined" in why, why
    kinds = [k for (k,) in rows(store, "SELECT kind FROM events")]
    assert "stop_requested" in kinds and "node_lost" not in kinds, kinds


def health_stopped_by(tmp_path, sig):
    store = tmp_path / f"store-{sig}.db"
    marker = f"{30 + sig}.{os.getpid()}"  # sleep's argument names this one
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "1", "--db", str(store), "--no-http",
         "--health-check", f"sleep {marker}", "--health-check-timeout",
         "60", "--", *example("--steps", "5")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    took, err = stop_and_time(proc, sig, 1.5)
    assert took < 2, (took, err)
    assert proc.returncode == 128 + sig, err
    assert "no rank was started" in err, err
    (status,), = rows(store, "SELECT status FROM runs")
    assert status == "interrupted", status
    (cause,), = rows(store, "SELECT cause FROM attempts")
    assert cause == "interrupted", cause
    kinds = [k for (k,) in rows(store, "SELECT kind FROM events")]
    assert "health_check_failed" not in kinds, kinds
    assert "rank_connected" not in kinds, kinds
    # The check itself is gone too.
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"],
                          capture_output=True, text=True).stdout.split()
    assert not left, left


def test_ctrl_c_during_the_first_health_check(tmp_path):
    health_stopped_by(tmp_path, signal.SIGINT)


def test_sigterm_during_the_first_health_check(tmp_path):
    health_stopped_by(tmp_path, signal.SIGTERM)
