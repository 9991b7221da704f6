"""Tests of the workload API's Python side (stepscope/_workloads.py and
stepscope.expert_load, expert_placement, shard_load): a placement given
as a mapping or a sequence (or a tensor) becomes one vector by expert;
bad layers, tables and placements are refused with a clear error; the
calls are no-ops without a controller; the step's host tensors are
concatenated per dtype and handed to the recorder as float64 slices.
The vectors' way to the controller and its findings are tested end to
end by tests/e2e/test_moe.py and test_embedding.py."""
import ctypes

import pytest

torch = pytest.importorskip("torch")

import stepscope  # noqa: E402
from stepscope import _workloads  # noqa: E402


def test_placement_from_a_sequence_a_mapping_or_a_tensor():
    want = [0.0, 0.0, 1.0, 1.0]
    assert _workloads.placement_vector([0, 0, 1, 1]) == want
    assert _workloads.placement_vector((0, 0, 1, 1)) == want
    assert _workloads.placement_vector({3: 1, 0: 0, 2: 1, 1: 0}) == want
    assert _workloads.placement_vector(torch.tensor([0, 0, 1, 1])) == want
    # a mapping may leave experts out: -1, "not known"
    assert _workloads.placement_vector({2: 3}) == [-1.0, -1.0, 3.0]


@pytest.mark.parametrize("bad,words", [
    ([0, -1], "rank -1"),
    ([0, 1.5], "rank 1.5"),
    ({-2: 0}, "expert -2"),
    ([], "no experts"),
    (range(1025), "at most 1024"),
])
def test_bad_placements_are_refused(bad, words):
    with pytest.raises(ValueError, match=words):
        stepscope.expert_placement(0, bad)


@pytest.mark.parametrize("call,exc,words", [
    (lambda: stepscope.expert_load(1.5, [1]), TypeError, "layer must be an int or a str"),
    (lambda: stepscope.expert_load(True, [1]), TypeError, "layer must be an int or a str"),
    (lambda: stepscope.expert_load("x" * 50, [1]), ValueError, "1..49 bytes"),
    (lambda: stepscope.shard_load("", [1]), ValueError, "1..54 bytes"),
    (lambda: stepscope.expert_load(0, torch.ones(2, 2)), ValueError, "1-D tensor"),
])
def test_bad_arguments(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


def test_names():
    assert _workloads.load_name(3) == "moe.load.3"
    assert _workloads.load_name("blocks.3.moe") == "moe.load.blocks.3.moe"
    assert _workloads.shard_name("items") == "emb.load.items"


def test_noop_without_controller():
    assert not stepscope.enabled()
    stepscope.expert_placement(7, [0, 1])
    stepscope.expert_load(7, torch.tensor([3, 4]))
    stepscope.expert_load(7, [3, 4])
    stepscope.shard_load("items", torch.tensor([1, 2, 3, 4]))
    assert _workloads.host_loads == []  # no step open: nothing kept


def test_host_loads_are_flushed_per_dtype_as_float64():
    _workloads.host_loads.extend([
        ("moe.load.0", torch.tensor([1, 2, 3])),
        ("emb.load.t", torch.tensor([4.5, 5.5], dtype=torch.float32)),
        ("moe.load.1", torch.tensor([7, 8])),
    ])
    got = {}

    def record(name, address, n, owner):
        assert owner.dtype == torch.float64
        got[name] = list((ctypes.c_double * n).from_address(address))

    _workloads.flush(record)
    assert got == {"moe.load.0": [1, 2, 3], "moe.load.1": [7, 8],
                   "emb.load.t": [4.5, 5.5]}
    assert _workloads.host_loads == []
