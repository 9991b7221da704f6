"""`stepscope trace` on a real run: the file is valid JSON in the trace-event
format, with one named track per rank, step and phase slices that nest
without overlapping on each track, sync arrivals and findings as instant
events, and the chosen steps and ranks only."""
import json
import subprocess
from collections import defaultdict

from conftest import STEPSCOPE, example, run_job


def trace(db, out, *args):
    proc = subprocess.run([str(STEPSCOPE), "trace", "--db", str(db), "-o",
                           str(out), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    with open(out) as f:
        return json.load(f)


def check_nesting(events):
    """Per track, the complete slices nest and never partly overlap."""
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
            tracks[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for tid, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in spans:
            while stack and stack[-1][1] <= start + 1e-6:
                stack.pop()
            if stack:
                assert end <= stack[-1][1] + 1e-6, (tid, name, stack[-1])
            stack.append((start, end, name))
    return tracks


def test_trace_of_a_straggler_run(store, tmp_path):
    job = run_job(store, 4, example("--steps", "120", "--compute-ms", "3",
                                    "--straggler", "2:20:compute"))
    assert job.returncode == 0, job.stderr
    doc = trace(store, tmp_path / "t.json")
    events = doc["traceEvents"]
    names = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert sorted(e["args"]["name"] for e in names) == \
        [f"rank {r}" for r in range(4)]
    assert len({e["tid"] for e in names}) == 4
    tracks = check_nesting(events)
    assert set(tracks) == {e["tid"] for e in names}

    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    # 120 steps (all kept: fewer than the default 200) on every rank.
    assert len(steps) == 4 * 120
    assert min(e["ts"] for e in steps) >= 0
    phases = {e["name"] for e in events if e["ph"] == "X" and
              e["cat"] == "phase"}
    assert {"data", "compute", "allreduce"} <= phases
    syncs = [e for e in events if e["ph"] == "i" and e["cat"] == "sync"]
    assert len(syncs) == 4 * 120
    assert all(e["s"] == "t" and "vs_median_ms" in e["args"] for e in syncs)
    # The straggler reaches the all-reduce late: positive skew, mostly.
    tid_of = {e["args"]["name"]: e["tid"] for e in names}
    late = [e["args"]["vs_median_ms"] for e in syncs
            if e["tid"] == tid_of["rank 2"]]
    assert sorted(late)[len(late) // 2] > 2.0
    found = [e for e in events if e["ph"] == "i" and e["cat"] == "finding"]
    assert found, "no finding marker"
    assert all(e["s"] == "g" and e["args"]["message"] for e in found)
    assert any(e["name"] == "straggler" for e in found)
    assert doc["otherData"]["run_id"] == 1


def test_trace_of_chosen_steps_and_ranks(store, tmp_path):
    job = run_job(store, 3, example("--steps", "40", "--compute-ms", "2"))
    assert job.returncode == 0, job.stderr
    doc = trace(store, tmp_path / "t.json", "--steps", "10:19", "--ranks",
                "0,2")
    events = doc["traceEvents"]
    names = [e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names == ["rank 0", "rank 2"]
    steps = sorted({e["args"]["step"] for e in events
                    if e["ph"] == "X" and e["cat"] == "step"})
    assert steps == list(range(10, 20))
    check_nesting(events)
