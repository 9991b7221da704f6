"""Auto mode's per-step work in C (stepscope/native_auto.c): the gradient
clock's C-callable hooks and its learning, DDP's forward arming it, and,
in a real 1-rank DDP job under `stepscope run --auto`, the events the C
side records (the data fetches before the first step, the phases, the
all-reduce arrival and wait, RSS) with no stepscope Python code running
per step."""
import importlib.util
import os

import pytest

from conftest import PYTHON, run_job

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for "
                                "this Python")


def test_clock_hooks_are_c_callables_that_note_the_last_gradient():
    """A _Clock's hooks, registered with torch, note when and which
    parameter's gradient came last; settle() gives that time once per
    armed pass, learns the last parameter and asks for its hook alone
    after narrow_after passes, and for every hook back when it then does
    not fire; a closed clock asks for nothing."""
    import torch
    from stepscope import _native

    asked = []
    p = [torch.nn.Parameter(torch.ones(2)) for _ in range(3)]
    c = _native._Clock(3, asked.append, 2, 100)
    hooks = [c.hook(i) for i in range(3)]
    assert all(type(h).__name__ == "_ClockHook" for h in hooks)
    with pytest.raises(IndexError):
        c.hook(3)
    handles = [t.register_hook(h) for t, h in zip(p, hooks)]
    c.nhooks = 3

    def pass_(armed, params=p):
        c.armed = armed
        before = _native.now_ns()
        sum((t * t).sum() for t in params).backward()
        return before, c.settle()

    assert pass_(False)[1] is None and c.ns is None and c.last is None
    before, ns = pass_(True)
    assert before <= ns <= _native.now_ns() and c.candidate is not None
    assert asked == []
    pass_(True)
    assert asked == [c.candidate]  # narrowed to the last one's hook
    last = c.candidate
    for h in handles:
        h.remove()
    handles = [p[last].register_hook(c.hook(last))]
    c.nhooks = 1
    assert pass_(True)[1] is not None
    others = [t for i, t in enumerate(p) if i != last]
    assert pass_(True, others)[1] is None  # its hook did not fire
    assert asked[-1] == -1 and c.candidate is None  # every hook back
    c.close()
    c.armed = True
    assert c.settle() is None and asked[-1] == -1 and len(asked) == 2


def test_arm_forward_arms_the_clock_of_its_ddp():
    """_ArmForward calls the forward it wraps and arms the clock found in
    the instance's __dict__ when the forward prepared an all-reduce
    (require_backward_grad_sync, gradients enabled); objects without a
    clock pass through."""
    import torch
    from stepscope import _native

    class Fake:
        def forward(self, x):
            return x + 1

    Fake.forward = _native._ArmForward(Fake.forward, torch.is_grad_enabled)
    f = Fake()
    assert f.forward(1) == 2  # no clock: nothing else happens
    c = _native._Clock(1, lambda i: None, 3, 200)
    f.__dict__["_stepscope_clock"] = c
    f.require_backward_grad_sync = True
    assert f.forward(2) == 3 and c.armed
    with torch.no_grad():
        f.forward(0)
    assert not c.armed
    f.require_backward_grad_sync = False
    f.forward(0)
    assert not c.armed
    assert Fake.forward.__wrapped__.__name__ == "forward"


def test_outermost_kind_refuses_callbacks_and_unknown_kinds():
    from stepscope import _native

    with pytest.raises(ValueError):
        _native._Outermost(len, None, len, None, kind=_native.AUTO_DATA)
    with pytest.raises(ValueError):
        _native._Outermost(len, None, kind=99)
    assert _native._Outermost(len, "x", kind=_native.AUTO_DATA)("ab") == 2


STEPS_SCRIPT = r'''
import json, os, sys
import torch, torch.distributed as dist
from stepscope import _native, auto

dist.init_process_group("gloo")
ddp = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(64, 4)), batch_size=4)
it = iter(loader)
early = [next(it) for _ in range(2)]  # before the first step: pending
state_before = list(_native._auto_state())
hook_types = sorted({type(h).__name__ for p in ddp.module.parameters()
                     for h in p._backward_hooks.values()})

def step(x):
    ddp(x).sum().backward()
    opt.step()
    opt.zero_grad()

step(early[0][0])
step(early[1][0])
for _ in range(4):
    step(next(it)[0])
# Steps from here on run no stepscope Python code at all.
here = os.path.dirname(auto.__file__)
calls = []

def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(here):
        calls.append(frame.f_code.co_name)

sys.setprofile(profile)
for _ in range(4):
    step(next(it)[0])
sys.setprofile(None)
hooked = sum(len(p._backward_hooks) for p in ddp.module.parameters())
print("RESULT " + json.dumps({
    "rank": 0, "state_before": state_before, "hook_types": hook_types,
    "state_after": list(_native._auto_state()), "python_calls": calls,
    "hooked": hooked}))
dist.destroy_process_group()
'''


@pytest.mark.parametrize("every", ["0", "3"])
def test_c_side_records_the_steps_without_python_per_step(store, tmp_path,
                                                          every):
    """A 1-rank DDP job: the data fetched before the first step is added
    to it, every step has its phases, the all-reduce arrival (sync) and
    wait (phase, nested in backward) and RSS; the gradient hooks are C
    callables, narrowed to one; and once warm, a step runs no Python
    function of the stepscope package (numerics off), but for the
    checksums of the steps due (--checksum-every 3: steps 6 and 9 of the
    four steps 6-9 watched)."""
    script = tmp_path / "steps.py"
    script.write_text(STEPS_SCRIPT)
    job = run_job(store, 1, [PYTHON, str(script)],
                  extra=["--auto", "--numerics", "off"],
                  env=dict(os.environ, STEPSCOPE_CHECKSUM_EVERY=every))
    assert job.returncode == 0, job.stdout + job.stderr
    assert "stepscope: auto mode" not in job.stderr, job.stderr
    res = job.results()[0]
    assert res["state_before"] == [0, 3, 1]  # not started, 3 fetches, 1 DDP
    assert res["hook_types"] == ["_ClockHook"]
    assert res["state_after"] == [1, 0, 1]
    assert res["hooked"] == 1
    calls = res["python_calls"]
    if every == "0":
        assert calls == []
    else:
        assert calls.count("_after_optimizer") == 2, calls
        assert calls.count("after_optimizer_step") == 2, calls
    rows = job.rank_steps()
    # 10 optimizer steps are steps 0-9; the one opened by the last never ends
    assert sorted(s for s, _ in rows) == list(range(10))
    assert rows[(0, 0)]["counts"]["data"] == 3  # 2 pending + iter()
    for (s, _), row in rows.items():
        assert {"forward", "backward", "optimizer", "allreduce"} <= \
            set(row["phases"]), (s, row)
        assert row["counts"].get("backward", 1) == 1  # 1s are left out
        assert row["syncs"] and "allreduce" in row["syncs"], (s, row)
        assert row["self"]["allreduce"] == row["phases"]["allreduce"]
        assert row["self"]["backward"] < row["phases"]["backward"]
        assert row["rss"] and row["rss"] > 1 << 20
    for s in range(1, 10):
        row = rows[(s, 0)]
        data = row["counts"].get("data", 1) if "data" in row["phases"] else 0
        assert data == (1 if s > 1 else 0), (s, row)
