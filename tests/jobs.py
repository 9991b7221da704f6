"""Running `stepscope run` jobs from tests and reading what they left.

Shared by the end-to-end tests (tests/e2e) and the Python package's tests
(python/tests), whose conftest.py files put this folder on sys.path.  The
CLI is $STEPSCOPE_BUILD/stepscope (default ./build).
"""
import json
import os
import sqlite3
import subprocess
from pathlib import Path

SOURCE = Path(os.environ.get("STEPSCOPE_SOURCE", Path(__file__).resolve().parents[1]))
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"


class Job:
    """A finished `stepscope run`: exit status, output, report and store."""

    def __init__(self, proc, db):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.db = db

    def report(self, run=None):
        args = [str(STEPSCOPE), "report", "--json", "--db", str(self.db)]
        if run is not None:
            args.append(str(run))
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def findings(self, kind=None):
        fs = self.report()["findings"]
        return [f for f in fs if kind is None or f["kind"] == kind]

    def rank_steps(self):
        """{(step, rank): {"phases": {...}, "counts": {...}, "syncs": {...},
        "self": {...} | None, "rss": int|None, "device": int|None}} from the
        store; "self" has the self time of every phase (the store keeps
        only those that differ from the phase's time), None when the rank
        recorded none."""
        con = sqlite3.connect(str(self.db))
        rows = {}
        for step, rank, phases, pc, sy, ps, rss, dev in con.execute(
                "SELECT step, rank, phases, phase_counts, syncs, phase_self, "
                "rss_bytes, device_bytes FROM rank_steps"):
            phases = json.loads(phases) if phases else {}
            own = None
            if ps is not None:
                own = dict(phases)
                own.update(json.loads(ps))
            rows[(step, rank)] = {
                "phases": phases,
                "counts": json.loads(pc) if pc else {},
                "syncs": json.loads(sy) if sy else None,
                "self": own, "rss": rss, "device": dev}
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
    """Runs `stepscope run -n NPROCS --db DB [EXTRA] -- CMD` and waits for
    it."""
    args = [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(db),
            *extra, "--", *cmd]
    proc = subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, env=env)
    return Job(proc, db)
