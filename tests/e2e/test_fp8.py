"""Float8 health on real PyTorch DDP jobs (gloo, CPU) under `stepscope run`:
examples/fp8_emulated.py trains in emulated float8 and calls
stepscope.fp8_stats for every cast; its faults are each found with the
right finding, layer, tensor, rank and first step, and a clean job, with
dynamic or delayed scaling, has no finding.

Two arrangements of the three faults over the layers and ranks (an
outlier channel that a delayed scale clips: fp8_saturation of the layer's
input; gradients shrunk under a delayed scale: fp8_underflow of the
layer's gradient; an all-zero input: fp8_scale of the layer's input),
three of them in one job each, so that the machine's two cores run few
jobs: one on 3 ranks, one on 4.
"""
import importlib.util

import pytest

from conftest import SOURCE
from test_ddp import ddp_env, python_cmd
from jobs import run_job

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

EXAMPLE = SOURCE / "examples" / "fp8_emulated.py"
STEPS = 25
TIMEOUT = 240

# (ranks, [(switch, finding kind, layer, tensor, rank, step), ...])
ARRANGEMENTS = {
    "three-ranks": (3, [("--outlier", "fp8_saturation", "fc1", "input", 2, 6),
                        ("--underflow", "fp8_underflow", "fc4", "grad", 0, 8),
                        ("--zero-input", "fp8_scale", "fc3", "input", 1, 12)]),
    "four-ranks": (4, [("--outlier", "fp8_saturation", "fc4", "input", 0, 5),
                       ("--underflow", "fp8_underflow", "fc1", "grad", 3, 7),
                       ("--zero-input", "fp8_scale", "fc2", "input", 2, 9)]),
}


def run_example(db, ranks, *args):
    job = run_job(db, ranks, python_cmd(EXAMPLE, "--steps", str(STEPS), *args),
                  env=ddp_env(), timeout=TIMEOUT)
    assert job.returncode == 0, job.stderr
    return job.report()


@pytest.fixture(scope="module", params=sorted(ARRANGEMENTS))
def faulty(request, tmp_path_factory):
    ranks, faults = ARRANGEMENTS[request.param]
    args = []
    for switch, _, layer, _, rank, step in faults:
        args += [switch, f"{layer}:{rank}:{step}"]
    db = tmp_path_factory.mktemp(f"fp8-{request.param}") / "store.db"
    return faults, run_example(db, ranks, *args)


def test_each_fault_is_named(faulty):
    faults, report = faulty
    findings = report["findings"]
    assert sorted(f["kind"] for f in findings) == sorted(k for _, k, *_ in faults), findings
    for _, kind, layer, tensor, rank, step in faults:
        f, = [f for f in findings if f["kind"] == kind]
        ev = f["evidence"]
        assert (ev["layer"], ev["tensor"]) == (layer, tensor), f
        assert f["ranks"] == [rank], f
        assert f["first_step"] == step, f
        assert f["severity"] == ("critical" if kind == "fp8_scale" else "warning")
        assert f"layer {layer}'s" in f["message"]


def test_evidence_of_each_kind(faulty):
    faults, report = faulty
    by_kind = {f["kind"]: f for f in report["findings"]}
    sat = by_kind["fp8_saturation"]["evidence"]
    # one input channel of 64, clipped every step from the fault on
    assert sat["format"] == "e4m3" and sat["worst_pct"] == pytest.approx(100 / 64, rel=1e-3)
    assert sat["steps_over"] >= STEPS - 10 and sat["ranks_over"] == 1
    under = by_kind["fp8_underflow"]["evidence"]
    assert under["format"] == "e5m2" and under["worst_pct"] > 50
    assert under["amax"] < 1e-9  # gradients 2^-32 of their size
    scale = by_kind["fp8_scale"]["evidence"]
    assert scale["cause"] == "amax_zero" and scale["scale"] == "inf" and scale["amax"] == 0
    # the NaN it made reached the layers after it on that rank, in that step
    assert scale["invalid_steps"] == 1 and scale["invalid_ranks"] == 1
    assert scale["invalid_tensors"] >= 2


@pytest.mark.parametrize("scaling", ["dynamic", "delayed"])
def test_clean_run_has_no_finding(tmp_path, scaling):
    report = run_example(tmp_path / "store.db", 2, "--scaling", scaling)
    assert report["findings"] == []
    assert report["steps"]["count"] >= STEPS - 1
