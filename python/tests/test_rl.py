"""stepscope.rl_batch and auto mode's "rollout" phase (docs/rl.md).

rl_batch's arguments are checked with clear errors whether or not a
controller records; under `stepscope run --auto` (one rank) a script's
model with a generate method gets the phase "rollout" from the first
forward of its class on, rl_batch's lists and tensors reach the store as
the rl.* vectors with rl.group_size, and phases named by the script
(reward, weight_sync) sit beside auto mode's."""
import array
import importlib.util
import sqlite3
import textwrap

import pytest

import stepscope
from conftest import PYTHON, run_job

torch_missing = importlib.util.find_spec("torch") is None


def test_rl_batch_bad_arguments():
    with pytest.raises(TypeError, match="group_size must be an int"):
        stepscope.rl_batch([1.0, 0.0], [3, 4], 2.0)
    with pytest.raises(ValueError, match="at least 1"):
        stepscope.rl_batch([1.0, 0.0], [3, 4], 0)
    with pytest.raises(ValueError, match="2 rewards but 3 lengths"):
        stepscope.rl_batch([1.0, 0.0], [3, 4, 5], 2)
    with pytest.raises(ValueError, match="not whole groups of 4"):
        stepscope.rl_batch([1.0, 0.0], [3, 4], 4)
    with pytest.raises(ValueError, match="2 rewards but 1 advantages"):
        stepscope.rl_batch([1.0, 0.0], [3, 4], 2, [0.5])
    with pytest.raises(TypeError, match="sequence of numbers"):
        stepscope.rl_batch(3, [3], 1)
    # no controller: checked, then nothing
    stepscope.rl_batch([1.0, 0.0], array.array("d", [3, 4]), 2, (1, -1))


SCRIPT = textwrap.dedent('''
    import torch
    import stepscope

    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

        @torch.no_grad()
        def generate(self, x, n):
            for _ in range(n):
                x = self(x)
            return x

    model = Policy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(5):
        out = model.generate(torch.randn(8, 4), 3)
        with stepscope.phase("reward"):
            rewards = [float(i % 2) for i in range(8)]
            lengths = torch.arange(8) + 1
            stepscope.rl_batch(rewards, lengths, 4,
                               torch.tensor(rewards) - 0.5)
        model(out).sum().backward()
        opt.step()
        opt.zero_grad()
        with stepscope.phase("weight_sync"):
            pass
''')


@pytest.mark.skipif(torch_missing, reason="PyTorch is not installed")
def test_auto_rollout_and_batch(store, tmp_path):
    script = tmp_path / "rl_auto.py"
    script.write_text(SCRIPT)
    job = run_job(store, 1, [PYTHON, str(script)], extra=["--auto"])
    assert job.returncode == 0, job.stdout + job.stderr
    rows = job.rank_steps()
    assert sorted(rows) == [(s, 0) for s in range(5)]
    # generate is wrapped at the first forward of Policy: steps 1 on; an
    # auto step ends at the optimizer step, so the weight_sync after it
    # is the next step's
    for (step, rank), row in rows.items():
        assert {"reward", "forward"} <= set(row["phases"]), (step, row)
        if step >= 1:
            assert {"rollout", "weight_sync"} <= set(row["phases"]), (step,
                                                                     row)
            # its forwards are inside it, not phases of their own
            assert row["counts"].get("forward", 1) == 1, (step, row)
    con = sqlite3.connect(str(job.db))
    got = {(name, n) for name, n in con.execute(
        "SELECT name, n FROM rank_values WHERE step = 2 AND name LIKE 'rl.%'")}
    con.close()
    assert got == {("rl.reward", 8), ("rl.length", 8),
                   ("rl.advantage", 8)}, got
