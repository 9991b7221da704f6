"""Tests of stepscope.fp8_stats's statistics (stepscope/_fp8.py) against the
emulated float8 cast of examples/fp8_emulated.py (round to nearest even on
the format's grid, subnormals included, clipped at the largest value):
what the cast clips and what it flushes to zero is counted exactly, also at
the boundaries (the largest value, the midpoint above it, half the smallest
subnormal), for random tensors of several dtypes and scales, and for
invalid scales; the per-step batching sends one vector per statistic with
the labels in the order of first use.  The vectors' path to the controller
is tested end to end by tests/e2e/test_fp8.py."""
import importlib.util
import math

import pytest

torch = pytest.importorskip("torch")

import stepscope  # noqa: E402
from conftest import SOURCE  # noqa: E402
from stepscope import _fp8  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "fp8_emulated", SOURCE / "examples" / "fp8_emulated.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def reference(x, scale, fmt):
    """(saturated, underflow) fractions by the emulated cast: a value is
    clipped when it rounds above the largest value on an unbounded grid,
    and flushed when a non-zero value rounds to zero."""
    y = x.to(torch.float32) * scale
    fmax = FMAX[fmt]
    wide = dict(example.FORMATS)
    wide[fmt] = (float("inf"), *example.FORMATS[fmt][1:])
    old, example.FORMATS = example.FORMATS, wide
    try:
        unbounded = example.round_to_format(y, fmt)
    finally:
        example.FORMATS = old
    rounded = example.round_to_format(y, fmt)
    n = x.numel()
    nonzero = int(torch.count_nonzero(x))
    sat = int(torch.count_nonzero(unbounded.abs() > fmax)) / n
    flushed = int(torch.count_nonzero((rounded == 0) & (x != 0)))
    return sat, flushed / max(nonzero, 1)


def stats(x, scale, fmt):
    return _fp8.compute(x, scale, fmt).tolist()


@pytest.mark.parametrize("fmt,values,sat,under", [
    # e4m3: 448 largest, 480 would be next; the midpoint 464 rounds down to
    # 448 (its mantissa is even), just above it rounds away
    ("e4m3", [448.0, 464.0, 464.00003, 1000.0], 2, 0),
    # e4m3: the smallest subnormal is 2^-9; half of it rounds to the even
    # zero, just above half rounds up to 2^-9
    ("e4m3", [2.0 ** -10, 2.0 ** -10 * (1 + 2 ** -20), 2.0 ** -9, 2.0 ** -11], 0, 2),
    # e5m2: 57344 largest (odd mantissa): the midpoint 61440 rounds up, away
    ("e5m2", [57344.0, 61439.996, 61440.0, 1e6], 2, 0),
    # e5m2: the smallest subnormal is 2^-16
    ("e5m2", [2.0 ** -17, 2.0 ** -17 * (1 + 2 ** -20), 2.0 ** -16, 1e-30], 0, 2),
])
def test_boundaries_match_the_cast(fmt, values, sat, under):
    x = torch.tensor(values + [0.0, 0.0], dtype=torch.float32)
    amax, scale, s, u = stats(x, 1.0, fmt)
    assert amax == pytest.approx(max(values))
    assert scale == 1.0
    assert s == sat / x.numel()
    assert u == under / len(values)  # of the non-zero values; zeros are not
    assert (s, u) == pytest.approx(reference(x, 1.0, fmt))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_random_tensors_match_the_cast(fmt, dtype):
    g = torch.Generator().manual_seed(7)
    for shift in (0, 8, 24, -40):
        # a wide range of magnitudes, some exact zeros
        x = torch.randn(64, 96, generator=g) * torch.exp2(
            torch.randint(-30, 10, (64, 96), generator=g).float() + shift)
        x[::7] = 0
        x = x.to(dtype)
        amax = float(x.abs().max())
        for scale in (FMAX[fmt] / amax, 4 * FMAX[fmt] / amax, 1.0):
            for given in (scale, torch.tensor(scale)):
                got = stats(x, given, fmt)
                assert got[0] == pytest.approx(amax)
                assert got[2:] == pytest.approx(list(reference(x, scale, fmt)))


def test_dynamic_scale_never_saturates():
    # amax * (448 / amax) can land a float32 ulp above 448: not a clip
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        x = torch.randn(33, generator=g) * float(torch.rand((), generator=g) * 100)
        scale = torch.tensor(448.0) / x.abs().max()
        assert stats(x, scale, "e4m3")[2] == 0


def test_invalid_scales():
    zeros = torch.zeros(16)
    amax, scale, sat, under = stats(zeros, torch.tensor(448.0) / zeros.abs().max(), "e4m3")
    assert amax == 0 and scale == math.inf and sat == 0 and under == 0
    x = torch.tensor([1.0, -2.0, 0.0, 1e-3])
    # an infinite scale clips every non-zero value; zeros stay zeros
    assert stats(x, math.inf, "e4m3")[2:] == [0.75, 0.0]
    # a zero scale flushes every non-zero value
    assert stats(x, 0.0, "e4m3")[2:] == [0.0, 1.0]
    got = stats(x, float("nan"), "e5m2")
    assert math.isnan(got[1]) and got[2:] == [0.0, 1.0]
    assert stats(x, -1.0, "e4m3")[1] == -1.0
    # NaN in the tensor: amax NaN, the NaN is neither clipped nor flushed
    y = torch.tensor([1.0, float("nan"), 2.0 ** -12])
    got = stats(y, 1.0, "e4m3")
    assert math.isnan(got[0]) and got[2] == 0 and got[3] == pytest.approx(1 / 3)


def test_empty_tensor():
    assert stats(torch.zeros(0), 2.0, "e5m2") == [0.0, 2.0, 0.0, 0.0]


def test_the_tensor_is_left_alone():
    x = torch.tensor([3.0, -1.0], requires_grad=True)
    before = x.detach().clone()
    stats(x, 448.0 / 3, "e4m3")
    assert torch.equal(x.detach(), before) and x.grad is None


@pytest.mark.parametrize("args,exc,words", [
    ((1, torch.ones(2), 1.0), TypeError, "name"),
    (("", torch.ones(2), 1.0), TypeError, "name"),
    (("a.input", [1.0], 1.0), TypeError, "tensor"),
    (("a.input", torch.ones(2, dtype=torch.int32), 1.0), TypeError, "floating"),
    (("a.input", torch.ones(2), "1"), TypeError, "scale"),
    (("a.input", torch.ones(2), True), TypeError, "scale"),
    (("a.input", torch.ones(2), torch.ones(2)), ValueError, "one element"),
])
def test_bad_arguments(args, exc, words):
    with pytest.raises(exc, match=words):
        stepscope.fp8_stats(*args)


def test_bad_format():
    with pytest.raises(ValueError, match="e4m3, e5m2"):
        stepscope.fp8_stats("a.input", torch.ones(2), 1.0, fmt="e3m4")


def test_noop_without_controller():
    assert not stepscope.enabled()
    stepscope.fp8_stats("a.input", torch.ones(2), 1.0)
    assert _fp8._P.take() == ({}, [])


def test_a_step_is_one_vector_per_statistic():
    sent = []

    def send(name, values, labels):
        if isinstance(values, torch.Tensor):  # statistics: a device column
            assert values.dtype == torch.float64 and values.dim() == 1
            values = values.tolist()
        sent.append((name, values, labels))

    p = _fp8._P
    p.index.clear(), p.labels.clear(), p.rows.clear()
    _fp8.record("fc1.input", torch.tensor([2.0, 0.0]), 224.0, "e4m3")
    _fp8.record("fc1.grad", torch.tensor([1.0]), torch.tensor(57344.0), "e5m2")
    _fp8.flush(send)
    assert [s[0] for s in sent] == list(_fp8.VECTORS)
    assert all(s[2] == ["fc1.input", "fc1.grad"] for s in sent)
    assert dict((s[0], s[1]) for s in sent) == {
        "fp8.amax": [2.0, 1.0], "fp8.scale": [224.0, 57344.0],
        "fp8.saturated": [0.0, 0.0], "fp8.underflow": [0.0, 0.0],
        "fp8.format": [1.0, 2.0]}
    # the next step: a label not recorded has format 0 and NaN statistics;
    # the last call of a label in a step wins
    sent.clear()
    _fp8.record("fc1.grad", torch.tensor([1.0]), 1.0, "e5m2")
    _fp8.record("fc1.grad", torch.tensor([4.0]), 2.0, "e5m2")
    _fp8.flush(send)
    got = dict((s[0], s[1]) for s in sent)
    assert got["fp8.format"] == [0.0, 2.0]
    assert math.isnan(got["fp8.amax"][0]) and got["fp8.amax"][1] == 4.0
    assert got["fp8.scale"][1] == 2.0
    sent.clear()
    _fp8.flush(send)  # nothing recorded: nothing sent
    assert sent == []


def test_auto_mode_float8linear_with_stand_ins(monkeypatch):
    """Auto mode's torchao path (stepscope/_fp8_auto.py), with test doubles:
    torch 1.13 has no float8 dtype and torchao is not installed here, so a
    stand-in module plays torchao.float8.float8_linear (a Float8Linear
    subclass of nn.Linear with a config of dynamic tensorwise casts) and
    float32 plays the float8 dtypes.  Checks the import watch, the module
    paths (DDP's "module." left out), the formats, the dynamic scale and
    the output-gradient hook; not torchao's own behaviour."""
    import enum
    import sys
    import types

    from stepscope import _fp8_auto

    class ScalingType(enum.Enum):
        DYNAMIC = "dynamic"

    class Gran(enum.Enum):
        TENSORWISE = "tensorwise"

    def cast(dtype):
        return types.SimpleNamespace(scaling_type=ScalingType.DYNAMIC,
                                     scaling_granularity=Gran.TENSORWISE,
                                     target_dtype=dtype)

    monkeypatch.setattr(torch, "float8_e4m3fn", torch.float32, raising=False)
    monkeypatch.setattr(torch, "float8_e5m2", torch.float16, raising=False)
    stand_in = types.ModuleType(_fp8_auto._MODULE)

    class Float8Linear(torch.nn.Linear):
        def __init__(self, *a):
            super().__init__(*a)
            self.config = types.SimpleNamespace(
                cast_config_input=cast(None), cast_config_weight=cast(None),
                cast_config_grad_output=cast(None),
                round_scales_to_power_of_2=True)

    stand_in.Float8Linear = Float8Linear
    calls = []
    monkeypatch.setattr(stepscope, "fp8_stats",
                        lambda *a: calls.append(a))
    monkeypatch.setattr(_fp8_auto, "_native", types.SimpleNamespace(
        _auto_on=lambda: True, _current_step=lambda: 0))
    monkeypatch.setattr(_fp8_auto, "_S", type("S", (), dict(
        vars(_fp8_auto._S), names=_fp8_auto.weakref.WeakKeyDictionary(),
        covered=_fp8_auto.weakref.WeakSet(), post=_fp8_auto.weakref.WeakSet(),
        hooked=False)))
    assert _fp8_auto.install(torch)
    watch = sys.meta_path[0]
    try:
        assert isinstance(watch, _fp8_auto._Watch)
        sys.meta_path.remove(watch)
        _fp8_auto._hook(stand_in)  # what the watch does once torchao loads

        class Wrapper(torch.nn.Module):  # in DDP's place
            def __init__(self):
                super().__init__()
                self.module = torch.nn.Sequential(Float8Linear(4, 3))

            def forward(self, x):
                return self.module(x)

        net = Wrapper()
        x = torch.tensor([[0.5, -2.0, 0.0, 1.0]])
        net(x)                 # the first call: input and weight
        net(x).sum().backward()
    finally:
        handles = torch.nn.modules.module._global_forward_pre_hooks
        for k in list(handles):
            if getattr(handles[k], "__qualname__", "").startswith("_hook"):
                del handles[k]
    names = [(c[0], c[3]) for c in calls]
    assert names == [("0.input", "e4m3"), ("0.weight", "e4m3"),
                     ("0.input", "e4m3"), ("0.weight", "e4m3"),
                     ("0.grad", "e5m2")]
    # the dynamic scale: largest value over amax (2), rounded to a power of
    # two (float32 plays the format here, so float32 rounding shows)
    fmax = torch.finfo(torch.float32).max
    scale = float(calls[0][2])
    assert math.frexp(scale)[0] == 0.5
    assert scale == pytest.approx(fmax / 2.0, rel=1e-6)
