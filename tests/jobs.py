"""Running `stepscope run` jobs from tests and reading what they left.

Shared by the end-to-end tests (tests/e2e), the Python package's tests
(python/tests), whose conftest.py files put this folder on sys.path, and
bench/bench_accuracy.py (the helpers that find a job's rank processes).
The CLI is $STEPSCOPE_BUILD/stepscope (default ./build).
"""
import base64
import json
import os
import random
import socket
import sqlite3
import subprocess
from pathlib import Path

SOURCE = Path(os.environ.get("STEPSCOPE_SOURCE", Path(__file__).resolve().parents[1]))
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"


def free_port(span=1):
    """A TCP port P with P .. P + SPAN - 1 free on every address now, picked
    at random below the kernel's ephemeral ports, as stepscope's launcher
    picks MASTER_PORT: a port from bind(port 0) is an ephemeral one, which
    any process's next outgoing connection (another test's ranks, say) may
    be handed before the test's server binds it."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    base = low - 10000 if low > 11024 else 1024
    for _ in range(500):
        port = random.randrange(base, low - span)
        try:
            for p in range(port, port + span):
                with socket.socket() as s:
                    s.bind(("", p))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no {span} free ports in a row below {low}")


def secret_file(path):
    """A new random link secret in PATH, mode 0600 (as docs/multinode.md
    says); returns PATH."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(base64.b64encode(os.urandom(32)).decode() + "\n")
    return path


class Job:
    """A finished `stepscope run`: exit status, output, report and store."""

    def __init__(self, proc, db):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.db = db

    def report(self, run=None):
        args = [str(STEPSCOPE), "report", "--json", "--db", str(self.db)]
        if run is not None:
            args.append(str(run))
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def findings(self, kind=None):
        fs = self.report()["findings"]
        return [f for f in fs if kind is None or f["kind"] == kind]

    def rank_steps(self):
        """{(step, rank): {"phases": {...}, "counts": {...}, "syncs": {...},
        "self": {...} | None, "rss": int|None, "device": int|None}} from the
        store; "self" has the self time of every phase (the store keeps
        only those that differ from the phase's time), None when the rank
        recorded none."""
        con = sqlite3.connect(str(self.db))
        rows = {}
        for step, rank, phases, pc, sy, ps, rss, dev in con.execute(
                "SELECT step, rank, phases, phase_counts, syncs, phase_self, "
                "rss_bytes, device_bytes FROM rank_steps"):
            phases = json.loads(phases) if phases else {}
            own = None
            if ps is not None:
                own = dict(phases)
                own.update(json.loads(ps))
            rows[(step, rank)] = {
                "phases": phases,
                "counts": json.loads(pc) if pc else {},
                "syncs": json.loads(sy) if sy else None,
                "self": own, "rss": rss, "device": dev}
        con.close()
        return rows

    def results(self):
        """The RESULT {json} lines the ranks printed, by rank."""
        out = {}
        for line in self.stdout.splitlines():
            if "RESULT " in line:
                r = json.loads(line.split("RESULT ", 1)[1])
                out[r["rank"]] = r
        return out


def job_args(db, nprocs, cmd, extra=()):
    """The command line `stepscope run -n NPROCS --db DB [EXTRA] -- CMD`."""
    return [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(db),
            *extra, "--", *cmd]


def run_job(db, nprocs, cmd, extra=(), timeout=240, env=None):
    """Runs `stepscope run -n NPROCS --db DB [EXTRA] -- CMD` and waits for
    it."""
    proc = subprocess.run(job_args(db, nprocs, cmd, extra), capture_output=True,
                          text=True, timeout=timeout, env=env)
    return Job(proc, db)


def stored_steps(db):
    """Steps the latest run of the store DB has finalized so far (0 when
    there is no store or no run yet); readable while the job runs."""
    try:
        out = subprocess.run([str(STEPSCOPE), "runs", "--json", "--db", str(db)],
                             capture_output=True, text=True, timeout=10).stdout
        runs = json.loads(out)["runs"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return 0
    return runs[-1]["steps"] if runs else 0


# ---------------------------------------------------------------------------
# A job's processes, seen from outside (to stop, renice or pin one rank)

def proc_parents():
    """{pid: parent pid} for every process now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after it.
        parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
    return parents


def descendants(root):
    """The pids of ROOT's children, grandchildren and so on, now."""
    parents = proc_parents()
    found, frontier = [], {root}
    while frontier:
        kids = {pid for pid, ppid in parents.items() if ppid in frontier}
        found += sorted(kids)
        frontier = kids
    return found


def rank_of(pid):
    """The RANK in PID's environment, None when it has none or is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            try:
                return int(item[5:])
            except ValueError:
                return None
    return None


def rank_pid(launcher_pid, rank):
    """The main process of RANK: a child of the launcher with RANK set
    (a wrapper script that execs its program keeps that pid); None while
    there is none."""
    for pid, ppid in proc_parents().items():
        if ppid == launcher_pid and rank_of(pid) == rank:
            return pid
    return None


def threads(pid):
    """The thread ids of PID, [] when it is gone."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []
