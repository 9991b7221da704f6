"""What another local user plants beside a store is refused, never used:
a world-writable STORE.d/logs/run-1/ of theirs whose rank-0.log is a
symbolic link to a file of the controller's user, and an existing empty
store file of theirs with mode 0666.  The other user is real: the planting
runs as uid 65534 (nobody), so these tests need root (as CI runs) and are
skipped otherwise."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import STEPSCOPE

OTHER = 65534  # nobody

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to act as another user")


@pytest.fixture
def shared_dir():
    """A sticky world-writable directory both users reach, like /tmp."""
    d = tempfile.mkdtemp(prefix="stepscope-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_other(script):
    """Runs the shell SCRIPT as the other user."""
    subprocess.run(["/bin/sh", "-c", script], check=True, user=OTHER,
                   group=OTHER, umask=0, timeout=30)


def run(db):
    return subprocess.run(
        [str(STEPSCOPE), "run", "-n", "1", "--db", db, "--", "/bin/sh", "-c",
         "echo secret-output-of-rank-0"],
        capture_output=True, text=True, timeout=120)


def test_planted_log_directory_and_symlink_are_refused(shared_dir, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the controller user's own file\n")
    db = os.path.join(shared_dir, "store.db")
    logs = db + ".d/logs/run-1"
    as_other(f"mkdir -p -m 0777 '{logs}' && chmod 0777 '{db}.d' "
             f"'{db}.d/logs' && ln -s '{victim}' '{logs}/rank-0.log'")
    out = run(db)
    assert out.returncode != 0, out.stderr
    assert victim.read_text() == "the controller user's own file\n"
    assert "secret-output-of-rank-0" not in out.stdout
    assert f"refusing {db}.d" in out.stderr, out.stderr
    assert "uid 65534" in out.stderr and "mode 0777" in out.stderr, out.stderr


def plant_run_log(base, victim, owner, mode):
    """BASE/store.db.d (private, ours) with logs/run-1 of OWNER and MODE
    holding rank-0.log, a symbolic link of OWNER to VICTIM."""
    logs = base / "store.db.d" / "logs" / "run-1"
    logs.mkdir(parents=True)
    os.chmod(base / "store.db.d", 0o700)
    os.chmod(base / "store.db.d" / "logs", 0o700)
    os.chmod(logs, mode)
    os.symlink(victim, logs / "rank-0.log")
    os.chown(logs, owner, owner)
    os.lchown(logs / "rank-0.log", owner, owner)
    return base / "store.db", logs


@pytest.mark.parametrize("owner,mode,words", [
    (OTHER, 0o777, "it belongs to another user (owner uid 65534, mode 0777)"),
    (0, 0o777, "it is writable by group or others (owner uid 0, mode 0777)"),
    (0, 0o700, "rank-0.log: it is a symbolic link"),
])
def test_planted_run_log_directory_is_refused(tmp_path, owner, mode, words):
    """The store's own directories are the user's; run-1 and its log link
    were planted (set up by root, then handed to OWNER)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    db, logs = plant_run_log(tmp_path, victim, owner, mode)
    out = run(str(db))
    assert out.returncode != 0, out.stderr
    assert victim.read_text() == "mine\n"
    assert f"refusing {logs}" in out.stderr, out.stderr
    assert words in out.stderr, out.stderr


def test_another_users_empty_store_is_refused(shared_dir):
    db = os.path.join(shared_dir, "store.db")
    as_other(f"touch '{db}' && chmod 0666 '{db}'")
    out = run(db)
    assert out.returncode != 0, out.stderr
    assert f"refusing {db}: it belongs to another user" in out.stderr, \
        out.stderr
    assert "uid 65534" in out.stderr and "mode 0666" in out.stderr
    assert os.path.getsize(db) == 0, "the other user's store was written"
    assert not os.path.exists(db + "-wal")
