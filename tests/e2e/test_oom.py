"""A rank the kernel's OOM killer ends: the launcher says it was the OOM
killer and which memory cgroup ran out, not only "signal 9", on stderr and
in the stored event.  The kill is real: the rank moves itself into a memory
cgroup of 64 MiB that the test made, then allocates until it dies."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import STEPSCOPE, Job

LIMIT = 64 << 20

RANK = r"""
import os, sys, time
if os.environ["RANK"] == "1":
    with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as f:
        f.write(f"{os.getpid()}\n")
    held = []
    while True:
        held.append(b"\1" * (16 << 20))  # written, so resident
time.sleep(120)
"""


WORKER_RANK = r"""
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Samples(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if os.environ["RANK"] == "1" and i == 8:
            with open(os.path.join(sys.argv[1], "cgroup.procs"), "w") as f:
                f.write(f"{os.getpid()}\n")
            held = []
            while True:
                held.append(b"\1" * (16 << 20))
        return torch.zeros(4)

for _ in DataLoader(Samples(), num_workers=1):
    pass
time.sleep(120)
"""


def kmsg_readable():
    """Whether the kernel's log can be read here (root may still be
    refused it in a container): open it as the launcher does."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        os.lseek(fd, 0, os.SEEK_END)
        os.read(fd, 8192)
    except BlockingIOError:
        pass
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def mounts():
    """[(fstype, mount point, super options)] from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            fs = tail.split()
            out.append((fs[0], head.split()[4], fs[2] if len(fs) > 2 else ""))
    return out


def memory_cgroup(name):
    """Makes a memory cgroup of LIMIT bytes without swap; its directory, or
    None when this host gives no writable memory controller."""
    for fstype, mnt, opts in mounts():
        if fstype == "cgroup" and "memory" in opts.split(","):
            group = Path(mnt) / name
            try:
                group.mkdir()
                (group / "memory.limit_in_bytes").write_text(f"{LIMIT}\n")
                swap = group / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(f"{LIMIT}\n")
                return group
            except OSError:
                remove(group)
                return None
    for fstype, mnt, _ in mounts():
        if fstype == "cgroup2":
            root = Path(mnt)
            try:
                if "memory" not in (root / "cgroup.controllers").read_text().split():
                    return None
                (root / "cgroup.subtree_control").write_text("+memory\n")
                group = root / name
                group.mkdir()
                (group / "memory.max").write_text(f"{LIMIT}\n")
                if (group / "memory.swap.max").exists():
                    (group / "memory.swap.max").write_text("0\n")
                return group
            except OSError:
                return None
    return None


def remove(group):
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


def run_in_cgroup(store, code):
    """Runs CODE as 2 ranks, the directory of a memory cgroup of LIMIT
    bytes its argument; the finished Job."""
    group = memory_cgroup(f"stepscope-oom-test-{os.getpid()}")
    if group is None:
        pytest.skip("no writable memory cgroup controller here")
    try:
        proc = subprocess.run(
            [str(STEPSCOPE), "run", "-n", "2", "--db", str(store), "--no-http",
             "--connect-timeout", "300", "--grace", "2", "--",
             sys.executable, "-c", code, str(group)],
            capture_output=True, text=True, timeout=180)
    finally:
        remove(group)
    return Job(proc, store)


def test_an_oom_killed_rank_is_named_with_its_cgroup(store):
    job = proc = run_in_cgroup(store, RANK)
    assert proc.returncode == 137, proc.stderr
    err = proc.stderr
    if kmsg_readable():
        assert "rank 1 failed first: killed by the kernel's OOM killer " \
            "(SIGKILL)" in err, err
        assert "its memory cgroup" in err and "reached its limit of 64 MiB" \
            in err, err
    else:
        assert "probably by the kernel's OOM killer" in err, err
    failed = [e for e in job.report().get("events", [])
              if e["kind"] == "rank_failed" and e.get("rank") == 1]
    assert failed and "OOM killer" in failed[0]["message"], failed
    # The report keeps the explanation after the run.
    failure = [e["message"] for e in job.report()["events"]
               if e["kind"] == "failure"]
    assert failure and failure[0].startswith("rank 1 failed first: killed "), \
        failure
    # Code given inline is not the run's name.
    assert job.report()["run"]["name"] == \
        os.path.basename(sys.executable) + " -c"
    # Rank 0 was stopped by stepscope, and is not said to be OOM-killed.
    assert "rank 0 was killed by signal 15" in str(job.report()["events"])


def test_an_oom_killed_dataloader_worker_is_named(store):
    # A real DataLoader worker of rank 1 is killed; PyTorch ends the rank
    # with an exception that names the worker's pid, which the kernel's
    # log names too.
    pytest.importorskip("torch")
    job = run_in_cgroup(store, WORKER_RANK)
    assert job.returncode == 1, job.stderr
    if not kmsg_readable():
        pytest.skip("the kernel's log cannot be read here")
    assert "rank 1 failed first: exited with code 1" in job.stderr, job.stderr
    assert "the kernel's OOM killer ended process " in job.stderr, job.stderr
    assert "which its last lines name: its memory cgroup" in job.stderr, \
        job.stderr
