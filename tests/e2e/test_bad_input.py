"""Bad input on the wire is rejected with a logged reason and harms no one:
the same rank then connects properly and the run is recorded in full."""
import sys

import pytest

from conftest import SOURCE, example, run_job

BAD_CLIENT = str(SOURCE / "tests" / "e2e" / "bad_client.py")


@pytest.mark.parametrize("mode,reason", [
    ("garbage", "expected HELLO"),
    ("wrong-token", "wrong token"),
    ("version", "unsupported protocol version 77"),
    ("truncated", "HELLO is truncated"),
    ("oversize", "exceeds the 16384-byte limit"),
    ("undeclared", "undeclared name id 9"),
])
def test_bad_connection_is_rejected_and_run_survives(store, mode, reason):
    job = run_job(store, 2, [sys.executable, BAD_CLIENT, mode, "--",
                             *example("--steps", "30", "--compute-ms", "3")])
    assert job.returncode == 0, job.stderr
    assert f"{mode} rejected as expected" in job.stdout
    assert "rejected a connection" in job.stderr
    assert reason in job.stderr
    report = job.report()
    events = [e for e in report["events"] if e["kind"] == "rejected_connection"]
    assert len(events) == 2  # one per rank
    assert report["steps"]["count"] >= 28
    assert report["findings"] == []
