"""Node-level aggregation (--aggregate node, docs/multinode.md) gives the
same findings as per-rank aggregation: on the two-node virtual cluster of
tests/netns.py (a network namespace per node), a straggler and a data
stall on node 1 each run once with --aggregate rank and once with
--aggregate node, and the findings (kind, ranks, phase: what the accuracy
matrix scores) are the same.  Severity is printed, not compared: a
straggler 30 ms late in a ~50 ms step sits at the warning/critical line,
and two runs of the same job in the same mode land on either side of it.  In node mode the agent folds its ranks' records into one partial
per step and batches their STATUS frames; node 0 merges the partials and
checks every merged step against the per-rank aggregation of the same
step: every step must agree (ranks present, step time and phase extremes
and slowest rank, p90 within the sketch's 1 %).  The side-by-side table
is printed (pytest -s shows it).

A last check on loopback: --aggregate with a bad value is refused, and a
single-node run ignores it (no aggregation line).
"""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import netns  # noqa: E402
from conftest import STEPSCOPE  # noqa: E402
from test_multinode import (NPROC, Scenario, assert_nothing_left, finish,  # noqa: E402
                            report, start_pair, train)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")
NETNS_OK, NETNS_WHY = netns.should_run()
needs_netns = pytest.mark.skipif(not NETNS_OK, reason=NETNS_WHY)

# rank 3 is node 1's second rank, rank 2 its first
SCENARIOS = {
    "straggler": ("--steps", "40", "--slow-rank", "3", "--slow-ms", "30"),
    "data stall": ("--steps", "80", "--stall-rank", "2", "--stall-ms", "150",
                   "--stall-every", "10"),
}
AGREE = re.compile(r"node partials: (\d+) merged .*? into (\d+) steps complete, "
                   r"(\d+) incomplete, (\d+) late;.* agree with the per-rank "
                   r"aggregation on (\d+) of (\d+) steps compared")


def run_mode(tmp_path, mode, args):
    with netns.Cluster(2) as c:
        sc = Scenario(tmp_path, master_addr=c.addr(0))
        try:
            p0, p1 = start_pair(sc, c, train(*args), ("--aggregate", mode))
            (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
            assert rc0 == 0, err0
            assert rc1 == 0, err1
            assert f"aggregation by {mode}:" in err0, err0
            return report(sc), err0
        finally:
            assert_nothing_left(sc, c)


def findings(rep):
    return sorted((f["kind"], tuple(f["ranks"]), f["phase"] or "")
                  for f in rep["findings"])


def described(rep):
    out = []
    for f in sorted(rep["findings"], key=lambda f: (f["kind"], f["ranks"])):
        late = f["evidence"].get("late_ms_median")
        out.append(f"{f['kind']} ranks {f['ranks']} {f['phase'] or '-'} "
                   f"{f['severity']}" + (f" ({late} ms late)" if late else ""))
    return "; ".join(out)


@needs_netns
def test_findings_are_the_same_by_rank_and_by_node(tmp_path):
    rows = []
    for name, args in SCENARIOS.items():
        by, text = {}, {}
        for mode in ("rank", "node"):
            rep, err0 = run_mode(tmp_path / f"{name.replace(' ', '-')}-{mode}",
                                 mode, args)
            by[mode] = findings(rep)
            text[mode] = described(rep)
            assert rep["steps"]["with_missing_ranks"] == 0, rep["steps"]
            if mode == "node":
                m = AGREE.search(err0)
                assert m, err0
                merged, complete, incomplete, late, agreed, compared = map(int, m.groups())
                steps = int(args[1])
                assert complete == steps and incomplete == 0 and late == 0, err0
                assert merged == steps, err0  # one partial per node 1 step
                assert agreed == compared == steps, err0
        want = {"straggler": "straggler", "data stall": "data_stall"}[name]
        assert any(f[0] == want for f in by["rank"]), by
        assert by["rank"] == by["node"], by
        for mode in ("rank", "node"):
            rows.append((name, mode, text[mode]))
    width = max(len(r[2]) for r in rows)
    print(f"\n{'scenario':<11} {'--aggregate':<11} findings")
    for name, mode, text in rows:
        print(f"{name:<11} {mode:<11} {text:<{width}}")


def test_aggregate_option_is_checked_and_a_single_node_ignores_it(tmp_path):
    out = subprocess.run([str(STEPSCOPE), "run", "-n", "1", "--aggregate", "nodes",
                          "--", "true"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out
    assert "bad --aggregate 'nodes' (rank or node)" in out.stderr, out.stderr
    out = subprocess.run([str(STEPSCOPE), "run", "-n", str(NPROC), "--aggregate", "node",
                          "--db", str(tmp_path / "s.db"), "--no-http", "--", "true"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "aggregation by" not in out.stderr and "node partials" not in out.stderr, \
        out.stderr
