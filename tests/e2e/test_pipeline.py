"""Pipelines on real gloo ranks (examples/pipeline_train.py, 4 ranks, one
stage each, docs/workloads.md#pipelines).

A stage given four times the layers of the others (an unbalanced layer
split) gives one pipeline_bubble finding naming that stage and its rank,
at the first, a middle and the last position, under 1F1B and GPipe.
Balanced runs give no finding, and the measured bubble of a balanced
1F1B, as `stepscope trace` reports it per stage and step, lies within the
documented tolerance of the schedule's formula (0.7 to 3 times: the ranks
share this machine's cores, and a wait for a core or a transfer counts as
bubble).  The trace draws every microbatch span of every rank."""
import importlib.util
import json
import statistics
import subprocess

import pytest

from conftest import SOURCE, STEPSCOPE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "pipeline_train.py"
NPROCS = 4
STEPS = 8
MICROBATCHES = 6
TOLERANCE = (0.7, 3.0)  # docs/workloads.md: measured / formula, balanced


def run(store, *args):
    cmd = python_cmd(SCRIPT, "--steps", str(STEPS), "--microbatches",
                     str(MICROBATCHES), *args)
    job = run_job(store, NPROCS, cmd, extra=("--no-http",), env=ddp_env(),
                  timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr[-3000:]
    return job


def trace(job, tmp_path):
    out = tmp_path / "trace.json"
    p = subprocess.run([str(STEPSCOPE), "trace", "--db", str(job.db), "-o",
                        str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [e for e in json.loads(out.read_text())["traceEvents"]
            if e.get("cat") == "microbatch"]


@pytest.mark.parametrize("schedule,heavy", [("1f1b", 0), ("1f1b", 3),
                                            ("gpipe", 1)])
def test_heavy_stage_is_named(store, schedule, heavy):
    # four times the layers: three leaves the first stage of 1f1b at 1.6x
    # on an idle machine, close enough to the rule's 1.25x that the load of
    # the whole suite beside it has hidden it (docs/workloads.md)
    job = run(store, "--schedule", schedule, "--heavy-stage", str(heavy),
              "--heavy-factor", "4")
    fs = job.findings("pipeline_bubble")
    assert len(fs) == 1, (job.findings(), job.stderr[-2000:])
    f = fs[0]
    ev = f["evidence"] if isinstance(f["evidence"], dict) else \
        json.loads(f["evidence"])
    assert f["ranks"] == [heavy], f
    assert ev["stage"] == heavy and ev["rank"] == heavy, ev
    assert ev["schedule"] == schedule and ev["stages"] == NPROCS, ev
    assert ev["ratio"] >= 1.25 and ev["busy_ratio"] >= 1.6, ev
    assert f"Stage {heavy} (rank {heavy})" in f["message"], f["message"]


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_balanced_no_finding(store, tmp_path, schedule):
    job = run(store, "--schedule", schedule)
    assert job.findings("pipeline_bubble") == [], job.findings()
    ev = trace(job, tmp_path)
    spans = [e for e in ev if e["name"][0] in "FBW"]
    # every microbatch's F and B on every rank of every kept step
    assert len(spans) == STEPS * NPROCS * MICROBATCHES * 2, len(spans)
    assert {e["cname"] for e in spans} == {"good", "terrible"}
    stages = [e for e in ev if e["name"].startswith("stage ")]
    assert {e["args"]["stage"] for e in stages} == set(range(NPROCS))
    if schedule != "1f1b":
        return
    # The measured bubble of a balanced 1F1B against (p-1)(F+B): per step,
    # the mean over the stages, past the warm-up; the median of the steps.
    ratios = []
    for step in range(3, STEPS):
        rows = [e["args"] for e in stages if e["args"]["step"] == step]
        assert len(rows) == NPROCS, rows
        formula = rows[0]["formula_ms"]
        assert all(r["formula_ms"] == formula for r in rows)
        ratios.append(statistics.mean(r["bubble_ms"] for r in rows) / formula)
    ratio = statistics.median(ratios)
    assert TOLERANCE[0] <= ratio <= TOLERANCE[1], ratios
