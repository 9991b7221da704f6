"""RL post-training on real gloo DDP ranks: examples/grpo_train.py (GRPO of
a tiny causal language model, 4 ranks) under `stepscope run`, docs/rl.md.

The served dashboard shows the RL panel with the long-tail rank.  The clean run learns (the mean reward of all ranks over the last steps is
well above the first steps') and gets no finding; each switch is named
with its finding and rank: one rank's sampler that never stops
(rollout_long_tail on that rank, and the straggler finding saying so), a
reward that becomes constant (reward_collapse, with the constant), a
learning rate blown up (kl_spike from that step).  The rank-side records
reach the store: the rl.* vectors, rl.group_size and the TRL-named
metrics, and the RL phases."""
import importlib.util
import json
import sqlite3

import pytest

from conftest import SOURCE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "grpo_train.py"
NPROCS = 4
RL_KINDS = ("rollout_long_tail", "reward_collapse", "kl_spike",
            "entropy_collapse")


def run(store, *args):
    cmd = python_cmd(SCRIPT, *args)
    job = run_job(store, NPROCS, cmd, extra=("--no-http",), env=ddp_env(),
                  timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr
    return job


def evidence(f):
    ev = f["evidence"]
    return ev if isinstance(ev, dict) else json.loads(ev)


def of_kind(job, kind):
    return [f for f in job.findings() if f["kind"] == kind]


def metrics_by_step(db, name):
    """{step: [value of each rank]} of metric NAME."""
    con = sqlite3.connect(str(db))
    out = {}
    for step, m in con.execute("SELECT step, metrics FROM rank_steps"):
        v = json.loads(m).get(name) if m else None
        if v is not None:
            out.setdefault(step, []).append(v)
    con.close()
    return out


def test_clean_run_learns_with_no_finding(store):
    job = run(store)
    kinds = [f["kind"] for f in job.findings()]
    assert not kinds, (kinds, job.stderr)
    reward = metrics_by_step(job.db, "reward")
    steps = sorted(reward)
    assert len(steps) == 40 and all(len(reward[s]) == NPROCS for s in steps)
    first = sum(sum(reward[s]) for s in steps[:10]) / (10 * NPROCS)
    last = sum(sum(reward[s]) for s in steps[-10:]) / (10 * NPROCS)
    assert last >= first + 0.2, (first, last)
    # TRL's names, the group size, the vectors and the phases are stored
    con = sqlite3.connect(str(job.db))
    m, phases = con.execute("SELECT metrics, phases FROM rank_steps "
                            "WHERE step = 5 AND rank = 1").fetchone()
    names = set(json.loads(m))
    assert {"kl", "entropy", "clip_ratio/region_mean", "reward", "reward_std",
            "completions/mean_length", "frac_reward_zero_std",
            "rl.group_size"} <= names, names
    assert set(json.loads(phases)) == {"rollout", "reward", "reference",
                                       "update", "weight_sync"}
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "rank_values" in tables
    con.close()


@pytest.mark.parametrize("rank", [2])
def test_long_tail_rank_named(store, rank):
    job = run(store, "--long-rank", str(rank))
    fs = of_kind(job, "rollout_long_tail")
    assert len(fs) == 1, (job.findings(), job.stderr)
    f = fs[0]
    assert f["ranks"] == [rank], f
    ev = evidence(f)
    assert ev["rank"] == rank and ev["longest_tokens"] == 24, ev
    assert ev["others_longest_tokens"] <= 4, ev
    assert ev["waited_ms_total"] > 0 and ev["ranks_waiting"] == 3, ev
    assert f["phase"] == "rollout"
    assert not [k for k in ("reward_collapse", "kl_spike",
                            "entropy_collapse") if of_kind(job, k)]
    for s in of_kind(job, "straggler"):
        assert s["ranks"] == [rank], s
        if evidence(s)["mode"] == "persistent":
            assert "its rollouts set the pace" in s["message"], s


def test_constant_reward_collapse(store):
    job = run(store, "--constant-reward-step", "12")
    fs = of_kind(job, "reward_collapse")
    assert len(fs) == 1, (job.findings(), job.stderr)
    f = fs[0]
    ev = evidence(f)
    assert ev["constant_reward"] == 1 and ev["frac_reward_zero_std"] >= 0.9
    assert f["ranks"] == list(range(NPROCS)), f
    assert f["first_step"] == 12, f
    assert not of_kind(job, "rollout_long_tail")


def test_lr_blowup_kl_spike(store):
    job = run(store, "--lr-blowup-step", "15")
    fs = of_kind(job, "kl_spike")
    assert fs, (job.findings(), job.stderr)
    assert fs[0]["first_step"] >= 15, fs
    ev = evidence(fs[0])
    assert ev["ratio"] >= 5, ev
    assert not of_kind(job, "rollout_long_tail")
    assert not of_kind(job, "reward_collapse")


def test_dashboard_rl_panel(store, tmp_path):
    """The served dashboard of a run with a long-tail rank shows the RL
    panel: every rank's completion lengths, the rollout over the steps,
    and rank 2 the slowest in most of them; a run without rl_batch shows
    no panel.  Skipped without chromium and chromedriver."""
    import subprocess
    import time

    dash = pytest.importorskip("test_dashboard")
    if not dash.CHROMIUM or not dash.CHROMEDRIVER:
        pytest.skip("chromium and chromedriver are needed")
    from conftest import STEPSCOPE, example
    run(store, "--long-rank", "2", "--steps", "20")
    plain = subprocess.run([str(STEPSCOPE), "run", "-n", "2", "--db", str(store),
                            "--", *example("--steps", "10", "--compute-ms", "1")],
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    port = dash.free_port()
    base = f"http://127.0.0.1:{port}/"
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(store),
                            "--http", f"127.0.0.1:{port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    browser = dash.Browser(tmp_path)
    try:
        deadline = time.time() + 20
        while True:
            try:
                dash.http_json("GET", base + "api/runs/1/values")
                break
            except OSError:
                if time.time() > deadline or srv.poll() is not None:
                    raise AssertionError("stepscope serve did not answer")
                time.sleep(0.1)
        browser.get(base + "#run=1")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "+document.body.dataset.rlRanks === 4", "the RL panel")
        assert browser.js("return document.getElementById('panel-rl').hidden") is False
        assert int(browser.js("return +document.body.dataset.rlSteps")) == 20
        rows = browser.js("return [...document.querySelectorAll('#rl-ranks tr')]"
                          ".slice(1).map(r => r.cells[1].textContent + '|' + "
                          "r.cells[3].textContent)")
        assert rows[2].startswith("24|"), rows
        slowest = [int(r.split("|")[1].split()[0]) for r in rows]
        assert max(slowest) == slowest[2] and slowest[2] >= 15, rows
        dash.keep_artifact(browser.screenshot(tmp_path / "rl-panel.png"))
        browser.js("location.hash = '#run=2'; location.reload()")
        browser.wait_for("return document.body.dataset.state === 'ready' && "
                         "document.body.dataset.runId === '2'", "run 2")
        time.sleep(1)
        assert browser.js("const p = document.getElementById('panel-rl');"
                          "return p === null || p.hidden") is True
        assert dash.errors(browser.console()) == []
    finally:
        browser.close()
        srv.kill()
        srv.communicate()
