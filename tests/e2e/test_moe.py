"""Mixture-of-experts load on real PyTorch ranks (4, gloo, CPU) under
`stepscope run`: examples/moe_train.py routes every token to its top-2
experts of 8, spread 2 per rank, over all_to_all_single, and records
stepscope.expert_load and expert_placement.  A router skewed towards
chosen experts of one layer is named by expert_imbalance with that layer,
those experts and the rank hosting them; when the hosting rank is the one
the others wait for, the straggler finding says that its experts' load
is why.  A balanced router makes no finding at all.

The skews: layer 1 towards experts 6 and 7 (both on rank 3), layer 0
towards expert 1 (on rank 0).  Runs are short (30 or 40 steps of a small
model) since the machine's cores are shared.
"""
import importlib.util

import pytest

from conftest import SOURCE
from test_ddp import ddp_env, python_cmd
from jobs import run_job

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

EXAMPLE = SOURCE / "examples" / "moe_train.py"
STEPS = 30
TIMEOUT = 400

# name: (layer, experts, hosting rank, more arguments).  The first makes
# the hosting rank late: its experts get about 3x a rank's tokens, and
# wider experts make that work most of its step.
SKEWS = {
    "layer1-experts6-7": (1, (6, 7), 3, ("--skew", "2.0", "--expert-hidden", "1024",
                                         "--steps", "40")),
    "layer0-expert1": (0, (1,), 0, ("--skew", "3.0")),
}


def run_example(db, *args):
    job = run_job(db, 4, python_cmd(EXAMPLE, "--steps", str(STEPS), *args),
                  env=ddp_env(), timeout=TIMEOUT)
    assert job.returncode == 0, job.stderr
    return job.report()


@pytest.fixture(scope="module", params=sorted(SKEWS))
def skewed(request, tmp_path_factory):
    layer, experts, rank, more = SKEWS[request.param]
    db = tmp_path_factory.mktemp(f"moe-{request.param}") / "store.db"
    report = run_example(db, "--skew-layer", str(layer), "--skew-experts",
                         ",".join(map(str, experts)), *more)
    return (layer, experts, rank), report


def test_the_skewed_layer_experts_and_rank_are_named(skewed):
    (layer, experts, rank), report = skewed
    found = [f for f in report["findings"] if f["kind"] == "expert_imbalance"]
    f, = [f for f in found if f["evidence"]["layer"] == str(layer)]
    # a layer after the skewed one may be unbalanced too: its router sees
    # the skewed experts' outputs (the layer-0 skew makes layer 1 favour
    # expert 2); a layer before it never is
    assert all(int(g["evidence"]["layer"]) > layer for g in found if g is not f), found
    ev = f["evidence"]
    assert sorted(int(e) for e in ev["hot_experts"].split(",")) == sorted(experts), f
    assert f["ranks"][0] == rank, f
    assert ev["rank"] == rank and ev["rank_load_ratio"] > 1.5, f
    assert ev["maxvio"] > 1.0 and ev["dead_experts"] == 0, f
    assert f"layer {layer}'s experts are unbalanced" in f["message"]


def test_a_late_host_is_explained_by_its_experts(skewed):
    (layer, experts, rank), report = skewed
    if len(experts) < 2:
        pytest.skip("one hot expert of two on its rank: too little extra work "
                    "to make the rank late on this machine")
    late = [f for f in report["findings"] if f["kind"] == "straggler"]
    assert [f["ranks"] for f in late] == [[rank]], report["findings"]
    msg = late[0]["message"]
    assert "it is late because it hosts experts" in msg, msg
    assert f"in layer {layer}" in msg, msg
    assert all(f" {e}" in msg.split("hosts experts")[1] for e in experts), msg


def test_a_balanced_router_makes_no_finding(tmp_path):
    report = run_example(tmp_path / "store.db")
    assert report["findings"] == [], report["findings"]
    by_name = {v["name"]: v for v in report["values"]["names"]}
    # every rank sent each layer's load every step, and the placement once
    assert by_name["moe.load.1"]["steps"] == STEPS
    assert by_name["moe.load.1"]["ranks"] == [0, 1, 2, 3]
    place = by_name["moe.placement.1"]
    assert place["steps"] == 1
    assert place["latest"]["ranks"][0]["values"] == [0, 0, 1, 1, 2, 2, 3, 3]
