"""Readers never need write access (docs/store.md, "Reading").

`report`, `runs` and `trace` read a store the user may read but not write
(a 0644 file in a 0755 directory of another user) and a store on a
read-only mount, where SQLite cannot create the WAL index beside the file.
A write-ahead log left behind by a writer that stopped is refused with a
message naming `stepscope upgrade`, which folds it in.  The tests that
switch user or mount need root; they are skipped without it."""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import STEPSCOPE, example, run_job

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to switch user and mount")


@pytest.fixture(scope="module")
def shared():
    """A finished run's store, 0644 in a 0755 directory of its owner."""
    base = Path(tempfile.mkdtemp(prefix="stepscope-ro-", dir="/tmp"))
    os.chmod(base, 0o755)
    db = base / "x.db"
    job = run_job(db, 2, example("--steps", "30", "--compute-ms", "1"))
    assert job.returncode == 0, job.stderr
    for leftover in ("x.db-wal", "x.db-shm"):
        assert not (base / leftover).exists()
    os.chmod(db, 0o644)
    yield db
    shutil.rmtree(base)


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def stepscope_as_nobody(*args):
    return subprocess.run(NOBODY + [str(STEPSCOPE), *args],
                          capture_output=True, text=True, timeout=60)


def in_read_only_mount(directory, script):
    """Runs SCRIPT (sh) with DIRECTORY bind-mounted read-only over itself,
    in a private mount namespace."""
    d = str(directory)
    return subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f'mount --bind "{d}" "{d}" && mount -o remount,ro,bind "{d}" "{d}"'
         f' && {script}'],
        capture_output=True, text=True, timeout=60)


def require_mounts():
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here")


@needs_root
def test_a_user_who_cannot_write_reads_the_store(shared):
    if stepscope_as_nobody("--version").returncode != 0:
        pytest.skip(f"{STEPSCOPE} is not executable by an unprivileged user")
    before = digest(shared)
    listing = sorted(os.listdir(shared.parent))

    rep = stepscope_as_nobody("report", "--json", "--db", str(shared))
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["run"]["status"] == "succeeded"
    assert doc["steps"]["count"] == 30

    runs = stepscope_as_nobody("runs", "--json", "--db", str(shared))
    assert runs.returncode == 0, runs.stderr
    assert [r["steps"] for r in json.loads(runs.stdout)["runs"]] == [30]

    text = stepscope_as_nobody("report", "--db", str(shared))
    assert text.returncode == 0, text.stderr
    assert "30 finalized" in text.stdout

    tr = stepscope_as_nobody("trace", "--db", str(shared), "-o", "-")
    assert tr.returncode == 0, tr.stderr
    assert json.loads(tr.stdout)["traceEvents"]

    # Nothing was written: the file is the same and nothing was added.
    assert digest(shared) == before
    assert sorted(os.listdir(shared.parent)) == listing


@needs_root
def test_a_store_the_user_may_not_read_is_named(shared, tmp_path):
    private = Path(tempfile.mkdtemp(prefix="stepscope-ro-", dir="/tmp"))
    try:
        os.chmod(private, 0o755)
        db = private / "x.db"
        shutil.copy(shared, db)
        os.chmod(db, 0o600)
        rep = stepscope_as_nobody("report", "--db", str(db))
        assert rep.returncode == 1
        assert rep.stderr == (f"stepscope report: cannot read the store {db}: "
                              f"Permission denied ({db} is owned by root, "
                              f"mode 0600)\n"), rep.stderr
    finally:
        shutil.rmtree(private)


@needs_root
def test_a_store_on_a_read_only_mount_is_read(shared):
    require_mounts()
    before = digest(shared)
    out = in_read_only_mount(
        shared.parent,
        f'"{STEPSCOPE}" report --json --db "{shared}" && echo ===== && '
        f'"{STEPSCOPE}" runs --db "{shared}"')
    assert out.returncode == 0, out.stderr
    report, runs = out.stdout.split("=====\n")
    assert json.loads(report)["steps"]["count"] == 30
    assert "succeeded" in runs
    assert digest(shared) == before


def leave_a_write_ahead_log(db, name):
    """Renames run 1 in a process that dies without closing the store, so
    that the change stays in DB-wal (with its -shm index)."""
    code = ("import os, sqlite3, sys\n"
            "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "con.execute('PRAGMA wal_autocheckpoint = 0')\n"
            "con.execute('UPDATE runs SET name = ? WHERE id = 1',"
            " (sys.argv[2],))\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(db), name], check=True)
    assert Path(f"{db}-wal").stat().st_size > 0


@needs_root
def test_a_left_over_log_is_read_or_named(shared, tmp_path):
    require_mounts()
    d = tmp_path / "copy"
    d.mkdir()
    db = d / "x.db"
    shutil.copy(shared, db)
    leave_a_write_ahead_log(db, "renamed")

    # With its -shm index beside it, SQLite reads the log read-only.
    out = in_read_only_mount(d, f'"{STEPSCOPE}" runs --json --db "{db}"')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["runs"][0]["name"] == "renamed"

    # Without it, the reader cannot index the log: it says what to run.
    os.unlink(f"{db}-shm")
    out = in_read_only_mount(d, f'"{STEPSCOPE}" report --db "{db}"')
    assert out.returncode == 1
    assert "write-ahead log" in out.stderr
    assert f"stepscope upgrade --db {db}" in out.stderr

    up = subprocess.run([str(STEPSCOPE), "upgrade", "--db", str(db)],
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stderr
    assert not Path(f"{db}-wal").exists()
    out = in_read_only_mount(d, f'"{STEPSCOPE}" runs --json --db "{db}"')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["runs"][0]["name"] == "renamed"


def test_upgrade_migrates_an_older_store_and_creates_none(shared, tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(shared, db)
    con = sqlite3.connect(db)
    # Version 2: without what later versions added (metrics, the name
    # limits, the fingerprint, self time, the host evidence, the nodes, the
    # stacks, the profiles, the vectors).
    con.executescript(
        "DROP TABLE value_labels;" "DROP TABLE rank_values;"
        "ALTER TABLE runs DROP COLUMN dropped_vectors;"
        "DROP TABLE profiles;"
        "DROP TABLE nodes;" "DROP TABLE stack_snapshots;" +
        "".join(f"ALTER TABLE attempts DROP COLUMN {c};" for c in (
            "ended_at", "cause", "first_step", "last_step",
            "resumed_from")) +
        "ALTER TABLE runs DROP COLUMN fingerprint;"
        "ALTER TABLE rank_steps DROP COLUMN metrics;"
        "ALTER TABLE ranks DROP COLUMN names_over_limit;"
        "ALTER TABLE ranks DROP COLUMN values_over_limit;"
        "ALTER TABLE rank_steps DROP COLUMN phase_self;"
        "ALTER TABLE step_phases DROP COLUMN self_n;"
        "ALTER TABLE step_phases DROP COLUMN self_min;"
        "ALTER TABLE step_phases DROP COLUMN self_median;"
        "ALTER TABLE step_phases DROP COLUMN self_p90;"
        "ALTER TABLE step_phases DROP COLUMN self_max;"
        "ALTER TABLE step_phases DROP COLUMN self_worst_rank;" +
        "".join(f"ALTER TABLE rank_steps DROP COLUMN host_{c};" for c in (
            "cpu_ns", "runq_ns", "stopped_ns", "throttled_ns",
            "nr_throttled", "vol_switches", "invol_switches",
            "major_faults", "psi_cpu_ns", "psi_memory_ns", "psi_io_ns")) +
        "".join(f"ALTER TABLE rank_steps DROP COLUMN gpu_{c};" for c in (
            "index", "covered_ns", "slowed_ns", "power_cap_ns", "thermal_ns",
            "hw_slowdown_ns", "sm_clock_mhz", "temperature_c", "ecc_new",
            "xid_new", "last_xid")) +
        "PRAGMA user_version = 2;")
    con.close()
    # Read as it is, and left as it is ...
    out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                          str(db)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["metrics"] == []
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    con.close()
    # ... until upgraded.
    up = subprocess.run([str(STEPSCOPE), "upgrade", "--db", str(db)],
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stderr
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] > 2
    con.close()

    missing = tmp_path / "none" / "x.db"
    up = subprocess.run([str(STEPSCOPE), "upgrade", "--db", str(missing)],
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 1
    assert "no store there" in up.stderr
    assert not missing.parent.exists()
