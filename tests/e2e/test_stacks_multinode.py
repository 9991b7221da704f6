"""Every rank's stacks across nodes (docs/debug.md, "Other nodes"): two
nodes of two ranks on loopback, node 0 the controller, node 1 an agent.

`stepscope stacks` on node 0 shows node 1's ranks with their Python
frames, a rank asleep in time.sleep on node 1 first as the outlier group;
a hang on node 1 (a rank asleep at step 5 while the others wait in step 6,
under --hang-timeout 3 --on-hang stop) is a `hang` finding naming it, and
the stacks stored with it (`report`) hold node 1's ranks in time.sleep, on
loopback and on the virtual cluster of tests/netns.py (as root).
A rank of node 1 stopped from outside (SIGSTOP) is named by the hang as
stopped, its process in state T, as a rank of node 0 would be.
A node whose agent does not answer leaves placeholders that say so.  After each scenario
no process of the job is left.  No PyTorch needed: the ranks are small
Python programs."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import STEPSCOPE  # noqa: E402
from test_host import rank_pid  # noqa: E402
from test_multinode import (Scenario, assert_nothing_left, cluster,  # noqa: E402,F401
                            finish, needs_netns, spawn)

HERE = Path(__file__).resolve().parent
STUCK_PY = HERE / "stacks" / "stuck_ranks.py"
STEPS_PY = HERE / "stacks" / "step_ranks.py"
HANG_EXIT = 124


def start(sc, cmd, extra0=(), env=None, cluster=None):
    """Node 0 (with its dashboard, which `stepscope stacks` asks) and node 1,
    on loopback or on the nodes of CLUSTER."""
    argv0 = [a for a in sc.argv(0, cmd, extra0) if a != "--no-http"]
    env = dict(sc.env, **(env or {}))
    p0 = spawn(cluster, 0, argv0, env)
    p1 = spawn(cluster, 1, sc.argv(1, cmd), env)
    return p0, p1


def stacks(sc, *extra):
    return subprocess.run([str(STEPSCOPE), "stacks", "--db", str(sc.db), *extra],
                          capture_output=True, text=True, timeout=60)


def wait_stacks(sc, procs, ready, seconds=90):
    """The stacks document once READY(doc) holds."""
    deadline = time.monotonic() + seconds
    doc = None
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, p.communicate()[1]
        out = stacks(sc, "--json")
        if out.returncode == 0:
            doc = json.loads(out.stdout)
            if ready(doc):
                return doc
        time.sleep(0.5)
    raise AssertionError(f"the stacks never got ready: {json.dumps(doc)[:3000]}")


def funcs(rank_obj):
    """The call path of RANK_OBJ's main thread (the last one)."""
    if not rank_obj["threads"]:
        return []
    return [f["func"] for f in rank_obj["threads"][-1]["frames"]]


def in_sleep(rank_obj):
    """RANK_OBJ's main thread is in load_batch, at time.sleep (a C call:
    its Python frame is load_batch's, whose line is the call)."""
    frames = rank_obj["threads"][-1]["frames"] if rank_obj["threads"] else []
    return bool(frames) and frames[-1]["func"] == "load_batch" and \
        "time.sleep" in frames[-1].get("code", "")


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(2)
    return finish(procs, timeout=60)


def test_stacks_show_the_ranks_of_node_1(tmp_path):
    sc = Scenario(tmp_path)
    procs = start(sc, [sys.executable, str(STUCK_PY)], env={"STUCK": "3:sleep"})
    try:
        doc = wait_stacks(sc, procs, lambda d: d["answered"] == 4 and
                          "load_batch" in funcs(d["ranks"][3]))
        assert doc["ranks_total"] == 4
        assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
        assert {r["state"] for r in doc["ranks"]} == {"ok"}, doc["ranks"]
        assert in_sleep(doc["ranks"][3]), doc["ranks"][3]
        assert funcs(doc["ranks"][2])[-1] == "wait_for_peers", doc["ranks"][2]
        assert doc["ranks"][2]["pid"] > 0
        # the outlier group, on node 1, comes first
        assert [g["ranks"] for g in doc["merged"]["groups"]] == ["3", "0-2"] or \
            [g["ranks"] for g in doc["merged"]["groups"]] == ["3", "0,1,2"], doc["merged"]
        out = stacks(sc)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert "4 of 4 ranks answered" in lines[0], out.stdout
        assert lines[1].startswith("rank 3 (1): "), out.stdout
        assert "load_batch: time.sleep(100000)" in lines[1], out.stdout
        # with native frames too, node 1's agent unwinds its ranks
        native = json.loads(stacks(sc, "--native", "--json").stdout)
        assert native["native"] is True
        r3 = native["ranks"][3]
        assert r3["state"] == "ok", r3
        assert r3.get("native_threads") or r3.get("native_error"), r3
    finally:
        stop(procs)
        assert_nothing_left(sc)


def hang_on_node_1(tmp_path, cluster=None):
    """A hang on node 1: the finding names rank 3, the stacks stored with it
    hold every node's ranks, rank 3 in time.sleep; returns them."""
    sc = Scenario(tmp_path, **({"master_addr": cluster.addr(0)} if cluster else {}))
    procs = start(sc, [sys.executable, str(STEPS_PY)],
                  extra0=("--hang-timeout", "3", "--on-hang", "stop"),
                  env={"STUCK_RANK": "3", "STUCK_AT": "5"}, cluster=cluster)
    try:
        (rc0, _, err0), (rc1, _, err1) = finish(list(procs), timeout=120)
        assert rc0 == HANG_EXIT, err0
        assert rc1 != 0, err1
        assert "hang" in err0 and "rank 3" in err0, err0
        rep = json.loads(subprocess.run(
            [str(STEPSCOPE), "report", "--json", "--db", str(sc.db)],
            capture_output=True, text=True, timeout=60).stdout)
        hangs = [f for f in rep["findings"] if f["kind"] == "hang"]
        assert len(hangs) == 1, rep["findings"]
        assert "rank 3" in hangs[0]["message"], hangs[0]["message"]
        st = rep["stacks"]
        assert st["trigger"] == "hang", st
        doc = st["document"]
        assert doc["ranks_total"] == 4 and doc["answered"] == 4, doc
        assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
        assert in_sleep(doc["ranks"][3]), doc["ranks"][3]
        assert funcs(doc["ranks"][2])[-1] == "wait_for_peers", doc["ranks"][2]
        assert doc["merged"]["groups"][0]["ranks"] == "3", doc["merged"]
        text = subprocess.run([str(STEPSCOPE), "report", "--db", str(sc.db)],
                              capture_output=True, text=True, timeout=60).stdout
        section = text.split("STACKS (taken ")[1].split("\n\n")[0]
        assert "4 of 4 ranks answered" in section, section
        assert section.splitlines()[1].startswith("  rank 3 (1): "), section
        assert "load_batch: time.sleep(100000)" in section, section
        return doc
    finally:
        stop(procs)
        assert_nothing_left(sc, cluster)


def test_a_hang_on_node_1_is_named_with_its_stacks(tmp_path):
    hang_on_node_1(tmp_path)


@needs_netns
def test_a_hang_on_node_1_across_namespaces(tmp_path, cluster):
    """The same on the virtual cluster: node 1 is another host (its own
    network and host name), and its ranks' objects say so."""
    doc = hang_on_node_1(tmp_path, cluster)
    hosts = [r["host"] for r in doc["ranks"]]
    assert hosts[0] == hosts[1] and hosts[2] == hosts[3], hosts
    assert hosts[0] != hosts[2], hosts


def test_a_stopped_rank_on_node_1_is_said_to_be_stopped(tmp_path):
    """Rank 3, on node 1, stopped with SIGSTOP while every rank steps: its
    agent tells the controller, whose hang finding says what holds it (as
    for a rank of its own node), not only that it went silent."""
    sc = Scenario(tmp_path)
    procs = start(sc, [sys.executable, str(STEPS_PY)],
                  extra0=("--hang-timeout", "3", "--on-hang", "stop"),
                  env={"STUCK_AT": "1000000"})
    try:
        pid = rank_pid(procs[1].pid, 3, seconds=60)
        assert pid, "rank 3 never started"
        time.sleep(3)  # some steps of every rank first
        os.kill(pid, signal.SIGSTOP)
        (rc0, _, err0), (rc1, _, err1) = finish(list(procs), timeout=120)
        assert rc0 == HANG_EXIT, err0
        rep = json.loads(subprocess.run(
            [str(STEPSCOPE), "report", "--json", "--db", str(sc.db)],
            capture_output=True, text=True, timeout=60).stdout)
        hangs = [f for f in rep["findings"] if f["kind"] == "hang"]
        assert len(hangs) == 1, rep["findings"]
        msg = hangs[0]["message"]
        assert hangs[0]["ranks"] == [3], hangs[0]
        assert "rank 3 is stopped for " in msg, msg
        assert "(its process is in state T: SIGSTOP or a job control " \
            "stop)" in msg, msg
        r3 = rep["stacks"]["document"]["ranks"][3]
        assert r3["state"] == "stopped", r3
    finally:
        stop(procs)
        assert_nothing_left(sc)


def test_a_silent_node_leaves_placeholders(tmp_path):
    """Node 1's agent is SIGSTOPped: it answers nothing, and its ranks are
    listed as not answering, with why, within the deadline (exit status 3:
    partial)."""
    sc = Scenario(tmp_path)
    procs = start(sc, [sys.executable, str(STUCK_PY)], env={"STUCK": "3:sleep"})
    try:
        wait_stacks(sc, procs, lambda d: d["answered"] == 4)
        procs[1].send_signal(19)  # SIGSTOP the agent (its ranks run on)
        t0 = time.monotonic()
        out = stacks(sc, "--json")
        took = time.monotonic() - t0
        assert out.returncode == 3, out.stderr
        doc = json.loads(out.stdout)
        assert doc["answered"] == 2 and doc["ranks_total"] == 4, doc
        for r in doc["ranks"][2:]:
            assert r["state"] == "no_answer", r
            assert r["why"] == "node 1 did not answer within 1.9 s", r
            assert r["threads"] == []
        assert took < 5, took
        text = stacks(sc).stdout
        assert "2 of 4 ranks answered" in text, text
        assert "node 1 did not answer within 1.9 s" in text, text
        procs[1].send_signal(18)  # SIGCONT
    finally:
        stop(procs)
        assert_nothing_left(sc)
