"""One headline: `stepscope report`, `stepscope top` and the end-of-run
summary lead with the same answer (the first finding's ranks, phase and
kind), and no table under it names another rank as the slow one.

A real 4-rank job (the C example) whose rank 2 does 20 ms of extra compute
per step, so that the other ranks wait for it in the all-reduce and every
rank's step time comes out alike: the rank with the longest step time is
then any rank, which the report and `top` used to name as "the slowest".
`top --once` at 72 columns wraps the findings whole instead of cutting
them.  (The dashboard's side is test_dashboard_headline.py.)
"""
import json
import os
import re
import signal
import subprocess
import time

from conftest import STEPSCOPE, example, kill_quietly

WIDTH = 72


def report(store, *args):
    r = subprocess.run([str(STEPSCOPE), "report", "--db", str(store), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def headline_of(text):
    lines = [ln for ln in text.splitlines() if ln.startswith("HEADLINE")]
    assert len(lines) == 1, text
    return lines[0][len("HEADLINE"):].strip()


def wait_for_finding(store, proc, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        r = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                            str(store)], capture_output=True, text=True,
                           timeout=60)
        if r.returncode == 0 and any(
                f["kind"] == "straggler" and f["ranks"] == [2]
                for f in json.loads(r.stdout)["findings"]):
            return
        time.sleep(0.5)
    raise AssertionError("no straggler finding on rank 2")


def finding_blocks(lines):
    """The text of each finding `top` listed, its wrapped lines joined."""
    blocks, cur = [], None
    for ln in lines:
        if re.match(r"^ (CRITICAL|warning) ", ln):
            cur = [ln.strip()]
            blocks.append(cur)
        elif cur is not None and ln.startswith(" " * 10) and ln.strip():
            cur.append(ln.strip())
        else:
            cur = None
    return [" ".join(b) for b in blocks]


def test_report_top_and_summary_lead_with_one_headline(tmp_path):
    store = tmp_path / "store.db"
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "-n", "4", "--db", str(store), "--",
         *example("--steps", "100000", "--compute-ms", "5",
                  "--straggler", "2:20")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_finding(store, proc)
        live = headline_of(report(store))
        assert live.startswith("rank 2 \u00b7 phase compute \u00b7 "), live
        top = subprocess.run([str(STEPSCOPE), "top", "--once", "--db",
                              str(store)], capture_output=True, text=True,
                             timeout=60,
                             env=dict(os.environ, COLUMNS=str(WIDTH)))
        assert top.returncode == 0, top.stderr
        lines = top.stdout.splitlines()
        assert all(len(ln) <= WIDTH for ln in lines), top.stdout
        # top leads with the headline, right under its title and step line
        heads = [i for i, ln in enumerate(lines) if ln.startswith("headline: ")]
        assert heads and heads[0] <= 3, top.stdout
        head = lines[heads[0]][len("headline: "):].strip()
        assert head == live, (head, live, top.stdout)
        # its step line does not name another rank as the worst
        for m in re.finditer(r"mostly rank (\d+)", top.stdout):
            assert m.group(1) == "2", top.stdout
        # every finding whole: wrapped, not cut at the width
        blocks = finding_blocks(lines)
        assert blocks, top.stdout
        for b in blocks:
            assert b.endswith("."), (b, top.stdout)
        assert any("compute phase" in b for b in blocks), top.stdout
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_quietly(proc.pid)
            proc.communicate()

    text = report(store)
    final = headline_of(text)
    assert final.startswith("rank 2 \u00b7 phase compute \u00b7 "), final
    # the headline comes before the findings, which come before any table
    assert text.index("HEADLINE") < text.index("FINDINGS") < text.index("STEP TIME")
    # no table singles out another rank as the slow one without saying how
    # that fits the headline
    for m in re.finditer(r"slowest rank most often: rank (\d+)", text):
        assert m.group(1) == "2", text
    for m in re.finditer(r"most often last\s*\n\s+\S+.*rank (\d+)", text):
        assert m.group(1) == "2", text
    if re.search(r"^\s+allreduce .* rank [013] \(", text, re.M):
        assert "the headline blames phase compute of rank 2" in text, text
