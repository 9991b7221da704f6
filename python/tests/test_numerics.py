"""Tests of auto mode's numerics (stepscope/_numerics.py) in this process,
without a controller: the recorder's metric and vector calls are replaced
by ones that keep what they are given, and auto mode's switch reads as on.
The end-to-end behaviour on DDP ranks is tests/e2e/test_numerics.py."""
import importlib.util
import math

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for "
                                "this Python")


@pytest.fixture
def kept(monkeypatch):
    """What the numerics record: {"metric": {name: value}, "values":
    {name: list}, "labels": {name: list}}."""
    from stepscope import _native
    out = {"metric": {}, "values": {}, "labels": {}}
    monkeypatch.setattr(_native, "_auto_on", lambda: True)
    monkeypatch.setattr(_native, "metric",
                        lambda n, v: out["metric"].__setitem__(n, v))
    monkeypatch.setattr(_native, "values",
                        lambda n, v: out["values"].__setitem__(n, list(v)))
    monkeypatch.setattr(_native, "values_labels",
                        lambda n, v: out["labels"].__setitem__(n, list(v)))
    return out


def model():
    """A small model whose last layer's output turns NaN while
    net.poison is True (a hook registered before the numerics' own, as a
    module's own code would)."""
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                              torch.nn.Linear(8, 2))
    net.poison = False
    net[2].register_forward_hook(
        lambda m, i, o: o * float("nan") if net.poison else o)
    return net


def train_step(num, net, opt, x, loss_of):
    """One training step as auto mode sees it, on input X, its loss
    LOSS_OF(the model's output)."""
    num.on_forward_root(net)
    loss = loss_of(net(x))
    num.on_backward(loss)
    loss.backward()
    num.before_optimizer()
    opt.step()
    opt.zero_grad()
    num.step_end()
    num.step_begun()


def step(num, net, opt, poison=False):
    """One training step; the last layer's output NaN when POISON."""
    import torch
    net.poison = poison

    def loss_of(out):
        net.poison = False
        return out.square().mean()
    train_step(num, net, opt, torch.ones(3, 4), loss_of)


def test_light_metrics_of_a_clean_step(kept):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.LIGHT, update_every=1)
    step(num, net, torch.optim.SGD(net.parameters(), lr=0.1))
    m = kept["metric"]
    assert m["numerics.loss_nonfinite"] == 0 and m["numerics.loss"] > 0
    assert m["numerics.grad_nonfinite"] == 0 and m["numerics.grad_norm"] > 0
    assert m["numerics.param_nonfinite"] == 0
    expect = math.sqrt(sum(float(p.detach().square().sum())
                           for p in net.parameters()))
    assert abs(m["numerics.param_norm"] - expect) < 1e-5 * expect
    assert 0 < m["numerics.update_ratio"] < 1
    assert m["numerics.errors"] == 0
    assert "numerics.origin_dir" not in m and not kept["values"]


def test_full_mode_names_the_module_where_nan_is_born(kept):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.FULL)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    step(num, net, opt, poison=True)
    m = kept["metric"]
    assert m["numerics.origin_dir"] == _numerics.FORWARD
    labels = kept["labels"]["numerics.module_nonfinite"]
    assert labels == ["(Sequential)", "0", "1", "2"]
    assert labels[int(m["numerics.origin_index"])] == "2"
    assert m["numerics.origin_ns"] >= 0
    assert m["numerics.loss_nonfinite"] == 1 and "numerics.loss" not in m
    nf = kept["values"]["numerics.module_nonfinite"]
    assert nf[1] == 0 and nf[3] == 6 and nf[0] == 6  # head and the root
    assert kept["labels"]["numerics.param_grad_norm"][0] == "0.weight"


def test_full_mode_names_the_input_when_no_module_made_it(kept):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.FULL)
    x = torch.ones(3, 4)
    x[1, 2] = float("nan")
    train_step(num, net, torch.optim.SGD(net.parameters(), lr=0.1), x,
                  lambda out: out.square().mean())
    m = kept["metric"]
    assert m["numerics.origin_dir"] == _numerics.INPUT
    labels = kept["labels"]["numerics.module_nonfinite"]
    # the first module handed it, not the layer inside that passed it on
    assert labels[int(m["numerics.origin_index"])] == "(Sequential)"
    assert m["numerics.origin_ns"] >= 0


def test_full_mode_names_a_loss_made_outside_the_modules(kept):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.FULL)
    train_step(num, net, torch.optim.SGD(net.parameters(), lr=0.1),
                  torch.ones(3, 4),
                  lambda out: (out - 100).log().mean())  # log of negatives
    m = kept["metric"]
    assert m["numerics.loss_nonfinite"] == 1
    # every module's output was finite: not the first gradient's parameter
    assert max(kept["values"]["numerics.module_nonfinite"]) == 0
    assert m["numerics.origin_dir"] == _numerics.LOSS
    assert "numerics.origin_index" not in m
    assert m["numerics.origin_ns"] >= 0


def test_full_mode_names_a_backward_origin_only_with_a_finite_loss(kept):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.FULL)

    def nan_gradient(out):
        out.register_hook(lambda g: g * float("nan"))
        return out.square().mean()
    train_step(num, net, torch.optim.SGD(net.parameters(), lr=0.1),
                  torch.ones(3, 4), nan_gradient)
    m = kept["metric"]
    assert m["numerics.loss_nonfinite"] == 0
    assert m["numerics.origin_dir"] == _numerics.BACKWARD
    labels = kept["labels"]["numerics.param_grad_norm"]
    assert labels[int(m["numerics.origin_index"])].startswith("2.")


def test_a_failing_hook_is_counted_and_training_goes_on(kept, monkeypatch):
    import torch
    from stepscope import _numerics
    net = model()
    num = _numerics.Numerics(torch, _numerics.FULL)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    real = torch._foreach_norm

    def broken(*a, **k):
        raise RuntimeError("injected")
    monkeypatch.setattr(torch, "_foreach_norm", broken)
    step(num, net, opt)     # no exception reaches the training step
    step(num, net, opt)
    monkeypatch.setattr(torch, "_foreach_norm", real)
    assert kept["metric"]["numerics.errors"] >= 2
    assert "numerics.grad_norm" not in kept["metric"]
    step(num, net, opt)     # and it recovers
    assert kept["metric"]["numerics.grad_norm"] > 0


def _norm_of_grads(net):
    return math.sqrt(sum(float(p.grad.detach().square().sum())
                         for p in net.parameters() if p.grad is not None))


def measured_step(kept, num, net, opt):
    """One training step as auto mode sees it: the gradient norm the
    numerics recorded (None when none) and the one of the gradients."""
    import torch
    num.on_forward_root(net)
    loss = net(torch.ones(3, 4)).square().mean()
    num.on_backward(loss)
    loss.backward()
    want = _norm_of_grads(net)
    num.before_optimizer()
    opt.step()
    opt.zero_grad(set_to_none=True)
    kept["metric"].pop("numerics.grad_norm", None)
    num.step_end()
    num.step_begun()
    return kept["metric"].get("numerics.grad_norm"), want


def test_light_keeps_one_gradient_hook_after_the_first_step(kept):
    import torch
    from stepscope import _numerics
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    num = _numerics.Numerics(torch, _numerics.LIGHT)
    step(num, net, opt)
    assert len(num.grad_handles) == 1  # the others removed
    for _ in range(3):
        got, want = measured_step(kept, num, net, opt)
        assert got is not None and abs(got - want) < 1e-5 * want
    assert len(num.grad_handles) == 1
    full, net2 = _numerics.Numerics(torch, _numerics.FULL), model()
    step(full, net2, torch.optim.SGD(net2.parameters(), lr=0.1))
    assert len(full.grad_handles) == 4  # full mode times every gradient


def test_light_takes_every_hook_back_when_the_graph_changes(kept):
    """The kept hook's parameter gets no gradient in a step (a branch not
    taken): that step has no gradient norm, and from the next one every
    parameter is hooked again, for good."""
    import torch
    from stepscope import _numerics

    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 1)
            self.skip_head = False

        def forward(self, x):
            h = self.body(x)
            return h if self.skip_head else self.head(h)

    torch.manual_seed(0)
    net = Branchy()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    num = _numerics.Numerics(torch, _numerics.LIGHT)

    def one(skip):
        net.skip_head = skip
        return measured_step(kept, num, net, opt)

    one(False)
    assert len(num.grad_handles) == 1
    got, _ = one(True)  # the head, whose gradient came first, is skipped
    assert got is None
    assert len(num.grad_handles) == 4
    for skip in (True, False, True):
        got, want = one(skip)
        assert got is not None and abs(got - want) < 1e-5 * want
    assert len(num.grad_handles) == 4
