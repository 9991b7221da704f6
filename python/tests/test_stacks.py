"""The rank's side of `stepscope stacks` (stepscope/_stacks.py,
docs/debug.md): importing stepscope under a controller registers the stack
handler; the stack signal then appends every thread's stack and the end
marker to the rank's stack file, also while the main thread is in a C call
that holds the GIL; a C read() on a pipe is not interrupted by it (no
EINTR: the handler is installed with SA_RESTART); the file appears only
once the handler is in place, and the processes the rank starts do not
see the directory;
STEPSCOPE_STACKS=0 and a missing STEPSCOPE_STACK_DIR leave the process
alone."""
import os
import signal
import subprocess
import sys
import time

from conftest import PYTHON, clean_env

MARKER = "\n# stepscope: end of stacks\n"
SIG = signal.SIGRTMIN + 10

RANK_PROGRAM = r"""
import ctypes, os, sys, threading, time
import stepscope
from stepscope import _stacks
assert _stacks.install() == _stacks.install()  # once per process
# what this process starts does not answer in its name
assert _stacks.install() is None or "STEPSCOPE_STACK_DIR" not in os.environ
def helper():
    time.sleep(1000)
threading.Thread(target=helper, name="helper", daemon=True).start()
def blocked_in_c():
    mutex = ctypes.create_string_buffer(64)
    libc = ctypes.PyDLL(None)
    libc.pthread_mutex_lock(mutex)
    print("READY", flush=True)
    libc.pthread_mutex_lock(mutex)
blocked_in_c()
"""


def start(tmp_path, **env):
    return subprocess.Popen(
        [PYTHON, "-c", RANK_PROGRAM],
        env=clean_env(RANK="3", PYTHONPATH=os.environ.get("PYTHONPATH", ""),
                      **env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path, text=None, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and (text is None or text in path.read_text()):
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {text!r}")


def wait_asleep(pid, seconds=20.0):
    """Waits until every thread of process PID is asleep (state S).  After
    its READY line the rank blocks nowhere but where the test wants it (the
    second lock, read()) and, in the helper thread, in time.sleep(); with
    every thread asleep none holds the GIL, so the main thread is not
    merely waiting for it.  A fixed sleep was too short for a child that a
    loaded machine schedules late."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rpartition(")")[2].split()[0])
            except FileNotFoundError:
                pass
        if states and all(s == "S" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never went to sleep")


def test_signal_dumps_every_thread_and_the_marker(tmp_path):
    p = start(tmp_path, STEPSCOPE_STACK_DIR=str(tmp_path))
    try:
        assert p.stdout.readline() == "READY\n", p.stderr.read()
        wait_asleep(p.pid)  # from print() into the second lock
        stack = tmp_path / "stack.3"
        assert stack.exists()
        assert [f.name for f in tmp_path.iterdir()] == ["stack.3"]
        assert oct(stack.stat().st_mode & 0o777) == "0o600"
        for _ in range(2):  # it answers every request
            os.kill(p.pid, SIG)
            text = wait_for(stack, MARKER)
            assert text.endswith(MARKER)
            assert 'line 16 in blocked_in_c' in text  # the second lock
            assert "in helper" in text
            stack.write_text("")  # as the controller empties it
        assert p.poll() is None  # still blocked in its C call
    finally:
        p.kill()
        p.wait()


READ_PROGRAM = r"""
import ctypes, os, sys
import stepscope
from stepscope import _stacks
assert _stacks.install()
libc = ctypes.CDLL(None, use_errno=True)  # the GIL is released in read()
buf = ctypes.create_string_buffer(1)
print("READY", flush=True)
n = libc.read(int(sys.argv[1]), buf, 1)
print("READ", n, ctypes.get_errno(), buf.raw, flush=True)
"""


def test_c_read_on_a_pipe_is_not_interrupted(tmp_path):
    r, w = os.pipe()
    p = subprocess.Popen(
        [PYTHON, "-c", READ_PROGRAM, str(r)], pass_fds=(r,),
        env=clean_env(RANK="2", STEPSCOPE_STACK_DIR=str(tmp_path),
                      PYTHONPATH=os.environ.get("PYTHONPATH", "")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(r)
    try:
        assert p.stdout.readline() == "READY\n", p.stderr.read()
        wait_asleep(p.pid)  # from print() into read()
        stack = tmp_path / "stack.2"
        for _ in range(5):
            assert p.poll() is None, p.communicate()  # an EINTR ends it
            os.kill(p.pid, SIG)
            text = wait_for(stack, MARKER)
            assert "line 9 in <module>" in text, text
            stack.write_text("")
        assert p.poll() is None  # still in read(): it was restarted
        os.write(w, b"x")
        out, err = p.communicate(timeout=10)
        assert out == "READ 1 0 b'x'\n", (out, err)
    finally:
        os.close(w)
        if p.poll() is None:
            p.kill()
            p.wait()


def test_off_without_a_directory_or_when_asked(tmp_path):
    for env in ({"STEPSCOPE_STACK_DIR": str(tmp_path), "STEPSCOPE_STACKS": "0"},
                {}):
        p = start(tmp_path, **env)
        try:
            assert p.stdout.readline() == "READY\n", p.stderr.read()
            assert list(tmp_path.iterdir()) == []
        finally:
            p.kill()
            p.wait()
