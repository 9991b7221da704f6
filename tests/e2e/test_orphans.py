"""Nothing a job starts outlives it, and a controller that dies leaves no
state that lies: a grandchild in a session of its own (`os.setsid()`) is
ended at a normal end and on Ctrl-C; after the controller is SIGKILLed its
ranks die, and so do their children (the job's watchdog: a grandchild in
the rank's process group everywhere, a setsid one where the job has a
cgroup), its run reads `interrupted`, and the next controller removes the
socket directory it left."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import STEPSCOPE, kill_quietly, wait_gone

# A rank (a shell) that starts a grandchild in a new session, which writes
# its pid to $PIDS/<rank> and sleeps; then the rank does THEN.
RANK = ("{py} -c 'import os, sys, time; os.setsid();"
        " open(sys.argv[1] + \".tmp\", \"w\").write(str(os.getpid()));"
        " os.rename(sys.argv[1] + \".tmp\", sys.argv[1]); time.sleep(1000)'"
        " \"$PIDS/$RANK\" &"
        " while [ ! -e \"$PIDS/$RANK\" ]; do sleep 0.02; done; {then}")


def rank_command(then):
    return ["/bin/sh", "-c", RANK.format(py=sys.executable, then=then)]


def run_env(tmp_path):
    """An environment whose socket directories go to tmp_path/runtime."""
    pids = tmp_path / "pids"
    runtime = tmp_path / "runtime"
    pids.mkdir()
    runtime.mkdir(mode=0o700)
    return dict(os.environ, PIDS=str(pids), XDG_RUNTIME_DIR=str(runtime)), \
        pids, runtime


def grandchildren(pids_dir, n, job, seconds=15.0):
    """The N grandchild pids once every one has written its file; else
    the failure with what JOB (ended here) printed."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        files = list(pids_dir.iterdir())
        if len([f for f in files if not f.name.endswith(".tmp")]) >= n:
            return [int((pids_dir / str(r)).read_text()) for r in range(n)]
        time.sleep(0.05)
    if job.poll() is None:
        job.kill()
    out, err = job.communicate(timeout=30)
    raise AssertionError(f"the grandchildren did not start: {files}; "
                         f"the job's exit status {job.returncode}, its output:\n"
                         f"{out[-2000:]}{err[-4000:]}")


def start(store, env, then, nprocs=2):
    return subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(store),
         "--grace", "2", "--", *rank_command(then)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def cgroup_expected():
    """Root on a machine with a cgroup v1 pids or freezer hierarchy: the
    job gets a cgroup (docs/launcher.md)."""
    return os.geteuid() == 0 and any(
        os.path.isfile(f"/sys/fs/cgroup/{c}/cgroup.procs")
        for c in ("pids", "freezer"))


def is_watchdog(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"__job-watchdog" in f.read()
    except OSError:
        return False


def children_of(parent):
    """The children of PARENT but its job watchdog."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == parent \
                        and not is_watchdog(int(entry)):
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def runs_status(store):
    out = subprocess.run([str(STEPSCOPE), "runs", "--db", str(store)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_setsid_grandchild_ends_with_a_normal_job(store, tmp_path):
    env, pids_dir, _ = run_env(tmp_path)
    job = start(store, env, "exit 0")
    strays = []
    try:
        strays = grandchildren(pids_dir, 2, job)
        out, err = job.communicate(timeout=60)
        assert job.returncode == 0, err
        assert wait_gone(strays, 5), "a setsid grandchild outlived the job"
        assert "ended 2 processes the ranks left behind" in err, err
    finally:
        for pid in strays:
            kill_quietly(pid)
        if job.poll() is None:
            job.kill()
            job.communicate()


def test_setsid_grandchild_ends_on_ctrl_c(store, tmp_path):
    env, pids_dir, _ = run_env(tmp_path)
    job = start(store, env, "exec sleep 1000")
    strays = []
    try:
        strays = grandchildren(pids_dir, 2, job)
        job.send_signal(signal.SIGINT)
        out, err = job.communicate(timeout=60)
        assert job.returncode != 0
        assert "stopping the ranks" in err
        assert wait_gone(strays, 5), "a setsid grandchild survived Ctrl-C"
    finally:
        for pid in strays:
            kill_quietly(pid)
        if job.poll() is None:
            job.kill()
            job.communicate()


def kill_controller(store, tmp_path):
    """Starts a job, SIGKILLs its controller once the ranks run; returns
    (environment, runtime dir).  The ranks must die (PDEATHSIG), and their
    setsid grandchildren too where the job has a cgroup."""
    env, pids_dir, runtime = run_env(tmp_path)
    job = start(store, env, "exec sleep 1000")
    strays = []
    try:
        strays = grandchildren(pids_dir, 2, job)
        ranks = children_of(job.pid)
        assert len(ranks) == 2, ranks
        assert len(list(runtime.iterdir())) == 1  # its socket directory
        job.kill()
        _, err = job.communicate(timeout=10)
        assert wait_gone(ranks, 10), "ranks outlived a SIGKILLed controller"
        if cgroup_expected():
            assert "no cgroup for the job" not in err, err
            assert wait_gone(strays, 5), \
                "a setsid grandchild outlived a SIGKILLed controller"
    finally:
        for pid in strays:
            kill_quietly(pid)
        if job.poll() is None:
            job.kill()
            job.communicate()
    return env, runtime


def test_killed_controller_run_is_interrupted_and_cleaned_up(store,
                                                             tmp_path):
    env, runtime = kill_controller(store, tmp_path)
    stale = list(runtime.iterdir())
    assert len(stale) == 1 and stale[0].name.startswith("stepscope-")
    # The next controller: marks run 1 interrupted, removes the directory.
    out = subprocess.run(
        [str(STEPSCOPE), "run", "-n", "1", "--db", str(store), "--",
         "/bin/true"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "1 earlier run of this store lost its controller" in out.stderr
    assert list(runtime.iterdir()) == [], "the stale socket directory stayed"
    con = sqlite3.connect(str(store))
    rows = con.execute("SELECT id, status, ended_at IS NOT NULL FROM runs "
                       "ORDER BY id").fetchall()
    events = con.execute("SELECT count(*) FROM events WHERE run_id = 1 AND "
                         "kind = 'interrupted'").fetchone()[0]
    con.close()
    assert rows == [(1, "interrupted", 1), (2, "succeeded", 1)], rows
    assert events == 1
    listing = runs_status(store)
    assert "interrupted" in listing and "running" not in listing, listing


def test_killed_controller_run_reads_interrupted_at_once(store, tmp_path):
    kill_controller(store, tmp_path)
    # No controller has opened the store since: the readers decide.
    listing = runs_status(store)
    assert "interrupted" in listing and "running" not in listing, listing
    report = subprocess.run([STEPSCOPE, "report", "--json", "--db", store],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["run"]["status"] == "interrupted"


def test_rank_children_die_with_a_killed_controller(store, tmp_path):
    """A rank's own children (a shell's background job, in the rank's
    process group) are gone within seconds of a SIGKILL of the controller,
    with or without a cgroup."""
    env, pids_dir, _ = run_env(tmp_path)
    rank = ("sleep 1000 & echo $! > \"$PIDS/$RANK.tmp\";"
            " mv \"$PIDS/$RANK.tmp\" \"$PIDS/$RANK\"; wait")
    job = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "2", "--db", str(store), "--",
         "/bin/sh", "-c", rank],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    children = []
    try:
        children = grandchildren(pids_dir, 2, job)
        job.kill()
        job.communicate(timeout=10)
        assert wait_gone(children, 5), \
            "a rank's child outlived a SIGKILLed controller"
    finally:
        for pid in children:
            kill_quietly(pid)
        if job.poll() is None:
            job.kill()
            job.communicate()
