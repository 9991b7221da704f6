"""`stepscope stacks` across many nodes, end to end (docs/performance.md,
"Every rank's stacks"): bench/bench_stacks_agents.c starts a real
controller whose node 0 runs real Python ranks and plays the other nodes'
agents over real authenticated links (the link's own code), each agent
answering with realistic stacks where three ranks are elsewhere.  The
program checks each `stepscope stacks` text itself (exit status 0): the
three outliers first, each alone; every rank answered, or, with a silent
agent, that agent's node named after the wait while every other node's
ranks are there.  Here in a small shape, so that it runs in `make test`;
`make bench-stacks-agents` runs the 4,160-rank one."""
import os
import re
import subprocess
from pathlib import Path

BUILD = Path(os.environ.get("STEPSCOPE_BUILD",
                            Path(__file__).resolve().parents[2] / "build"))
BENCH = BUILD / "bench" / "bench_stacks_agents"


def run(*args):
    p = subprocess.run([str(BENCH), "--port", "0", *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_outliers_grouped_and_the_rest_as_one_range():
    out = run("--agents", "6", "--ranks", "8", "--reps", "2")
    text = out[out.index("the merged text"):]
    # 7 nodes of 8 ranks; outliers 17 % 8 + 8, 900 % 8 + 24, 3001 % 8 + 40
    assert "stacks of run 1: 56 of 56 ranks answered" in text
    assert re.search(r"^    rank 9 \(1\): .* → get → wait: waiter\.acquire\(\)$",
                     text, re.M), text
    # (here the plain set is the shorter text; 4,096 ranks read
    # "64-4159 except 81, 1412, 2809")
    assert re.search(r"^    ranks 8,10-27,29-40,42-55 \(45\): <module> → "
                     r"pretrain → … → .* → wait: work\.wait\(\)$", text, re.M), text
    assert "ranks 0-7 (8): <module> → wait_for_peers" in text


def test_a_silent_agent_is_named_and_the_others_answer():
    out = run("--agents", "6", "--ranks", "8", "--reps", "2", "--silent", "1")
    text = out[out.index("the merged text"):]
    assert "48 of 56 ranks answered" in text
    assert "ranks 48-55 (8): node 6 did not answer within 1.9 s" in out
    # the wait is one wait: about 1.9 s, not one per node
    m = re.search(r"command \(stepscope stacks, end to end\): median (\d+) ms",
                  out)
    assert m and 1900 <= int(m.group(1)) < 6000, out
