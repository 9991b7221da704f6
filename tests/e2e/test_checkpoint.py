"""End to end: a real DDP job (examples/ddp_checkpoint.py, 2 ranks, gloo on
CPU) under `stepscope run --auto` saves a checkpoint every 4 steps; the
first run crashes at step 10, the second, started by hand, loads the
checkpoint of step 7 and continues.  Auto mode times the saves as the
"checkpoint" phase and reports them, recognises the resume, numbers the
second run's steps from 8, and each run's goodput adds up to its wall
time (docs/fault-tolerance.md).  A script that saves and loads through file
objects (`with open(...) as f: torch.save(state, f)`, to a temporary name
then os.replace) is recognised the same way.  Where rank 0 alone loads the
checkpoint and hands it to the others, their steps are counted from the
resumed step with rank 0's."""
import json
import subprocess

from conftest import SOURCE, STEPSCOPE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

SCRIPT = SOURCE / "examples" / "ddp_checkpoint.py"


def checkpoint_job(store, ckpt, *args):
    return run_job(store, 2, python_cmd(SCRIPT, "--checkpoint", str(ckpt),
                                        "--steps", "16", "--save-every", "4",
                                        "--step-ms", "20", *args),
                   extra=("--auto",), env=ddp_env(), timeout=JOB_TIMEOUT)


def check_goodput(goodput):
    """The categories add up to the wall time (to the rounding of the
    milliseconds printed), the run's and each attempt's."""
    ms = goodput["ms"]
    assert abs(sum(ms.values()) - goodput["wall_ms"]) < 0.01 * len(ms)
    assert goodput["wall_ms"] > 0 and 0 < goodput["goodput"] < 1
    assert abs(goodput["goodput"] - ms["productive"] / goodput["wall_ms"]) < 1e-4
    for a in goodput["attempts"]:
        assert abs(sum(a["ms"].values()) - a["wall_ms"]) < 0.01 * len(ms)


def stored_attempt(db, run):
    con = __import__("sqlite3").connect(str(db))
    row = con.execute("SELECT cause, first_step, last_step, resumed_from, "
                      "ended_at IS NOT NULL FROM attempts WHERE run_id = ?",
                      (run,)).fetchone()
    con.close()
    return row


def test_checkpoints_and_a_resume_by_hand(store, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    first = checkpoint_job(store, ckpt, "--crash-rank", "1", "--crash-step", "10")
    assert first.returncode == 1, first.stderr
    assert ckpt.exists()
    rep = first.report()
    phases = {p["name"]: p for p in rep["steps"]["phases"]}
    # Rank 0 saved after steps 3 and 7, in the auto steps 4 and 8.
    assert phases["checkpoint"]["steps"] == 2, phases["checkpoint"]
    saved = sorted(e["message"] for e in rep["events"] if e["kind"] == "checkpoint")
    assert saved == ["rank 0 saved a checkpoint at step 3",
                     "rank 0 saved a checkpoint at step 7"]
    check_goodput(rep["goodput"])
    assert rep["goodput"]["ms"]["checkpoint"] > 0
    cause, first_step, last_step, resumed, ended = stored_attempt(store, 1)
    assert (cause, first_step, resumed, ended) == ("rank_crash", 0, None, 1)
    assert 9 <= last_step <= 10

    second = checkpoint_job(store, ckpt)
    assert second.returncode == 0, second.stderr
    results = second.results()
    assert {r["resumed_from"] for r in results.values()} == {7}
    rep = second.report()
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (8, 15)
    assert rep["steps"]["count"] == 8
    [attempt] = rep["goodput"]["attempts"]
    assert attempt["resumed_from"] == 7 and attempt["cause"] == "completed"
    check_goodput(rep["goodput"])
    assert stored_attempt(store, 2) == ("completed", 8, 15, 7, 1)
    assert sum(e["kind"] == "resumed" for e in rep["events"]) == 2

    text = subprocess.run([str(STEPSCOPE), "report", "--db", str(store), "2"],
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "\nGOODPUT " in text.stdout and "completed    8-15" in text.stdout
    out = subprocess.run([str(STEPSCOPE), "goodput", "--json", "--db",
                          str(store), "--name", "ddp_checkpoint.py"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    named = json.loads(out.stdout)
    assert len(named["runs"]) == 2
    assert named["reliability"]["failures"] == 1
    assert named["reliability"]["by_cause"]["rank_crash"]["failures"] == 1


FILE_OBJECT_SCRIPT = """\
import os, sys, torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
ckpt = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = 0
if os.path.exists(ckpt):
    with open(ckpt, "rb") as f:
        state = torch.load(f)
    model.module.load_state_dict(state["model"])
    start = state["step"] + 1
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
for step in range(start, 40):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if rank == 0 and step % 10 == 9:
        with open(ckpt + ".tmp", "wb") as f:
            torch.save({"model": model.module.state_dict(), "step": step}, f)
        os.replace(ckpt + ".tmp", ckpt)
    if attempt == 0 and rank == 1 and step == 25:
        sys.exit(3)
dist.destroy_process_group()
"""


def restarted_job(store, tmp_path, source, nprocs):
    """Runs SOURCE (a script that crashes in attempt 0 and resumes from
    its checkpoint, the path its argument) on NPROCS ranks under --auto
    with one restart; the job, which succeeded."""
    script = tmp_path / "train.py"
    script.write_text(source)
    job = run_job(store, nprocs, python_cmd(script, str(tmp_path / "ckpt.pt")),
                  extra=("--auto", "--max-restarts", "1"), env=ddp_env(),
                  timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr
    return job


def test_a_resume_through_file_objects_is_recognised(store, tmp_path):
    job = restarted_job(store, tmp_path, FILE_OBJECT_SCRIPT, 2)
    rep = job.report()
    saved = sorted(e["message"] for e in rep["events"]
                   if e["kind"] == "checkpoint")
    assert saved == ["rank 0 saved a checkpoint at step 29",
                     "rank 0 saved a checkpoint at step 39"], saved
    attempts = rep["goodput"]["attempts"]
    assert [a["cause"] for a in attempts] == ["rank_crash", "completed"]
    # Attempt 1 loaded the checkpoint of step 19 (saved to ckpt.pt.tmp
    # through a file object, then renamed) and went on from step 20.
    assert attempts[1]["resumed_from"] == 19, attempts
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (20, 39), \
        rep["steps"]


RANK0_LOADS_SCRIPT = """\
import os, sys, torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
ckpt = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
net = nn.Linear(8, 1)
box = [None]
if rank == 0 and os.path.exists(ckpt):
    box[0] = torch.load(ckpt)          # rank 0 alone reads the file
dist.broadcast_object_list(box, src=0)
start = 0
if box[0] is not None:
    net.load_state_dict(box[0]["model"])
    start = box[0]["step"] + 1
model = DDP(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
for step in range(start, 40):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if rank == 0 and step % 10 == 9:
        torch.save({"model": model.module.state_dict(), "step": step}, ckpt)
    if attempt == 0 and rank == 2 and step == 25:
        sys.exit(3)
dist.destroy_process_group()
"""


def test_ranks_that_did_not_load_the_checkpoint_go_on_with_rank_0(
        store, tmp_path):
    job = restarted_job(store, tmp_path, RANK0_LOADS_SCRIPT, 3)
    # Rank 0 resumed from step 19; ranks 1 and 2, which numbered their
    # steps from 0, are counted from 20 with it: every step of attempt 1
    # is every rank's.
    assert ("2 ranks (rank 1 first) numbered their steps from 0 while rank "
            "0, which loaded the checkpoint, resumed from step 19: their "
            "steps are counted from 20") in job.stderr, job.stderr
    rep = job.report()
    attempts = rep["goodput"]["attempts"]
    assert attempts[1]["resumed_from"] == 19, attempts
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (20, 39), \
        rep["steps"]
    assert rep["steps"]["count"] == 20, rep["steps"]
    assert "steps_renumbered" in [e["kind"] for e in rep["events"]]
    assert "stopped stepping before the last step" not in job.stderr, job.stderr
