"""Layer-local training on real gloo ranks (examples/forward_forward.py,
4 ranks, data parallel, docs/workloads.md#layer-local-training).

Each layer of the forward-forward model is a phase with its loss and its
update nested in it, the update holding the layer's all_reduce.  A rank
slow in one layer is the straggler, and the layer's loss phase is named as
what explains it, for a middle and an edge layer on different ranks; a
run without a slow layer has no straggler."""
import importlib.util
import json

import pytest

from conftest import SOURCE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "forward_forward.py"
NPROCS = 4
STEPS = 30  # 3 of warm-up, then the straggler's 20 steps and a margin


def run(store, *args):
    cmd = python_cmd(SCRIPT, "--steps", str(STEPS), *args)
    job = run_job(store, NPROCS, cmd, extra=("--no-http",), env=ddp_env(),
                  timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr[-3000:]
    return job


@pytest.mark.parametrize("rank,layer", [(2, 1), (0, 3)])
def test_slow_layer_is_named(store, rank, layer):
    job = run(store, "--slow-rank", str(rank), "--slow-layer", str(layer),
              "--slow-ms", "400")
    fs = job.findings("straggler")
    assert len(fs) == 1, (job.findings(), job.stderr[-2000:])
    f = fs[0]
    ev = f["evidence"] if isinstance(f["evidence"], dict) else \
        json.loads(f["evidence"])
    assert f["ranks"] == [rank], f
    assert f["phase"] == f"layer{layer}.loss", f
    assert ev["phase"] == f"layer{layer}.loss", ev


def test_no_slow_layer_no_straggler(store):
    job = run(store)
    assert job.findings("straggler") == [], job.findings()
