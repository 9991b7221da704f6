"""Multi-node runs end to end: `stepscope run --nnodes 2` on node 0 (the
controller and its ranks) and on node 1 (an agent and its ranks), with
real gloo DDP jobs of examples/ddp_train.py under --auto.

Two nodes on loopback (no namespace) finish and report 4 ranks and 2
agents, and node 1's agent stopped for 4 s leaves no step without its
ranks.  On the virtual cluster of tests/netns.py (one network, UTS and
optionally time namespace per node): a straggler on node 1 is blamed as
right with node 1's clock 1000 s ahead as without, and NODES shows the
offset; an agent killed by SIGKILL, a link taken down, a rank crashing on
node 1 and Ctrl-C to the controller each stop every node, with the event
and summary naming the node.  A node that never joins and an agent with
the wrong secret end the job at the join timeout; without a secret no
node starts anything.  Under a one-host Slurm cluster a job launched by
srun runs.

After every scenario no process of the job is left on any node: none
carries the scenario's marker in its environment (every process of the
job inherits it), none names the scenario's directory on its command
line, and each node's network namespace holds only the cluster's own
holder processes.

Each node has its own port space in the virtual cluster, so fixed ports
collide with nothing there; on loopback each scenario takes two free
ports in a row (the master port and the controller's, master port + 1).  Namespace scenarios run as root (an error if root
cannot build a cluster, unless STEPSCOPE_NETNS=skip) and are skipped with
the reason otherwise; the loopback ones run anywhere torch is installed.
"""
import datetime
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import netns  # noqa: E402
import slurm  # noqa: E402
from conftest import BUILD, SOURCE, STEPSCOPE  # noqa: E402
from jobs import free_port, Job, secret_file, stored_steps  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

NETNS_OK, NETNS_WHY = netns.should_run()
needs_netns = pytest.mark.skipif(not NETNS_OK, reason=NETNS_WHY)
SLURM_OK, SLURM_WHY = slurm.available()

PY = sys.executable
TRAIN = SOURCE / "examples" / "ddp_train.py"
NPROC = 2
NODE_PORT = 29611  # in a virtual node: the ranks' rendezvous; the controller +1
SLOW_RANK, SLOW_MS = 3, 30  # rank 3 is node 1's second rank
TIMEOUT = 120  # seconds a scenario's processes may take at most
LONG = ("--steps", "100000")  # a job that runs until it is stopped


def train(*args):
    return [PY, str(TRAIN), "--samples", "1024", "--warmup", "2", *args]




class Scenario:
    """One multi-node job: its directory, secret, store, environment and
    marker, and the command line of each node."""

    def __init__(self, tmp_path, master_addr="127.0.0.1"):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.dir = tmp_path
        self.db = tmp_path / "store.db"
        self.token = secret_file(tmp_path / "token")
        self.master_addr = master_addr
        # Loopback shares this host's ports with everything else: two free
        # ones in a row.  A virtual node has its own port space.
        self.master_port = NODE_PORT if master_addr != "127.0.0.1" else free_port(2)
        self.mark = f"SS_MULTINODE_TEST={uuid.uuid4().hex}"
        env = dict(os.environ)
        pkg = BUILD / "python"
        if not (pkg / "stepscope").is_dir():
            pkg = SOURCE / "python"
        env["PYTHONPATH"] = str(pkg)
        env["OMP_NUM_THREADS"] = "1"
        env.pop("STEPSCOPE_TOKEN", None)
        env.pop("GLOO_SOCKET_IFNAME", None)
        for k in list(env):
            if k.startswith(("SLURM_", "PET_")):
                del env[k]
        name, value = self.mark.split("=")
        env[name] = value
        self.env = env

    def argv(self, k, cmd, extra=(), token=None, nnodes=2):
        """`stepscope run` for node K running CMD."""
        args = [str(STEPSCOPE), "run", "--nnodes", str(nnodes), "--node-rank", str(k),
                "--master-addr", self.master_addr, "--master-port", str(self.master_port),
                "-n", str(NPROC), "--auto", "--grace", "2",
                "--log-dir", str(self.dir / f"logs{k}")]
        if token is not False:
            args += ["--token-file", str(token or self.token)]
        if k == 0:
            args += ["--db", str(self.db), "--no-http"]
        return [*args, *extra, "--", *cmd]


def spawn(cluster, k, argv, env):
    """Starts ARGV on node K of CLUSTER (None: on this host)."""
    kw = dict(env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
              stdin=subprocess.DEVNULL)
    if cluster is None:
        return subprocess.Popen(argv, **kw)
    return cluster.popen(k, argv, **kw)


def finish(procs, timeout=TIMEOUT):
    """Waits for every Popen of PROCS; returns [(returncode, stdout, stderr)]."""
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += "\n(test: killed, it ran past the timeout)"
        outs.append((p.returncode, out, err))
    return outs


def wait_for(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def procs_of(sc):
    """Live (not zombie) pids carrying SC's marker in their environment or
    its directory on their command line."""
    mark = sc.mark.encode()
    needle = str(sc.dir).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if mark in env or needle in cmdline:
            found.append(int(entry))
    return found


def strangers_in_nodes(cluster):
    """{node: pids} of processes in a node's network namespace other than
    the cluster's holder (ip netns exec -> unshare, and its sleep)."""
    left = {}
    for k, ns in enumerate(cluster.namespaces):
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                             text=True).stdout
        holder, sleeper = cluster._holders[k][0].pid, cluster._holders[k][1]
        pids = {int(p) for p in out.split()} - {holder, sleeper}
        if pids:
            left[k] = sorted(pids)
    return left


def assert_nothing_left(sc, cluster=None, seconds=10):
    """No process of SC's job is left, on this host or any node."""
    deadline = time.monotonic() + seconds
    while True:
        pids = procs_of(sc)
        strangers = strangers_in_nodes(cluster) if cluster else {}
        if not pids and not strangers:
            return
        if time.monotonic() > deadline:
            desc = []
            for pid in pids + [p for ps in strangers.values() for p in ps]:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                    desc.append(f"{pid}: {cmd}")
                except OSError:
                    desc.append(f"{pid}: (gone)")
            raise AssertionError(f"processes left behind (nodes: {strangers}):\n"
                                 + "\n".join(desc))
        time.sleep(0.1)


def report(sc):
    out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db", str(sc.db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def report_text(sc):
    out = subprocess.run([str(STEPSCOPE), "report", "--db", str(sc.db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def section(text, title):
    """The lines of report section TITLE (up to the next blank line)."""
    m = re.search(rf"^{title}\b.*?\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert m, f"no {title} section in:\n{text}"
    return m.group(1)


def events(rep, kind):
    return [e for e in rep["events"] if e["kind"] == kind]


def nodes_by_rank(rep):
    return {n["node"]: n for n in rep["nodes"]}


def ranks_by_rank(rep):
    return {r["rank"]: r for r in rep["ranks"]}


def start_pair(sc, cluster, cmd, extra0=(), extra1=()):
    """Starts node 0 and node 1 (node 0 first, on the cluster or here)."""
    p0 = spawn(cluster, 0, sc.argv(0, cmd, extra0), sc.env)
    p1 = spawn(cluster, 1, sc.argv(1, cmd, extra1), sc.env)
    return p0, p1


def wait_steps(sc, n, procs, seconds=60):
    """Waits until the store holds N finalized steps (fails early when a
    node's process ends first)."""
    def ready():
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"a node ended (status {p.returncode}) before "
                                     f"step {n}: {p.stderr.read()}")
        return stored_steps(sc.db) >= n
    wait_for(ready, seconds, f"{n} steps in {sc.db}")


@pytest.fixture
def cluster():
    with netns.Cluster(2) as c:
        yield c


# ---------------------------------------------------------------------------
# 1. Two nodes on loopback, no namespace


def test_two_nodes_on_loopback(tmp_path):
    sc = Scenario(tmp_path)
    try:
        p0, p1 = start_pair(sc, None, train("--steps", "20"))
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        assert "node 1 of 2" in err1 and "ranks 2-3 started" in err1, err1
        rep = report(sc)
        assert rep["agents"] == 2, rep["agents"]
        ranks = ranks_by_rank(rep)
        assert sorted(ranks) == [0, 1, 2, 3]
        for r in (2, 3):
            assert ranks[r]["state"] == "exited" and ranks[r]["exit_code"] == 0, ranks[r]
            assert ranks[r]["steps"] == 20, ranks[r]
        nodes = nodes_by_rank(rep)
        assert [nodes[k]["state"] for k in (0, 1)] == ["done", "done"], nodes
        assert nodes[1]["first_rank"] == 2 and nodes[1]["nranks"] == 2, nodes[1]
        assert nodes[1]["addr"].startswith("127.0.0.1:"), nodes[1]
        assert abs(nodes[1]["clock_offset_ms"]) < 50, nodes[1]
        assert rep["steps"]["with_missing_ranks"] == 0, rep["steps"]
    finally:
        assert_nothing_left(sc)


def torchrun_argv(sc, k, cmd, backend, numbered=False, nnodes=2):
    """Node K's line written for torchrun's BACKEND rendezvous: no master
    address, the endpoint names node 0 (static: the master port; c10d:
    the controller's, the master port given beside it).  NUMBERED: no
    node rank either, as under c10d; on loopback every node is the
    endpoint's host, so the others say they do not host it (is_host)."""
    argv = sc.argv(k, cmd, nnodes=nnodes)
    i = argv.index("--master-addr")
    del argv[i:i + 4]
    port = sc.master_port if backend == "static" else sc.master_port + 1
    rdzv = [f"--rdzv_backend={backend}",
            f"--rdzv_endpoint={sc.master_addr}:{port}", "--rdzv_id=job42"]
    if backend == "c10d":
        rdzv += ["--master_port", str(sc.master_port)]
    if numbered:
        j = argv.index("--node-rank")
        del argv[j:j + 2]
        i -= 2
        if k > 0:
            rdzv += ["--rdzv_conf", "is_host=false"]
    return argv[:i] + rdzv + argv[i:]


@pytest.mark.parametrize("backend", ["static", "c10d"])
def test_two_nodes_meet_at_torchruns_rendezvous_endpoint(tmp_path, backend):
    sc = Scenario(tmp_path)
    try:
        cmd = train("--steps", "10")
        p0 = spawn(None, 0, torchrun_argv(sc, 0, cmd, backend), sc.env)
        p1 = spawn(None, 1, torchrun_argv(sc, 1, cmd, backend), sc.env)
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        assert f"controller port {sc.master_port + 1}" in err1, err1
        assert "job job42 (--rdzv-id)" in err1, err1
        assert "address from --rdzv-endpoint" in err1, err1
        rep = report(sc)
        ranks = ranks_by_rank(rep)
        assert sorted(ranks) == [0, 1, 2, 3]
        assert all(ranks[r]["steps"] == 10 for r in ranks), ranks
    finally:
        assert_nothing_left(sc)


def test_c10d_numbers_the_nodes_as_they_join(tmp_path):
    """Three nodes started with the same torchrun c10d line and no node
    rank: node 0 is the endpoint's host, the agents are numbered 1 and 2
    as they join, and every rank runs as its number says."""
    sc = Scenario(tmp_path)
    try:
        cmd = train("--steps", "10")
        procs = [spawn(None, 0, torchrun_argv(sc, 0, cmd, "c10d", True, 3),
                       sc.env)]
        for k in (1, 2):
            procs.append(spawn(None, k, torchrun_argv(sc, k, cmd, "c10d",
                                                      True, 3), sc.env))
        outs = finish(procs)
        for rc, _, err in outs:
            assert rc == 0, err
        err0 = outs[0][2]
        assert "node 0 of 3 (node rank from the c10d endpoint, this host" \
            in err0, err0
        said = sorted(re.search(r"stepscope: node (\d): numbered by the "
                                r"controller as it joined", err).group(1)
                      for _, _, err in outs[1:])
        assert said == ["1", "2"], [e for _, _, e in outs[1:]]
        for _, _, err in outs[1:]:
            assert "a node of 3 (node rank from the controller" in err, err
        rep = report(sc)
        ranks = ranks_by_rank(rep)
        assert sorted(ranks) == list(range(6)), ranks
        assert all(ranks[r]["steps"] == 10 for r in ranks), ranks
        nodes = nodes_by_rank(rep)
        assert sorted(nodes) == [0, 1, 2], nodes
    finally:
        assert_nothing_left(sc)


def test_agent_started_first_and_a_second_node_1_refused(tmp_path):
    """An agent started before node 0 keeps trying until it joins; a second
    agent claiming node 1 is refused and starts nothing, the job runs on."""
    sc = Scenario(tmp_path)
    try:
        p1 = spawn(None, 1, sc.argv(1, train("--steps", "30")), sc.env)
        time.sleep(2)
        p0 = spawn(None, 0, sc.argv(0, train("--steps", "30")), sc.env)
        wait_for(lambda: p0.poll() is not None or stored_steps(sc.db) >= 1, 60,
                 "the first step")
        dup = spawn(None, 1, sc.argv(1, train("--steps", "30"), ("--log-dir",
                                                                 str(tmp_path / "dup"))),
                    sc.env)
        (rc0, _, err0), (rc1, _, err1), (rcd, _, errd) = finish([p0, p1, dup])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        assert rcd == 1, errd
        assert "refused this node: node 1 has already joined" in errd, errd
        assert "ranks 2-3 started" not in errd, errd
        assert not (tmp_path / "dup").exists()
        assert "refused an agent from 127.0.0.1" in err0, err0
        rep = report(sc)
        assert rep["agents"] == 2 and len(rep["ranks"]) == 4, rep["nodes"]
    finally:
        assert_nothing_left(sc)


def test_an_agent_stopped_for_seconds_leaves_no_step_without_its_ranks(tmp_path):
    """Node 1's agent stopped with SIGSTOP for 4 s (as a starved or
    swapped-out process is) while its ranks and node 0's go on: their
    records wait at the agent, node 0's window holds the steps meanwhile,
    and every step is finalized with all 4 ranks, none refused as late
    (with a 64-step window about a hundred steps lost node 1's ranks)."""
    sc = Scenario(tmp_path)
    p1 = None
    try:
        p0, p1 = start_pair(sc, None, train("--steps", "400"))
        wait_steps(sc, 60, [p0, p1])
        os.kill(agent_pid(p1), signal.SIGSTOP)
        time.sleep(4)
        os.kill(agent_pid(p1), signal.SIGCONT)
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        rep = report(sc)
        assert rep["steps"]["count"] == 400, rep["steps"]
        assert rep["steps"]["with_missing_ranks"] == 0, rep["steps"]
        assert not events(rep, "refused_records"), events(rep, "refused_records")
        assert all(r["steps"] == 400 for r in rep["ranks"]), rep["ranks"]
    finally:
        if p1 is not None and p1.poll() is None:
            os.kill(p1.pid, signal.SIGCONT)
        assert_nothing_left(sc)


# ---------------------------------------------------------------------------
# 2. A straggler on node 1, whose clock runs 1000 s ahead


def straggler_run(tmp_path, offsets):
    with netns.Cluster(2, time_offsets=offsets) as c:
        sc = Scenario(tmp_path, master_addr=c.addr(0))
        try:
            p0, p1 = start_pair(sc, c, train("--steps", "40", "--slow-rank",
                                             str(SLOW_RANK), "--slow-ms", str(SLOW_MS)))
            (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
            assert rc0 == 0, err0
            assert rc1 == 0, err1
            return sc, report(sc), report_text(sc)
        finally:
            assert_nothing_left(sc, c)


def blame(rep):
    hits = [f for f in rep["findings"] if f["kind"] == "straggler"]
    assert hits, f"no straggler finding in {rep['findings']}"
    assert [f["ranks"] for f in hits] == [[SLOW_RANK]] * len(hits), hits
    assert hits[0]["phase"] == "forward", hits[0]
    ev = hits[0]["evidence"]
    # Blamed by when it arrived at the all-reduce, compared across nodes on
    # the aligned clock, with node 1's error bound.
    assert ev["method"] == "arrival" and 0 < ev["clock_bound_ns"] < 5e6, ev
    assert 0.5 * SLOW_MS <= ev["late_ms_median"] <= 2.5 * SLOW_MS, ev
    return ev


@needs_netns
def test_straggler_on_a_node_with_an_offset_clock(tmp_path):
    _, plain, _ = straggler_run(tmp_path / "plain", {})
    sc, skewed, text = straggler_run(tmp_path / "skewed", {1: 1000})
    ev_plain, ev_skewed = blame(plain), blame(skewed)
    # As right with the offset as without: the same rank, phase and lateness
    # within what two runs of the same job differ by.
    assert abs(ev_skewed["late_ms_median"] - ev_plain["late_ms_median"]) <= SLOW_MS, \
        (ev_plain, ev_skewed)
    # Arrival skew is compared on the aligned clock: milliseconds, not 1000 s.
    for rep in (plain, skewed):
        for r in rep["ranks"]:
            assert r["median_step_ms"] < 1000, r
    nodes = nodes_by_rank(skewed)
    assert abs(nodes[1]["clock_offset_ms"] + 1000e3) < 50, nodes[1]
    assert 0 < nodes[1]["clock_bound_ms"] < 5, nodes[1]
    assert abs(nodes_by_rank(plain)[1]["clock_offset_ms"]) < 50
    # The report's NODES line for node 1 shows the offset with its bound.
    node1 = [ln for ln in section(text, "NODES").splitlines()
             if re.match(r"\s+1\s", ln)]
    assert node1 and "node1" in node1[0], text
    m = re.search(r"±([\d.]+) ms \(offset (-?[\d.]+) ms\)", node1[0])
    assert m, node1
    assert abs(float(m.group(2)) + 1000e3) < 50 and float(m.group(1)) < 5, node1
    rows = section(text, "RANKS").splitlines()[1:]
    hosts = {int(ln.split()[0]): ln.split()[1] for ln in rows if ln.split()[0].isdigit()}
    assert hosts == {0: "node0", 1: "node0", 2: "node1", 3: "node1"}, text
    assert [e for e in events(skewed, "node_clock") if "node 1" in e["message"]]


# ---------------------------------------------------------------------------
# 3. The agent of node 1 is SIGKILLed mid-run


def agent_pid(popen):
    """The agent's pid: the node's `stepscope run` (nsenter execs it)."""
    return popen.pid


@needs_netns
def test_agent_killed_mid_run(tmp_path, cluster):
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    try:
        p0, p1 = start_pair(sc, cluster, train(*LONG))
        wait_steps(sc, 5, [p0, p1])
        os.kill(agent_pid(p1), signal.SIGKILL)
        (rc0, _, err0), (rc1, _, _) = finish([p0, p1], timeout=40)
        assert rc1 == -signal.SIGKILL
        assert rc0 != 0, err0
        m = re.search(r"node 1 \(node1 (\S+):\d+, ranks 2–3\) lost its connection "
                      r"\([^)]*\) at step (\d+)", err0)
        assert m, err0
        assert m.group(1) == cluster.addr(1), err0
        rep = report(sc)
        lost = events(rep, "node_lost")
        assert len(lost) == 1 and m.group(0) in lost[0]["message"], lost
        nodes = nodes_by_rank(rep)
        assert nodes[1]["state"] == "lost", nodes[1]
        assert nodes[1]["lost_at_step"] == int(m.group(2)), nodes[1]
        ranks = ranks_by_rank(rep)
        for r in (2, 3):
            assert ranks[r]["state"] in ("lost", "missing"), ranks[r]
    finally:
        # Node 1's ranks die with their agent (parent-death signal).
        assert_nothing_left(sc, cluster)


# ---------------------------------------------------------------------------
# 4. Node 1's link goes down


@needs_netns
def test_link_down_stops_both_sides(tmp_path, cluster):
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    hb = ("--heartbeat-timeout", "3")
    try:
        p0, p1 = start_pair(sc, cluster, train(*LONG), hb, hb)
        wait_steps(sc, 5, [p0, p1])
        down = time.time()
        cluster.link_down(1)
        # Both sides notice on their own; each ends its ranks.
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1], timeout=40)
        assert rc0 != 0, err0
        assert rc1 != 0, err1
        assert re.search(r"node 1 \(node1 \S+, ranks 2–3\) lost its connection "
                         r"\(.*\) at step \d+", err0), err0
        assert "lost the controller" in err1 and "stopping this node's ranks" in err1, err1
        rep = report(sc)
        lost = events(rep, "node_lost")
        assert len(lost) == 1, lost
        # Declared lost after the heartbeat timeout (3 s), within 6 s.
        delay = wall_s(lost[0]["at"]) - down
        assert 2.5 <= delay <= 6.5, delay
        assert nodes_by_rank(rep)[1]["state"] == "lost", rep["nodes"]
    finally:
        assert_nothing_left(sc, cluster)


def wall_s(iso):
    """Seconds since the epoch of an event's time ("...T09:49:39.113Z")."""
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# ---------------------------------------------------------------------------
# 5. Node 1 never joins


def test_node_that_never_joins(tmp_path):
    sc = Scenario(tmp_path)
    try:
        t0 = time.monotonic()
        p0 = spawn(None, 0, sc.argv(0, train(*LONG), ("--join-timeout", "5")), sc.env)
        ((rc0, _, err0),) = finish([p0], timeout=60)
        took = time.monotonic() - t0
        assert rc0 != 0, err0
        assert "node 1 (ranks 2–3) did not join within 5 s" in err0, err0
        assert 5 <= took < 20, took
        rep = report(sc)
        assert nodes_by_rank(rep)[1]["state"] == "never_joined", rep["nodes"]
        lost = events(rep, "node_lost")
        assert len(lost) == 1 and "did not join within 5 s" in lost[0]["message"], lost
        ranks = ranks_by_rank(rep)
        for r in (2, 3):
            assert ranks[r]["state"] in ("lost", "missing"), ranks[r]
    finally:
        assert_nothing_left(sc)


# ---------------------------------------------------------------------------
# 6. The wrong secret; no secret at all


def test_agent_with_the_wrong_secret_is_refused(tmp_path):
    sc = Scenario(tmp_path)
    other = secret_file(tmp_path / "other-token")
    try:
        p0 = spawn(None, 0, sc.argv(0, train(*LONG), ("--join-timeout", "6")), sc.env)
        # Whoever answers may not be the controller: the agent tries again
        # until its own join timeout.
        p1 = spawn(None, 1, sc.argv(1, train(*LONG), ("--join-timeout", "4"),
                                    token=other), sc.env)
        (rc1, _, err1), (rc0, _, err0) = finish([p1, p0], timeout=60)
        assert rc1 == 1, err1
        assert "did not prove it knows the run's secret" in err1, err1
        assert "could not join the controller" in err1, err1
        assert "ranks 2-3 started" not in err1, err1
        assert not (tmp_path / "logs1").exists() or not any((tmp_path / "logs1").iterdir())
        assert rc0 != 0, err0
        assert "refused an agent from 127.0.0.1" in err0, err0
        assert "did not join within 6 s" in err0, err0
        rep = report(sc)
        assert events(rep, "agent_refused"), rep["events"]
        assert nodes_by_rank(rep)[1]["state"] == "never_joined", rep["nodes"]
    finally:
        assert_nothing_left(sc)


def test_no_listener_without_a_secret(tmp_path):
    """Without a secret neither node starts anything: a usage error (2) with
    how to make one; node 0 records no run and launches no rank."""
    sc = Scenario(tmp_path)
    p0 = spawn(None, 0, sc.argv(0, train(*LONG), token=False), sc.env)
    p1 = spawn(None, 1, sc.argv(1, train(*LONG), token=False), sc.env)
    (rc0, out0, err0), (rc1, out1, err1) = finish([p0, p1], timeout=30)
    for rc, out, err, k in ((rc0, out0, err0, 0), (rc1, out1, err1, 1)):
        assert rc == 2, err
        assert "no shared secret" in err and "--token-file" in err, err
        assert "head -c 32 /dev/urandom | base64" in err, err
        assert "chmod 600" in err, err
        assert "ddp_train" not in out and not (tmp_path / f"logs{k}").exists()
    assert "waiting for" not in err0, err0
    assert not sc.db.exists(), "a run was recorded"
    assert_nothing_left(sc)


# ---------------------------------------------------------------------------
# 7. A rank on node 1 crashes


@needs_netns
def test_rank_crash_on_node_1_stops_every_node(tmp_path, cluster):
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    try:
        p0, p1 = start_pair(sc, cluster, train("--steps", "200", "--crash-rank", "3",
                                               "--crash-step", "10"))
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1], timeout=60)
        assert rc0 == 1, err0  # ddp_train.py exits 1 on an exception
        assert rc1 != 0, err1
        # Node 0's summary names the node, the rank and why; node 1 stopped
        # its other rank.
        assert "node 1: rank 3 failed first: exited with code 1" in err0, err0
        assert "rank-3.log" in err0, err0
        assert "the other ranks were stopped" in err1, err1
        rep = report(sc)
        ranks = ranks_by_rank(rep)
        assert ranks[3]["exit_code"] == 1, ranks[3]
        assert ranks[3]["last_step"] is not None and ranks[3]["last_step"] < 10, ranks[3]
    finally:
        assert_nothing_left(sc, cluster)


@needs_netns
def test_c10d_finds_node_0_by_the_endpoints_address(tmp_path, cluster):
    """Two namespace nodes with the same c10d line, no node rank and no
    is_host: the node whose interface holds the endpoint's address is
    node 0, the other joins and is numbered 1."""
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    try:
        cmd = train("--steps", "10")
        argv = [torchrun_argv(sc, k, cmd, "c10d", numbered=True) for k in (0, 1)]
        argv[1] = [a for a in argv[1] if a not in ("--rdzv_conf", "is_host=false")]
        p0 = spawn(cluster, 0, argv[0], sc.env)
        p1 = spawn(cluster, 1, argv[1], sc.env)
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        assert "node 0 of 2 (node rank from the c10d endpoint, this host" in err0, err0
        assert "node 1: numbered by the controller as it joined" in err1, err1
        ranks = ranks_by_rank(report(sc))
        assert sorted(ranks) == [0, 1, 2, 3]
        assert all(ranks[r]["steps"] == 10 for r in ranks), ranks
    finally:
        assert_nothing_left(sc, cluster)


# ---------------------------------------------------------------------------
# 8. Ctrl-C to the controller


@needs_netns
def test_interrupting_the_controller_stops_the_agents(tmp_path, cluster):
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    try:
        p0, p1 = start_pair(sc, cluster, train(*LONG))
        wait_steps(sc, 5, [p0, p1])
        p0.send_signal(signal.SIGINT)
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1], timeout=40)
        assert rc0 != 0, err0
        assert rc1 != 0, err1
        # The agent stopped its ranks on the controller's word.
        assert "the job was stopped: stopped by Interrupt" in err1, err1
        rep = report(sc)
        assert events(rep, "stop_requested"), rep["events"]
        ranks = ranks_by_rank(rep)
        assert sorted(ranks) == [0, 1, 2, 3]
        assert all(r["state"] != "running" for r in ranks.values()), ranks
        assert all(n["state"] != "running" for n in rep["nodes"]), rep["nodes"]
    finally:
        assert_nothing_left(sc, cluster)


@needs_netns
def test_controller_killed_mid_run(tmp_path, cluster):
    """Node 0's `stepscope run` SIGKILLed: its ranks die with it, node 1's
    agent sees the link close and stops its own."""
    sc = Scenario(tmp_path, master_addr=cluster.addr(0))
    try:
        p0, p1 = start_pair(sc, cluster, train(*LONG))
        wait_steps(sc, 5, [p0, p1])
        os.kill(p0.pid, signal.SIGKILL)
        (rc0, _, _), (rc1, _, err1) = finish([p0, p1], timeout=40)
        assert rc0 == -signal.SIGKILL
        assert rc1 != 0, err1
        assert "lost the controller" in err1 and "stopping this node's ranks" in err1, err1
        assert "the ranks were stopped: 2 ended on SIGTERM" in err1, err1
    finally:
        assert_nothing_left(sc, cluster)


# ---------------------------------------------------------------------------
# 9. Under Slurm


@pytest.mark.skipif(not SLURM_OK, reason=SLURM_WHY)
def test_under_srun(tmp_path):
    sc = Scenario(tmp_path)
    with slurm.SlurmCluster(tmp_path / "cluster") as s:
        env = dict(sc.env, SLURM_CONF=str(s.conf))
        r = s.srun(["-N1", "--ntasks-per-node=1", str(STEPSCOPE), "run", "-n", "2",
                    "--auto", "--no-http", "--db", str(sc.db), "--log-dir",
                    str(tmp_path / "logs"), "--", *train("--steps", "10")],
                   timeout=120, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + s.logs()
        rep = report(sc)
        assert sorted(x["rank"] for x in rep["ranks"]) == [0, 1]
        assert all(x["exit_code"] == 0 for x in rep["ranks"]), rep["ranks"]
    assert_nothing_left(sc)
