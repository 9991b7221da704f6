"""A real Prometheus server scrapes a running job's /metrics.

Prometheus (Debian package `prometheus`, scripts/install-deps.sh) is started
with a temporary configuration that scrapes `stepscope run`'s /metrics on
127.0.0.1 every second; series are then read back through Prometheus' own
HTTP API (/api/v1/query) and compared with what the job is.  Loopback only;
every wait is bounded.  Skipped when the prometheus binary is absent.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import STEPSCOPE, example, kill_quietly
from jobs import free_port  # noqa: E402

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None)

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (Debian package "
           "`prometheus`; scripts/install-deps.sh installs it)")


def wait_for(what, check, timeout):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            got = check()
            if got is not None:
                return got
        except (OSError, urllib.error.URLError, ValueError) as e:
            last = e
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def query(prom, expr):
    """The instant vector of EXPR as [(labels, float value)]."""
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return [(x["metric"], float(x["value"][1])) for x in doc["data"]["result"]]


def stop(proc, sig=signal.SIGINT, timeout=30):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_quietly(proc.pid)
            proc.wait()


def test_prometheus_scrapes_a_running_job(tmp_path):
    db = tmp_path / "store.db"
    err = tmp_path / "run.err"
    with open(err, "w") as ef:
        job = subprocess.Popen(
            [str(STEPSCOPE), "run", "-n", "3", "-q", "--db", str(db),
             "--http", "127.0.0.1:0", "--",
             *example("--steps", "100000", "--compute-ms", "5")],
            stdout=subprocess.DEVNULL, stderr=ef)
    prom = None
    try:
        m = wait_for("the dashboard URL", lambda: re.search(
            r"dashboard http://(127\.0\.0\.1:\d+)/", err.read_text()), 30)
        target = m.group(1)
        run_id = int(re.search(r"run (\d+) ", err.read_text()).group(1))

        port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: stepscope\n"
            "    scrape_interval: 1s\n"
            "    scrape_timeout: 1s\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        with open(tmp_path / "prometheus.log", "w") as pl:
            prom = subprocess.Popen(
                [PROMETHEUS,
                 f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}",
                 "--log.level=warn"],
                stdout=pl, stderr=subprocess.STDOUT, cwd=tmp_path)
        base = f"http://127.0.0.1:{port}"
        wait_for("Prometheus to be ready", lambda: urllib.request.urlopen(
            base + "/-/ready", timeout=5).status == 200 or None, 90)

        # The target is up and the job's series arrive.
        up = wait_for("a successful scrape", lambda: [
            v for _, v in query(base, 'up{job="stepscope"}') if v == 1] or None,
            60)
        assert up == [1.0]
        world = wait_for("stepscope_world_size", lambda: query(
            base, f'stepscope_world_size{{run="{run_id}"}}') or None, 30)
        assert world[0][1] == 3.0
        assert world[0][0]["job"] == "stepscope"

        # Counters and gauges carry their labels and plausible values.
        finalized = wait_for("steps finalized", lambda: [
            v for _, v in query(
                base, f'stepscope_steps_finalized_total{{run="{run_id}"}}')
            if v >= 5] or None, 30)
        assert finalized[0] >= 5
        ranks = query(base, f'stepscope_rank_last_step{{run="{run_id}"}}')
        assert sorted(int(labels["rank"]) for labels, _ in ranks) == [0, 1, 2]
        assert all(v >= 1 for _, v in ranks)
        med = query(base, f'stepscope_step_seconds{{run="{run_id}",stat="median"}}')
        assert len(med) == 1 and 0.001 < med[0][1] < 10
        phases = {labels["phase"] for labels, _ in query(
            base, f'stepscope_phase_seconds{{run="{run_id}",stat="max"}}')}
        assert {"data", "compute", "allreduce", "optimizer"} <= phases
        # A counter Prometheus can take a rate of.
        rate = wait_for("a step rate", lambda: [
            v for _, v in query(
                base, f'rate(stepscope_steps_finalized_total{{run="{run_id}"}}[5s])')
            if v > 0] or None, 30)
        assert rate[0] > 0
        # The host's counters of each rank's process tree.
        cpu = wait_for("the ranks' CPU time", lambda: [
            v for _, v in query(
                base, f'stepscope_rank_cpu_seconds_total{{run="{run_id}"}}')
            if v > 0] or None, 30)
        assert len(cpu) == 3
        stopped = query(
            base, f'stepscope_rank_stopped_seconds_total{{run="{run_id}"}}')
        assert sorted(v for _, v in stopped) == [0.0, 0.0, 0.0]
        assert len(query(base, 'stepscope_rank_runqueue_seconds_total'
                               f'{{run="{run_id}"}}')) == 3
    finally:
        if prom is not None:
            stop(prom, signal.SIGTERM)
        stop(job)
    assert job.returncode is not None
