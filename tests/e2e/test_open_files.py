"""The open-file limit (docs/launcher.md#open-files): the controller holds
about a dozen descriptors per rank, so a run sizes its need before any
rank starts.  Under a hard limit too low for the ranks it refuses, before
launching anything, and says why; under a low soft limit with a higher
hard one it raises the soft limit (the ranks inherit it) and every rank's
telemetry arrives.  A run whose ranks never sent telemetry is not
reported as a plain success: the summary warns and an event says so."""
import json
import sqlite3
import subprocess

from conftest import EXAMPLE, STEPSCOPE

RANKS = 30


def run_limited(tmp_path, soft, hard, cmd, n=RANKS):
    db = tmp_path / "store.db"
    args = ["prlimit", f"--nofile={soft}:{hard}", str(STEPSCOPE), "run",
            "-n", str(n), "--db", str(db), "--no-http", "--", *cmd]
    return subprocess.run(args, capture_output=True, text=True, timeout=240,
                          cwd=tmp_path), db


def events(db, kind):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [m for (m,) in con.execute(
            "SELECT message FROM events WHERE kind = ?", (kind,))]
    finally:
        con.close()


def test_refused_before_launch_when_the_hard_limit_is_short(tmp_path):
    marker = tmp_path / "launched"
    out, db = run_limited(tmp_path, 256, 256,
                          ["sh", "-c", f"touch {marker}; exec {EXAMPLE} "
                           "--steps 20 --compute-ms 1"])
    assert out.returncode == 1, out.stderr
    assert ("stepscope run: 30 ranks on this node need about 488 open files "
            "in the controller (12 each and 128 of its own), but the hard "
            "open-file limit is 256: raise it") in out.stderr, out.stderr
    assert "nothing was launched" in out.stderr
    assert not marker.exists()  # no rank started
    assert not db.exists()      # no run recorded


def test_soft_limit_raised_and_every_rank_heard(tmp_path):
    limits = tmp_path / "limits"
    out, db = run_limited(tmp_path, 256, 8192,
                          ["sh", "-c", f"ulimit -n >> {limits}; exec "
                           f"{EXAMPLE} --steps 20 --compute-ms 1"])
    assert out.returncode == 0, out.stderr
    # 128 + 64 per rank, and the HTTP server's 1024 connections
    assert limits.read_text().split() == [str(128 + 64 * RANKS + 1024)] * RANKS
    assert "20 steps finalized" in out.stderr, out.stderr
    assert "warning" not in out.stderr, out.stderr
    assert events(db, "rank_never_connected") == []
    rep = json.loads(subprocess.run(
        [str(STEPSCOPE), "report", "--json", "--db", str(db)],
        capture_output=True, text=True, timeout=60).stdout)
    assert rep["steps"]["count"] == 20


def test_silent_ranks_are_not_a_plain_success(tmp_path):
    out, db = run_limited(tmp_path, 1024, 1024, ["true"], n=2)
    assert out.returncode == 0, out.stderr
    said = ("2 of 2 ranks never sent telemetry: the store holds no step of "
            "this run; the script does not call stepscope: add --auto")
    assert "stepscope: warning: " + said in out.stderr, out.stderr
    [event] = events(db, "ranks_silent")
    assert event.startswith(said), event
