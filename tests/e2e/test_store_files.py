"""Two stores in one directory keep their logs and live files apart, and
what a store owns (the store, its -wal/-shm, logs, live files and their
directories) is private to the user whatever the umask."""
import os
import sqlite3
import stat
import subprocess
import time

from conftest import STEPSCOPE


def start(db, name, lines, delay):
    """A one-rank job that prints NAME-1 .. NAME-LINES, DELAY s apart."""
    script = (f"i=1; while [ $i -le {lines} ]; do echo {name}-$i;"
              f" sleep {delay}; i=$((i+1)); done")
    return subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "1", "--db", str(db), "--name", name,
         "--", "/bin/sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        umask=0o022)


def top_once(db):
    out = subprocess.run([str(STEPSCOPE), "top", "--once", "--db", str(db)],
                         capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr


def wait_for(pred, seconds=15.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def log_of(db):
    """Rank 0's log, where the store says it is."""
    con = sqlite3.connect(str(db))
    (path,) = con.execute("SELECT log_path FROM ranks WHERE rank = 0").fetchone()
    con.close()
    with open(path) as f:
        return path, f.read()


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_two_stores_in_one_directory_do_not_mix(tmp_path):
    d = tmp_path / "d"
    a_db, b_db = d / "a.db", d / "b.db"
    a = start(a_db, "jobA", 60, 0.1)
    b = None
    try:
        assert wait_for(lambda: "jobA" in top_once(a_db)), top_once(a_db)
        b = start(b_db, "jobB", 10, 0.1)
        assert wait_for(lambda: "jobB" in top_once(b_db)), top_once(b_db)
        # Both run, both are run 1 of their store: each store shows its own.
        view = top_once(a_db)
        assert "jobA" in view and "jobB" not in view, view
        b.communicate(timeout=60)
        assert b.returncode == 0
        # B ended and removed its live file; A still runs and is found.
        view = top_once(a_db)
        assert a.poll() is None, "job A ended too early for this test"
        assert "jobA" in view, view
        a.communicate(timeout=60)
        assert a.returncode == 0
    finally:
        for p in (a, b):
            if p and p.poll() is None:
                p.kill()
                p.communicate()
    a_path, a_log = log_of(a_db)
    b_path, b_log = log_of(b_db)
    assert a_path != b_path
    assert a_log == "".join(f"jobA-{i}\n" for i in range(1, 61))
    assert b_log == "".join(f"jobB-{i}\n" for i in range(1, 11))
    assert a_path == str(d / "a.db.d" / "logs" / "run-1" / "rank-0.log")


def test_store_logs_and_live_files_are_private(tmp_path):
    d = tmp_path / "d"
    db = d / "s.db"
    job = start(db, "private", 30, 0.1)
    try:
        assert wait_for(lambda: list(d.rglob("run-1.json"))), "no live file"
        assert wait_for(lambda: os.path.exists(f"{db}-wal"))
        assert wait_for(lambda: list(d.rglob("rank-0.log")))
        # While the job runs, with a umask of 022: everything under d.
        seen = {p.name for p in d.rglob("*")}
        assert {"s.db", "s.db-wal", "s.db-shm", "run-1.json",
                "rank-0.log"} <= seen, seen
        assert mode(d) == 0o700
        for p in d.rglob("*"):
            want = 0o700 if p.is_dir() else 0o600
            assert mode(p) == want, f"{p}: {oct(mode(p))}"
        job.communicate(timeout=60)
        assert job.returncode == 0
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    path, _ = log_of(db)
    assert mode(path) == 0o600


STEPS = """
import time, stepscope
for _ in range(400):
    with stepscope.step():
        time.sleep(0.01)
"""


def test_a_store_removed_during_the_run_is_saved_again(tmp_path):
    # An `rm` of the store while a run records into it: the run says so at
    # once, goes on, and writes what the store held back to its path at
    # the end (beside it when another file took the name); nothing is
    # lost, and the report tells it.
    from test_ddp import ddp_env, python_cmd
    from jobs import stored_steps
    script = tmp_path / "steps.py"
    script.write_text(STEPS)
    for other_file in (False, True):
        db = tmp_path / f"s{int(other_file)}.db"
        proc = subprocess.Popen(
            [str(STEPSCOPE), "run", "-n", "2", "--db", str(db), "--no-http",
             "--", *python_cmd(script)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=ddp_env())
        assert wait_for(lambda: stored_steps(db) >= 20, 60)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{db}{suffix}")
            except FileNotFoundError:
                pass
        if other_file:  # another store takes the name meanwhile
            sqlite3.connect(str(db)).execute("CREATE TABLE x(y)").connection.close()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "was removed or replaced while this run records into it" in err
        saved = f"{db}.saved-1" if other_file else str(db)
        assert f"this run included, was saved again to {saved}\n" in err, err
        assert mode(saved) == 0o600
        con = sqlite3.connect(saved)
        steps = con.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        kinds = [k for (k,) in con.execute("SELECT kind FROM events")]
        con.close()
        assert steps == 400, steps
        assert "store_moved" in kinds, kinds
        if other_file:  # the file that took the name is left as it was
            tables = [t for (t,) in sqlite3.connect(str(db)).execute(
                "SELECT name FROM sqlite_master")]
            assert tables == ["x"], tables
