"""Bad input on the wire is rejected with a logged reason and harms no one:
the same rank then connects properly and the run is recorded in full."""
import subprocess
import sys

import pytest

from conftest import SOURCE, STEPSCOPE, example, run_job

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
    # Steps of 10 ms: on a shared two-core machine a rank that happens to
    # share its core with other work is a real (if accidental) straggler
    # by a millisecond, which on 3 ms steps is 30 % of a step.
    job = run_job(store, 2, [sys.executable, BAD_CLIENT, mode, "--",
                             *example("--steps", "30", "--compute-ms", "10")])
    assert job.returncode == 0, job.stderr
    assert f"{mode} rejected as expected" in job.stdout
    assert "rejected a connection" in job.stderr
    assert reason in job.stderr
    report = job.report()
    events = [e for e in report["events"] if e["kind"] == "rejected_connection"]
    assert len(events) == 2  # one per rank
    assert report["steps"]["count"] >= 28
    # The bad connection itself leaves no trace in the findings: none is
    # about a missing, lost or failed rank.  Only what the machine's own
    # load can cause on a healthy job may appear.
    load_kinds = {"straggler", "jitter", "cpu_starved", "stopped"}
    assert {f["kind"] for f in report["findings"]} <= load_kinds, report["findings"]


@pytest.mark.parametrize("flag,value", [
    ("-n", "2.6"), ("-n", " 2"), ("-n", "+2"), ("-n", "2x"), ("-n", "0"),
    ("-n", "1e0"), ("--window", "64.0"), ("--grace", "1e1"),
    ("--grace", " 5"), ("--grace", "5."), ("--grace", "0.0001"),
    ("--connect-timeout", "-1"), ("--connect-timeout", "nan"),
])
def test_number_flags_are_parsed_strictly(tmp_path, flag, value):
    # A flag's number is exactly what was typed: "-n 2.6" is not 3 ranks.
    out = subprocess.run([str(STEPSCOPE), "run", "--db",
                          str(tmp_path / "s.db"), flag, value, "--", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert f"'{value}'" in out.stderr, out.stderr
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("flag,value", [("--grace", "2.5"), ("--grace", "3"),
                                        ("--connect-timeout", "0.5"),
                                        ("-n", "2"), ("--window", "16")])
def test_number_flags_take_what_they_should(tmp_path, flag, value):
    ranks = [] if flag == "-n" else ["-n", "1"]
    out = subprocess.run([str(STEPSCOPE), "run", "--no-http", "--db",
                          str(tmp_path / "s.db"), *ranks, flag, value, "--",
                          "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
