"""A controller that could not run for a while loses no step (a real
`stepscope run`, real rank processes of the C example, a real SQLite store):
stopped from outside with SIGSTOP for 3 s, as a process starved of CPU or
swapped out is, while its ranks go on at about 2 ms a step, their records
wait in their sockets; once it runs again it reads the backlogs in step
(ingest.c, "Reading in step"), so every step is finalized with every rank,
no record is refused as late and nothing is dropped.  Before, one rank's
whole backlog was read before the next one's, and the steps it outran were
finalized with the other ranks missing (a third of them in such a run).
Nor is the controller's own stop taken for the ranks' hang: stopped for
longer than the hang timeout, it says it could not run and judges no
silence of that time.
"""
import os
import signal
import subprocess
import time
from types import SimpleNamespace

from conftest import example
from jobs import Job, job_args, stored_steps

STEPS = 3000


def stop_the_controller(store, seconds, extra=()):
    """Runs the 4-rank job, stops its controller for SECONDS once 200
    steps are stored, and returns the ended job."""
    cmd = example("--steps", str(STEPS), "--compute-ms", "1")
    proc = subprocess.Popen(job_args(store, 4, cmd, extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.time() + 120
        while stored_steps(store) < 200 and time.time() < deadline:
            time.sleep(0.05)
        assert stored_steps(store) >= 200, "the job never got going"
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.communicate()
    return Job(SimpleNamespace(returncode=proc.returncode, stdout=out,
                               stderr=err), store)


def test_a_stopped_controller_loses_no_step(store):
    job = stop_the_controller(store, 3)
    assert job.returncode == 0, job.stderr
    report = job.report()
    steps = report["steps"]
    assert steps["count"] == STEPS, steps
    assert steps["with_missing_ranks"] == 0, steps
    late = [e for e in report["events"] if e["kind"] == "refused_records"]
    assert not late, late
    assert all(v == 0 for v in report["dropped"].values()), report["dropped"]
    assert all(r["steps"] == STEPS for r in report["ranks"]), report["ranks"]


def test_a_stopped_controller_is_no_hang(store):
    # 8 s stopped with a 3 s hang timeout: before, on waking it found every
    # rank silent for 8 s and stopped the healthy job on a hang (exit 124).
    job = stop_the_controller(store, 8, ("--hang-timeout", "3",
                                         "--on-hang", "stop"))
    assert job.returncode == 0, job.stderr
    assert "the controller could not run for" in job.stderr, job.stderr
    report = job.report()
    assert not [f for f in report["findings"] if f["kind"] == "hang"], \
        report["findings"]
    stalled = [e for e in report["events"] if e["kind"] == "controller_stalled"]
    assert len(stalled) == 1, report["events"]
    assert report["steps"]["with_missing_ranks"] == 0, report["steps"]
    # Ranks that finished while it was stopped had 1 s at exit to be read:
    # what did not fit in their sockets is lost, and that is said.
    cut = [e for e in report["events"] if e["kind"] == "ranks_cut_off"]
    if report["steps"]["count"] < STEPS:
        assert len(cut) == 1, report["events"]
        assert "exited without their last frames reaching the controller" \
            in job.stderr, job.stderr
    else:
        assert not cut, cut
