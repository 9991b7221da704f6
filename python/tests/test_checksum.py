"""stepscope._checksum without a controller: the XXH3 of memory in place
agrees with the buffer form and sees one flipped bit; the device reduction
(run here on CPU tensors, the same torch code a GPU runs: there is no GPU
on this machine) sees one flipped bit in every position tried; replica
groups parse and resolve; many parameters fold into buckets."""
import struct

import pytest

from stepscope import _checksum, _native

torch = pytest.importorskip("torch")


def test_hash_in_place_matches_buffer_and_sees_a_bit():
    t = torch.arange(1000, dtype=torch.float32)
    h = _native._hash_ptrs([t.data_ptr()], [t.numel() * 4])[0]
    assert h == _native.hash_buffer(t.numpy())
    assert 0 <= h < 2 ** 64
    t.view(torch.int32)[517] ^= 1 << 9
    assert _native._hash_ptrs([t.data_ptr()], [t.numel() * 4])[0] != h
    # big enough to release the GIL, and an empty region
    big = torch.zeros(1 << 20)
    hs = _native._hash_ptrs([big.data_ptr(), big.data_ptr()], [4 << 20, 0])
    assert hs[0] == _native.hash_buffer(big.numpy())
    assert hs[1] == _native.hash_buffer(b"")


def test_hash_ptrs_refuses_bad_input():
    with pytest.raises(ValueError):
        _native._hash_ptrs([1, 2], [3])
    with pytest.raises(ValueError):
        _native._hash_ptrs([0], [8])


@pytest.mark.parametrize("device_path", [False, True])
def test_every_single_bit_flip_is_seen(device_path):
    p = torch.randn(33, 7)
    base, _ = _checksum.hash_tensors(torch, [p], device_path)
    raw = p.view(-1).view(torch.int32)
    for index in (0, 100, 230):
        for bit in range(32):
            raw[index] ^= (1 << bit) if bit < 31 else -(1 << 31)
            h, _ = _checksum.hash_tensors(torch, [p], device_path)
            assert h != base, (index, bit)
            raw[index] ^= (1 << bit) if bit < 31 else -(1 << 31)
    assert _checksum.hash_tensors(torch, [p], device_path)[0] == base


def test_device_reduction_of_odd_sizes_and_types():
    for t in (torch.ones(3, dtype=torch.uint8), torch.ones(5).double(),
              torch.zeros(0)):
        (s1, s2), = _checksum._device_pairs(torch, [t])
        assert isinstance(s1, int) and isinstance(s2, int)


def test_groups_parse_and_resolve(monkeypatch):
    assert _checksum.parse_groups("0,1;2-3") == [[0, 1], [2, 3]]
    with pytest.raises(ValueError):
        _checksum.parse_groups("0,1;1,2")
    monkeypatch.setenv("RANK", "3")
    env = {"STEPSCOPE_REPLICA_GROUPS": "0,1;2-3"}
    assert _checksum.group_key(environ=env) == 2
    assert _checksum.group_key(environ={}) == 0
    assert _checksum.group_key(ddp_ranks=[3, 5], environ={}) == 3
    _checksum.replica_group([3, 1])
    try:
        assert _checksum.group_key(environ=env) == 1
    finally:
        _checksum._group = None


def test_interval_from_the_environment():
    assert _checksum._env_every({}) == _checksum.AUTO
    assert _checksum._env_every({"STEPSCOPE_CHECKSUM_EVERY": "0"}) == 0
    assert _checksum._env_every({"STEPSCOPE_CHECKSUM_EVERY": "8"}) == 8
    assert _checksum._env_every({"STEPSCOPE_CHECKSUM_EVERY": "x"}) == \
        _checksum.AUTO


def test_many_parameters_fold_into_buckets():
    n = _checksum.MAX_VALUES * 2 + 3
    names = ["p%d" % i for i in range(n)]
    hashes = list(range(n))
    labels, folded = _checksum._buckets(names, hashes)
    assert len(labels) <= _checksum.MAX_VALUES and len(labels) == len(folded)
    assert labels[0] == "p0..p2"
    assert folded[0] == _native.hash_buffer(struct.pack("<3Q", 0, 1, 2))


def test_a_pause_between_steps_does_not_make_every_step_checksum(monkeypatch):
    """AUTO's interval follows the running mean of the step time; one long
    gap between two steps (an evaluation, a stall, a benchmark's other
    half) moves that mean by at most PAUSE_CAP-fold, so the steps after it
    keep an interval near the one before (without the cap, a gap of 100
    steps made the next steps checksum every time)."""
    clock = [0]
    monkeypatch.setattr(_native, "now_ns", lambda: clock[0])
    monkeypatch.setattr(_native, "metric", lambda *a: None)
    cs = _checksum.Checksums(torch, every=_checksum.AUTO)
    cs.cost_ns = 64 * 1000.0  # a checksum costs 64 steps' 1 %
    monkeypatch.setattr(cs, "checksum", lambda optimizer=None: cs._decide())
    step = 0
    for _ in range(20):
        clock[0] += 100_000  # 0.1 ms steps
        cs.after_optimizer_step(step=step)
        step += 1
    assert cs.auto_every == 64
    clock[0] += 100 * 100_000  # a gap of 100 steps
    cs.after_optimizer_step(step=step)
    assert cs.step_ns <= 1.6 * 100_000 + 1
    cs._decide()
    assert cs.auto_every >= 32
