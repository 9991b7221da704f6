"""The web dashboard and `stepscope report --html` in a real browser.

A real job runs under `stepscope run --http`; headless Chromium, driven
through chromedriver by the small WebDriver client below (Python's standard
library only), loads the dashboard while the job runs and must draw the
job's steps, heat map and straggler finding without a console error.  The
report file must be one self-contained page (no network) that draws the same
charts.  Screenshots land in the test's temporary directory and, when
STEPSCOPE_ARTIFACTS is set, are copied there.

Skipped when chromium or chromedriver is not installed
(scripts/install-deps.sh installs both).
"""
import base64
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import SOURCE, STEPSCOPE, example, kill_quietly
from jobs import free_port  # noqa: E402

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-device-scale-factor=1", "--window-size=1400,1000"]


def find_chromium():
    for p in ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser"):
        if os.access(p, os.X_OK):
            return p
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


CHROMIUM = find_chromium()
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/lib/chromium/chromedriver"
    if os.access("/usr/lib/chromium/chromedriver", os.X_OK) else None)

pytestmark = pytest.mark.skipif(
    not CHROMIUM or not CHROMEDRIVER,
    reason="chromium and chromedriver are needed (scripts/install-deps.sh)")


def http_json(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {url}: {e.code} {e.read()[:400]!r}")


class Browser:
    """Headless Chromium under chromedriver, over the W3C WebDriver API."""

    def __init__(self, tmp):
        self.port = free_port()
        self.log = open(tmp / "chromedriver.log", "w")
        self.driver = subprocess.Popen(
            [CHROMEDRIVER, f"--port={self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                if http_json("GET", self.base + "/status", timeout=2)["value"]["ready"]:
                    break
            except (OSError, AssertionError):
                pass
            if time.time() > deadline:
                self.driver.kill()
                raise AssertionError("chromedriver did not start")
            time.sleep(0.1)
        profile = tmp / "chromium-profile"
        profile.mkdir(exist_ok=True)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": CHROME_FLAGS + [f"--user-data-dir={profile}"]},
            "goog:loggingPrefs": {"browser": "ALL"}}}}
        try:
            self.session = http_json("POST", self.base + "/session", caps)["value"]["sessionId"]
        except Exception:
            self.driver.kill()
            raise

    def cmd(self, method, path, body=None):
        return http_json(method, f"{self.base}/session/{self.session}{path}", body)["value"]

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait_for(self, script, what, timeout=30.0):
        """Polls SCRIPT (a function body returning a value) until it is truthy."""
        deadline = time.time() + timeout
        while True:
            v = self.js(script)
            if v:
                return v
            if time.time() > deadline:
                state = self.js("return JSON.stringify(document.body.dataset)")
                raise AssertionError(f"timed out waiting for {what}; body data: {state}")
            time.sleep(0.2)

    def console(self):
        """Browser console entries since the last call (level, message)."""
        return [(e["level"], e["message"])
                for e in self.cmd("POST", "/se/log", {"type": "browser"})]

    def screenshot(self, path):
        """A PNG of the whole page (not only the window) at PATH."""
        h = self.js("return Math.ceil(document.documentElement.scrollHeight)")
        w = self.js("return Math.ceil(document.documentElement.clientWidth)")
        shot = self.cmd("POST", "/goog/cdp/execute", {
            "cmd": "Page.captureScreenshot",
            "params": {"format": "png", "captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}})
        data = base64.b64decode(shot["data"])
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        Path(path).write_bytes(data)
        return Path(path)

    def close(self):
        try:
            http_json("DELETE", f"{self.base}/session/{self.session}", timeout=10)
        except (OSError, AssertionError):
            pass
        self.driver.terminate()
        try:
            self.driver.wait(10)
        except subprocess.TimeoutExpired:
            self.driver.kill()
            self.driver.wait()
        self.log.close()


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path)
    yield b
    b.close()


class Refs(HTMLParser):
    """Every attribute of a page that makes a browser fetch something."""

    def __init__(self):
        super().__init__()
        self.found = []
        self.tags = collections.Counter()

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "poster", "data"):
                self.found.append((tag, name, value or ""))


def keep_artifact(path):
    dest = os.environ.get("STEPSCOPE_ARTIFACTS")
    if dest:
        os.makedirs(dest, exist_ok=True)
        shutil.copy(path, dest)


def errors(entries):
    return [m for level, m in entries if level in ("SEVERE", "ERROR")]


FINDING_ON_RANK_1 = """
    return [...document.querySelectorAll('.finding')]
        .some(f => f.dataset.ranks.split(',').includes('1'))"""


def start_job(store, steps, extra=()):
    """`stepscope run` with its HTTP server on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "3", "--db", str(store),
         "--http", f"127.0.0.1:{port}", *extra, "--",
         *example("--steps", str(steps), "--compute-ms", "5",
                  "--straggler", "1:15")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{port}/"


def wait_http(url, proc, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()[1][-2000:]}")
        try:
            with urllib.request.urlopen(url + "api/runs", timeout=2) as r:
                doc = json.loads(r.read())
                if any(run.get("live") for run in doc["runs"]):
                    return doc
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


def stop_job(proc):
    """Stops a job like Ctrl-C does and waits for it; once is enough."""
    if proc.returncode is not None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        kill_quietly(proc.pid)
        proc.communicate()


def test_dashboard_follows_a_live_run(tmp_path, browser):
    store = tmp_path / "store.db"
    # Long enough to outlast the checks on a loaded machine; stopped after.
    proc, url = start_job(store, 8000)
    try:
        wait_http(url, proc)
        browser.get(url)
        # The page picks the live run and draws steps as they are finalized.
        browser.wait_for("return +document.body.dataset.stepsRendered > 20",
                         "the step chart")
        assert browser.js("return document.getElementById('run-status').textContent") == "live"
        first = int(browser.js("return document.body.dataset.stepsRendered"))
        browser.wait_for(f"return +document.body.dataset.stepsRendered > {first + 20}",
                         "the chart to grow while the run goes on")
        # The detectors blame rank 1 (on a loaded machine it may take a
        # while to stand out from the noise).
        browser.wait_for(FINDING_ON_RANK_1, "a finding on rank 1", timeout=90)
        assert proc.poll() is None, "the run ended during the checks"
        assert int(browser.js("return +document.body.dataset.heatCells")) > 30
        # The host chart: the ranks' run-queue delay and stopped time.
        browser.wait_for("return +document.body.dataset.hostSteps > 10",
                         "the host chart")
        rows = browser.js("return document.querySelectorAll('#ranks tbody tr').length")
        assert rows == 3
        # A rank's number asks for its latest steps, every one (the
        # controller keeps node 0's): rank 1 computes 15 ms more a step.
        browser.js("document.querySelector('#ranks button.rank-pick[data-rank=\"1\"]').click()")
        browser.wait_for("return (document.body.dataset.rankRecent || '').startsWith('1:')",
                         "rank 1's latest steps")
        assert browser.js("return document.body.dataset.rankRecent") == "1:64"
        assert browser.js("return document.getElementById('rank-recent-title').textContent") \
            == "Latest steps of rank 1"
        assert "newest first; the controller (node 0) keeps its latest 256" in \
            browser.js("return document.getElementById('rank-recent-hint').textContent")
        cells = browser.js("""
            const t = document.getElementById('rank-recent-table');
            const col = [...t.querySelectorAll('thead th')].findIndex(h => h.textContent === 'compute');
            return [...t.querySelectorAll('tbody tr')].map(r => r.children[col].textContent)""")
        assert len(cells) == 64, cells
        ms = sorted(float(c.split()[0]) for c in cells)
        assert ms[32] > 15, cells
        # while the run is live the panel follows the rank's new steps
        newest = "+document.querySelector('#rank-recent-table tbody td').textContent.replace(/\\D/g, '')"
        first_newest = browser.js(f"return {newest}")
        browser.wait_for(f"return {newest} > {first_newest}", "the latest steps to refresh")
        # The goodput panel: one stacked bar for the one attempt, with
        # productive time in it.
        browser.wait_for("return document.querySelector('#goodput .gp-bar .gp-productive') !== null",
                         "the goodput bar")
        assert browser.js("return document.querySelectorAll('#goodput .gp-row').length") == 1
        # Every chart has a canvas with pixels on it.
        assert browser.js("""
            const c = [...document.querySelectorAll(
                '#chart-steps canvas, #chart-phases canvas, #chart-memory canvas, #heat-canvas, #chart-host canvas')];
            return c.length === 5 && c.every(x => x.width > 0 && x.height > 0)""")
        shot = browser.screenshot(tmp_path / "dashboard-live.png")
        keep_artifact(shot)
        assert shot.stat().st_size > 20000
        assert errors(browser.console()) == []
        # Stopping the job ends the run: the page stops saying "live" (the
        # controller then stops serving, which the browser logs).
        stop_job(proc)
        browser.wait_for("return document.getElementById('run-status').textContent !== 'live'",
                         "the page to see the end of the run")
        assert browser.js("return document.body.dataset.stream") != "open"
    finally:
        stop_job(proc)


def test_report_html_is_one_self_contained_file(tmp_path, browser):
    store = tmp_path / "store.db"
    proc, _ = start_job(store, 150)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    page = tmp_path / "report.html"
    r = subprocess.run([str(STEPSCOPE), "report", "--html", "--db", str(store),
                        "-o", str(page)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    # Nothing is loaded from anywhere: every src/href is inline data.
    refs = Refs()
    refs.feed(html)
    assert ("link", "href", "data:,") in refs.found, refs.found
    assert all(v.startswith(("data:", "#")) for _, _, v in refs.found), refs.found
    # index.html's scripts, inlined, and the data
    scripts = (SOURCE / "web" / "index.html").read_text().count('<script src="')
    assert refs.tags["script"] == scripts + 1 and refs.tags["style"] == 2, refs.tags
    assert 'id="ss-data"' in html and "uPlot" in html
    data = json.loads(re.search(
        r'<script id="ss-data" type="application/json">(.*?)</script>', html,
        re.S).group(1))
    assert data["run"]["run"]["world_size"] == 3
    assert sum(len(p["steps"]) for p in data["step_pages"]) == 150
    findings = data["findings"]["findings"]
    assert data["ranks"]["ranks"][1]["median_step_ms"] > 0
    assert len(data["host"]["runq_ms"]) == 3
    assert sum(v is not None for v in data["host"]["cpu_ms"][0]) >= 140
    # It draws offline: file:// URL, nothing else to fetch.
    browser.get(page.as_uri())
    browser.wait_for("return document.body.dataset.state === 'ready' && "
                     "+document.body.dataset.stepsRendered === 150", "the report page")
    assert browser.js("return document.querySelectorAll('.finding').length") == len(findings)
    assert browser.js("return document.querySelectorAll('#ranks tbody tr').length") == 3
    assert int(browser.js("return +document.body.dataset.heatCells")) >= 150 * 3 - 3
    assert int(browser.js("return +document.body.dataset.hostSteps")) >= 140
    assert browser.js("return document.querySelector('#ranks tbody tr td:nth-child(11)')"
                      ".textContent") != "–"
    shot = browser.screenshot(tmp_path / "report.png")
    keep_artifact(shot)
    # Clicking a finding zooms every chart to its steps.
    if findings:
        first, last = browser.js("""
            const f = document.querySelector('.finding');
            f.click();
            return [+f.dataset.first, +f.dataset.last]""")
        lo, hi = (first - 5, last + 5) if last - first < 10 else (first, last)
        browser.wait_for(f"return document.body.dataset.zoom === '{lo}-{hi}'", "the zoom")
    assert errors(browser.console()) == []


VALUES_RANK = """
import stepscope
for i in range(40):
    with stepscope.step():
        v = [float(i + k) for k in range(6)]
        if i == 30:
            v[2] = float("nan")
        if i == 31:
            v[3] = float("inf")
        stepscope.values("act_absmax", v,
                         labels=["embed", "l0", "l1", "l2", "l3", "head"])
"""


def test_vector_heat_maps(tmp_path, browser):
    """A real run whose ranks record vectors (stepscope.values): the
    served dashboard shows the Vectors panel with a heat map of index x
    step for one rank and, switched, of rank x step for one index, NaN
    and infinities drawn as such; `report --html` carries the same maps.
    A run without vectors shows no panel."""
    from test_ddp import ddp_env, python_cmd
    store = tmp_path / "store.db"
    script = tmp_path / "values_rank.py"
    script.write_text(VALUES_RANK)
    job = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db", str(store),
                          "--", *python_cmd(script)],
                         capture_output=True, text=True, timeout=120, env=ddp_env())
    assert job.returncode == 0, job.stderr
    plain = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db", str(store),
                            "--", *example("--steps", "20", "--compute-ms", "1")],
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(store),
                            "--http", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                doc = http_json("GET", base + "api/runs/1/values")
                break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise AssertionError("stepscope serve did not answer")
                time.sleep(0.1)
        [entry] = doc["values"]
        assert entry["name"] == "act_absmax" and entry["ranks"] == [0, 1]
        assert entry["steps"] == 40 and entry["max_n"] == 6
        assert entry["labels"][5] == "head"

        browser.get(base + "#run=1")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "+document.body.dataset.valuesCells > 0", "the vector heat map")
        assert browser.js("return document.getElementById('panel-values').hidden") is False
        # index x step of rank 0: 6 indices x 40 steps, one NaN, one +inf
        assert int(browser.js("return +document.body.dataset.valuesCells")) == 6 * 40
        assert int(browser.js("return +document.body.dataset.valuesNonfinite")) == 2
        shot = browser.screenshot(tmp_path / "values-rank.png")
        keep_artifact(shot)
        # rank x step of index 2: 2 ranks x 40 steps, the NaN of step 30
        browser.js("""
            const m = document.getElementById('values-mode');
            m.value = 'index'; m.dispatchEvent(new Event('change'));
            const p = document.getElementById('values-pick');
            p.value = '2'; p.dispatchEvent(new Event('change'));""")
        browser.wait_for("return document.getElementById('values-hint').textContent"
                         ".startsWith('rank × step of index 2') && "
                         "+document.body.dataset.valuesCells === 80", "the rank x step map")
        assert int(browser.js("return +document.body.dataset.valuesNonfinite")) == 2
        # a run without vectors: no panel
        browser.js("location.hash = '#run=2'; location.reload()")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "document.body.dataset.runId === '2' && "
                         "document.body.dataset.valuesNames === '0'", "run 2")
        assert browser.js("return document.getElementById('panel-values').hidden") is True
        assert errors(browser.console()) == []
    finally:
        kill_quietly(srv.pid)
        srv.communicate()

    page = tmp_path / "values.html"
    r = subprocess.run([str(STEPSCOPE), "report", "--html", "--db", str(store),
                        "-o", str(page), "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    browser.get(page.as_uri())
    browser.wait_for("return document.body.dataset.state === 'ready' && "
                     "+document.body.dataset.valuesCells === 240", "the report's vector map")
    assert int(browser.js("return +document.body.dataset.valuesNonfinite")) == 2
    assert errors(browser.console()) == []
