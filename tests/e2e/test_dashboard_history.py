"""The dashboard's History view in a real browser (docs/dashboard.md).

Six real runs of one name under `stepscope run --name nightly` (the
ss_allreduce example behind a wrapper script, so the command line, and with
it the fingerprint, stays the same); the last one slowed by busy work in its
compute phase (--straggler on every rank).  `stepscope serve` serves the
store; headless Chromium opens the History view, which must draw one chart
per metric over the six runs, mark the latest run as a step-time
regression that began at the slowed run, agree with GET /api/history, and
log nothing to the console.  The screenshot lands in the test's temporary
directory (and in STEPSCOPE_ARTIFACTS when set).

Skipped when chromium or chromedriver is not installed.
"""
import json
import subprocess
import time
import urllib.request

import pytest

from conftest import EXAMPLE, STEPSCOPE, kill_quietly, run_job
from test_dashboard import Browser, errors, free_port, keep_artifact, pytestmark  # noqa: F401

RANKS = 2
STEPS = 120


def write_job(path, slow_ms=0.0):
    """Each rank sleeps 6 ms in its data phase per step and computes about
    0.5 ms; SLOW_MS more busy work in compute on every rank."""
    args = ["--steps", str(STEPS), "--compute-ms", "0.5"]
    for r in range(RANKS):
        args += ["--data-stall", f"{r}:1:6"]
        if slow_ms:
            args += ["--straggler", f"{r}:{slow_ms}:compute"]
    path.write_text("#!/bin/sh\nexec %s %s\n" % (EXAMPLE, " ".join(args)))
    path.chmod(0o755)


def get_json(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path)
    yield b
    b.close()


def test_history_view_marks_the_slowed_run(tmp_path, browser):
    store = tmp_path / "store.db"
    job = tmp_path / "nightly.sh"
    write_job(job)
    for _ in range(5):
        j = run_job(store, RANKS, [str(job)], extra=("--name", "nightly"))
        assert j.returncode == 0, j.stderr
    write_job(job, slow_ms=6)
    j = run_job(store, RANKS, [str(job)], extra=("--name", "nightly"))
    assert j.returncode == 0, j.stderr
    slowed = 6

    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(store),
                            "--http", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                get_json(base + "api/runs")
                break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise AssertionError("stepscope serve did not answer")
                time.sleep(0.1)

        # The document the page draws.
        doc = get_json(base + "api/history?name=nightly")
        assert [r["id"] for r in doc["runs"]] == [1, 2, 3, 4, 5, 6]
        assert doc["run_id"] == slowed and doc["verdict"] == "regression", doc
        step = next(m for m in doc["metrics"] if m["name"] == "step_time")
        assert step["verdict"] == "regressed" and step["since_run"] == slowed
        assert len(step["values"]) == 6 and step["values"][-1] > 1.3 * step["values"][0]
        # A change point, when the search finds one with a single slow run
        # at the end, is at the slowed run.
        assert not step["change_points"] or slowed in step["change_points"], step

        # The History view of the run shown (the latest, "nightly").
        browser.get(base)
        browser.wait_for("return document.body.dataset.state === 'ready'", "the run view")
        browser.js("document.querySelector('#views button[data-view=history]').click()")
        browser.wait_for("return document.body.dataset.historyState === 'ready'",
                         "the history view")
        assert browser.js("return document.body.dataset.view") == "history"
        assert browser.js("return document.getElementById('history-name').value") == "nightly"
        n_charts = int(browser.js("return +document.body.dataset.historyCharts"))
        assert n_charts == len(doc["metrics"]) and n_charts >= 5
        # Every chart has a canvas with pixels on it, the run view is hidden.
        assert browser.js("""
            const c = [...document.querySelectorAll('#history-charts canvas')];
            return c.length >= %d && c.every(x => x.width > 0 && x.height > 0)""" % n_charts)
        assert browser.js("return document.getElementById('chart-steps').offsetParent") is None
        # The mark is at the slowed run: the latest run's verdict, and any
        # change point the step time has.
        assert browser.js("return document.body.dataset.historyRunId") == str(slowed)
        assert browser.js("return document.body.dataset.historyVerdict") == "regression"
        regressed = browser.js("return document.body.dataset.historyRegressed").split(",")
        assert f"step_time@{slowed}" in regressed, regressed
        card = browser.js("""
            const c = document.querySelector('.hchart[data-metric="step_time"]');
            return {verdict: c.dataset.verdict, cps: c.dataset.changePoints,
                    badge: c.querySelector('.verdict').textContent}""")
        assert card["verdict"] == "regressed" and card["badge"] == "regressed"
        assert card["cps"] == ",".join(map(str, step["change_points"])), card
        shot = browser.screenshot(tmp_path / "dashboard-history.png")
        keep_artifact(shot)
        assert shot.stat().st_size > 10000

        # The view is addressable: a fresh load of #history=nightly opens it.
        browser.get(base + "#history=nightly")
        browser.wait_for("return document.body.dataset.historyState === 'ready' && "
                         "document.body.dataset.view === 'history'", "#history=nightly")
        # And back to the run.
        browser.js("document.querySelector('#views button[data-view=run]').click()")
        assert browser.js("return document.body.dataset.view") == "run"
        assert errors(browser.console()) == []
    finally:
        if srv.poll() is None:
            srv.terminate()
            try:
                srv.wait(10)
            except subprocess.TimeoutExpired:
                kill_quietly(srv.pid)
                srv.wait()
