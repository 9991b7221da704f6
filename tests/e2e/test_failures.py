"""Ranks that crash, never connect, or are interrupted: the launcher names
the culprit, the steps it missed are finalized with it missing, and no rank
outlives the job; a rank that left a DDP job early is named before the rank
that failed on it."""
import os
import re
import signal
import subprocess
import time

from conftest import SOURCE, STEPSCOPE, example, kill_quietly, run_job, wait_gone
from test_ddp import ddp_env, python_cmd, sanitizer_runtime


def test_rank_crash_is_named_with_its_step(store):
    job = run_job(store, 3, example("--steps", "200", "--compute-ms", "3",
                                    "--crash", "1:25"))
    assert job.returncode == 3, job.stderr
    err = job.stderr
    assert "rank 1" in err
    assert "rank 1 failed first: exited with code 3" in err, err
    # The failure message names its last step (24 or close to it).
    assert "last step: 24" in err, err
    report = job.report()
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert ranks[1]["state"] == "failed"
    assert ranks[1]["exit_code"] == 3
    assert 20 <= ranks[1]["last_step"] <= 25
    assert report["run"]["exit_code"] == 3
    # Steps after the crash that other ranks finished have rank 1 missing,
    # never a zero.
    assert report["steps"]["count"] >= 20
    # Why it failed stays in the store: the summary's lines and the rank's
    # last output line.
    failure = [e["message"] for e in report["events"] if e["kind"] == "failure"]
    assert len(failure) == 1, report["events"]
    assert failure[0].startswith("rank 1 failed first: exited with code 3"), \
        failure
    assert failure[0].endswith("| last line: ss_allreduce: rank 1: injected "
                               "crash at step 25"), failure
    # ... and the text report's header says it under the status.
    text = subprocess.run([str(STEPSCOPE), "report", "--db", str(store)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "\n  why         rank 1 failed first: exited with code 3 (pid " \
        in text, text
    assert "\n              last line: ss_allreduce: rank 1: injected crash " \
        "at step 25\n" in text, text
    assert "the other ranks were stopped" not in text.split("\n\n")[0]


def test_rank_that_never_connects_is_missing(store):
    job = run_job(store, 3, example("--steps", "60", "--compute-ms", "3",
                                    "--no-telemetry", "2"),
                  extra=("--connect-timeout", "2"))
    assert job.returncode == 0, job.stderr
    report = job.report()
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert ranks[2]["state"] in ("never_connected", "exited")
    assert ranks[2]["last_step"] in (None, -1)
    # The other two ranks' steps were finalized nevertheless.
    assert report["steps"]["count"] >= 55
    assert any(e["kind"] == "rank_never_connected"
               for e in report.get("events", [])) or "never" in job.stderr


def test_ctrl_c_stops_every_rank(store):
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "3", "--db", str(store), "--grace", "2",
         "--", *example("--steps", "100000", "--compute-ms", "2")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    pids = rank_pids(proc.pid)
    assert len(pids) == 3, pids
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert wait_gone(pids), "ranks survived Ctrl-C"
    assert "stopping the ranks" in err


def test_second_ctrl_c_kills_at_once_and_says_so(store):
    # Ranks that ignore SIGTERM would need the 10 s grace period; a second
    # Ctrl-C kills them at once, and the summary says that, not that the
    # grace period ran out.
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "3", "--db", str(store), "--grace", "10",
         "--no-http", "--", "/bin/sh", "-c",
         'trap "" TERM; exec "$0" "$@"',
         *example("--steps", "100000", "--compute-ms", "2")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    pids = rank_pids(proc.pid)
    assert len(pids) == 3, pids
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None, "the ranks ignored SIGTERM; still running"
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.time() - t0 < 5, err
    assert wait_gone(pids), "ranks survived a second Ctrl-C"
    assert proc.returncode == 128 + signal.SIGINT, err  # a user stop: 130
    assert "the job was stopped: stopped by Interrupt" in err, err
    assert "3 were killed at once with SIGKILL on a second Ctrl-C" in err, err
    assert "grace period" not in err, err


def test_no_orphans_when_controller_is_killed(store):
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "3", "--db", str(store), "--",
         *example("--steps", "100000", "--compute-ms", "2")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    pids = rank_pids(proc.pid)
    assert len(pids) == 3, pids
    proc.kill()
    proc.wait(timeout=10)
    try:
        assert wait_gone(pids), "ranks outlived a SIGKILLed controller"
    finally:
        for pid in pids:
            kill_quietly(pid)
    # The store the killed controller was writing still opens.
    out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                          str(store)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def rank_pids(parent):
    """The pids of the rank processes started by controller PARENT."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(fields[1]) == parent and b"ss_allreduce" in cmd:
            pids.append(int(entry))
    return pids


def failure_message(job):
    """The message of the job's run's one `failure` event."""
    failure = [e for e in job.report()["events"] if e["kind"] == "failure"]
    assert len(failure) == 1, failure
    return failure[0]["message"]


TEARDOWN_ABORT = """
import os, sys
import torch                # auto mode instruments a torch job
import stepscope
class AbortsAtTeardown:
    def __del__(self):
        os.abort()          # as torch 1.13's gloo teardown can
keep = AbortsAtTeardown()   # dropped while the interpreter shuts down
with stepscope.step():
    pass
if len(sys.argv) > 1:
    os.abort()              # inside the script: a real failure
"""


def test_abort_in_teardown_after_the_script_keeps_its_status(store, tmp_path):
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN_ABORT)
    job = run_job(store, 2, python_cmd(script), extra=("--auto",))
    assert job.returncode == 0, job.stderr
    assert "aborted while the interpreter shut down" in job.stderr
    failed = run_job(store, 2, python_cmd(script, "abort"), extra=("--auto",))
    assert failed.returncode == 128 + signal.SIGABRT, failed.stderr


SEGFAULT = """
import ctypes, os, time
def forward(step):
    if os.environ["RANK"] == "1" and step == 20:
        ctypes.string_at(0)  # a crash in native code
for step in range(200):
    forward(step)
    time.sleep(0.005)
"""


def test_a_segfault_shows_where_and_is_stored(store, tmp_path):
    # The ranks run with PYTHONFAULTHANDLER=1: a rank that dies of SIGSEGV
    # prints its Python stack, which the summary quotes and the store keeps.
    script = tmp_path / "segv.py"
    script.write_text(SEGFAULT)
    job = run_job(store, 2, python_cmd(script))
    assert "[rank 1] Fatal Python error: Segmentation fault" in job.stderr
    if sanitizer_runtime():
        # the sanitizer's runtime in the rank ends it its own way after
        # faulthandler's dump, and fills the last lines with its report
        assert job.returncode != 0, job.stderr
        return
    assert job.returncode == 128 + signal.SIGSEGV, job.stderr
    assert "rank 1 failed first: killed by signal SIGSEGV" in job.stderr
    failure = failure_message(job)
    assert "Fatal Python error: Segmentation fault; File " in failure
    assert 'segv.py", line 5 in forward < File ' in failure, failure


UNEVEN = """
import os, time, stepscope
steps = 120
if os.environ["RANK"] == "1":
    steps = int(os.environ.get("RANK1_STEPS", "40"))
for _ in range(steps):
    with stepscope.step():
        time.sleep(0.003)
"""


def test_a_rank_that_ended_early_is_noted(store, tmp_path):
    # A job that succeeds although rank 1 stopped after 40 of 120 steps:
    # the summary and the store say the later steps are without it.
    script = tmp_path / "uneven.py"
    script.write_text(UNEVEN)
    job = run_job(store, 3, python_cmd(script), env=ddp_env())
    assert job.returncode == 0, job.stderr
    assert "stepscope: note: rank 1 stopped stepping at step 39 while the " \
        "others went on to step 119: steps 40 to 119 are finalized " \
        "without it." in job.stderr, job.stderr
    early = [e for e in job.report()["events"]
             if e["kind"] == "ranks_ended_early"]
    assert len(early) == 1 and early[0]["rank"] == 1, early
    # Even ranks: no note.
    even = run_job(store, 3, python_cmd(script),
                   env={**ddp_env(), "RANK1_STEPS": "120"})
    assert even.returncode == 0, even.stderr
    assert "stopped stepping at step" not in even.stderr, even.stderr


def test_a_rank_that_left_a_ddp_job_is_named_before_the_rank_that_failed(store):
    # Rank 1 of a real DDP job exits with status 0 at the start of step 20
    # (its loop ended early); the others' next all-reduce fails on the
    # closed connection.  The rank that failed first says a peer went away,
    # so the summary, the run's `why` and its failure event begin with the
    # rank that left; the job's status is the failed rank's.  Rank 1's
    # interpreter closes its sockets before it ends: on a loaded machine a
    # rank fails on them before rank 1's process has exited, and the stop
    # ends it; its script had ended, which its recorder said.
    cmd = python_cmd(SOURCE / "examples" / "ddp_train.py", "--steps", "40",
                     "--leave-rank", "1", "--leave-step", "20")
    job = run_job(store, 3, cmd, extra=("--auto",), env=ddp_env(), timeout=180)
    assert job.returncode == 1, job.stderr
    assert re.search(r"stepscope: rank 1 left the job early: (it had exited "
                     r"with status 0|its script had ended) [0-9.]+ s before "
                     r"rank [02] failed", job.stderr), job.stderr
    assert "(last step: 19) while 2 other ranks still ran" in job.stderr, job.stderr
    failure = failure_message(job)
    assert failure.startswith("rank 1 left the job early"), failure
    assert " failed first: exited with code 1" in failure, failure


LEAVES_SLOWLY = """
import sys, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
class SlowTeardown:
    def __del__(self):                # while the interpreter shuts down,
        dist.destroy_process_group()  # after the script's end: its sockets
        time.sleep(30)                # close, and its process goes on
t = torch.ones(1)
for step in range(40):
    if dist.get_rank() == 1 and step == 20:
        keep = SlowTeardown()
        sys.exit(0)
    dist.all_reduce(t)
    time.sleep(0.01)
"""


def test_a_rank_still_exiting_after_it_left_is_named(store, tmp_path):
    # Rank 1's script ends with status 0 at step 20, and its process goes
    # on exiting after its sockets closed: the others fail on the lost peer
    # before it has exited, and the stop ends it.  Its recorder said
    # goodbye when its script ended, so the summary still begins with it.
    script = tmp_path / "leaves_slowly.py"
    script.write_text(LEAVES_SLOWLY)
    started = time.monotonic()
    job = run_job(store, 3, python_cmd(script), extra=("--auto",),
                  env=ddp_env(), timeout=120)
    assert job.returncode == 1, job.stderr
    assert time.monotonic() - started < 25, job.stderr  # not its 30 s
    assert re.search(r"stepscope: rank 1 left the job early: its script had "
                     r"ended [0-9.]+ s before rank [02] failed, its process "
                     r"still exiting", job.stderr), job.stderr
    assert "ended on SIGTERM" in job.stderr, job.stderr
    failure = failure_message(job)
    assert failure.startswith("rank 1 left the job early"), failure