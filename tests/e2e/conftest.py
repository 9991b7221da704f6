"""Shared helpers for the end-to-end tests.

Every test runs real rank processes under `stepscope run` (the CLI built in
$STEPSCOPE_BUILD, default ./build) against a fresh SQLite store in a
temporary directory, and asserts on `stepscope report --json` (tests/jobs.py
runs the jobs).
"""
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jobs import BUILD, SOURCE, STEPSCOPE, Job, run_job  # noqa: E402,F401

EXAMPLE = BUILD / "examples" / "ss_allreduce"


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store.db"


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


def again_on_false_alarm(run, alarms):
    """RUN(attempt) for a clean job, and once more when ALARMS(its result)
    is not empty, which is then told as a warning with each alarm's message
    and evidence: a clean job's false alarms on a loaded machine are rare,
    not impossible (docs/accuracy.md, "Clean runs of the tests").  Returns
    the last result; two runs in a row with an alarm fail the test."""
    for attempt in (1, 2):
        result = run(attempt)
        found = alarms(result)
        if not found or attempt == 2:
            return result
        warnings.warn(f"a clean run had findings, run again: "
                      f"{[f['message'] for f in found]} "
                      f"{[f['evidence'] for f in found]}")
