"""Tests of `stepscope run --auto`: an unmodified DDP script (train_ddp.py,
2 ranks, gloo on CPU, a few steps) is instrumented through the start-up
hook.  Every torch job here takes a few seconds on 2 cores, so each one
checks several things."""
import importlib.util
import os
import shutil

import pytest

from conftest import HERE, PYTHON, SANITIZED, STEPSCOPE, run_job

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for "
                                "this Python")

TRAIN = str(HERE / "train_ddp.py")
PHASES = {"data", "forward", "backward", "optimizer", "allreduce"}


def auto_job(store, *args, env=None):
    job = run_job(store, 2, [PYTHON, TRAIN, *args], extra=["--auto"], env=env)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "stepscope: auto mode" not in job.stderr, job.stderr
    res = job.results()
    assert sorted(res) == [0, 1], job.stdout
    for r in res.values():
        assert r["params_equal"] and r["auto_loaded"]
    return job, res


def test_steps_phases_and_allreduce(store):
    job, res = auto_job(store, "--steps", "4")
    rep = job.report()
    # Four optimizer steps are steps 0-3; the step opened by the last one
    # never ends and is not sent.
    assert rep["steps"]["count"] == 4
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (0, 3)
    assert {p["name"] for p in rep["steps"]["phases"]} == PHASES
    assert all(p["steps"] == 4 for p in rep["steps"]["phases"])
    assert [s["name"] for s in rep["steps"]["syncs"]] == ["allreduce"]
    assert rep["steps"]["syncs"][0]["steps"] == 4
    assert rep["dropped"]["events"] == 0 and rep["dropped"]["records"] == 0
    rows = job.rank_steps()
    assert len(rows) == 8
    for (step, rank), row in rows.items():
        assert PHASES <= set(row["phases"]), (step, rank, row)
        assert row["counts"].get("backward", 1) == 1
        assert row["counts"].get("optimizer", 1) == 1
        assert row["counts"].get("allreduce", 1) == 1
        # The all-reduce wait nests in backward: backward's self time is
        # what is left of it (docs/recorder.md), the wait's is all of it.
        own = row["self"]
        assert own is not None, (step, rank, row)
        assert own["allreduce"] == row["phases"]["allreduce"]
        assert own["forward"] == row["phases"]["forward"]
        assert 0 <= own["backward"] < row["phases"]["backward"]
        assert own["backward"] + own["allreduce"] >= row["phases"]["backward"]
        assert row["rss"] and row["rss"] > 1 << 20
        # CPU only: the CUDA path stays off and never initialises CUDA.
        assert row["device"] is None
        assert not any(p.startswith("gpu_") for p in row["phases"])
    assert not any(r["cuda_initialized"] for r in res.values())


def test_accumulation_workers_and_user_hook(store):
    """Two forward/backward passes per optimizer step are one step; forked
    DataLoader workers work; a communication hook the script registers runs
    as it would without stepscope, and its all-reduce is still timed."""
    job, res = auto_job(store, "--steps", "3", "--accum", "2",
                        "--workers", "2", "--user-hook")
    assert [r["user_hook_calls"] for r in res.values()] == [6, 6]
    rep = job.report()
    assert rep["steps"]["count"] == 3
    assert {p["name"] for p in rep["steps"]["phases"]} == PHASES
    rows = job.rank_steps()
    assert len(rows) == 6
    for key, row in rows.items():
        assert row["counts"]["backward"] == 2, (key, row)
        assert row["counts"]["allreduce"] == 2, (key, row)
        assert row["counts"].get("optimizer", 1) == 1, (key, row)
        assert row["counts"]["data"] >= 2, (key, row)
        # each all-reducing pass of the step is a sync point of its own
        assert sorted(row["syncs"]) == ["allreduce", "allreduce.2"], (key, row)


def test_no_sync_passes_have_no_allreduce(store):
    """Accumulation under DDP.no_sync(): of three backward passes per step
    only the last all-reduces, so only it has an arrival and a wait."""
    job, _ = auto_job(store, "--steps", "4", "--accum", "3", "--no-sync")
    rep = job.report()
    assert rep["steps"]["count"] == 4
    assert rep["steps"]["syncs"][0]["steps"] == 4
    for key, row in job.rank_steps().items():
        assert row["counts"]["backward"] == 3, (key, row)
        assert "allreduce" in row["phases"], (key, row)
        assert row["counts"].get("allreduce", 1) == 1, (key, row)
        assert list(row["syncs"]) == ["allreduce"], (key, row)


def test_explicit_steps_win(store):
    """A script that makes its own steps keeps them: no auto boundaries,
    while the phases are still recorded inside its steps.  (It also
    registers DDP's built-in ALLREDUCE hook and uses a static graph; the
    all-reduce is timed the same way.)"""
    job, _ = auto_job(store, "--steps", "3", "--explicit", "--builtin-hook",
                      "--static-graph")
    rep = job.report()
    assert rep["steps"]["count"] == 3
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (0, 2)
    assert {p["name"] for p in rep["steps"]["phases"]} == PHASES
    for row in job.rank_steps().values():
        assert row["counts"].get("data", 1) == 1
        assert row["counts"].get("optimizer", 1) == 1


def test_script_without_torch(store, tmp_path):
    """A script that never imports torch runs as usual and records nothing;
    the start-up hook chains to the sitecustomize it hides; a Python process
    the rank starts is not taken for the rank."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import builtins\nbuiltins.chained_sitecustomize = True\n")
    script = tmp_path / "plain.py"
    script.write_text(
        "import builtins, json, os, subprocess, sys\n"
        "owner = 'os.environ[\"STEPSCOPE_AUTO_PID\"] == str(os.getpid())'\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; print(%s)'\n"
        "                        % owner], capture_output=True, text=True)\n"
        "print('RESULT ' + json.dumps({'rank': int(os.environ['RANK']),\n"
        "    'torch': 'torch' in sys.modules,\n"
        "    'chained': getattr(builtins, 'chained_sitecustomize', False),\n"
        "    'owner': eval(owner), 'child_owner': child.stdout.strip()}))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (env.get("PYTHONPATH"), str(site)) if p)
    job = run_job(store, 2, [PYTHON, str(script)], extra=["--auto"], env=env)
    assert job.returncode == 0, job.stderr
    want = {"torch": False, "chained": True, "owner": True,
            "child_owner": "False"}
    assert job.results() == {0: dict(rank=0, **want), 1: dict(rank=1, **want)}
    assert job.report()["steps"]["count"] == 0
    assert "Error in sitecustomize" not in job.stderr


def test_auto_without_the_package(store, tmp_path):
    """--auto names where it looked when the package is not beside the
    executable."""
    lonely = tmp_path / "bin" / "stepscope"
    lonely.parent.mkdir()
    shutil.copy(STEPSCOPE, lonely)
    out = os.popen("%s run --auto -n 1 --db %s -- true 2>&1; echo rc=$?"
                   % (lonely, store)).read()
    assert "--auto needs the stepscope Python package" in out, out
    assert "rc=0" not in out


MANUAL_ALLREDUCE_SCRIPT = r'''
import json, os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(0)
slow = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(120):
    if dist.get_rank() == slow:
        time.sleep(0.02)  # a slow data pipeline, say
    loss = model(torch.randn(32, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():  # gradients averaged by hand, no DDP
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    opt.step()
print("RESULT " + json.dumps({"rank": dist.get_rank()}))
'''


def test_own_collectives_are_phases_and_name_the_straggler(store, tmp_path):
    """A script that all-reduces its gradients itself (no DDP): each
    collective it calls is a phase of its name, and a rank 20 ms late is
    the straggler, found where the others wait for it."""
    script = tmp_path / "manual.py"
    script.write_text(MANUAL_ALLREDUCE_SCRIPT)
    job = run_job(store, 3, [PYTHON, str(script), "1"], extra=["--auto"])
    assert job.returncode == 0, job.stderr
    rep = job.report()
    phases = {p["name"]: p for p in rep["steps"]["phases"]}
    assert {"forward", "backward", "optimizer", "all_reduce"} <= set(phases)
    hits = [f for f in rep["findings"] if f["kind"] == "straggler"]
    assert [f["ranks"] for f in hits] == [[1]], rep["findings"]
    assert "less than the median rank in all_reduce" in hits[0]["message"]


GAN_SCRIPT = r'''
import json, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
torch.set_num_threads(1)
slow = int(sys.argv[1])


class Generator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32),
                                       torch.nn.ReLU(), torch.nn.Linear(32, 16))

    def forward(self, z):
        if dist.get_rank() == slow:
            time.sleep(0.012)
        return self.net(z)


gen = DDP(Generator())
disc = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 1)))
opt_g = torch.optim.Adam(gen.parameters(), 2e-4)
opt_d = torch.optim.Adam(disc.parameters(), 2e-4)
bce = torch.nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
for it in range(120):
    fake = gen(torch.randn(16, 8))
    opt_d.zero_grad()
    (bce(disc(torch.randn(16, 16) + 1), ones) +
     bce(disc(fake.detach()), zeros)).backward()
    opt_d.step()
    opt_g.zero_grad()
    bce(disc(fake), ones).backward()
    opt_g.step()
print("RESULT " + json.dumps({"rank": dist.get_rank()}))
'''


def test_a_gan_straggler_late_after_the_first_allreduce(store, tmp_path):
    """A GAN: the discriminator's optimizer paces the steps, so the
    generator's forward lies between the step's two all-reducing backward
    passes (allreduce, allreduce.2).  A rank whose generator is 12 ms
    slower is late only at the second, and is the straggler."""
    script = tmp_path / "gan.py"
    script.write_text(GAN_SCRIPT)
    job = run_job(store, 3, [PYTHON, str(script), "2"], extra=["--auto"])
    assert job.returncode == 0, job.stderr
    rep = job.report()
    assert [s["name"] for s in rep["steps"]["syncs"]] == \
        ["allreduce", "allreduce.2"]
    hits = [f for f in rep["findings"] if f["kind"] == "straggler"]
    assert [f["ranks"] for f in hits] == [[2]], rep["findings"]
    assert hits[0]["phase"] == "forward", hits[0]
    assert "the step's later sync point" in hits[0]["message"], hits[0]


def auto_script_job(store, tmp_path, text, world, *args):
    """Runs script TEXT under --auto on WORLD ranks with ARGS; it must
    succeed."""
    script = tmp_path / "script.py"
    script.write_text(text)
    job = run_job(store, world, [PYTHON, str(script), *map(str, args)],
                  extra=["--auto"])
    assert job.returncode == 0, job.stderr
    return job


def the_straggler(rep, slow):
    """The one straggler finding of report REP, naming rank SLOW alone;
    None, and no finding at all, where SLOW is -1 (a clean run)."""
    if slow < 0:
        assert rep["findings"] == [], rep["findings"]
        return None
    hits = [f for f in rep["findings"] if f["kind"] == "straggler"]
    assert [f["ranks"] for f in hits] == [[slow]], rep["findings"]
    return hits[0]


CLOSURE_SCRIPT = r'''
import json, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
slow = int(sys.argv[1])
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4)))
# two passes a step: the first evaluation and one more iteration
opt = torch.optim.LBFGS(model.parameters(), lr=0.05, max_iter=2,
                        tolerance_grad=0, tolerance_change=0)
lossf = torch.nn.CrossEntropyLoss()
gen = torch.Generator().manual_seed(dist.get_rank())
for it in range(120):
    x = torch.randn(32, 16, generator=gen)
    y = torch.randint(0, 4, (32,), generator=gen)

    def closure():
        opt.zero_grad()
        loss = lossf(model(x), y)
        if dist.get_rank() == slow:
            time.sleep(0.008)
        loss.backward()
        return loss

    opt.step(closure)
print("RESULT " + json.dumps({"rank": dist.get_rank()}))
'''


@pytest.mark.parametrize("slow", [1, -1])
def test_an_optimizer_with_a_closure(store, tmp_path, slow):
    """LBFGS runs the forward and backward passes itself, in its step's
    closure: they are recorded nested in "optimizer", each backward's
    all-reduce arrival a sync point of the step, and a rank that sleeps
    8 ms in every closure is the straggler (its optimizer step's own time
    explains it); without one, nothing is found."""
    job = auto_script_job(store, tmp_path, CLOSURE_SCRIPT, 3, slow)
    rep = job.report()
    assert [s["name"] for s in rep["steps"]["syncs"]] == \
        ["allreduce", "allreduce.2"]
    for (step, rank), row in job.rank_steps().items():
        assert PHASES - {"data"} <= set(row["phases"]), (step, rank, row)
        assert row["counts"]["backward"] == 2, (step, rank, row)
        own = row["self"]
        assert 0 <= own["optimizer"] < row["phases"]["optimizer"]
        assert row["phases"]["optimizer"] >= (row["phases"]["forward"] +
                                              row["phases"]["backward"])
    hit = the_straggler(rep, slow)
    assert hit is None or hit["phase"] == "optimizer", hit


ZERO_SCRIPT = r'''
import json, sys, time
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
slow = int(sys.argv[1])
model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 4)))
opt = ZeroRedundancyOptimizer(model.parameters(),
                              optimizer_class=torch.optim.Adam, lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
gen = torch.Generator().manual_seed(dist.get_rank())
for it in range(120):
    opt.zero_grad()
    lossf(model(torch.randn(32, 32, generator=gen)),
          torch.randint(0, 4, (32,), generator=gen)).backward()
    if dist.get_rank() == slow:
        time.sleep(0.008)  # after the all-reduce, before its shard's update
    opt.step()
print("RESULT " + json.dumps({"rank": dist.get_rank()}))
'''


@pytest.mark.parametrize("slow", [1, -1])
def test_a_sharded_optimizer_s_broadcast_is_a_sync_point(store, tmp_path,
                                                         slow):
    """ZeroRedundancyOptimizer broadcasts the parameters each rank updated
    inside its step: every rank reaches it after its own update, so the
    broadcast is a sync point of the step ("broadcast", beside DDP's
    "allreduce"), and a rank that sleeps 8 ms between its all-reduce and
    its step, late there only, is the straggler; without one, nothing is
    found."""
    rep = auto_script_job(store, tmp_path, ZERO_SCRIPT, 3, slow).report()
    assert sorted(s["name"] for s in rep["steps"]["syncs"]) == \
        ["allreduce", "broadcast"]
    hit = the_straggler(rep, slow)
    assert hit is None or \
        "reaches allreduce and the step's later sync point" in \
        hit["message"], hit


OWN_COLLECTIVE_SCRIPT = r'''
import json, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
shape, slow = sys.argv[1], int(sys.argv[2])
if shape == "tp":
    # tensor parallelism in pairs (0 and 1, 2 and 3) inside data
    # parallelism across them (0 and 2, 1 and 3)
    tp = [dist.new_group([0, 1]), dist.new_group([2, 3])][rank // 2]
    dp = [dist.new_group([0, 2]), dist.new_group([1, 3])][rank % 2]
else:
    tp, dp = None, None


class TensorParallelSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=tp)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 4)

    def forward(self, x):
        if rank == slow and shape == "tp":
            time.sleep(0.008)  # before its pair's all_reduce
        h = torch.relu(self.fc1(x))
        if tp is not None:
            h = TensorParallelSum.apply(h)
        return self.fc2(h)


model = DDP(Net(), process_group=dp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
gen = torch.Generator().manual_seed(rank % 2 if shape == "tp" else rank)
for it in range(150):
    opt.zero_grad()
    loss = lossf(model(torch.randn(32, 64, generator=gen)),
                 torch.randint(0, 4, (32,), generator=gen))
    loss.backward()
    if rank == slow and shape == "log":
        time.sleep(0.008)  # after its all-reduce, before its update
    opt.step()
    if shape == "log":
        # the loss averaged over the ranks for logging
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean.item()
print("RESULT " + json.dumps({"rank": rank}))
'''


@pytest.mark.parametrize("shape,world,slow", [("log", 3, 1), ("log", 3, -1),
                                              ("tp", 4, 1), ("tp", 4, -1)])
def test_waits_in_the_script_s_collectives_are_not_lateness(
        store, tmp_path, shape, world, slow):
    """A loss all-reduced for logging after every optimizer step evens the
    ranks out before the next step's all-reduce: a rank slower between its
    all-reduce and that collective is named all the same, by how much the
    others waited for it there.  Tensor parallelism in pairs inside data
    parallelism: a rank slower before its pair's all_reduce is named, not
    its pair, which waits for it and reaches the data-parallel all-reduce
    as late as it does.  Clean jobs: nothing found."""
    rep = auto_script_job(store, tmp_path, OWN_COLLECTIVE_SCRIPT, world,
                          shape, slow).report()
    hit = the_straggler(rep, slow)
    assert hit is None or \
        "counting the time the others waited for it in the script's " \
        "own collectives" in hit["message"], hit


SPAWN_SCRIPT = r'''
import json, os, sys
import torch
import torch.multiprocessing as mp


def worker(index, out):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
    with open(out + str(index), "w") as f:
        f.write("trained")


if __name__ == "__main__":
    out = sys.argv[1]
    mp.spawn(worker, args=(out,), nprocs=2)
    print("RESULT " + json.dumps({"rank": int(os.environ["RANK"]),
        "workers": sorted(os.listdir(os.path.dirname(out)))}))
'''


def test_spawned_workers_are_named_not_recorded(store, tmp_path):
    """A script that starts its own workers with torch.multiprocessing.spawn
    trains in processes that are not the rank: nothing is recorded, and
    auto mode says why once, and how to launch the workers as ranks."""
    script = tmp_path / "spawner.py"
    script.write_text(SPAWN_SCRIPT)
    outdir = tmp_path / "out"
    outdir.mkdir()
    job = run_job(store, 1, [PYTHON, str(script), str(outdir / "w")],
                  extra=["--auto"])
    assert job.returncode == 0, job.stderr
    assert job.results() == {0: {"rank": 0, "workers": ["w0", "w1"]}}
    said = [line for line in (job.stdout + job.stderr).splitlines()
            if "starts 2 processes of its own with torch.multiprocessing" in line]
    assert len(said) == 1, job.stdout + job.stderr
    assert "stepscope run -n 2 --auto" in said[0]
    assert job.report()["steps"]["count"] == 0
    assert "processes a rank starts itself, such as " \
           "torch.multiprocessing.spawn's workers, are not recorded" in job.stderr


FAKE_CUDA_SCRIPT = r'''
import json, os, time
import torch
from stepscope import auto


class Event:
    """Stands in for torch.cuda.Event: the first pair completes late."""
    made = 0

    def __init__(self, enable_timing=False):
        Event.made += 1
        self.late = Event.made == 2
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def query(self):
        if self.late:
            self.late = False
            return False
        return True

    def elapsed_time(self, end):
        return 2.0  # ms


class Cuda:
    Event = Event
    resets = 0
    peak = 0

    def max_memory_allocated(self):
        Cuda.peak += 1000
        return Cuda.peak

    def memory_allocated(self):
        return 500

    def reset_peak_memory_stats(self):
        Cuda.resets += 1


assert auto.install()
auto._S.gpu = auto._Gpu(Cuda())
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
print("RESULT " + json.dumps({"rank": 0, "resets": Cuda.resets,
                              "events": Event.made,
                              "cuda": torch.cuda.is_initialized()}))
'''


def test_gpu_bookkeeping_with_a_fake_cuda(store, tmp_path):
    """The CUDA path cannot run here, so its bookkeeping runs against a
    stand-in for torch.cuda: event pairs become gpu_* spans once query()
    says they completed, in order (the pairs queued behind a late one wait
    with it), events are reused, and the device peak is recorded and reset
    every step."""
    script = tmp_path / "fake_cuda.py"
    script.write_text(FAKE_CUDA_SCRIPT)
    job = run_job(store, 1, [PYTHON, str(script)], extra=["--auto"])
    assert job.returncode == 0, job.stdout + job.stderr
    assert "stepscope: auto mode" not in job.stderr, job.stderr
    res = job.results()[0]
    assert res["resets"] == 4 and not res["cuda"]
    assert res["events"] == 12  # 2 steps' pairs in flight, then reused
    rows = job.rank_steps()
    assert sorted(rows) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    gpu = ["gpu_forward", "gpu_backward", "gpu_optimizer"]
    assert not any(g in rows[(0, 0)]["phases"] for g in gpu)  # late
    for g in gpu:
        assert rows[(1, 0)]["phases"][g] == 4000000  # step 0's and its own
        assert rows[(1, 0)]["counts"][g] == 2
        assert rows[(2, 0)]["phases"][g] == rows[(3, 0)]["phases"][g] == \
            2000000
    assert [rows[(s, 0)]["device"] for s in range(4)] == \
        [1000, 2000, 3000, 4000]


def test_exit_watchdog_ends_a_rank_stuck_in_shutdown(store, tmp_path):
    """A rank whose interpreter hangs after the script ended (torch 1.13's
    process-group teardown can deadlock) is ended by the watchdog with the
    script's own exit status instead of hanging the job forever."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import sys, time, torch\n"
        "class Stuck:\n"
        "    def __del__(self):\n"
        "        time.sleep(1000)\n"
        "stuck = Stuck()\n"
        "print('script done', flush=True)\n"
        "sys.exit(3)\n")
    env = dict(os.environ, STEPSCOPE_EXIT_GRACE_S="2")
    job = run_job(store, 1, [PYTHON, str(script)], extra=["--auto"], env=env,
                  timeout=120)
    assert job.returncode == 3, job.stderr
    assert "script done" in job.stdout
    assert "still shutting down 2 s after the script ended" in job.stderr


def test_grad_clock_arrival_narrowing_and_widening(monkeypatch):
    """The gradient clock (run here without DDP or a controller): the
    arrival is the last gradient of a pass that all-reduced; after three
    passes with the same last parameter only its hook stays; a pass where
    it gives no gradient finds no arrival and puts every hook back, and so
    does a number of passes on one hook (to learn again)."""
    import torch
    from stepscope import _native, auto

    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    clock = auto._GradClock(list(a.parameters()) + list(b.parameters()))
    assert len(clock.handles) == 4
    x = torch.ones(2, 4)

    def pass_(armed, through_a=True):
        clock.armed = armed
        before = _native.now_ns()
        (b(a(x)) if through_a else b(x)).sum().backward()
        return before, clock.settle()

    before, arrival = pass_(armed=False)
    assert arrival is None  # under no_sync(): no all-reduce, no arrival
    for n in range(3):
        before, arrival = pass_(armed=True)
        assert before <= arrival <= _native.now_ns()
        assert clock.last is None and clock.ns is None  # reset for the next
    # a's weight is reached last (its gradient needs b's and a's bias's)
    assert clock.narrowed and len(clock.handles) == 1
    assert clock.candidate in (0, 1)
    before, arrival = pass_(armed=True)
    assert arrival is not None and arrival >= before
    before, arrival = pass_(armed=True, through_a=False)
    assert arrival is None
    assert not clock.narrowed and len(clock.handles) == 4
    monkeypatch.setattr(auto, "_RELEARN_EVERY", 2)
    for n in range(3):
        pass_(armed=True)
    assert clock.narrowed and len(clock.handles) == 1
    pass_(armed=True)
    assert clock.narrowed
    before, arrival = pass_(armed=True)
    assert arrival is not None and arrival >= before
    assert not clock.narrowed and len(clock.handles) == 4
    clock._unhook()
    before, arrival = pass_(armed=True)
    assert arrival is None and not a.weight._backward_hooks


def test_checkpoint_sidecar_identifies_the_file_as_saved(tmp_path):
    """A sidecar names the step of the file as saved: found next to it, or
    for a file renamed after the save among its directory's sidecars; a
    file changed since (another size or modification time) has none."""
    import json
    from stepscope import auto
    tmp = tmp_path / "ckpt.pt.tmp"
    tmp.write_bytes(b"state after step 7")
    size, mtime = auto._identity(str(tmp))
    (tmp_path / ("ckpt.pt.tmp" + auto.SIDECAR_SUFFIX)).write_text(json.dumps(
        {"format": auto.SIDECAR_FORMAT, "step": 7, "size": size,
         "mtime_ns": mtime}))
    assert auto._sidecar_step(str(tmp)) == 7
    final = tmp_path / "ckpt.pt"
    os.replace(tmp, final)                  # the usual atomic save
    assert auto._sidecar_step(str(final)) == 7
    os.utime(final, ns=(mtime + 1000, mtime + 1000))  # rewritten since
    assert auto._sidecar_step(str(final)) is None
    assert auto._path_of(object()) is None and auto._path_of(final) == str(final)
    # A file object open on a file names it; other file-likes do not.
    import io
    with open(final, "rb") as f:
        assert auto._path_of(f) == str(final)
    assert auto._path_of(io.BytesIO(b"x")) is None


LOAD_PROGRAM = r"""
import json, os, sys, torch
from stepscope import _native, auto
ckpt = sys.argv[1]
torch.save(torch.arange(5), ckpt)
auto._patch_checkpoint(torch)
_native._auto_enable(True)
if sys.argv[2] == "good":  # a sidecar of the file as it is, found by scan
    size, mtime = auto._identity(ckpt)
    with open(os.path.join(os.path.dirname(ckpt),
                           "renamed.pt" + auto.SIDECAR_SUFFIX), "w") as f:
        json.dump({"format": auto.SIDECAR_FORMAT, "step": 7, "size": size,
                   "mtime_ns": mtime}, f)
out = torch.load(ckpt)
print("LOADED", out.tolist(), _native._next_step(), auto._S.sidecars_skipped)
out = torch.load(ckpt)  # a second scan: counted, said once
print("LOADED", out.tolist(), _native._next_step(), auto._S.sidecars_skipped)
"""


@pytest.mark.parametrize("hostile", ["nested", "fifo", "dev_zero", "large"])
@pytest.mark.parametrize("good", ["good", "none"])
def test_hostile_sidecars_never_break_torch_load(tmp_path, hostile, good):
    """A sidecar that is deeply nested JSON, a FIFO, a symbolic link to
    /dev/zero or too large is skipped and counted, once said on stderr:
    torch.load returns the checkpoint, within a second, and a good sidecar
    beside it is still found."""
    import resource
    import subprocess
    ckpt = tmp_path / "ckpt.pt"
    side = tmp_path / ("other.pt" + ".stepscope.json")
    if hostile == "nested":  # small, but deeper than json's recursion limit
        side.write_text("[" * 3000)
    elif hostile == "fifo":
        os.mkfifo(side)
    elif hostile == "dev_zero":
        os.symlink("/dev/zero", tmp_path / "ckpt.pt.stepscope.json")
    else:
        side.write_text(" " * 100000 + "{}")

    def limit_memory():  # /dev/zero read whole would take it all
        # (not under AddressSanitizer: its shadow memory alone reserves
        # terabytes of address space)
        if not SANITIZED:
            resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    p = subprocess.run([PYTHON, "-c", LOAD_PROGRAM, str(ckpt), good],
                       capture_output=True, text=True, timeout=30,
                       preexec_fn=limit_memory,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith("STEPSCOPE_")})
    assert p.returncode == 0, p.stderr
    nxt = 8 if good == "good" else 0
    assert p.stdout.splitlines() == [f"LOADED [0, 1, 2, 3, 4] {nxt} 1",
                                     f"LOADED [0, 1, 2, 3, 4] {nxt} 2"], \
        p.stdout + p.stderr
    warned = [line for line in p.stderr.splitlines()
              if "checkpoint sidecar" in line]
    assert len(warned) == 1, p.stderr
    assert "stepscope.json" in warned[0], warned
