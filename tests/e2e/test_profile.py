"""On-demand profiling on real ranks (docs/debug.md#profiling): while a
DDP job runs under `stepscope run --auto`, `stepscope profile --ranks 0,1
--seconds 1` gets a torch.profiler trace from each rank; they are stored
and `stepscope trace` merges them with the steps, each aligned with its
rank's steps (the profile begins at a step boundary, so its clock marker
lies at the begin of one of that rank's steps).  Ranks that cannot profile
(a C program, no auto mode) are answered at once with why.
"""
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import SOURCE, STEPSCOPE, example, kill_quietly
from jobs import BUILD, job_args, stored_steps

TRAIN = SOURCE / "examples" / "ddp_train.py"
has_torch = importlib.util.find_spec("torch") is not None


def env():
    e = dict(os.environ)
    pkg = BUILD / "python"
    if not (pkg / "stepscope").is_dir():
        pkg = SOURCE / "python"
    e["PYTHONPATH"] = str(pkg) + (os.pathsep + e["PYTHONPATH"]
                                  if e.get("PYTHONPATH") else "")
    e["OMP_NUM_THREADS"] = "1"
    return e


def start(db, nprocs, cmd, extra=()):
    return subprocess.Popen(job_args(db, nprocs, cmd, extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env())


def wait_steps(db, n, proc, seconds=120):
    deadline = time.time() + seconds
    while stored_steps(db) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the job made no steps"
        time.sleep(0.2)


def profile(db, *args, timeout=120):
    return subprocess.run([str(STEPSCOPE), "profile", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not has_torch, reason="PyTorch is not installed")
def test_profile_ddp_ranks_and_merge(tmp_path):
    db = tmp_path / "store.db"
    job = start(db, 2, [sys.executable, str(TRAIN), "--steps", "100000",
                        "--samples", "1024"], ("--auto",))
    try:
        wait_steps(db, 5, job)
        out = profile(db, "--ranks", "0,1", "--seconds", "1")
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.splitlines()
        for rank in (0, 1):
            line = next(l for l in lines if l.startswith(f"rank {rank}: "))
            path = line.split(": ", 1)[1].split(" (on ")[0]
            assert path.endswith(f"rank{rank}-request1.json"), line
            assert os.path.isfile(path)
        assert "stepscope trace 1 -o FILE" in out.stdout
        # a second request finds the first one finished
        again = profile(db, "--ranks", "1", "--seconds", "0.5")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "rank1-request2.json" in again.stdout
    finally:
        kill_quietly(job.pid, 15)
        job.communicate(timeout=120)

    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT request_id, rank, status, duration_ms, "
                       "marker_ns IS NOT NULL FROM profiles ORDER BY 1, 2"
                       ).fetchall()
    con.close()
    assert rows == [(1, 0, "done", 1000, 1), (1, 1, "done", 1000, 1),
                    (2, 1, "done", 500, 1)]

    trace = tmp_path / "trace.json"
    out = subprocess.run([str(STEPSCOPE), "trace", "--db", str(db),
                          "--steps", "1:100000", "-o", str(trace)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3 torch.profiler traces merged" in out.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    groups = {e["pid"]: e["args"]["name"] for e in events
              if e.get("name") == "process_name" and e["ph"] == "M"}
    names = sorted(groups.values())
    assert names[:3] == ["rank 0 torch.profiler (request 1)",
                         "rank 1 torch.profiler (request 1)",
                         "rank 1 torch.profiler (request 2)"], names
    steps = [e for e in events if e.get("cat") == "step" and e["ph"] == "X"]
    assert steps
    for pid, name in groups.items():
        if "torch.profiler" not in name:
            continue
        rank = int(name.split()[1])
        mine = [e for e in events if e["pid"] == pid and e.get("ph") == "X"]
        assert any(e["name"].startswith("aten::") for e in mine), name
        marker = next(e for e in mine if e["name"] == "stepscope::clock")
        begins = [s["ts"] for s in steps if s["args"]["rank"] == rank]
        gap_ms = min(abs(float(marker["ts"]) - b) for b in begins) / 1000
        assert gap_ms < 20, f"{name}: marker {gap_ms:.1f} ms from a step"


def test_profile_rank_without_auto_mode(tmp_path):
    db = tmp_path / "store.db"
    job = start(db, 2, example("--steps", "100000", "--compute-ms", "5"))
    try:
        wait_steps(db, 3, job)
        t0 = time.time()
        out = profile(db, "--ranks", "0-1", "--seconds", "2")
        assert time.time() - t0 < 10  # answered at once, not timed out
        assert out.returncode == 1, out.stdout + out.stderr
        assert ("rank 0: unsupported: rank 0 cannot profile: it does not "
                "run under --auto") in out.stdout
        assert "rank 1: unsupported" in out.stdout
        bad = profile(db, "--ranks", "2", "--seconds", "1")
        assert bad.returncode == 1
        assert "rank 2 is out of range: the run has 2 ranks" in bad.stderr
    finally:
        kill_quietly(job.pid, 15)
        job.communicate(timeout=60)
