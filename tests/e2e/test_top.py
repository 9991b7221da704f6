"""`stepscope top` in a real terminal: a detached tmux pane (its own tmux
server) shows a running job's ranks with numbers, follows the window's
size, quits on `q` leaving the terminal's modes as they were, and says so
when the job ends under it; without a job it says that no job is running."""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import STEPSCOPE, example

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed")

RANK_LINE = re.compile(r"^\s+(\d+)\s+\d+\s.*\d\.\d\dx\s+\d+\.\d\s")


class Tmux:
    """A private tmux server (so no user session is touched)."""

    def __init__(self, tmp_path):
        self.sock = f"sstop-{os.getpid()}-{time.monotonic_ns()}"
        self.env = dict(os.environ, TERM="xterm-256color")
        self.env.pop("TMUX", None)

    def __call__(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, *args],
                              capture_output=True, text=True, timeout=10,
                              env=self.env)

    def start(self, name, command, width, height):
        r = self("new-session", "-d", "-s", name, "-x", str(width), "-y",
                 str(height), command)
        assert r.returncode == 0, r.stderr

    def screen(self, name):
        return self("capture-pane", "-p", "-t", name).stdout

    def wait_for(self, name, predicate, seconds=15.0):
        deadline = time.monotonic() + seconds
        text = ""
        while time.monotonic() < deadline:
            text = self.screen(name)
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"pane {name} never showed it:\n{text}")

    def close(self):
        self("kill-server")


def rank_lines(text):
    return {int(m.group(1)): line for line in text.splitlines()
            if (m := RANK_LINE.match(line))}


def pane_command(db):
    top = shlex.join([str(STEPSCOPE), "top", "--db", str(db)])
    # The shell ignores Ctrl-C (top sets its own handler); after top: its
    # exit status and the terminal's modes, then linger so the pane can be
    # read.
    return (f"sh -c 'trap \"\" INT; {top}; echo TOP_EXIT=$?; stty -a | "
            f"tr -s \" ;\" "
            f"\"\\n\\n\" | grep -E \"^-?(icanon|echo)$\" | tr \"\\n\" \" \"; "
            f"echo; sleep 60'")


def start_job(db, steps, ranks=4, http=()):
    job = subprocess.Popen([str(STEPSCOPE), "run", "-n", str(ranks), "-q",
                            *http, "--db", str(db), "--",
                            *example("--steps", str(steps),
                                     "--compute-ms", "3")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    live = db.parent / f"{db.name}.d" / "live" / "run-1.json"
    deadline = time.monotonic() + 15
    while not live.exists() and time.monotonic() < deadline:
        assert job.poll() is None, job.communicate()
        time.sleep(0.1)
    assert live.exists(), "the controller wrote no live-run file"
    return job


def test_top_in_a_terminal(store, tmp_path):
    tmux = Tmux(tmp_path)
    job = start_job(store, 20000)
    try:
        tmux.start("a", pane_command(store), 120, 30)
        text = tmux.wait_for("a", lambda t: len(rank_lines(t)) == 4 and
                             "steps/s" in t)
        assert "stepscope top  run 1" in text
        assert re.search(r"step \d+\s+~?\d+\.\d steps/s", text), text
        assert re.search(r"median rank \d+\.\d ms, worst rank \d+\.\d ms",
                         text), text
        for line in rank_lines(text).values():
            assert re.search(r"(data|compute|allreduce|optimizer|"
                             r"between steps|in step)", line), line

        # A short, narrow window: fewer rank lines, nothing wider.
        tmux("resize-window", "-t", "a", "-x", "70", "-y", "9")
        text = tmux.wait_for("a", lambda t: "more ranks" in t)
        assert all(len(line) <= 70 for line in text.splitlines()), text
        assert len(rank_lines(text)) < 4

        tmux("send-keys", "-t", "a", "q")
        text = tmux.wait_for("a", lambda t: "icanon" in t)
        assert "TOP_EXIT=0" in text, text
        modes = text.split("TOP_EXIT=0", 1)[1].split()
        assert "icanon" in modes and "echo" in modes, text
        assert "stepscope top  run 1" not in text  # the main screen is back

        # Ctrl-C quits the same way.
        tmux.start("c", pane_command(store), 100, 24)
        tmux.wait_for("c", lambda t: len(rank_lines(t)) == 4)
        tmux("send-keys", "-t", "c", "C-c")
        text = tmux.wait_for("c", lambda t: "TOP_EXIT=" in t and
                             "icanon" in t.split("TOP_EXIT=", 1)[1])
        assert "TOP_EXIT=0" in text, text
        modes = text.split("TOP_EXIT=0", 1)[1].split()
        assert "icanon" in modes and "echo" in modes, text

        # The job ends while top watches it.
        tmux.start("b", pane_command(store), 120, 30)
        tmux.wait_for("b", lambda t: len(rank_lines(t)) == 4)
        job.send_signal(signal.SIGINT)
        job.communicate(timeout=60)
        text = tmux.wait_for("b", lambda t: "TOP_EXIT=" in t and
                             "icanon" in t.split("TOP_EXIT=", 1)[1])
        assert "TOP_EXIT=0" in text, text
        # (another test's controller may take the freed address at once)
        assert re.search(r"stepscope top: (run 1 has finished|the controller "
                         r"at \S+ (does not answer|is another one now))",
                         text), text
        assert "icanon" in text.split("TOP_EXIT=0", 1)[1].split()
    finally:
        tmux.close()
        if job.poll() is None:
            job.kill()
            job.communicate()

    out = subprocess.run([str(STEPSCOPE), "top", "--db", str(store)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "no job is running" in out.stderr


def test_top_is_not_fooled_by_another_run_at_the_same_address(tmp_path):
    """The controller top watches ends and another run's controller takes
    its address before top's next look: top says so and ends, where it
    used to show the other run as if it were its own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = ("--http", f"127.0.0.1:{port}")
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    tmux = Tmux(tmp_path)
    jobs = [start_job(first, 100000, 2, http)]
    try:
        tmux.start("d", pane_command(first), 120, 30)
        tmux.wait_for("d", lambda t: len(rank_lines(t)) == 2)
        top = subprocess.run(["pgrep", "-f", f"^{STEPSCOPE} top --db {first}"],
                             capture_output=True, text=True).stdout.split()
        assert len(top) == 1, top
        os.kill(int(top[0]), signal.SIGSTOP)  # top does not look meanwhile
        jobs[0].kill()
        jobs[0].communicate(timeout=60)
        jobs.append(start_job(second, 100000, 3, http))
        os.kill(int(top[0]), signal.SIGCONT)
        text = tmux.wait_for("d", lambda t: "TOP_EXIT=" in t)
        assert re.search(r"stepscope top: the controller at \S+ is another "
                         r"one now \(pid \d+, not \d+\): the run has ended",
                         text.replace("\n", "")), text
        assert "TOP_EXIT=0" in text, text
    finally:
        tmux.close()
        for job in jobs:
            if job.poll() is None:
                job.kill()
                job.communicate()
