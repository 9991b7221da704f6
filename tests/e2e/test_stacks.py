"""`stepscope stacks` and GET /api/runs/{id}/stacks on real ranks
(docs/debug.md): a rank asleep in time.sleep while the others wait in a
gloo all-reduce comes first in the merged output, which `report` shows
after the job; a rank blocked in a C
call that holds the GIL still shows its Python stack; the stacks are read
from the ranks' memory, so a rank in a C sleep() sleeps on, a SIGSTOPped
rank and one that does not load stepscope's Python module are read too;
with the reading refused (a seccomp filter, no_memory_read.py) the signal
answers instead, the stopped rank and the one without stepscope are
listed with why; eight ranks answer within 2 s; and the endpoint wants
the run token off loopback."""
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import STEPSCOPE, kill_quietly
from jobs import rank_pid

RANKS_PY = Path(__file__).resolve().parent / "stacks" / "stuck_ranks.py"
# runs the controller with process_vm_readv refused: the signal path
NO_MEMORY_READ = RANKS_PY.parent / "no_memory_read.py"


class StuckJob:
    """A `stepscope run` whose ranks get stuck; stopped at the end."""

    def __init__(self, tmp_path, n, stuck="", ddp=False, auto=True,
                 http=None, memory=True):
        self.db = tmp_path / "store.db"
        self.release = tmp_path / "release"
        env = dict(os.environ, STUCK=stuck, DDP="1" if ddp else "0",
                   RELEASE=str(self.release), FIFO_DIR=str(tmp_path))
        args = [str(STEPSCOPE), "run", "-n", str(n), "--db", str(self.db)]
        if not memory:  # the controller may not read the ranks' memory
            args = [sys.executable, str(NO_MEMORY_READ)] + args
        if auto:
            args.append("--auto")
        if http:
            args += ["--http", http]
        self.err = tmp_path / "run.err"
        self.out = tmp_path / "run.out"
        with open(self.err, "w") as e, open(self.out, "w") as o:
            self.proc = subprocess.Popen(
                args + ["--", sys.executable, str(RANKS_PY)], stdout=o,
                stderr=e, env=env)
        self.n = n

    def wait_ready(self, seconds=120):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready = self.out.read_text().count("READY")
            if ready >= self.n:
                time.sleep(0.5)  # the waiting ranks reach their wait
                return
            assert self.proc.poll() is None, self.err.read_text()
            time.sleep(0.2)
        raise AssertionError("the ranks never got ready:\n" +
                             self.err.read_text())

    def url(self):
        m = re.search(r"dashboard (http://\S+?)(\?token=(\w+))?$",
                      self.err.read_text(), re.M)
        assert m, self.err.read_text()
        return m.group(1), m.group(3)

    def stacks(self, *extra):
        t0 = time.monotonic()
        out = subprocess.run([str(STEPSCOPE), "stacks", "--db", str(self.db),
                              *extra], capture_output=True, text=True,
                             timeout=60)
        return out, time.monotonic() - t0

    def pid(self, rank):
        return rank_pid(self.proc.pid, rank)

    def stop(self):
        for r in range(self.n):
            pid = self.pid(r)
            if pid:
                kill_quietly(pid, signal.SIGCONT)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def jobs():
    started = []
    yield lambda *a, **k: started.append(StuckJob(*a, **k)) or started[-1]
    for j in started:
        j.stop()


def test_sleeping_rank_first_while_others_wait_in_all_reduce(tmp_path, jobs):
    job = jobs(tmp_path, 4, stuck="2:sleep", ddp=True)
    job.wait_ready()
    out, _ = job.stacks()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("stacks of run 1: 4 of 4 ranks answered")
    # the outlier group comes first and names the call it sleeps in
    assert lines[1].startswith("rank 2 (1): "), out.stdout
    assert "load_batch: time.sleep(100000)" in lines[1]
    assert lines[2].startswith("ranks 0,1,3 (3): "), out.stdout
    # auto mode counts the collective in a wrapper that shows by its name
    assert ("all_reduce_step → stepscope_collective → all_reduce: "
            "work.wait()") in lines[2], out.stdout

    doc = json.loads(job.stacks("--json")[0].stdout)
    assert [g["ranks"] for g in doc["merged"]["groups"]] == ["2", "0,1,3"]
    assert {r["state"] for r in doc["ranks"]} == {"ok"}
    # every thread is there: gloo's and torch's threads have no Python
    # frames, but the rank's Python threads all do
    r0 = doc["ranks"][0]
    assert r0["threads"][-1]["frames"][0]["func"] == "<module>"

    # the snapshots are stored: `report` shows the merged stacks after the
    # job is gone
    job.stop()
    out = subprocess.run([str(STEPSCOPE), "report", "--db", str(job.db)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("STACKS (taken ")[1].split("\n\n")[0]
    assert "on request; 4 of 4 ranks answered)" in section
    assert section.splitlines()[1].startswith("  rank 2 (1): "), section
    assert "load_batch: time.sleep(100000)" in section
    rep = json.loads(subprocess.run(
        [str(STEPSCOPE), "report", "--json", "--db", str(job.db)],
        capture_output=True, text=True, timeout=60).stdout)
    assert rep["stacks"]["trigger"] == "request"
    assert rep["stacks"]["finding_id"] is None
    assert rep["stacks"]["document"]["merged"]["groups"][0]["ranks"] == "2"


@pytest.mark.parametrize("via", ["memory", "signal"])
def test_rank_holding_the_gil_in_c_still_answers(tmp_path, jobs, via):
    job = jobs(tmp_path, 2, stuck="1:gil", memory=via == "memory")
    job.wait_ready()
    pid = job.pid(1)
    out, took = job.stacks("--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    r1 = doc["ranks"][1]
    assert r1["state"] == "ok" and r1["pid"] == pid
    assert r1["via"] == via, r1
    frames = r1["threads"][-1]["frames"]
    assert [f["func"] for f in frames][-2:] == ["train", "hold_gil"]
    call = "libc.pthread_mutex_lock(mutex)"
    # the second lock, the one that never returns
    second = [i for i, text in enumerate(RANKS_PY.read_text().splitlines(), 1)
              if text.strip() == call][1]
    assert frames[-1]["code"] == call and frames[-1]["line"] == second
    assert f"rank 1 (1): <module> → train → hold_gil: {call}" in \
        doc["merged_text"]
    # its other thread, asleep, waits for the GIL forever: shown as well
    assert len(r1["threads"]) == 2
    assert r1["threads"][0]["frames"][-1]["func"] == "run"
    assert took < 2.0
    # the C call never returned: the thread is still in it
    with open(f"/proc/{pid}/task/{pid}/wchan") as f:
        assert f.read() != "0"


@pytest.mark.parametrize("via", ["memory", "signal"])
def test_a_c_read_goes_on_while_stacks_are_taken(tmp_path, jobs, via):
    """Read from memory, the rank is not touched; asked by the stack
    signal, whose handler is installed with SA_RESTART, a rank blocked in
    a C read() on a pipe stays in it (no EINTR) however often its stacks
    are taken."""
    job = jobs(tmp_path, 2, stuck="1:read", memory=via == "memory")
    job.wait_ready()
    for _ in range(4):
        out, _ = job.stacks("--json")
        assert out.returncode == 0, out.stderr
        r1 = json.loads(out.stdout)["ranks"][1]
        assert r1["state"] == "ok" and r1["via"] == via, r1
        assert r1["threads"][-1]["frames"][-1]["func"] == "read_pipe", r1
    assert "] READ " not in job.out.read_text()
    job.release.touch()
    deadline = time.monotonic() + 20
    while ("] READ " not in job.out.read_text() and
           time.monotonic() < deadline):
        time.sleep(0.1)
    assert "[rank 1] READ 1 0" in job.out.read_text(), job.out.read_text()


def test_a_fifo_named_as_source_does_not_stop_the_controller(tmp_path, jobs):
    """A frame whose source file is a FIFO: the controller reads source
    lines off its loop, regular files only, so the stacks answer at once
    (without that line), the API keeps answering, and SIGTERM is acted
    on."""
    job = jobs(tmp_path, 2, stuck="1:fifo", http="127.0.0.1:0")
    job.wait_ready()
    for _ in range(2):
        t0 = time.monotonic()
        out = subprocess.run([str(STEPSCOPE), "stacks", "--json", "--db",
                              str(job.db)], capture_output=True, text=True,
                             timeout=15)
        assert out.returncode == 0, out.stderr
        assert time.monotonic() - t0 < 5
        leaf = json.loads(out.stdout)["ranks"][1]["threads"][-1]["frames"][-1]
        assert leaf["func"] == "stuck" and leaf["line"] == 3, leaf
        assert leaf["file"] == str(tmp_path / "fifo_source.py")
        assert "code" not in leaf
    base, _ = job.url()
    runs = json.loads(urllib.request.urlopen(base + "api/runs",
                                             timeout=10).read())
    assert runs["runs"][0]["live"]
    t0 = time.monotonic()
    job.proc.send_signal(signal.SIGTERM)
    job.proc.wait(timeout=20)
    assert time.monotonic() - t0 < 15


def test_stopped_rank_read_from_memory_with_native_frames(tmp_path, jobs):
    job = jobs(tmp_path, 3)
    job.wait_ready()
    pid = job.pid(1)
    os.kill(pid, signal.SIGSTOP)
    out, _ = job.stacks("--native")
    assert out.returncode == 0, out.stderr
    assert "3 of 3 ranks answered" in out.stdout
    assert "ranks 0-2 (3): <module> → train → wait_for_peers" in out.stdout
    native = out.stdout.split("native frames (innermost first):\n")[1]
    block = native.split("rank 1 (pid")[1].split("\nrank 2")[0]
    assert "stopped" in block and "clock_nanosleep" in block, native
    # neither reading left it other than stopped
    with open(f"/proc/{pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] == "T"
    # every rank has native frames: libc's sleep under the interpreter
    # (whose own symbols need its symbol table: a stripped python3 has
    # none, so its frames are module@pc)
    doc = json.loads(job.stacks("--native", "--json")[0].stdout)
    for r in doc["ranks"]:
        main = [t for t in r["native_threads"] if t["tid"] == r["pid"]][0]
        assert main["native"][0]["symbol"].startswith("clock_nanosleep"), r
        assert any(f["module"] and f["module"].startswith("python3")
                   for f in main["native"]), r
        assert r["via"] == "memory", r
        assert r["state"] == ("stopped" if r["rank"] == 1 else "ok"), r
        assert r["threads"][-1]["frames"][-1]["func"] == "wait_for_peers"


def test_stopped_rank_listed_as_stopped_when_memory_is_refused(tmp_path,
                                                               jobs):
    job = jobs(tmp_path, 3, memory=False)
    job.wait_ready()
    os.kill(job.pid(1), signal.SIGSTOP)
    out, _ = job.stacks()
    assert out.returncode == 3, out.stderr  # partial: said, not hidden
    assert "2 of 3 ranks answered" in out.stdout
    assert ("rank 1 (1): stopped (SIGSTOP): no Python stack (reading its "
            "memory: reading the process's memory: Permission denied") \
        in out.stdout, out.stdout
    doc = json.loads(job.stacks("--json")[0].stdout)
    r0 = doc["ranks"][0]
    assert r0["via"] == "signal" and "Permission denied" in \
        r0["memory_error"], r0


def test_rank_without_stepscope_is_read_from_memory(tmp_path, jobs):
    job = jobs(tmp_path, 2, auto=False)  # the script never imports it
    job.wait_ready()
    out, took = job.stacks()
    assert out.returncode == 0, out.stdout
    assert ("ranks 0,1 (2): <module> → train → wait_for_peers: "
            "time.sleep(0.05)") in out.stdout, out.stdout
    assert took < 2.0


def test_rank_without_stepscope_is_listed_with_why(tmp_path, jobs):
    job = jobs(tmp_path, 2, auto=False, memory=False)
    job.wait_ready()
    out, took = job.stacks()
    assert out.returncode == 3
    assert ("ranks 0,1 (2): no answer: the rank does not load stepscope's "
            "Python module") in out.stdout, out.stdout
    assert "(reading its memory: " in out.stdout
    assert took < 2.0


def slept(job, rank, seconds=30):
    """(seconds slept, seconds unslept) that rank printed after its C
    sleep()."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = re.search(rf"\[rank {rank}\] SLEPT (\S+) (\d+)",
                      job.out.read_text())
        if m:
            return float(m.group(1)), int(m.group(2))
        time.sleep(0.1)
    raise AssertionError(job.out.read_text())


def test_a_c_sleep_is_not_cut_short_by_stacks(tmp_path, jobs):
    """libc's sleep() returns early on any signal: read from memory, the
    rank sleeps its 6 s however often its stacks are taken, and the stack
    names the call it sleeps in."""
    job = jobs(tmp_path, 2, stuck="1:csleep")
    job.wait_ready()
    for _ in range(3):
        out, _ = job.stacks("--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        r1 = doc["ranks"][1]
        assert r1["via"] == "memory", r1
        leaf = r1["threads"][-1]["frames"][-1]
        assert leaf["func"] == "c_sleep", leaf
        assert leaf["code"] == 'left = libc.sleep(int(os.environ.get(' \
            '"CSLEEP", "6")))', leaf
        time.sleep(0.5)
    took, left = slept(job, 1)
    assert left == 0 and took >= 5.9, (took, left)


def test_a_c_sleep_is_cut_short_by_the_signal_fallback(tmp_path, jobs):
    """Where the controller may not read the ranks' memory, it asks them
    with the stack signal: they answer, and a C sleep() is cut short
    (which is why the signal is only the fallback)."""
    job = jobs(tmp_path, 2, stuck="1:csleep", memory=False)
    job.wait_ready()
    out, _ = job.stacks("--json")
    assert out.returncode == 0, out.stderr
    r1 = json.loads(out.stdout)["ranks"][1]
    assert r1["via"] == "signal" and "Permission denied" in \
        r1["memory_error"], r1
    assert r1["threads"][-1]["frames"][-1]["func"] == "c_sleep", r1
    took, left = slept(job, 1)
    assert left > 0 and took < 5.9, (took, left)


def test_eight_ranks_answer_within_two_seconds(tmp_path, jobs):
    job = jobs(tmp_path, 8, stuck="5:sleep")
    job.wait_ready()
    for _ in range(3):
        out, took = job.stacks("--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["answered"] == 8 and took < 2.0, (took, doc["elapsed_ms"])
        assert doc["merged"]["groups"][0]["ranks"] == "5"


def stored_snapshots(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM stack_snapshots").fetchone()[0]
    finally:
        con.close()


def test_stacks_are_taken_by_post_only(tmp_path, jobs):
    """A GET, which any web page can make a browser send to a loopback
    server, takes no stacks (nothing signalled, nothing stored); nor does
    a request for another Host name (DNS rebinding) or from a page of
    another origin; `stepscope stacks` POSTs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = jobs(tmp_path, 2, http=f"127.0.0.1:{port}")
    job.wait_ready()
    url = f"http://127.0.0.1:{port}/api/runs/1/stacks?native=1"
    refused = [
        (urllib.request.Request(url), 405),
        (urllib.request.Request(url, headers={
            "Origin": "http://evil.example"}), 403),
        (urllib.request.Request(url, data=b"", headers={
            "Origin": "http://evil.example"}), 403),
        (urllib.request.Request(url, data=b"", headers={
            "Host": f"rebind.evil.example:{port}"}), 403),
        (urllib.request.Request(f"http://127.0.0.1:{port}/api/runs",
                                headers={"Host": "rebind.evil.example"}), 403),
    ]
    for req, status in refused:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=20)
        assert e.value.code == status, (req.full_url, req.headers)
        assert "error" in json.loads(e.value.read())
    time.sleep(0.5)  # the store's writer commits every 250 ms
    assert stored_snapshots(job.db) == 0
    out, _ = job.stacks()
    assert out.returncode == 0 and "ranks 0,1 (2)" in out.stdout, out.stderr
    doc = json.loads(urllib.request.urlopen(
        urllib.request.Request(url, data=b""), timeout=30).read())
    assert doc["answered"] == 2
    time.sleep(0.5)
    assert stored_snapshots(job.db) == 2


def test_endpoint_wants_the_token_off_loopback(tmp_path, jobs):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = jobs(tmp_path, 2, http=f"0.0.0.0:{port}")
    job.wait_ready()
    base, token = job.url()
    assert token
    url = f"http://127.0.0.1:{port}/api/runs/1/stacks"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, data=b"", timeout=20)
    assert e.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "?token=" + "0" * len(token), data=b"",
                               timeout=20)
    assert e.value.code == 401
    req = urllib.request.Request(url, data=b"", headers={
        "Authorization": "Bearer " + token})
    doc = json.loads(urllib.request.urlopen(req, timeout=20).read())
    assert doc["answered"] == 2
    # the CLI finds the token in the live-run file
    out, _ = job.stacks()
    assert out.returncode == 0 and "ranks 0,1 (2)" in out.stdout, out.stderr
