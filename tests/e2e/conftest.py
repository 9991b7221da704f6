"""Shared helpers for the end-to-end tests.

Every test runs real rank processes under `stepscope run` (the CLI built in
$STEPSCOPE_BUILD, default ./build) against a fresh SQLite store in a
temporary directory, and asserts on `stepscope report --json`.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("STEPSCOPE_SOURCE", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"
EXAMPLE = BUILD / "examples" / "ss_allreduce"


class Job:
    """A finished `stepscope run`: exit status, output and its store."""

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


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store.db"


def run_job(db, nprocs, cmd, extra=(), timeout=240, env=None):
    """Runs `stepscope run -n NPROCS [EXTRA] -- CMD` and waits for it."""
    args = [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(db),
            *extra, "--", *cmd]
    proc = subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, env=env)
    return Job(proc, db)


def example(*args):
    """The C example workload's command line."""
    return [str(EXAMPLE), *args]


def wait_gone(pids, seconds=10.0):
    """True once none of PIDS exists any more."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                # A zombie whose parent is gone is reaped by init soon.
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(")")[-1].split()[0] != "Z":
                        alive.append(pid)
            except (ProcessLookupError, FileNotFoundError):
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
