"""A rank's recent steps across nodes (docs/multinode.md, "A rank's recent
steps"; docs/api.md, /api/runs/{id}/recent): two nodes of two ranks on
loopback, node 0 the controller with its HTTP server, node 1 an agent,
under --aggregate node and --aggregate rank.

While the job runs, GET /recent for a rank of node 1 is answered by its
agent (from "agent", node 1) and for a rank of node 0 by the controller
(from "controller", node 0): consecutive steps, the latest last, the
rank's own phases (rank 3 computes 40 ms more in its forward pass than
rank 2, and its rows say so).  Once the job has ended, every row the
agents and node 0 answered is the store's row of the same rank and step,
to the microsecond: the step time, the largest RSS and every phase.  A
rank outside the run is a 404, a bad query a 400, a run that is not live
a 404.  `stepscope report --rank R` of the running job shows the same
rows (its JSON's `live`, its text's last table); once the job has ended
it has none.  No process of the job is left."""
import importlib.util
import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import STEPSCOPE  # noqa: E402
from test_multinode import (LONG, Scenario, assert_nothing_left,  # noqa: E402
                            finish, spawn, stored_steps, train)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SLOW_RANK, SLOW_MS = 3, 40


def get(url):
    """(status, parsed JSON body) of GET URL."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def live_url(sc, procs, seconds=90):
    """The dashboard's URL and the run's id, from its live-run file."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, p.communicate()[1]
        files = list((sc.dir / "store.db.d" / "live").glob("run-*.json"))
        if files:
            info = json.loads(files[0].read_text())
            return info["url"], info["run_id"]
        time.sleep(0.2)
    raise AssertionError("no live-run file")


def rows_of(base, rid, rank, steps):
    status, doc = get(f"{base}api/runs/{rid}/recent?rank={rank}&steps={steps}")
    assert status == 200, doc
    return doc


def report_rank(sc, rank, *extra):
    out = subprocess.run([str(STEPSCOPE), "report", "--db", str(sc.db), "--rank",
                          str(rank), *extra], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def same_ms(ns, ms):
    """NS nanoseconds written as MS milliseconds to the microsecond."""
    return abs(ns / 1e6 - ms) <= 0.0005 + 1e-9


def stored(sc, rank, step):
    """The store's (step_ns, rss_bytes, phases) of RANK's STEP, or None."""
    con = sqlite3.connect(f"file:{sc.db}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT step_ns, rss_bytes, phases FROM rank_steps "
                          "WHERE rank = ? AND step = ?", (rank, step)).fetchone()
    finally:
        con.close()
    return row and (row[0], row[1], json.loads(row[2] or "{}"))


@pytest.mark.parametrize("mode", ["node", "rank"])
def test_a_rank_s_recent_steps_come_from_its_node(tmp_path, mode):
    sc = Scenario(tmp_path)
    cmd = train(*LONG, "--slow-rank", str(SLOW_RANK), "--slow-ms", str(SLOW_MS))
    argv0 = [a for a in sc.argv(0, cmd, ("--aggregate", mode)) if a != "--no-http"]
    p0 = spawn(None, 0, argv0, sc.env)
    p1 = spawn(None, 1, sc.argv(1, cmd), sc.env)
    procs = [p0, p1]
    answered = {}
    try:
        base, rid = live_url(sc, procs)
        deadline = time.monotonic() + 90
        while stored_steps(sc.db) < 30:
            assert time.monotonic() < deadline, "30 steps never came"
            for p in procs:
                assert p.poll() is None, p.communicate()[1]
            time.sleep(0.2)
        for rank in range(4):
            doc = rows_of(base, rid, rank, 20)
            node = rank // 2
            assert doc["node"] == node and doc["rank"] == rank, doc
            assert doc["from"] == ("controller" if node == 0 else "agent"), doc
            assert doc["capacity"] == 256 and doc["kept"] == 20, doc
            assert doc["recorded"] >= 20, doc
            steps = [r["step"] for r in doc["rows"]]
            assert steps == list(range(steps[0], steps[0] + 20)), steps
            assert all(r["attempt"] == 0 for r in doc["rows"]), doc["rows"]
            for r in doc["rows"]:
                assert {"forward", "backward", "optimizer"} <= set(r["phases"]), r
                assert r["step_ms"] > 0 and r["rss_bytes"] > 0, r
                assert r["phases_dropped"] == 0, r
            answered[rank] = doc["rows"]
        forward = {k: median([r["phases"]["forward"] for r in rows])
                   for k, rows in answered.items()}
        assert forward[SLOW_RANK] > forward[2] + SLOW_MS * 0.6, forward
        assert forward[SLOW_RANK] > forward[0] + SLOW_MS * 0.6, forward
        # more rows than a node keeps are not asked for: all it has
        assert rows_of(base, rid, 2, 1024)["kept"] <= 256
        # `report --rank` of the running job asks its controller too
        live = json.loads(report_rank(sc, SLOW_RANK, "--json"))["live"]
        assert live and live["from"] == "agent" and live["node"] == 1, live
        assert live["kept"] == 20 and live["rank"] == SLOW_RANK, live
        text = report_rank(sc, 0)
        assert "LATEST STEPS FROM ITS NODE (live, every step; ms; kept by the " \
            "controller; 20 of its" in text, text
        status, doc = get(f"{base}api/runs/{rid}/recent?rank=4")
        assert status == 404 and "not in the run (4 ranks)" in doc["error"], doc
        status, doc = get(f"{base}api/runs/{rid}/recent?rank=2&steps=0")
        assert status == 400, doc
        status, doc = get(f"{base}api/runs/{rid + 1}/recent?rank=2")
        assert status == 404 and "is not live here" in doc["error"], doc
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        finish(procs, timeout=60)
        assert_nothing_left(sc)
    assert json.loads(report_rank(sc, SLOW_RANK, "--json"))["live"] is None
    assert "LATEST STEPS FROM ITS NODE" not in report_rank(sc, SLOW_RANK)
    # every row answered is the store's row of the same rank and step
    for rank, rows in answered.items():
        for r in rows:
            row = stored(sc, rank, r["step"])
            assert row, f"rank {rank} step {r['step']} is not in the store"
            step_ns, rss, phases = row
            assert same_ms(step_ns, r["step_ms"]), (rank, r, row)
            assert rss == r["rss_bytes"], (rank, r, row)
            assert set(phases) == set(r["phases"]), (rank, r, row)
            assert all(same_ms(v, r["phases"][k]) for k, v in phases.items()), \
                (rank, r, row)
