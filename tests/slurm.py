"""A one-host Slurm cluster for end-to-end tests of jobs launched by srun.

`SlurmCluster(tmpdir)` starts, in TMPDIR and as root, its own munged (own
key and socket), slurmctld and slurmd (node `n1`, loopback only, ports
chosen free on 127.0.0.1), with a minimal slurm.conf: no cgroups
(proctrack/linuxproc, task/none, no accounting).  `srun(args)` runs srun
against it; nothing of the host's Slurm or munge configuration is used or
changed, and close() kills every daemon and every process they started
(slurmstepd and tasks included).

    from slurm import SlurmCluster, available
    with SlurmCluster(tmp_path) as s:
        r = s.srun(["-N1", "--ntasks-per-node=1", "env"], capture_output=True, text=True)

Requires root and Debian's slurm-wlm and munge packages
(scripts/install-deps.sh).
"""
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

NODE = "n1"
DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sinfo")


class SlurmError(RuntimeError):
    """The cluster did not start or answer; carries the daemons' logs."""


def available():
    """(True, "") when a SlurmCluster can run here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "the one-host Slurm cluster runs its daemons as root"
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return False, f"Slurm not installed (no {', '.join(missing)}: apt-get install slurm-wlm munge)"
    return True, ""


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    """One controller and one compute node (NODE, CPUS cpus) in DIRECTORY;
    a context manager, or start() and close() (idempotent)."""

    def __init__(self, directory, cpus=2):
        self.dir = Path(directory) / "slurm"
        self.cpus = cpus
        self.conf = self.dir / "slurm.conf"
        self._daemons = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def env(self):
        """The environment srun and the other client commands need."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self, timeout_s=30.0):
        """Starts the daemons and waits until the node is idle; on failure
        stops what started and raises SlurmError with the logs."""
        try:
            self._start()
            self._wait_idle(timeout_s)
        except BaseException:
            self.close()
            raise

    def _start(self):
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        ctld_port, slurmd_port = _free_ports(2)
        self.conf.write_text(f"""\
ClusterName=stepscope
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
PlugStackConfig={d}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
        (d / "plugstack.conf").write_text("")
        self._spawn(["munged", "-F", "-f", f"--socket={d}/munge.sock", f"--key-file={key}",
                     f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                     f"--seed-file={d}/munge.seed"])
        deadline = time.monotonic() + 10
        while not (d / "munge.sock").exists():
            if time.monotonic() > deadline:
                raise SlurmError(f"munged did not start\n{self.logs()}")
            time.sleep(0.05)
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn(["slurmd", "-D", "-f", str(self.conf), "-N", NODE])

    def _spawn(self, argv):
        log = open(self.dir / f"{argv[0]}.out", "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=self.env(),
                                    start_new_session=True)
        finally:
            log.close()
        self._daemons.append(proc)

    def _wait_idle(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            for proc in self._daemons:
                if proc.poll() is not None:
                    raise SlurmError(f"{proc.args[0]} exited with {proc.returncode}\n"
                                     f"{self.logs()}")
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=self.env(),
                               capture_output=True, text=True, timeout=10)
            state = r.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.2)
        raise SlurmError(f"node {NODE} not idle after {timeout_s} s (state {state!r})\n"
                         f"{self.logs()}")

    def srun(self, args, timeout=60, **kwargs):
        """subprocess.run of `srun ARGS` against this cluster (KWARGS as for
        run; env, if given, gets SLURM_CONF added)."""
        env = dict(kwargs.pop("env", None) or os.environ, SLURM_CONF=str(self.conf))
        return subprocess.run(["srun", *map(str, args)], env=env, timeout=timeout, **kwargs)

    def logs(self):
        """The daemons' log files, for failure messages."""
        parts = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "munged.out",
                     "slurmctld.out", "slurmd.out"):
            path = self.dir / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def close(self):
        """Stops the daemons (SIGTERM, then SIGKILL after 5 s) and kills
        whatever they started.  Idempotent."""
        for proc in reversed(self._daemons):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self._daemons):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        self._daemons.clear()
        self._kill_strays()

    def _kill_strays(self):
        """SIGKILLs what the daemons left in sessions of its own: slurmstepd
        (which lingers, retrying to report to a slurmd that is gone) and
        the tasks of unfinished steps, found by the SLURM_CONF they carry."""
        mark = f"SLURM_CONF={self.conf}".encode()
        deadline = time.monotonic() + 5
        while True:
            strays = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == os.getpid():
                    continue
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if mark in f.read().split(b"\0"):
                            strays.append(int(entry))
                except OSError:
                    continue
            if not strays or time.monotonic() > deadline:
                return
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
