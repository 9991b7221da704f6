"""The dashboard leads with the run's answer, in a real browser.

A real 4-rank job (the C example, rank 2 given 20 ms of extra compute per
step) is stored; `stepscope serve` serves the store and headless Chromium
(test_dashboard.py's WebDriver client) opens it at 1400 x 1000:

- the headline (the first finding's ranks, phase and kind) is the words of
  `stepscope report`'s HEADLINE line and of the run's own summary line;
- it and the first finding are in the first screen: a screenshot of the
  window (what a person sees before scrolling) holds, pixel for pixel, a
  screenshot of the headline element alone, and the findings come before
  every chart;
- "Phases by rank" shows rank 2's compute as the longest compute bar,
  marked as blamed (the phase chart draws only the median and the worst);
- the heat map offers lateness and per-phase self time, and opens on the
  headline's phase;
- a workload panel registered through ssDash.registerPanel lands below
  the findings and above the charts;
- a run of 10 steps has whole-number step ticks.

A hang (tests/e2e/hang_job.py under --on-hang stop) stores the ranks'
stacks: the served dashboard and `report --html` both show them.
"""
import base64
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from conftest import STEPSCOPE, example, kill_quietly
from jobs import job_args
from test_dashboard import (browser, errors, free_port, http_json,  # noqa: F401
                            keep_artifact, pytestmark)

HANG_JOB = Path(__file__).resolve().parent / "hang_job.py"


def straggler_run(store, steps=80):
    r = subprocess.run(
        [str(STEPSCOPE), "run", "-n", "4", "--db", str(store), "--",
         *example("--steps", str(steps), "--compute-ms", "5",
                  "--straggler", "2:20")],
        capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return r.stderr


def serve(store):
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(store),
                            "--http", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 20
    while True:
        try:
            http_json("GET", base + "api/runs")
            return srv, base
        except OSError:
            if time.time() > deadline or srv.poll() is not None:
                kill_quietly(srv.pid)
                raise AssertionError("stepscope serve did not answer")
            time.sleep(0.1)


def stop(srv):
    kill_quietly(srv.pid)
    srv.communicate()


def report_headline(store, run=1):
    out = subprocess.run([str(STEPSCOPE), "report", "--db", str(store),
                          str(run)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("HEADLINE")]
    assert len(lines) == 1, out.stdout
    return lines[0][len("HEADLINE"):].strip()


# ---- PNG (8-bit RGB/RGBA, not interlaced: what Chromium writes) ----

def png_pixels(data):
    """(width, height, rows): rows[y] is bytes of RGBA or RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype)
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else
                                      b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def shot(browser, path, clip=None):
    """A PNG of the window as a person sees it (no scrolling), or of CLIP
    (x, y, width, height in page pixels)."""
    params = {"format": "png"}
    if clip:
        params["clip"] = dict(zip(("x", "y", "width", "height"), clip), scale=1)
    got = browser.cmd("POST", "/goog/cdp/execute",
                      {"cmd": "Page.captureScreenshot", "params": params})
    data = base64.b64decode(got["data"])
    Path(path).write_bytes(data)
    keep_artifact(path)
    return data


def crop(pixels, x, y, w, h):
    _, _, bpp, rows = pixels
    return [row[x * bpp:(x + w) * bpp] for row in rows[y:y + h]]


def test_dashboard_leads_with_the_headline(tmp_path, browser):  # noqa: F811
    store = tmp_path / "store.db"
    summary = straggler_run(store)
    words = report_headline(store)
    assert words.startswith("rank 2 \u00b7 phase compute \u00b7"), words
    # the run's own summary said the same, first
    assert f"stepscope: headline: {words}\n" in summary, summary
    srv, base = serve(store)
    try:
        browser.get(base + "#run=1")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "+document.body.dataset.phaseRanks > 0", "the run")
        assert browser.js("return document.body.dataset.headline") == words
        # the window is the first screen: nothing scrolled
        assert browser.js("return window.scrollY") == 0
        inner_h = browser.js("return window.innerHeight")
        rect = browser.js("""
            const r = document.getElementById('headline').getBoundingClientRect();
            return [Math.floor(r.left), Math.floor(r.top), Math.floor(r.width), Math.floor(r.height)]""")
        first = browser.js("return document.querySelector('.finding').getBoundingClientRect().bottom")
        assert rect[1] + rect[3] <= inner_h and first <= inner_h, (rect, first, inner_h)
        # findings before every chart
        assert browser.js("""
            const f = document.getElementById('panel-findings').getBoundingClientRect().top;
            return ['#chart-steps', '#chart-phases', '#heat'].every(
                s => document.querySelector(s).getBoundingClientRect().top > f)""")
        # the screenshot of the first screen holds the headline as drawn alone
        window = png_pixels(shot(browser, tmp_path / "first-screen.png"))
        alone = png_pixels(shot(browser, tmp_path / "headline.png", rect))
        assert (alone[0], alone[1]) == (rect[2], rect[3]), (alone[:2], rect)
        a = crop(window, *rect)
        b = crop(alone, 0, 0, rect[2], rect[3])
        if window[2] != alone[2]:  # RGB vs RGBA: compare RGB
            def rgb(rows, bpp):
                return [bytes(v for i, v in enumerate(r) if i % bpp < 3) for r in rows]
            a, b = rgb(a, window[2]), rgb(b, alone[2])
        assert a == b, "the headline drawn alone differs from the first screen's"
        assert len(set(b)) > 3, "the headline's screenshot is blank"

        # phases by rank: rank 2's compute is the longest compute bar, blamed
        bars = browser.js("""
            return [...document.querySelectorAll('.pr-bar[data-phase="compute"]')]
                .map(b => [+b.dataset.rank, +b.dataset.ms, b.classList.contains('blamed')])""")
        assert len(bars) == 4, bars
        by_rank = {r: (ms, blamed) for r, ms, blamed in bars}
        assert by_rank[2][1] and not any(by_rank[r][1] for r in (0, 1, 3)), bars
        assert by_rank[2][0] > 1.5 * max(by_rank[r][0] for r in (0, 1, 3)), bars
        # the heat map: lateness and per-phase self time, on the headline's phase
        modes = browser.js("return [...document.querySelectorAll('#heat-mode option')].map(o => o.value)")
        assert {"step", "late", "phase:compute", "phase:allreduce"} <= set(modes), modes
        assert browser.js("return document.body.dataset.heatMode") == "phase:compute"
        browser.js("""const m = document.getElementById('heat-mode');
                      m.value = 'late'; m.dispatchEvent(new Event('change'));""")
        assert browser.js("return document.body.dataset.heatMode") == "late"
        assert int(browser.js("return +document.body.dataset.heatCells")) >= 70 * 4
        # a workload panel registered by its script sits below the
        # findings and above the charts
        assert browser.js("""
            ssDash.registerPanel(function (st, el) {
              if (el.querySelector('#test-panel')) return;
              const s = document.createElement('section');
              s.className = 'panel'; s.id = 'test-panel'; s.textContent = 'a workload panel';
              el.appendChild(s);
            });
            ssDash.overview.render();
            const top = s => document.querySelector(s).getBoundingClientRect().top;
            return top('#panel-findings') < top('#test-panel') && top('#test-panel') < top('#chart-steps')""")
        # lateness names rank 2: it arrives last at the all-reduce
        late = browser.js("""
            const h = window.ssDash.st.heat;
            return h.late.map(row => row.filter(v => v !== null).sort((a, b) => a - b)[Math.floor(row.length / 2)])""")
        assert max(range(4), key=lambda r: late[r]) == 2, late
        assert errors(browser.console()) == []
    finally:
        stop(srv)


def test_few_steps_have_whole_step_ticks(tmp_path, browser):  # noqa: F811
    store = tmp_path / "store.db"
    r = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db", str(store),
                        "--", *example("--steps", "10", "--compute-ms", "1")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "report.html"
    r = subprocess.run([str(STEPSCOPE), "report", "--html", "--db", str(store),
                        "-o", str(page)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    browser.get(page.as_uri())
    browser.wait_for("return document.body.dataset.state === 'ready'", "the page")
    ticks = browser.wait_for("""
        const u = document.querySelector('#chart-steps .uplot');
        return u && u.dataset.xTicks""", "the step axis")
    values = [float(t) for t in ticks.split(",") if t]
    assert len(values) >= 2 and all(v == int(v) for v in values), ticks


def test_stacks_stored_with_a_hang_on_the_dashboard_and_in_the_report(
        tmp_path, browser):  # noqa: F811
    store = tmp_path / "store.db"
    args = job_args(store, 3, ["/usr/bin/python3", str(HANG_JOB), "--rank",
                               "1", "--at", "6"],
                    ["--auto", "-q", "--hang-timeout", "3", "--on-hang",
                     "stop"])
    r = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert r.returncode == 124, r.stderr
    srv, base = serve(store)
    try:
        browser.get(base + "#run=1")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "document.body.dataset.stacks === 'hang'", "the stacks")
        text = browser.js("return document.getElementById('stacks').textContent")
        assert "rank 1" in text and "sleep" in text, text
        assert browser.js("return document.getElementById('panel-stacks').hidden") is False
        assert "on a hang" in browser.js("return document.getElementById('stacks-hint').textContent")
        assert browser.js("return document.body.dataset.headline").startswith("rank 1")
    finally:
        stop(srv)
    page = tmp_path / "hang.html"
    r = subprocess.run([str(STEPSCOPE), "report", "--html", "--db", str(store),
                        "-o", str(page)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    browser.get(page.as_uri())
    browser.wait_for("return document.body.dataset.stacks === 'hang'", "the report's stacks")
    assert browser.js("return document.getElementById('stacks').textContent") == text
    assert errors(browser.console()) == []
