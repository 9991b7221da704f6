"""The dashboard's Diff view and GET /api/diff on real runs.

Three real gloo DDP runs of examples/ddp_replica.py (3 ranks, checksums
every step, --numerics light): two with the same seed, one with rank 2's
first weight perturbed at step 4.  `stepscope serve` answers /api/diff
(identical, diverged at step 4 on rank 2 with both loss series, 404 for a
run that does not exist, 400 without two runs); headless Chromium opens
#diff=1,3 and must draw both loss curves with the divergence at step 4,
then, run B switched to run 2, say identical, without a console error.
Skipped as test_dashboard.py is when chromium or chromedriver is missing.
"""
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import SOURCE, STEPSCOPE, run_job
from test_dashboard import browser  # noqa: F401 (the fixture)
from test_dashboard import errors, free_port, http_json, keep_artifact
from test_dashboard import pytestmark as needs_browser
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

SCRIPT = SOURCE / "examples" / "ddp_replica.py"

pytestmark = needs_browser


def make_runs(store):
    for args in ((), (), ("--perturb-rank", "2", "--perturb-step", "4")):
        job = run_job(store, 3, python_cmd(SCRIPT, "--steps", "8", *args),
                      extra=("--auto", "--no-http", "--numerics", "light",
                             "--checksum-every", "1"),
                      env=ddp_env(), timeout=JOB_TIMEOUT)
        assert job.returncode == 0, job.stderr


def test_diff_view_and_api(tmp_path, browser):  # noqa: F811
    store = tmp_path / "store.db"
    make_runs(store)
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(store),
                            "--http", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                doc = http_json("GET", base + "api/diff?a=1&b=3")
                break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise AssertionError("stepscope serve did not answer")
                time.sleep(0.1)
        assert doc["status"] == "diverged", doc
        assert doc["divergence"]["step"] == 4 and doc["divergence"]["ranks"] == [2]
        s = doc["series"]
        assert s["steps"] == [0, 7] and s["stride"] == 1, s
        assert len(s["loss_a"]) == len(s["loss_b"]) == 8
        assert s["loss_a"][:4] == s["loss_b"][:4]  # equal before step 4
        same = http_json("GET", base + "api/diff?a=1&b=2")
        assert same["status"] == "identical" and same["divergence"] is None
        assert same["series"]["loss_a"] == same["series"]["loss_b"]
        for query, code in (("a=1&b=99", 404), ("a=1", 400)):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + "api/diff?" + query, timeout=30)
            assert e.value.code == code, query

        browser.get(base + "#diff=1,3")
        browser.wait_for("return document.body.dataset.view === 'diff' && "
                         "document.body.dataset.diffState === 'ready'",
                         "the diff view")
        d = browser.js("return Object.assign({}, document.body.dataset)")
        assert d["diffStatus"] == "diverged" and d["diffStep"] == "4", d
        assert d["diffRanks"] == "2" and d["diffPoints"] == "8", d
        assert browser.js("return document.querySelectorAll("
                          "'#diff-chart canvas').length") >= 1
        assert browser.js("return getComputedStyle(document.getElementById("
                          "'cards')).display") == "none"  # the run view hidden
        text = browser.js("return document.getElementById('diff-verdict')"
                          ".textContent")
        assert "first at step 4 on rank 2" in text, text
        keep_artifact(browser.screenshot(tmp_path / "diff.png"))
        browser.js("""
            const b = document.getElementById('diff-b');
            b.value = '2'; b.dispatchEvent(new Event('change'));""")
        browser.wait_for("return document.body.dataset.diffState === 'ready' "
                         "&& document.body.dataset.diffStatus === 'identical'",
                         "runs 1 and 2 identical")
        assert browser.js("return location.hash") == "#diff=1,2"
        # back to the run view: the diff section hides
        browser.js("document.querySelector('#views button[data-view=run]')"
                   ".click()")
        assert browser.js("return getComputedStyle(document.getElementById("
                          "'diff')).display") == "none"
        assert errors(browser.console()) == []
    finally:
        srv.terminate()
        srv.communicate(timeout=30)
