"""The one-host Slurm cluster of tests/slurm.py, on which jobs launched by
srun are tested: it starts, `srun` runs a task on its node with the
SLURM_* variables a launcher reads (SLURM_NNODES, SLURM_NODEID,
SLURM_JOB_NODELIST, SLURM_PROCID...), and close() leaves no daemon
behind.  Skipped, with the reason, when not root or Slurm is not
installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import slurm  # noqa: E402

OK, WHY = slurm.available()
pytestmark = pytest.mark.skipif(not OK, reason=WHY)


def test_srun_runs_a_task_with_the_slurm_environment(tmp_path):
    with slurm.SlurmCluster(tmp_path) as s:
        r = s.srun(["-N1", "-n1", "hostname"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + s.logs()
        assert r.stdout.strip()
        r = s.srun(["-N1", "--ntasks-per-node=1", "env"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + s.logs()
        env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        assert env["SLURM_NNODES"] == "1"
        assert env["SLURM_NODEID"] == "0"
        assert env["SLURM_JOB_NODELIST"] == slurm.NODE
        assert env["SLURM_PROCID"] == "0"
        assert env["SLURM_NTASKS"] == "1"
    # Nothing of the cluster is left: no process carries its SLURM_CONF
    # (slurmstepd detaches into a session of its own and would linger), and
    # the controller's clients can no longer reach it.
    mark = f"SLURM_CONF={s.conf}".encode()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                assert mark not in f.read().split(b"\0"), f"process {entry} outlived close()"
        except OSError:
            pass
    r = subprocess.run(["sinfo"], env=s.env(), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout


def test_two_tasks_get_their_own_ranks(tmp_path):
    with slurm.SlurmCluster(tmp_path) as s:
        r = s.srun(["-N1", "-n2", "sh", "-c", "echo $SLURM_PROCID $SLURM_LOCALID"],
                   capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + s.logs()
        assert sorted(r.stdout.split("\n")[:2]) == ["0 0", "1 1"]
