"""The command line as a new user meets it (real `stepscope` processes,
real Python ranks, real SQLite):

  - `stepscope run -n 2 train.py` runs the script with the Python on PATH,
    as torchrun does, and says so; a torchrun command line
    (`--standalone --nproc_per_node=2 -m MODULE`, `--no-python`, `-n cpu`,
    a c10d rendezvous on one node, `--redirects`, `--tee` and
    `--local-ranks-filter`) runs as torchrun would run it, and its
    contradictions and values it cannot take are refused in one line;
  - a command that does not exist is refused before any rank starts, in
    one line, with no run recorded;
  - a mistyped option is one line with a "did you mean" and a --help
    pointer, prefixed `stepscope run:`;
  - the store's permission problems name the path, the operation and
    "Permission denied" (as root the commands run as `nobody` through
    setpriv, since root passes every permission check);
  - `make install PREFIX=DIR` installs a stepscope that runs an --auto job;
  - with two live jobs, `stepscope stacks` lists both and asks for one.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BUILD, SOURCE, STEPSCOPE

SCRIPT = ("import time, stepscope\n"
          "for i in range(3):\n"
          "    with stepscope.step(i):\n"
          "        time.sleep(0.01)\n")


def env(path_first="/usr/bin"):
    e = dict(os.environ)
    pkg = BUILD / "python"
    if not (pkg / "stepscope").is_dir():
        pkg = SOURCE / "python"
    e["PYTHONPATH"] = str(pkg)
    e["PATH"] = path_first + os.pathsep + e.get("PATH", "")
    return e


def test_py_script_runs_with_the_python_on_path(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db",
                          str(tmp_path / "s.db"), "--no-http", "train.py"],
                         capture_output=True, text=True, env=env(),
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "stepscope run: running train.py with /usr/bin/python3 (the " \
        "Python on PATH), as torchrun does" in out.stderr, out.stderr
    con = sqlite3.connect(str(tmp_path / "s.db"))
    (steps,), = con.execute("SELECT count(*) FROM steps").fetchall()
    con.close()
    assert steps == 3, out.stderr


def stored_steps(db):
    con = sqlite3.connect(str(db))
    (steps,), = con.execute("SELECT count(*) FROM steps").fetchall()
    con.close()
    return steps


def test_a_torchrun_command_line_runs_as_torchrun_would(tmp_path):
    (tmp_path / "trainmod.py").write_text(SCRIPT)
    db = tmp_path / "s.db"
    out = subprocess.run([str(STEPSCOPE), "run", "--standalone",
                          "--nproc_per_node=2", "--db", str(db), "--no-http",
                          "-m", "trainmod"],
                         capture_output=True, text=True, env=env(),
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "stepscope run: running module trainmod with /usr/bin/python3" \
        in out.stderr, out.stderr
    assert stored_steps(db) == 3, out.stderr
    # --no-python: a FILE.py with its own #! line runs as it is
    script = tmp_path / "direct.py"
    script.write_text("#!/usr/bin/python3\n" + SCRIPT)
    script.chmod(0o755)
    out = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db",
                          str(tmp_path / "d.db"), "--no-http", "--no-python",
                          str(script)],
                         capture_output=True, text=True, env=env(),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "the Python on PATH" not in out.stderr, out.stderr
    assert stored_steps(tmp_path / "d.db") == 3, out.stderr


TALKER = ("import os, sys, time, stepscope\n"
          "r = os.environ['RANK']\n"
          "print('out-' + r + '-' + os.environ['ROLE_NAME'], flush=True)\n"
          "print('err-' + r, file=sys.stderr, flush=True)\n"
          "for i in range(3):\n"
          "    with stepscope.step(i):\n"
          "        time.sleep(0.01)\n")


def test_torchruns_rendezvous_and_output_options_are_taken(tmp_path):
    """A one-node torchrun line with a c10d rendezvous, its monitor and
    start method, a role, and output redirected, teed and filtered runs:
    the console shows what torchrun's would, the logs hold everything."""
    (tmp_path / "talk.py").write_text(TALKER)
    logs = tmp_path / "logs"
    out = subprocess.run([str(STEPSCOPE), "run", "--nnodes=1",
                          "--nproc-per-node=3", "--rdzv-backend=c10d",
                          "--rdzv-endpoint=localhost:29400", "--rdzv-id=job7",
                          "--rdzv_conf", "join_timeout=900,read_timeout=60",
                          "--max-restarts=0", "--monitor-interval=0.5",
                          "--start-method=spawn", "--role=trainer",
                          "--local-addr=127.0.0.1", "--redirects", "3",
                          "--tee", "0:1", "--local-ranks-filter", "0,2",
                          "--log_dir", str(logs), "--db",
                          str(tmp_path / "s.db"), "--no-http", "talk.py"],
                         capture_output=True, text=True, env=env(),
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert stored_steps(tmp_path / "s.db") == 3, out.stderr
    # rank 0's stdout is teed; rank 1 is filtered out; rank 2 redirected
    assert "[rank 0] out-0-trainer\n" in out.stdout, out.stdout
    assert "out-1" not in out.stdout and "out-2" not in out.stdout, out.stdout
    assert "err-" not in out.stderr, out.stderr
    for r in range(3):
        log = (logs / f"rank-{r}.log").read_text()
        assert f"out-{r}-trainer\n" in log and f"err-{r}\n" in log, log


def test_without_n_one_rank_runs_as_under_torchrun(tmp_path):
    out = subprocess.run([str(STEPSCOPE), "run", "--db", str(tmp_path / "s.db"),
                          "--no-http", "--", "true"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert ": 1 rank, store" in out.stderr, out.stderr


@pytest.mark.parametrize("how", [["-n", "cpu"], ["PET_NPROC_PER_NODE=cpu"]])
def test_n_cpu_is_a_rank_per_cpu(tmp_path, how):
    """-n cpu, or a Kubeflow TrainJob's PET_NPROC_PER_NODE word."""
    e = dict(os.environ)
    args = how
    if how[0].startswith("PET_"):
        e["PET_NPROC_PER_NODE"] = how[0].split("=")[1]
        args = []
    out = subprocess.run([str(STEPSCOPE), "run", *args, "--db",
                          str(tmp_path / "s.db"), "--no-http", "--", "true"],
                         capture_output=True, text=True, env=e, timeout=120)
    assert out.returncode == 0, out.stderr
    n = os.cpu_count()
    assert f": {n} rank{'s' if n > 1 else ''}, store" in out.stderr, out.stderr


@pytest.mark.parametrize("args,said", [
    (["--standalone", "--nnodes", "2"],
     "stepscope run: --standalone is one node; --nnodes 2 asks for more\n"),
    (["-m", "--no-python"],
     "stepscope run: -m runs CMD with python -m, --no-python without "
     "Python: give one of them\n"),
    (["--redirects", "5"],
     "stepscope run: --redirects '5': torchrun's form is one of 0 (none), 1 "
     "(stdout), 2 (stderr), 3 (both) for every rank, or RANK:N,... per "
     "local rank\n"),
    (["--rdzv-backend", "zookeeper"],
     "stepscope run: --rdzv-backend zookeeper: torchrun's rendezvous "
     "backends are static, c10d, etcd and etcd-v2\n"),
    (["--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
      "etcd0:2379"],
     "stepscope run: --rdzv-backend etcd: the nodes meet at node 0's "
     "controller, not at an etcd server; give --node-rank K on each node "
     "and --master-addr (node 0's address)\n"),
    (["--local-ranks-filter", "0-1"],
     "stepscope run: --local-ranks-filter '0-1': local ranks joined by ',' "
     "(0,1,2)\n"),
])
def test_torchrun_flags_it_cannot_take_are_refused(tmp_path, args, said):
    """Contradictions and values torchrun would not take either: one line
    each, no run recorded."""
    out = subprocess.run([str(STEPSCOPE), "run", "-n", "2", *args, "--db",
                          str(tmp_path / "s.db"), "--", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr == said, out.stderr
    assert not (tmp_path / "s.db").exists()


def test_missing_command_is_refused_before_any_rank_starts(tmp_path):
    db = tmp_path / "s.db"
    t0 = time.monotonic()
    out = subprocess.run([str(STEPSCOPE), "run", "-n", "4", "--db", str(db),
                          "--no-http", "--", "stepscope-no-such-command"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 127, out.stderr
    assert out.stderr == ("stepscope run: cannot run "
                          "'stepscope-no-such-command': no such command on "
                          "PATH; no rank was started\n"), out.stderr
    assert not db.exists()  # nothing started, nothing recorded
    assert time.monotonic() - t0 < 5


def test_mistyped_option_is_one_line_with_a_suggestion(tmp_path):
    out = subprocess.run([str(STEPSCOPE), "run", "--atuo", "-n", "2", "--",
                          "true"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert out.stderr == ("stepscope run: unknown option '--atuo'; did you "
                          "mean --auto? (`stepscope run --help` lists the "
                          "options)\n"), out.stderr
    out = subprocess.run([str(STEPSCOPE), "reprot"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr == ("stepscope: unknown command 'reprot'; did you mean "
                          "report? (`stepscope --help` lists the "
                          "commands)\n"), out.stderr


def as_another_user(cmd):
    """CMD as a user the files do not belong to: `nobody` when we are root,
    else ourselves (the files are then made unwritable)."""
    if os.geteuid() != 0:
        return cmd
    if not shutil.which("setpriv"):
        pytest.skip("root without setpriv: cannot drop to another user")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            *cmd]


def test_permission_errors_name_path_operation_and_cause(tmp_path):
    # A directory every user can reach: pytest's own is private to us.
    top = Path(tempfile.mkdtemp(prefix="ss-perm-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        exe = top / "stepscope"
        shutil.copy(STEPSCOPE, exe)
        os.chmod(exe, 0o755)
        db = top / "theirs.db"
        made = subprocess.run([str(STEPSCOPE), "run", "-n", "1", "--db",
                               str(db), "--no-http", "-q", "--", "true"],
                              capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        for p in top.glob("theirs.db*"):
            if p.is_file():
                os.chmod(p, 0o444)
        ro = top / "ro"
        ro.mkdir()
        os.chmod(ro, 0o555)
        e = dict(os.environ, HOME=str(top))
        run = [str(exe), "run", "-n", "1", "--no-http", "--db"]
        out = subprocess.run(as_another_user([*run, str(db), "--", "true"]),
                             capture_output=True, text=True, env=e,
                             timeout=60)
        assert out.returncode != 0
        assert re.search(r"^stepscope run: cannot write the store "
                         + re.escape(str(db)) + r"(-wal|-shm)?: Permission "
                         r"denied \(.* is owned by \w+, mode 0444\)$",
                         out.stderr, re.M), out.stderr
        out = subprocess.run(as_another_user([*run, str(ro / "new.db"), "--",
                                              "true"]),
                             capture_output=True, text=True, env=e,
                             timeout=60)
        assert out.returncode != 0
        assert ("stepscope run: cannot create the store " + str(ro / "new.db")
                + ": Permission denied (its directory " + str(ro)
                + " is owned by") in out.stderr, out.stderr
        for p in top.glob("theirs.db*"):
            if p.is_file():
                os.chmod(p, 0o000 if os.geteuid() != 0 else 0o600)
        out = subprocess.run(as_another_user([str(exe), "report", "--db",
                                              str(db)]),
                             capture_output=True, text=True, env=e,
                             timeout=60)
        assert out.returncode != 0
        assert "stepscope report: cannot read the store " + str(db) in \
            out.stderr and "Permission denied" in out.stderr, out.stderr
    finally:
        for p in [top, *top.rglob("*")]:
            os.chmod(p, 0o700)
        shutil.rmtree(top, ignore_errors=True)


def test_make_install_with_prefix_runs_an_auto_job(tmp_path):
    prefix = tmp_path / "prefix"
    out = subprocess.run(["make", "-s", "-C", str(SOURCE), "install",
                          f"BUILD={BUILD}", f"PREFIX={prefix}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    exe = prefix / "bin" / "stepscope"
    assert exe.is_file() and (prefix / "include" / "stepscope.h").is_file()
    (tmp_path / "train.py").write_text(SCRIPT)
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)  # --auto finds the installed package itself
    out = subprocess.run([str(exe), "run", "-n", "1", "--auto", "-q",
                          "--no-http", "--db", str(tmp_path / "s.db"), "--",
                          "/usr/bin/python3", str(tmp_path / "train.py")],
                         capture_output=True, text=True, env=e, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3 steps finalized" in out.stderr, out.stderr
    # Without --auto, a script that imports stepscope finds the installed
    # package too, with no PYTHONPATH set.
    (tmp_path / "marked.py").write_text(
        "import stepscope\n"
        "for i in range(4):\n"
        "    with stepscope.step(i):\n"
        "        pass\n")
    out = subprocess.run([str(exe), "run", "-n", "2", "-q", "--no-http",
                          "--db", str(tmp_path / "s.db"), "--",
                          "/usr/bin/python3", str(tmp_path / "marked.py")],
                         capture_output=True, text=True, env=e, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "4 steps finalized" in out.stderr, out.stderr


def test_two_live_jobs_are_listed_and_one_asked_for(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import time, stepscope\n"
                      "for i in range(10 ** 6):\n"
                      "    with stepscope.step(i):\n"
                      "        time.sleep(0.05)\n")
    db = tmp_path / "s.db"
    procs = []
    try:
        for name in ("first", "second"):
            procs.append(subprocess.Popen(
                [str(STEPSCOPE), "run", "-n", "1", "-q", "--db", str(db),
                 "--http", "127.0.0.1:0", "--name", name, "--",
                 sys.executable, str(script)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env=env()))
            live = db.parent / (db.name + ".d") / "live"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and \
                    len(list(live.glob("run-*.json"))) < len(procs):
                time.sleep(0.2)
        out = subprocess.run([str(STEPSCOPE), "stacks", "--db", str(db)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0, out.stdout
        assert re.search(r"2 jobs are running: run 2 \(second, pid \d+\), "
                         r"run 1 \(first, pid \d+\); say which with its id "
                         r"or name \(RUN\), e\.g\. 2", out.stderr), out.stderr
        assert len(out.stderr.splitlines()) == 1, out.stderr
        out = subprocess.run([str(STEPSCOPE), "stacks", "--db", str(db),
                              "first"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("stacks of run 1"), out.stdout
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(2)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
