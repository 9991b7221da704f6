"""Runs that record nothing, and hangs before or after the first step
(real `stepscope run` processes, real Python ranks, real SQLite):

  - an unmodified script run without --auto: the summary and the report
    say the script does not call stepscope and to add --auto;
  - under --auto, a script that makes no optimizer step: the summary and
    the report say what auto mode counts as a step and stepscope.step();
  - under --auto, an explicit --hang-timeout applies before the first
    step: a script that never steps is stopped as hung within seconds,
    not after the 600 s start-up timeout;
  - goodput's `hang` category holds the hang's time, from the last
    progress to the stop (--on-hang stop), not 0.
"""
import importlib.util
import json
import os
import subprocess
import time

import pytest

from conftest import BUILD, SOURCE, STEPSCOPE

HANG_EXIT = 124
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="PyTorch is not installed")


def env():
    e = dict(os.environ)
    pkg = BUILD / "python"
    if not (pkg / "stepscope").is_dir():
        pkg = SOURCE / "python"
    e["PYTHONPATH"] = str(pkg)
    e["OMP_NUM_THREADS"] = "1"
    return e


def run(tmp_path, script, *extra, nprocs=2, timeout=120):
    path = tmp_path / "train.py"
    path.write_text(script)
    store = tmp_path / "store.db"
    t0 = time.monotonic()
    out = subprocess.run(
        [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(store),
         "--no-http", *extra, "--", "/usr/bin/python3", str(path)],
        capture_output=True, text=True, env=env(), timeout=timeout,
        stdin=subprocess.DEVNULL)
    return out, store, time.monotonic() - t0


def report(store, *args):
    out = subprocess.run([str(STEPSCOPE), *args, "--db", str(store)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_unmodified_script_without_auto_is_told_to_add_auto(tmp_path):
    out, store, _ = run(tmp_path, "import time\ntime.sleep(0.1)\n")
    assert out.returncode == 0, out.stderr
    assert "the script does not call stepscope: add --auto" in out.stderr, \
        out.stderr
    assert "add --auto" in report(store, "report"), report(store, "report")


@needs_torch
def test_auto_without_an_optimizer_step_says_what_counts(tmp_path):
    script = ("import torch\n"
              "m = torch.nn.Linear(4, 4)\n"
              "for _ in range(3):\n"
              "    m(torch.randn(2, 4)).sum().backward()\n")
    out, store, _ = run(tmp_path, script, "--auto")
    assert out.returncode == 0, out.stderr
    want = "no step was recorded: --auto counts one step per optimizer step"
    assert want in out.stderr, out.stderr
    assert "stepscope.step()" in out.stderr, out.stderr
    text = report(store, "report")
    assert "no_steps" in text and want in text, text


@needs_torch
def test_explicit_hang_timeout_applies_before_the_first_step(tmp_path):
    script = ("import time, torch\n"
              "torch.nn.Linear(2, 2)(torch.randn(1, 2))\n"
              "time.sleep(120)\n")
    out, store, took = run(tmp_path, script, "--auto", "-q",
                           "--hang-timeout", "3", "--on-hang", "stop",
                           "--grace", "1")
    assert out.returncode == HANG_EXIT, (out.returncode, out.stderr)
    assert took < 60, took
    doc = json.loads(report(store, "report", "--json"))
    hangs = [f for f in doc["findings"] if f["kind"] == "hang"]
    assert hangs and "at the first step" in hangs[0]["message"], hangs


def test_goodput_counts_the_hang_from_its_start_to_the_stop(tmp_path):
    script = ("import time, stepscope\n"
              "for i in range(5):\n"
              "    with stepscope.step(i):\n"
              "        time.sleep(0.05)\n"
              "time.sleep(120)\n")
    out, store, _ = run(tmp_path, script, "-q", "--hang-timeout", "2",
                        "--on-hang", "stop", "--grace", "1")
    assert out.returncode == HANG_EXIT, (out.returncode, out.stderr)
    gp = json.loads(report(store, "goodput", "--json"))
    ms = gp["ms"]
    # At least the 2 s timeout passed between the last step and the stop.
    assert ms["hang"] >= 2000, ms
    assert ms["other"] < ms["hang"], ms
