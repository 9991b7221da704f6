"""Shared helpers for the Python package's tests.

The package is imported from PYTHONPATH (ctest sets it to the build's
python/ directory; from the top of the tree, PYTHONPATH=python works after
`make`).  Jobs run under the real controller, $STEPSCOPE_BUILD/stepscope
(default ./build), against a fresh store in a temporary directory, and the
tests assert on `stepscope report --json` and on the store's rank_steps rows.
"""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SOURCE = Path(os.environ.get("STEPSCOPE_SOURCE", HERE.parents[1]))
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"
PYTHON = sys.executable  # the ranks run with the tests' interpreter
SANITIZED = os.environ.get("STEPSCOPE_SANITIZED") == "1"


def clean_env(**extra):
    """This process's environment without any STEPSCOPE_* variable (so the
    recorder is disabled), plus EXTRA."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STEPSCOPE_")}
    env.update(extra)
    return env


class Job:
    """A finished `stepscope run`: status, output, report and store rows."""

    def __init__(self, proc, db):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.db = db

    def report(self):
        out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                              str(self.db)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def rank_steps(self):
        """{(step, rank): {"phases": {...}, "counts": {...}, "syncs": {...},
        "rss": int|None, "device": int|None}} from the store."""
        con = sqlite3.connect(str(self.db))
        cols = {r[1] for r in con.execute("PRAGMA table_info(rank_steps)")}
        counts = "phase_counts" if "phase_counts" in cols else "NULL"
        syncs = "syncs" if "syncs" in cols else "NULL"
        rows = {}
        for step, rank, phases, pc, sy, rss, dev in con.execute(
                "SELECT step, rank, phases, %s, %s, rss_bytes, device_bytes "
                "FROM rank_steps" % (counts, syncs)):
            rows[(step, rank)] = {
                "phases": json.loads(phases) if phases else {},
                "counts": json.loads(pc) if pc else {},
                "syncs": json.loads(sy) if sy else None,
                "rss": rss, "device": dev}
        con.close()
        return rows

    def results(self):
        """The RESULT {json} lines the ranks printed, by rank."""
        out = {}
        for line in self.stdout.splitlines():
            if "RESULT " in line:
                r = json.loads(line.split("RESULT ", 1)[1])
                out[r["rank"]] = r
        return out


def run_job(db, nprocs, cmd, extra=(), timeout=240, env=None):
    """Runs `stepscope run -n NPROCS --db DB [EXTRA] -- CMD`."""
    args = [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(db),
            *extra, "--", *cmd]
    proc = subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, env=env)
    return Job(proc, db)


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store.db"
