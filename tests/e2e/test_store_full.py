"""A store whose disk fills up mid-run: the job goes on, and the end-of-run
summary claims exactly what the store holds, no more.

The disk is a real one: a 600 KiB tmpfs mounted for the test, so this test
needs root (it is skipped otherwise)."""
import os
import re
import sqlite3
import subprocess

import pytest

from conftest import STEPSCOPE, example, run_job


@pytest.fixture
def small_disk(tmp_path):
    """A directory on a 600 KiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs",
                          str(mnt)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {out.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def summary_line(stderr):
    lines = [l for l in stderr.splitlines()
             if re.match(r"stepscope: run \d+ (finished|failed) in ", l)]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def test_summary_claims_only_what_a_full_disk_stored(small_disk, tmp_path):
    db = small_disk / "store.db"
    job = run_job(db, 3, example("--steps", "1200", "--compute-ms", "1",
                                 "--straggler", "2:5"),
                  extra=("--no-http", "-q", "--log-dir",
                         str(tmp_path / "logs")))
    # The job itself succeeded: its status is stepscope run's.
    assert job.returncode == 0, job.stderr[-3000:]
    line = summary_line(job.stderr)

    m = re.search(r": (\d+) steps finalized, (\d+) stored \((\d+) lost: "
                  r"disk full: ([^)]+)\)", line)
    assert m, line
    finalized, stored, lost_steps = (int(m.group(i)) for i in (1, 2, 3))
    assert finalized == 1200
    assert stored + lost_steps == finalized
    assert lost_steps > 0
    m = re.search(r", (\d+) findings?(?:, (\d+) stored \((\d+) lost)?", line)
    assert m, line
    findings = int(m.group(1))
    findings_stored = int(m.group(2)) if m.group(2) else findings
    if m.group(3):
        assert findings_stored + int(m.group(3)) == findings
    # A store that keeps failing is said at its first failure, then at
    # most every 10 s with the batches lost between, not batch by batch.
    seconds = float(re.search(r" in ([0-9.]+) s:", line).group(1))
    said = [l for l in job.stderr.splitlines() if "items was not written" in l]
    assert 1 <= len(said) <= 2 + seconds // 10, job.stderr[-3000:]
    assert "while it keeps failing, this is said again every 10 s" in job.stderr

    # Never "explains it" when the report holds less than the run did.
    assert "explains it" not in job.stderr
    assert "shows what was stored" in line
    end_lost = "was not stored" in job.stderr

    con = sqlite3.connect(str(db))
    steps_in_db = con.execute("SELECT count(*) FROM steps").fetchone()[0]
    findings_in_db = con.execute("SELECT count(*) FROM findings").fetchone()[0]
    status_in_db = con.execute("SELECT status FROM runs").fetchone()[0]
    con.close()
    assert steps_in_db == stored
    assert findings_in_db == findings_stored

    report = job.report()
    assert report["steps"]["count"] == stored
    assert len(report["findings"]) == findings_stored
    if end_lost:
        assert status_in_db == "running"
        # no controller holds the run any more: readers say so
        assert report["run"]["status"] == "interrupted"
        assert "the store still says run" in job.stderr
        # The text report counts what was stored, not what was finalized.
        text = subprocess.run([str(STEPSCOPE), "report", "--db", str(db)],
                              capture_output=True, text=True)
        assert f"steps       {stored} stored" in text.stdout, text.stdout
        assert "the run's end was not stored: it may have finalized more" \
            in text.stdout
    else:
        assert status_in_db == "succeeded"
        # The report says what was lost, in an event written with the end.
        lost = [e for e in report.get("events", [])
                if e["kind"] == "store_lost"]
        assert lost and f"the store lost {lost_steps} of 1200 steps" in \
            lost[0]["message"], report.get("events")
