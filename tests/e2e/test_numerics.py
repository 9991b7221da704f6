"""Numerics on real gloo DDP ranks under `stepscope run --auto`
(examples/ddp_numerics.py, 3 ranks, docs/numerics.md).

A NaN injected into one module on one rank at one step, forward or
backward, gives one critical `nonfinite` finding with that step and rank
first, and in full mode that module and direction; a matrix covers the
first, a middle and the last module, ranks 0, 1 (middle) and 2 (last) and
both directions (each depth and direction once, the rank rotating; the
whole product with repetitions is `make bench-accuracy`).  A NaN born
outside every module, in the batch or between the model's output and the
loss function, is named as such in full mode, not as the first gradient
it spoiled.  A loss spike on
one rank gives loss_spike and grad_spike naming it; clean runs, light and
full, give no numerics finding and no hook error.  --on-nonfinite dump
keeps the job going and stores every rank's stacks with the finding,
stop ends it with status 65, restart replays from the last checkpoint in
full mode and names the module there."""
import importlib.util
import json
import sqlite3
import subprocess

import pytest

from conftest import SOURCE, STEPSCOPE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "ddp_numerics.py"
NPROCS = 3
NUMERICS = ("nonfinite", "loss_spike", "grad_spike")
NONFINITE_EXIT = 65


def run(store, *args, extra=(), steps=12):
    cmd = python_cmd(SCRIPT, "--steps", str(steps), *args)
    return run_job(store, NPROCS, cmd, extra=("--auto", "--no-http", *extra),
                   env=ddp_env(), timeout=JOB_TIMEOUT)


def evidence(f):
    ev = f["evidence"]
    return ev if isinstance(ev, dict) else json.loads(ev)


def findings_of(job, attempt):
    out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                          str(job.db), "--attempt", str(attempt)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["findings"]


def the_nonfinite(job, attempt=None):
    fs = job.findings() if attempt is None else findings_of(job, attempt)
    fs = [f for f in fs if f["kind"] == "nonfinite"]
    assert len(fs) == 1, (fs, job.stderr)
    f = fs[0]
    assert f["severity"] == "critical", f
    return f, evidence(f)


def numerics_metric(job, name):
    con = sqlite3.connect(str(job.db))
    vals = [json.loads(m).get(name) for (m,) in
            con.execute("SELECT metrics FROM rank_steps") if m]
    con.close()
    return [v for v in vals if v is not None]


# (module, direction, rank): each depth and direction once, the rank
# position rotating over 0, the last and the middle one.
MATRIX = [("embed", "forward", 0), ("blocks.1.fc1", "forward", 2),
          ("head", "forward", 1), ("embed", "backward", 2),
          ("blocks.1.fc1", "backward", 1), ("head", "backward", 0)]


@pytest.mark.parametrize("module,direction,rank", MATRIX)
def test_full_mode_names_rank_step_module_direction(store, module, direction,
                                                    rank):
    step = 2 + rank * 3  # 2 lies in the detectors' warm-up
    job = run(store, "--nan-rank", str(rank), "--nan-step", str(step),
              "--nan-module", module, "--nan-dir", direction,
              extra=("--numerics", "full"))
    assert job.returncode == 0, job.stderr
    f, ev = the_nonfinite(job)
    assert f["first_step"] == step and f["ranks"][0] == rank, f
    assert sorted(f["ranks"]) == list(range(NPROCS)), f  # it spread
    assert ev["mode"] == "full" and ev["direction"] == direction, ev
    assert ev["module"] == module, ev
    assert f["phase"] == direction, f
    assert ("module %s" % module) in f["message"], f["message"]
    if direction == "backward":
        assert ev["param"].startswith(module + "."), ev
    assert not numerics_metric(job, "numerics.errors") or \
        max(numerics_metric(job, "numerics.errors")) == 0


# (where it is injected, rank, the origin's direction, the module it was
# handed to): the example's loss function is a module
# (nn.CrossEntropyLoss), so a value made between the model and it is
# handed to it; one added to the loss after it has no module
OUTSIDE = [("input", 2, "input", "(Net)"),
           ("output", 1, "input", "2.(CrossEntropyLoss)"),
           ("loss", 0, "loss", None)]


@pytest.mark.parametrize("inject,rank,direction,handed_to", OUTSIDE)
def test_full_mode_names_a_value_made_outside_the_modules(store, inject, rank,
                                                          direction,
                                                          handed_to):
    step = 4 + rank
    job = run(store, "--nan-rank", str(rank), "--nan-step", str(step),
              "--nan-dir", inject, extra=("--numerics", "full"))
    assert job.returncode == 0, job.stderr
    f, ev = the_nonfinite(job)
    assert f["first_step"] == step and f["ranks"][0] == rank, f
    assert ev["mode"] == "full" and ev["direction"] == direction, ev
    assert ev.get("module") == handed_to, ev
    assert "param" not in ev and not f["phase"], f
    assert ("that no module had made" if handed_to else
            "while every module's output was finite") in f["message"], f


@pytest.mark.parametrize("module,direction,rank", MATRIX)
def test_light_mode_names_rank_and_step(store, module, direction, rank):
    step = 3 + rank * 3
    job = run(store, "--nan-rank", str(rank), "--nan-step", str(step),
              "--nan-module", module, "--nan-dir", direction)
    assert job.returncode == 0, job.stderr
    f, ev = the_nonfinite(job)
    assert f["first_step"] == step and f["ranks"][0] == rank, f
    assert ev["mode"] == "light" and ev["rank"] == rank, ev
    assert ev["signal"] == ("gradients" if direction == "backward"
                            else "loss and gradients"), ev
    assert "--numerics full" in f["message"], f["message"]
    assert "--numerics full" in ev["next"], ev


@pytest.mark.parametrize("mode", ["light", "full"])
def test_clean_run_has_no_numerics_finding(store, mode):
    job = run(store, extra=("--numerics", mode), steps=30)
    assert job.returncode == 0, job.stderr
    kinds = [f["kind"] for f in job.findings()]
    assert not set(kinds) & set(NUMERICS), (kinds, job.stderr)
    losses = numerics_metric(job, "numerics.loss")
    assert len(losses) == 30 * NPROCS, len(losses)
    assert max(numerics_metric(job, "numerics.errors")) == 0
    assert numerics_metric(job, "numerics.update_ratio"), "no update ratio"
    # The text report's METRICS table keeps its columns in line with
    # names longer than its default width (numerics.param_nonfinite).
    text = subprocess.run([str(STEPSCOPE), "report", "--db", str(job.db)],
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    table = text.stdout.split("\nMETRICS", 1)[1].split("\n\n", 1)[0]
    header, *rows = ("METRICS" + table).splitlines()
    end = header.index("steps") + len("steps")
    assert any(len(r.split()[0]) > 19 for r in rows), rows
    for r in rows:
        assert r[end - 1] != " " and r[end] == " ", (header, r)


def test_numerics_off_sends_nothing(store):
    job = run(store, extra=("--numerics", "off"), steps=6)
    assert job.returncode == 0, job.stderr
    assert numerics_metric(job, "numerics.loss") == []


def test_loss_spike_names_step_and_rank(store):
    job = run(store, "--spike-rank", "2", "--spike-step", "22", steps=30)
    assert job.returncode == 0, job.stderr
    for kind in ("loss_spike", "grad_spike"):
        fs = job.findings(kind)
        assert len(fs) == 1, (kind, job.findings(), job.stderr)
        assert fs[0]["first_step"] == 22 and fs[0]["ranks"] == [2], fs[0]
        assert evidence(fs[0])["ratio"] > 5, fs[0]
    assert not job.findings("nonfinite")


def test_dump_stores_stacks_and_goes_on(store):
    job = run(store, "--nan-rank", "1", "--nan-step", "5", "--nan-module",
              "blocks.0.fc2", "--step-ms", "150", steps=16)
    assert job.returncode == 0, job.stderr
    f, _ = the_nonfinite(job)
    st = job.report()["stacks"]
    assert st is not None and st["trigger"] == "nonfinite", st
    assert st["finding_id"] == f["id"], (st, f)
    assert len(st["document"]["ranks"]) == NPROCS
    assert len(job.results()) == NPROCS  # every rank finished


def test_stop_ends_the_job(store):
    job = run(store, "--nan-rank", "2", "--nan-step", "4", "--nan-module",
              "head", "--step-ms", "100", extra=("--on-nonfinite", "stop"),
              steps=200)
    assert job.returncode == NONFINITE_EXIT, job.stderr
    assert "stopped on a non-finite value" in job.stderr, job.stderr
    f, _ = the_nonfinite(job)
    assert f["first_step"] == 4 and f["ranks"][0] == 2
    assert len(job.results()) == 0  # no rank finished its 200 steps


def test_restart_replays_in_full_mode_and_finds_the_module(store, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    job = run(store, "--nan-rank", "1", "--nan-step", "9", "--nan-module",
              "blocks.2.fc1", "--nan-dir", "backward", "--step-ms", "150",
              "--checkpoint", str(ckpt), "--save-every", "4",
              extra=("--on-nonfinite", "restart", "--max-restarts", "1",
                     "--restart-backoff", "0"), steps=40)
    assert job.returncode == NONFINITE_EXIT, job.stderr
    assert "replay it with --numerics full" in job.stderr, job.stderr
    light, lev = the_nonfinite(job, attempt=0)
    assert lev["mode"] == "light" and light["first_step"] == 9
    full, fev = the_nonfinite(job, attempt=1)
    assert fev["mode"] == "full" and full["first_step"] == 9, fev
    assert full["ranks"][0] == 1 and fev["module"] == "blocks.2.fc1", fev
    assert fev["direction"] == "backward", fev
    assert "found again in the replay" in job.stderr, job.stderr
