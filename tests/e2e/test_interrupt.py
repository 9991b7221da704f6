"""A user's stop reads as one (real `stepscope run` processes, real Python
ranks that mark steps, the signal sent to stepscope's process group as a
terminal sends Ctrl-C, real SQLite):

  - Ctrl-C ends `stepscope run` with exit status 130 (SIGTERM with 143),
    the run and its attempt are stored `interrupted` whatever the ranks'
    exit codes: ranks that catch SIGTERM and exit 0 (a checkpoint on
    SIGTERM) do not turn the stop into a success;
  - ranks that stepscope's SIGTERM ended are `stopped_by_stepscope`, with
    `rank_stopped` events and no `rank_failed` ones;
  - interrupted runs are never `guard` baselines and never failures for
    the reliability section (no MTBF from user stops);
  - one stop delivered twice (`timeout` signals its child, then its whole
    process group) is one request: the ranks get their grace to save.
"""
import json
import os
import signal
import sqlite3
import subprocess
import time

from conftest import BUILD, SOURCE, STEPSCOPE

# The mode comes from a file, so that every run has the same command
# (guard compares runs of one fingerprint).
RANK = """\
import pathlib, signal, sys, time
import stepscope
mode = (pathlib.Path(sys.argv[0]).parent / "mode").read_text()
if mode == "exit0":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
if mode == "save":  # a checkpoint written on SIGTERM, taking a second
    def save(*a):
        time.sleep(1.0)
        (pathlib.Path(sys.argv[0]).parent /
         ("saved-" + __import__("os").environ["RANK"])).write_text("ok")
        sys.exit(0)
    signal.signal(signal.SIGTERM, save)
for i in range(40 if mode == "finite" else 10 ** 7):
    with stepscope.step(i):
        time.sleep(0.01)
"""


def env():
    e = dict(os.environ)
    pkg = BUILD / "python"
    if not (pkg / "stepscope").is_dir():
        pkg = SOURCE / "python"
    e["PYTHONPATH"] = str(pkg)
    return e


def rows(store, sql, *args):
    con = sqlite3.connect(str(store))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def steps_of_newest_run(store):
    try:
        return rows(store, "SELECT count(*) FROM steps WHERE run_id = "
                    "(SELECT max(id) FROM runs)")[0][0]
    except sqlite3.Error:
        return 0


def run_and_stop(tmp_path, store, mode, sig, name="stopme", send=None):
    """Runs 2 ranks of the script in MODE ("exit0": they exit 0 on SIGTERM;
    "die": SIGTERM kills them; "save": they take a second to save, then
    exit 0), sends SIG to stepscope's process group once steps are stored
    (or calls SEND(pid of stepscope) to stop it); returns (exit status,
    stderr)."""
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    (tmp_path / "mode").write_text(mode)
    before = steps_of_newest_run(store) if store.exists() else 0
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "2", "--db", str(store), "--no-http",
         "--grace", "5", "--name", name, "--",
         "/usr/bin/python3", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, env=env(), start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            n = steps_of_newest_run(store)
            if n >= 3 and n != before:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        if send:
            send(proc.pid)
        else:
            os.killpg(proc.pid, sig)  # the foreground group, as a terminal does
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def run_facts(store):
    (run_id, status, code), = rows(
        store, "SELECT id, status, exit_code FROM runs ORDER BY id DESC "
        "LIMIT 1")
    causes = [c for (c,) in rows(store, "SELECT cause FROM attempts "
                                 "WHERE run_id = ?", run_id)]
    states = [s for (s,) in rows(store, "SELECT state FROM ranks WHERE "
                                 "run_id = ? ORDER BY rank", run_id)]
    kinds = [k for (k,) in rows(store, "SELECT kind FROM events WHERE "
                                "run_id = ?", run_id)]
    return run_id, status, code, causes, states, kinds


def test_ctrl_c_with_ranks_that_exit_0_on_sigterm_is_interrupted(tmp_path):
    store = tmp_path / "store.db"
    rc, err = run_and_stop(tmp_path, store, "exit0", signal.SIGINT)
    assert rc == 130, (rc, err)
    _, status, code, causes, states, kinds = run_facts(store)
    assert status == "interrupted" and code == 130, (status, code, err)
    assert causes == ["interrupted"], causes
    assert states == ["exited", "exited"], states
    assert "rank_failed" not in kinds, kinds
    assert "was interrupted" in err, err


def test_sigterm_stops_ranks_that_are_then_stopped_not_failed(tmp_path):
    store = tmp_path / "store.db"
    rc, err = run_and_stop(tmp_path, store, "die", signal.SIGTERM)
    assert rc == 143, (rc, err)
    run_id, status, code, causes, states, kinds = run_facts(store)
    assert status == "interrupted" and code == 143, (status, code)
    assert causes == ["interrupted"], causes
    assert states == ["stopped_by_stepscope"] * 2, states
    assert "rank_failed" not in kinds and kinds.count("rank_stopped") == 2, \
        kinds
    out = subprocess.run([str(STEPSCOPE), "report", "--db", str(store),
                          str(run_id)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "stopped_by_stepscope" in out.stdout, out.stdout
    assert "failed" not in out.stdout.split("RANKS", 1)[1].split("\n\n")[0]


def test_interrupted_runs_are_no_failures_for_mtbf(tmp_path):
    store = tmp_path / "store.db"
    # Three stops of one name: the reliability section would count them as
    # failures (an MTBF of seconds) if they were any.
    for _ in range(3):
        rc, err = run_and_stop(tmp_path, store, "die", signal.SIGINT)
        assert rc == 130, (rc, err)
    rep = subprocess.run([str(STEPSCOPE), "report", "--db", str(store)],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    assert "RELIABILITY" not in rep.stdout and "MTBF" not in rep.stdout, \
        rep.stdout


def test_interrupted_runs_are_no_guard_baselines(tmp_path):
    store = tmp_path / "store.db"
    # Ranks that exit 0 on SIGTERM: three stops that once read as
    # successes, and so as baselines.
    for _ in range(3):
        rc, err = run_and_stop(tmp_path, store, "exit0", signal.SIGINT)
        assert rc == 130, (rc, err)
    script = tmp_path / "rank.py"
    (tmp_path / "mode").write_text("finite")
    done = subprocess.run(
        [str(STEPSCOPE), "run", "-n", "2", "--db", str(store), "--no-http",
         "-q", "--name", "stopme", "--", "/usr/bin/python3", str(script)],
        capture_output=True, text=True, env=env(), timeout=120)
    assert done.returncode == 0, done.stderr
    g = subprocess.run([str(STEPSCOPE), "guard", "--db", str(store),
                        "--json"], capture_output=True, text=True,
                       timeout=60)
    doc = json.loads(g.stdout)
    assert doc["run"] == 4 and doc["baseline"] == [], doc
    assert doc["left_out"].count("interrupted") == 3, doc


def test_a_stop_delivered_twice_leaves_the_ranks_their_grace(tmp_path):
    store = tmp_path / "store.db"

    def as_timeout_does(pid):
        # At its end `timeout` sends its signal to its child, then to its
        # whole process group, the child again included (here 0.1 s apart,
        # so that the kernel does not merge the two).
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.1)
        os.killpg(pid, signal.SIGTERM)

    rc, err = run_and_stop(tmp_path, store, "save", signal.SIGTERM,
                           send=as_timeout_does)
    assert rc == 143, (rc, err)
    assert "killing the ranks now" not in err, err
    for rank in (0, 1):
        assert (tmp_path / ("saved-%d" % rank)).exists(), err
    _, status, code, causes, states, _ = run_facts(store)
    assert status == "interrupted" and code == 143, (status, code, err)
    assert states == ["exited", "exited"], (states, err)
