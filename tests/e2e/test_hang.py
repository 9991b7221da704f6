"""Hangs on real ranks: a tiny gloo DDP job (tests/e2e/hang_job.py) under
`stepscope run --auto --hang-timeout 3 --on-hang stop`.  A rank asleep
forever at some step while the others block in the all-reduce, a rank
blocked in a C call that holds the GIL, a rank stopped with SIGSTOP, a
rank frozen by its cgroup's freezer, and a rank that skipped one
all_reduce are each named in one `hang` finding
within the timeout + 5 s, the skip as a collective mismatch; the stacks
stored with the finding show where the hung rank is (the stopped one
listed as stopped); --on-hang stop ends the job with status 124 and
leaves no process behind; clean jobs with normal jitter give no hang."""
import importlib.util
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import STEPSCOPE, Job, wait_gone
from jobs import descendants, job_args, rank_pid, stored_steps

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

JOB = Path(__file__).resolve().parent / "hang_job.py"
TIMEOUT_S = 3
HANG_EXIT = 124


def run(store, *script_args, extra=(), during=None):
    args = job_args(store, 3, ["/usr/bin/python3", str(JOB), *script_args],
                    ["--auto", "-q", "--hang-timeout", str(TIMEOUT_S), *extra])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    procs = []
    try:
        if during:
            during(proc)
        deadline = time.time() + 150
        while proc.poll() is None and time.time() < deadline:
            procs = sorted(set(procs) | set(descendants(proc.pid)))
            time.sleep(0.2)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    job = Job(subprocess.CompletedProcess(args, proc.returncode, out, err),
              store)
    return job, procs


def the_hang(job):
    hangs = job.findings("hang")
    assert len(hangs) == 1, (hangs, job.stderr)
    h = hangs[0]
    assert h["severity"] == "critical"
    ev = h["evidence"] if isinstance(h["evidence"], dict) else \
        json.loads(h["evidence"])
    assert ev["stalled_s"] <= TIMEOUT_S + 5, ev
    return h, ev


def stored_stacks(job):
    """The stacks stored with the run's hang finding: the document's rank
    objects by rank, and its merged groups."""
    st = job.report()["stacks"]
    assert st is not None and st["trigger"] == "hang", st
    doc = st["document"]
    return {r["rank"]: r for r in doc["ranks"]}, doc["merged"]["groups"]


def innermost(rank_obj):
    """The innermost frame of the rank's main (oldest) thread."""
    return rank_obj["threads"][-1]["frames"][-1]


def test_sleeping_rank_named_and_stop_leaves_nothing(store):
    job, procs = run(store, "--rank", "1", "--at", "10",
                     extra=["--on-hang", "stop"])
    assert job.returncode == HANG_EXIT, job.stderr
    h, ev = the_hang(job)
    assert h["ranks"] == [1], h
    assert "rank 1 is" in h["message"] and "ranks 0,2 are waiting in " \
        "all_reduce" in h["message"], h["message"]
    assert "stopped on a hang" in job.stderr
    ranks, groups = stored_stacks(job)
    assert groups[0]["ranks"] == "1", groups  # the outlier first
    assert "time.sleep" in (innermost(ranks[1]).get("code") or ""), ranks[1]
    assert all(ranks[r]["state"] == "ok" for r in (0, 2)), ranks
    assert wait_gone(procs, 10), procs  # no orphans


def test_rank_holding_the_gil_in_c_named_with_its_stack(store):
    job, procs = run(store, "--rank", "2", "--at", "8", "--fault", "gil",
                     extra=["--on-hang", "stop"])
    assert job.returncode == HANG_EXIT, job.stderr
    h, ev = the_hang(job)
    assert h["ranks"] == [2], h
    ranks, groups = stored_stacks(job)
    # the signal handler answers without the GIL the rank holds
    assert ranks[2]["state"] == "ok", ranks[2]
    assert innermost(ranks[2])["func"] == "hold_gil_forever", ranks[2]
    assert groups[0]["ranks"] == "2", groups
    assert wait_gone(procs, 10), procs


def rank_2_after_5_steps(store, proc):
    """Rank 2's pid once the job has stored 5 steps."""
    deadline = time.time() + 90
    while stored_steps(store) < 5 and time.time() < deadline:
        time.sleep(0.2)
    pid = rank_pid(proc.pid, 2)
    assert pid
    return pid


def test_sigstopped_rank_named(store):
    def stop_rank_2(proc):
        os.kill(rank_2_after_5_steps(store, proc), signal.SIGSTOP)

    job, procs = run(store, "--steps", "100000", "--step-ms", "5",
                     extra=["--on-hang", "stop"], during=stop_rank_2)
    assert job.returncode == HANG_EXIT, job.stderr
    h, ev = the_hang(job)
    assert h["ranks"] == [2], h
    # The host saw the stop: the message says what holds the rank.
    assert "rank 2 is stopped for " in h["message"], h["message"]
    assert "(its process is in state T: SIGSTOP or a job control stop)" \
        in h["message"], h["message"]
    ranks, _ = stored_stacks(job)
    assert ranks[2]["state"] == "stopped", ranks[2]
    assert "SIGSTOP" in (ranks[2]["why"] or "") or "stopped" in \
        (ranks[2]["why"] or ""), ranks[2]
    assert wait_gone(procs, 15), procs


FREEZER = Path("/sys/fs/cgroup/freezer")


def test_frozen_rank_named(store, tmp_path):
    """Rank 2 frozen by a cgroup's freezer (v1), as a paused container is:
    no signal says so, the host watch reads the freezer and the hang names
    it frozen.  Thawed after the finding, so that the stop can end it."""
    if not (FREEZER / "freezer.state").exists() and \
            not (FREEZER / "tasks").exists():
        pytest.skip("no v1 freezer controller mounted here")
    cg = FREEZER / f"stepscope-test-{tmp_path.name}"
    try:
        cg.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a freezer cgroup: {e}")

    def freeze_rank_2(proc):
        pid = rank_2_after_5_steps(store, proc)
        (cg / "cgroup.procs").write_text(f"{pid}\n")
        (cg / "freezer.state").write_text("FROZEN\n")
        time.sleep(TIMEOUT_S + 7)
        (cg / "freezer.state").write_text("THAWED\n")

    try:
        job, procs = run(store, "--steps", "100000", "--step-ms", "5",
                         extra=["--on-hang", "stop"], during=freeze_rank_2)
    finally:
        (cg / "freezer.state").write_text("THAWED\n")
        for _ in range(100):  # a rank being reaped may linger a moment
            for pid in (cg / "cgroup.procs").read_text().split():
                try:
                    (FREEZER / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:
                    pass
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert job.returncode == HANG_EXIT, job.stderr
    h, ev = the_hang(job)
    assert h["ranks"] == [2], h
    assert "rank 2 is frozen for " in h["message"], h["message"]
    assert "(its cgroup's freezer holds it: a paused container, or a " \
        "freeze from outside)" in h["message"], h["message"]
    assert wait_gone(procs, 15), procs


def test_skipped_all_reduce_is_a_mismatch(store):
    job, procs = run(store, "--steps", "20", "--rank", "2", "--at", "5",
                     "--fault", "skip", extra=["--on-hang", "stop"])
    assert job.returncode == HANG_EXIT, job.stderr
    h, ev = the_hang(job)
    assert ev["collective_mismatch"] is True, ev
    assert h["ranks"] == [2], h
    assert "different collectives" in h["message"], h["message"]
    ranks, _ = stored_stacks(job)
    assert "time.sleep" in (innermost(ranks[2]).get("code") or ""), ranks[2]
    assert wait_gone(procs, 10), procs


@pytest.mark.parametrize("attempt", range(3))
def test_clean_runs_have_no_hang(store, attempt):
    job, _ = run(store, "--steps", "60", "--step-ms", "30")
    assert job.returncode == 0, job.stderr
    assert job.findings("hang") == []
