"""End to end: restarts (docs/fault-tolerance.md, "Restarts") on a real DDP
job, examples/ddp_checkpoint.py (2 ranks, gloo on CPU, a checkpoint every 4
steps, resumed from when it starts again), under `stepscope run --auto`.

Each test watches every process the job ever had (the controller's
descendants, sampled) and checks that none is left once it ended.

  - a rank raises at step 10 in attempt 0 only: one restart, exit 0, the
    second attempt's steps continue from the checkpoint of step 7, the lost
    work is the steps after it, and the goodput adds up to the wall time;
  - a rank SIGKILLed by pid: restarted, exit 0;
  - a hang with --on-hang restart: restarted, the attempt's cause is hang;
  - an import error: not retried after the second identical failure;
  - a failing shell job whose last line differs per attempt: the backoff
    doubles, TORCHELASTIC_* reach the ranks, and the hourly budget stops it;
  - two nodes on loopback: a rank failure on node 1 restarts both nodes; a
    node lost past the heartbeat timeout joins again for the next attempt;
  - an injected fault (--inject) ends attempt 0 only: it fires once per
    run, so attempt 1 completes;
  - a health check that fails only before attempt 1 (node 0's, then node
    1's agent's): the job stops there, cause health_check, not restarted;
  - bad restart flags are usage errors.
"""
import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SOURCE, STEPSCOPE, Job, wait_gone
from jobs import free_port, descendants, job_args
from test_ddp import ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "ddp_checkpoint.py"
TIMEOUT = 240


def run(store, nprocs, cmd, extra, during=None):
    """Runs the job, sampling its processes; returns (Job, pids seen)."""
    args = job_args(store, nprocs, cmd, extra)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ddp_env())
    procs = set()
    try:
        deadline = time.time() + TIMEOUT
        while proc.poll() is None and time.time() < deadline:
            procs |= set(descendants(proc.pid))
            if during:
                during()
            time.sleep(0.1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Job(subprocess.CompletedProcess(args, proc.returncode, out, err),
               store), sorted(procs)


def ddp(store, ckpt, *script_args, extra=(), during=None):
    cmd = python_cmd(SCRIPT, "--checkpoint", str(ckpt), "--save-every", "4",
                     *script_args)
    return run(store, 2, cmd, ["--auto", *extra], during)


def attempts(db):
    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT attempt, cause, first_step, last_step, "
                       "resumed_from, started_at, ended_at FROM attempts "
                       "ORDER BY attempt").fetchall()
    con.close()
    return rows


def events(db, kind):
    con = sqlite3.connect(str(db))
    rows = [r[0] for r in con.execute(
        "SELECT message FROM events WHERE kind = ? ORDER BY id", (kind,))]
    con.close()
    return rows


def goodput(store):
    out = subprocess.run([str(STEPSCOPE), "goodput", "--json", "--db",
                          str(store), "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def check_sums(g):
    """Badput categories and productive time add up to the wall time
    (within 1 %), the run's and each attempt's."""
    assert abs(sum(g["ms"].values()) - g["wall_ms"]) <= 0.01 * g["wall_ms"]
    for a in g["attempts"]:
        assert abs(sum(a["ms"].values()) - a["wall_ms"]) <= 0.01 * a["wall_ms"]


def test_rank_raises_in_attempt_0_restarted_from_checkpoint(store, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    job, procs = ddp(store, ckpt, "--steps", "16", "--step-ms", "20",
                     "--crash-rank", "1", "--crash-step", "10",
                     "--crash-attempt", "0", extra=["--max-restarts", "2"])
    assert job.returncode == 0, job.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "rank_crash"),
                                             (1, "completed")], rows
    # Attempt 1 resumed from the checkpoint of step 7: its steps are 8..15.
    assert rows[0][2] == 0 and 9 <= rows[0][3] <= 10
    assert rows[1][2:5] == (8, 15, 7), rows
    assert {r["resumed_from"] for r in job.results().values()} == {7}
    assert "2 attempts: attempt 0 rank_crash (exit status 1); attempt 1 " \
        "completed (exit status 0)" in job.stderr
    g = goodput(store)
    check_sums(g)
    a0, a1 = g["attempts"]
    # Lost work: the steps after the checkpoint (8, 9) and the step in
    # progress at the crash (10): k - the checkpoint's step.
    assert a0["lost_steps"] == rows[0][3] + 1 - 7, a0
    assert a0["ms"]["lost_work"] > 0 and a0["ms"]["restart"] > 0
    assert a1["resumed_from"] == 7 and a1["cause"] == "completed"
    assert wait_gone(procs, 15), procs


def test_rank_sigkilled_is_restarted(store, tmp_path):
    ckpt, pids = tmp_path / "ckpt.pt", tmp_path / "pids"
    pids.mkdir()
    killed = []

    def kill_rank_1():
        f = pids / "rank-1.attempt-0.pid"
        if not killed and f.exists():
            pid = int(f.read_text())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    job, procs = ddp(store, ckpt, "--steps", "40", "--step-ms", "50",
                     "--pid-dir", str(pids), extra=["--max-restarts", "1"],
                     during=kill_rank_1)
    assert killed, job.stderr
    assert job.returncode == 0, job.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "rank_crash"),
                                             (1, "completed")], rows
    assert "killed by signal SIGKILL" in job.stderr
    assert rows[1][3] == 39
    check_sums(goodput(store))
    assert wait_gone(procs + killed, 15), procs


def test_hang_restarted(store, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    job, procs = ddp(store, ckpt, "--steps", "16", "--step-ms", "20",
                     "--hang-rank", "1", "--hang-step", "9",
                     extra=["--max-restarts", "1", "--on-hang", "restart",
                            "--hang-timeout", "3", "--grace", "2"])
    assert job.returncode == 0, job.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "hang"), (1, "completed")]
    assert rows[1][2:5] == (8, 15, 7), rows
    assert "--on-hang restart" in job.stderr
    [hang] = events(store, "hang")
    assert "rank 1" in hang, hang
    check_sums(goodput(store))
    assert wait_gone(procs, 15), procs


def test_injected_fault_fires_once_and_the_restart_completes(store,
                                                             tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    job, procs = ddp(store, ckpt, "--steps", "16", "--step-ms", "50",
                     extra=["--inject", "kill-rank:1@5", "--max-restarts",
                            "1"])
    assert job.returncode == 0, job.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "injected:kill-rank:1@5"),
                                             (1, "completed")], rows
    assert rows[1][3] == 15 and rows[1][4] >= 3, rows
    assert job.stderr.count("stepscope: injecting kill-rank:1@5") == 1, \
        job.stderr
    [sent] = events(store, "injected")
    assert "SIGKILL to rank 1" in sent, sent
    assert wait_gone(procs, 15), procs


def fails_the_second_time(marker):
    """A --health-check command that passes once, then fails."""
    return (f"if [ -e {marker} ]; then echo 'fabric down'; exit 7; fi; "
            f"touch {marker}")


def test_health_check_fails_before_attempt_1(store, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    job, procs = ddp(store, ckpt, "--steps", "16", "--step-ms", "20",
                     "--crash-rank", "1", "--crash-step", "6",
                     "--crash-attempt", "0",
                     extra=["--max-restarts", "2", "--restart-backoff", "0.2",
                            "--health-check",
                            fails_the_second_time(tmp_path / "marker")])
    assert job.returncode == 1, job.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "rank_crash"),
                                             (1, "health_check")], rows
    assert "node 0 failed the health check 'command'" in job.stderr
    assert "fabric down" in job.stderr
    assert "not restarted: a health check failed" in job.stderr, job.stderr
    [failed] = events(store, "health_check_failed")
    assert "node 0" in failed and "fabric down" in failed, failed
    # Nothing of attempt 1 was launched.
    assert events(store, "attempt_started") == []
    assert wait_gone(procs, 15), procs


def test_identical_startup_failure_not_retried(store, tmp_path):
    job, procs = run(store, 2, ["/usr/bin/python3", "-c",
                                "import no_such_module_for_stepscope"],
                     ["--max-restarts", "5", "--restart-backoff", "0.2"])
    assert job.returncode == 1, job.stderr
    assert [(a, c) for a, c, *_ in attempts(store)] == [(0, "rank_crash"),
                                                        (1, "rank_crash")]
    assert "attempts 0 and 1 failed the same way before their first step" \
        in job.stderr
    assert "No module named 'no_such_module_for_stepscope'" in job.stderr
    [why] = events(store, "not_restarted")
    assert "deterministic" in why
    assert wait_gone(procs, 15), procs


def test_backoff_doubles_and_the_hourly_budget_stops(store, tmp_path):
    # Each attempt prints another last line: not a deterministic failure.
    cmd = ["/bin/sh", "-c", 'echo "attempt $TORCHELASTIC_RESTART_COUNT of '
           '$TORCHELASTIC_MAX_RESTARTS"; exit 3']
    job, procs = run(store, 1, cmd, ["--max-restarts", "5",
                                     "--restart-backoff", "0.3",
                                     "--max-restarts-per-hour", "3"])
    assert job.returncode == 3, job.stderr
    rows = attempts(store)
    assert [a for a, *_ in rows] == [0, 1, 2, 3], rows
    for k in range(4):
        assert f"[rank 0] attempt {k} of 5\n" in job.stdout, job.stdout
    scheduled = events(store, "restart_scheduled")
    assert [s.split(" in ")[-1] for s in scheduled] == ["0.3 s", "0.6 s",
                                                        "1.2 s"], scheduled
    # The gap between an attempt's end and the next launch is the backoff.
    for (_, _, _, _, _, _, ended), (_, _, _, _, _, started, _), want in zip(
            rows, rows[1:], (0.3, 0.6, 1.2)):
        gap = (started - ended) / 1e9
        assert want - 0.02 <= gap < want + 1.0, (gap, want)  # loop clock
    [why] = events(store, "not_restarted")
    assert "--max-restarts-per-hour 3" in why
    assert "4 attempts" in job.stderr
    assert wait_gone(procs, 15), procs


# ---------------------------------------------------------------------------
# Two nodes on loopback: two `stepscope run`, node 0 the controller, node 1
# an agent, one rank each.



def two_nodes(store, tmp_path, script_args, extra=(), during=None,
              agent_extra=()):
    """Runs both nodes (AGENT_EXTRA: node 1's flags only); returns (node
    0's Job, node 1's CompletedProcess, pids seen)."""
    token = tmp_path / "token"
    token.write_text(os.urandom(32).hex() + "\n")
    token.chmod(0o600)
    port = free_port(2)
    cmd = python_cmd(SCRIPT, "--checkpoint", str(tmp_path / "ckpt.pt"),
                     "--save-every", "4", *script_args)
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port",
              str(port), "--token-file", str(token), "--job-id", "restarts",
              "--auto", "--no-http", *extra]
    agent_args = [str(STEPSCOPE), "run", "-n", "1", "--node-rank", "1",
                  "--log-dir", str(tmp_path / "logs1"), *common,
                  *agent_extra, "--", *cmd]
    agent = subprocess.Popen(agent_args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ddp_env())
    seen = set()

    def watch():
        nonlocal seen
        seen |= set(descendants(agent.pid)) | {agent.pid}
        if during:
            during(agent)

    try:
        job, procs = run(store, 1, cmd, ["--node-rank", "0", *common], watch)
        out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    return job, subprocess.CompletedProcess(agent_args, agent.returncode, out,
                                            err), sorted(set(procs) | seen)


def test_two_nodes_rank_failure_on_node_1_restarts_both(store, tmp_path):
    job, agent, procs = two_nodes(
        store, tmp_path, ["--steps", "16", "--step-ms", "20", "--crash-rank",
                          "1", "--crash-step", "10", "--crash-attempt", "0"],
        ["--max-restarts", "2"])
    assert job.returncode == 0, job.stderr
    assert agent.returncode == 0, agent.stderr
    assert "node 1: the job restarts: attempt 1" in agent.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "rank_crash"),
                                             (1, "completed")], rows
    assert rows[1][2:5] == (8, 15, 7), rows
    # Both ranks of attempt 1 resumed (one on each node).
    assert '"resumed_from": 7' in job.stdout and \
        '"resumed_from": 7' in agent.stdout
    check_sums(goodput(store))
    assert wait_gone(procs, 15), procs


def test_two_nodes_lost_node_joins_again(store, tmp_path):
    """Node 1's agent is frozen (SIGSTOP) past the heartbeat timeout: the
    controller loses it and restarts; thawed, the agent finds its link
    gone, stops its rank and joins again for attempt 1."""
    frozen = []

    def freeze(agent):
        if not frozen and (tmp_path / "pids" / "rank-1.attempt-0.pid").exists():
            os.kill(agent.pid, signal.SIGSTOP)
            frozen.append(time.time())
        elif len(frozen) == 1 and time.time() - frozen[0] > 5:
            os.kill(agent.pid, signal.SIGCONT)
            frozen.append(time.time())

    (tmp_path / "pids").mkdir()
    job, agent, procs = two_nodes(
        store, tmp_path, ["--steps", "30", "--step-ms", "50", "--pid-dir",
                          str(tmp_path / "pids")],
        ["--max-restarts", "1", "--heartbeat-timeout", "2", "--grace", "2",
         "--join-timeout", "60"], during=freeze)
    assert len(frozen) == 2
    assert job.returncode == 0, job.stderr
    assert agent.returncode == 0, agent.stderr
    assert "joining the controller at" in agent.stderr and "again" in \
        agent.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "node_lost"),
                                             (1, "completed")], rows
    assert rows[1][3] == 29
    assert wait_gone(procs, 15), procs


def test_two_nodes_agent_health_check_fails_on_restart(store, tmp_path):
    """Node 1's agent checks itself again when told RESTART: its check
    fails then, so attempt 1 ends with cause health_check and the job
    stops."""
    job, agent, procs = two_nodes(
        store, tmp_path, ["--steps", "16", "--step-ms", "20", "--crash-rank",
                          "1", "--crash-step", "6", "--crash-attempt", "0"],
        ["--max-restarts", "2", "--restart-backoff", "0.2"],
        agent_extra=["--health-check",
                     fails_the_second_time(tmp_path / "marker")])
    assert job.returncode == 1, job.stderr
    assert agent.returncode == 1, agent.stderr
    assert "node 1: the job restarts: attempt 1" in agent.stderr
    assert "the health check 'command' failed" in agent.stderr
    rows = attempts(store)
    assert [(a, c) for a, c, *_ in rows] == [(0, "rank_crash"),
                                             (1, "health_check")], rows
    assert "node 1 failed the health check 'command'" in job.stderr
    assert "not restarted: a health check failed" in job.stderr, job.stderr
    [failed] = events(store, "health_check_failed")
    assert "node 1" in failed and "fabric down" in failed, failed
    assert wait_gone(procs, 15), procs


@pytest.mark.parametrize("flags, says", [
    (["--on-hang", "restart"], "--on-hang restart needs --max-restarts"),
    (["--max-restarts", "1001"], "bad --max-restarts"),
    (["--max-restarts", "-1"], "bad --max-restarts"),
    (["--restart-backoff", "31"], "bad --restart-backoff"),
    (["--max-restarts-per-hour", "0"], "bad --max-restarts-per-hour"),
])
def test_bad_restart_flags(store, flags, says):
    out = subprocess.run(job_args(store, 1, ["/bin/true"], flags),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and says in out.stderr, out.stderr
