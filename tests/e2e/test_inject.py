"""Injected faults and health checks on real ranks (ss_allreduce, a
data-parallel toy job whose ranks all-reduce every step) under
`stepscope run`: --inject kill-rank, stop-rank and hang-rank on node 0's
ranks, kill-rank on a node-1 rank of a two-node run on loopback (the agent
sends the signal), and failing health checks that start no rank.  Each
fault is an `injected` event and, when it ends the attempt, the attempt's
cause `injected:SPEC`."""
import sqlite3
import subprocess
import time

from conftest import STEPSCOPE, example, run_job
from jobs import free_port  # noqa: E402


def rows(store, sql, *args):
    con = sqlite3.connect(str(store))
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def events(store, kind):
    return [(r, m) for r, m in rows(
        store, "SELECT rank, message FROM events WHERE kind = ? ORDER BY id",
        kind)]


def cause(store):
    return rows(store, "SELECT cause FROM attempts")[0][0]


def test_kill_rank_at_a_step(store):
    job = run_job(store, 2, example("--steps", "40", "--compute-ms", "50"),
                  extra=("--no-http", "-q", "--inject", "kill-rank:1@5"))
    assert job.returncode == 137, job.stderr
    assert "injecting kill-rank:1@5" in job.stderr
    inj = events(store, "injected")
    assert inj == [(1, "kill-rank:1@5: SIGKILL to rank 1 (node 0)")], inj
    (sig, last), = rows(store, "SELECT term_signal, last_step FROM ranks "
                        "WHERE rank = 1")
    assert sig == 9
    # Killed at its step 5: the controller saw it there (a STATUS in step
    # 5, or its record of step 5) and signalled it at once.
    assert last in (4, 5, 6), last
    assert cause(store) == "injected:kill-rank:1@5"


def test_stop_rank_for_a_while_at_a_step(store):
    job = run_job(store, 2, example("--steps", "15", "--compute-ms", "20"),
                  extra=("--no-http", "-q", "--host-interval", "50",
                         "--inject", "stop-rank:0:500@3"))
    assert job.returncode == 0, job.stderr
    inj = [m for _, m in events(store, "injected")]
    assert inj == ["stop-rank:0:500@3: SIGSTOP to rank 0 (node 0) for 500 ms",
                   "stop-rank:0:500@3: SIGCONT to rank 0"], inj
    stopped = dict(rows(store, "SELECT step, host_stopped_ns FROM rank_steps "
                        "WHERE rank = 0"))
    # The stop lands in the step rank 0 was in when the controller heard
    # of step 3 (3 or 4 on a quiet machine; later when the controller's
    # loop ran late on a loaded one), possibly spilling into the next: one
    # place, at step 3 or after, holding the 500 ms.
    peak = max(stopped, key=lambda s: stopped[s] or 0)
    assert peak >= 3, stopped
    near = sum(v or 0 for s, v in stopped.items() if peak - 1 <= s <= peak + 1)
    assert near >= 300e6, stopped
    far = sum(v or 0 for s, v in stopped.items()) - near
    assert far < 100e6, stopped
    assert cause(store) == "completed"


def test_hang_rank_is_found_and_stopped(store):
    job = run_job(store, 3, example("--steps", "200", "--compute-ms", "20"),
                  extra=("--no-http", "-q", "--hang-timeout", "3",
                         "--on-hang", "stop", "--inject", "hang-rank:1@5"),
                  timeout=120)
    assert job.returncode == 124, job.stderr
    hangs = job.findings("hang")
    assert len(hangs) == 1, (hangs, job.stderr)
    assert "rank 1" in hangs[0]["message"], hangs[0]["message"]
    assert events(store, "injected") == [
        (1, "hang-rank:1@5: SIGSTOP to rank 1 (node 0)")]
    assert cause(store) == "injected:hang-rank:1@5"


def test_failing_health_check_starts_no_rank(store, tmp_path):
    check = "echo probing the fabric; echo 'ib0 is down' >&2; exit 3"
    job = run_job(store, 2, example("--steps", "10"),
                  extra=("--no-http", "--log-dir", str(tmp_path / "logs"),
                         "--health-check", check))
    assert job.returncode == 1, job.stderr
    assert "node 0 failed the health check 'command':" in job.stderr
    assert "exited with status 3" in job.stderr
    assert "probing the fabric\nib0 is down" in job.stderr
    assert "no rank was started" in job.stderr
    assert events(store, "rank_connected") == []
    assert not (tmp_path / "logs").exists() or \
        not list((tmp_path / "logs").iterdir())
    (msg,), = [(m,) for _, m in events(store, "health_check_failed")]
    assert "ib0 is down" in msg
    assert cause(store) == "health_check"


def test_disk_threshold_and_passing_checks(store, tmp_path):
    job = run_job(store, 1, example("--steps", "3"),
                  extra=("--no-http", "-q", "--checkpoint-dir", str(tmp_path),
                         "--min-free-gb", "1000000000"))
    assert job.returncode == 1, job.stderr
    assert "node 0 failed the health check 'disk':" in job.stderr
    assert "(--min-free-gb)" in job.stderr
    ok = tmp_path / "ok.db"
    job = run_job(ok, 1, example("--steps", "3"),
                  extra=("--no-http", "-q", "--min-free-gb", "0.001",
                         "--health-check", "true"))
    assert job.returncode == 0, job.stderr
    (_, note), = events(ok, "health_check")
    assert "node 0 passed: disk:" in note and "command: 'true' passed" in note


def test_bad_specs_are_refused(store):
    for spec, says in (("kill-rank:1", "missing @STEP"),
                       ("kill-rank:5@1", "rank 5 does not exist"),
                       ("stop-rank:0:0", "not a duration"),
                       ("explode:1@2", "unknown fault")):
        job = run_job(store, 2, example("--steps", "3"),
                      extra=("--no-http", "--inject", spec))
        assert job.returncode == 2, (spec, job.stderr)
        assert says in job.stderr, (spec, job.stderr)


def two_nodes(store, tmp_path, node0_extra=(), node1_extra=(), steps=40):
    """Node 0 and node 1 of a 2 x 2-rank job on loopback; returns their
    (returncode, stderr) pairs."""
    token = tmp_path / "token"
    token.write_text("a-shared-secret-for-this-test-only\n")
    token.chmod(0o600)
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port",
              str(free_port()), "--controller-port", str(free_port()), "-n",
              "2", "--token-file", str(token), "--job-id", "inject-test", "-q"]
    cmd = ["--", *example("--steps", str(steps), "--compute-ms", "50")]
    node0 = subprocess.Popen(
        [str(STEPSCOPE), "run", "--node-rank", "0", "--db", str(store),
         "--no-http", "--log-dir", str(tmp_path / "l0"), *node0_extra,
         *common, *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    node1 = subprocess.Popen(
        [str(STEPSCOPE), "run", "--node-rank", "1",
         "--log-dir", str(tmp_path / "l1"), *node1_extra, *common, *cmd],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err0 = node0.communicate(timeout=120)
        _, err1 = node1.communicate(timeout=60)
    finally:
        for p in (node0, node1):
            if p.poll() is None:
                p.kill()
    return (node0.returncode, err0), (node1.returncode, err1)


def test_kill_a_rank_of_another_node(store, tmp_path):
    (rc0, err0), (rc1, err1) = two_nodes(
        store, tmp_path, node0_extra=("--inject", "kill-rank:3@5"))
    assert rc0 == 137, (err0, err1)
    assert rc1 == 137, err1
    inj = events(store, "injected")
    assert inj == [(3, "kill-rank:3@5: SIGKILL to rank 3 (node 1)")], inj
    (sig, last), = rows(store, "SELECT term_signal, last_step FROM ranks "
                        "WHERE rank = 3")
    assert sig == 9
    assert last in (4, 5, 6), last
    assert cause(store) == "injected:kill-rank:3@5"
    health = [m for _, m in events(store, "health_check")]
    assert any(m.startswith("node 1 passed") for m in health), health


def test_another_node_failing_its_health_check(store, tmp_path):
    (rc0, err0), (rc1, err1) = two_nodes(
        store, tmp_path, node1_extra=("--health-check", "echo nope; exit 4"),
        steps=400)
    assert rc1 == 1, err1
    assert "the health check 'command' failed; no rank started" in err1
    assert rc0 == 1, err0
    assert "node 1 failed the health check 'command'" in err0
    assert "exited with status 4\nnope" in err0
    assert cause(store) == "health_check"
    connected = {r for r, _ in events(store, "rank_connected")}
    assert not connected & {2, 3}, connected
    (msg,), = [(m,) for _, m in events(store, "health_check_failed")]
    assert msg.startswith("node 1 failed the health check 'command'"), msg
