"""bench_auto_hooks.py - where auto mode's time per training step goes.

A finer tool beside bench_torch_overhead.py's one-number micro-benchmark
("auto mode: one tiny DDP training step, recording minus not"): the same
tiny step (a DataLoader fetch, the forward of a DDP-wrapped model in a
1-rank gloo group, backward with its all-reduce, an SGD step), run under
`stepscope run --auto -n 1` with the rank pinned to one CPU and the
controller to another, split into its parts, each timed separately:

  data       next() on the DataLoader iterator (the data wrapper)
  forward    model(x): the module-call wrapper and DDP's forward wrapper
  backward   loss.backward(): the backward wrapper, the gradient hook,
             the all-reduce arrival and wait
  optimizer  optimizer.step(): the optimizer wrapper and the step
             boundary (RSS read, next step)
  zero_grad  optimizer.zero_grad() (not wrapped: a control)
  step       the whole step

Each part's figure is its time with auto mode recording minus the same part
on a twin model with auto mode's switch off and its gradient hooks removed,
in alternating batches of 100 steps, median over batches, as wall time and
as CPU time of the training thread.  The model is a chain of N
Linear(4, 4) layers (the last Linear(4, 1)) for N in --layers, so the cost
per module and per parameter shows.  Besides, single calls timed alone:
the RSS read (memory_sample), a torch.distributed collective (all_reduce
of one element) and torch.save to memory, each wrapped minus unwrapped.

    /usr/bin/python3 bench/bench_auto_hooks.py [--numerics off,light]
        [--layers 1,10,100] [--batches 60]

Needs the build (STEPSCOPE_BUILD, default ./build) and PyTorch.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"
PARTS = ("data", "forward", "backward", "optimizer", "zero_grad", "step")
BATCH = 100  # steps per timed batch


def python_path():
    pkg = BUILD / "python"
    return pkg if (pkg / "stepscope").is_dir() else SOURCE / "python"


# ---- the rank ----

def child(layers, batches):
    import io

    import torch
    import torch.distributed as dist
    from stepscope import _native, auto

    cpu = os.environ.get("STEPSCOPE_BENCH_CPU")
    dist.init_process_group("gloo")
    if cpu is not None:
        for task in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(task), {int(cpu)})
    torch.manual_seed(0)

    def make(n):
        mods = [torch.nn.Linear(4, 4) for _ in range(n - 1)] + [torch.nn.Linear(4, 1)]
        net = mods[0] if n == 1 else torch.nn.Sequential(*mods)
        ddp = torch.nn.parallel.DistributedDataParallel(net)
        return ddp, torch.optim.SGD(ddp.parameters(), lr=0.001)

    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(4096, 4)), batch_size=1)
    state = {"it": iter(loader)}
    clocks = (time.perf_counter_ns, time.thread_time_ns)
    out = {"layers": {}, "calls": {}}

    for n in layers:
        models = {on: make(n) for on in (True, False)}
        twin_params = set(id(p) for p in models[False][0].module.parameters())
        twin = [r for r in auto._S.clocks
                if r() is not None and id(r().params[0]) in twin_params]
        for ref in twin:
            ref()._unhook()
        auto._S.clocks = [r for r in auto._S.clocks if r not in twin]

        def steps(on, count, acc):
            _native._auto_enable(on)
            model, opt = models[on]
            for _ in range(count):
                t0 = [c() for c in clocks]
                try:
                    (x,) = next(state["it"])
                except StopIteration:
                    state["it"] = iter(loader)
                    (x,) = next(state["it"])
                t1 = [c() for c in clocks]
                y = model(x)
                t2 = [c() for c in clocks]
                y.sum().backward()
                t3 = [c() for c in clocks]
                opt.step()
                t4 = [c() for c in clocks]
                opt.zero_grad()
                t5 = [c() for c in clocks]
                if acc is not None:
                    for k, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4),
                                                (t4, t5), (t0, t5))):
                        acc[k][0] += b[0] - a[0]
                        acc[k][1] += b[1] - a[1]

        for on in (True, False, True, False):  # warm-up (the hooks learn too)
            steps(on, 500, None)
        diffs = [[] for _ in PARTS]
        for _ in range(batches):
            acc = {on: [[0, 0] for _ in PARTS] for on in (True, False)}
            steps(False, BATCH, acc[False])
            steps(True, BATCH, acc[True])
            for k in range(len(PARTS)):
                diffs[k].append([(acc[True][k][i] - acc[False][k][i]) / BATCH
                                 for i in (0, 1)])
            time.sleep(0.02)
        out["layers"][n] = {p: [statistics.median(d[i] for d in diffs[k]) for i in (0, 1)]
                            for k, p in enumerate(PARTS)}
        _native._auto_enable(True)

    # Single calls: the RSS read, a collective, a save; each on minus off.
    t = torch.ones(1)
    buf = io.BytesIO()
    unwrapped_all_reduce = getattr(dist.all_reduce, "__wrapped__", dist.all_reduce)
    state_dict = {"w": torch.ones(4)}

    def save(_):
        buf.seek(0)
        torch.save(state_dict, buf)

    calls = {
        "memory_sample": (lambda on: _native.memory_sample() if on else None, 1000),
        "collective": (lambda on: (dist.all_reduce if on else unwrapped_all_reduce)(t), 200),
        "checkpoint": (save, 200),
    }
    for name, (fn, count) in calls.items():
        diffs = []
        for _ in range(batches):
            per = {}
            for on in (False, True):
                _native._auto_enable(on)
                t0 = [c() for c in clocks]
                for _ in range(count):
                    fn(on)
                t1 = [c() for c in clocks]
                per[on] = [(t1[i] - t0[i]) / count for i in (0, 1)]
            diffs.append([per[True][i] - per[False][i] for i in (0, 1)])
            time.sleep(0.005)
        out["calls"][name] = [statistics.median(d[i] for d in diffs) for i in (0, 1)]
    _native._auto_enable(True)
    dist.destroy_process_group()
    print("HOOKS " + json.dumps(out), flush=True)


# ---- the driver ----

def run(numerics, layers, batches):
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(python_path()) + (os.pathsep + old if old else "")
    env["OMP_NUM_THREADS"] = "1"
    cpus = sorted(os.sched_getaffinity(0))
    pin = None
    if len(cpus) >= 2:
        env["STEPSCOPE_BENCH_CPU"] = str(cpus[1])
        pin = lambda: os.sched_setaffinity(0, {cpus[0]})  # the controller
    with tempfile.TemporaryDirectory(prefix="ss-bench-hooks-") as d:
        cmd = [str(STEPSCOPE), "run", "-n", "1", "--db", f"{d}/h.db", "--auto",
               "--numerics", numerics, "--", sys.executable, str(Path(__file__).resolve()),
               "--child", ",".join(map(str, layers)), "--batches", str(batches)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                              preexec_fn=pin)
    m = re.search(r"HOOKS (\{.*\})", proc.stdout)
    if not m:
        sys.exit(f"bench_auto_hooks: the rank failed (exit {proc.returncode}):\n"
                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--numerics", default="off",
                   help="numerics modes, comma-separated (default off)")
    p.add_argument("--layers", default="1,10,100",
                   help="Linear layers of the model, comma-separated (default 1,10,100)")
    p.add_argument("--batches", type=int, default=60, help="timed batches (default 60)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    layers = [int(x) for x in args.layers.split(",") if x]
    if args.child is not None:
        child([int(x) for x in args.child.split(",")], args.batches)
        return
    if not STEPSCOPE.exists():
        sys.exit(f"bench_auto_hooks: {STEPSCOPE} not found: run `make` first")
    print(f"load average: {' '.join('%.2f' % x for x in os.getloadavg())}")
    for numerics in args.numerics.split(","):
        res = run(numerics, layers, args.batches)
        print(f"\n--numerics {numerics}: ns per step, recording minus not "
              f"(wall / CPU of the training thread), median of {args.batches} batches "
              f"of {BATCH} steps")
        print(f"  {'part':10s} " + " ".join(f"{str(n) + ' layers':>18s}" for n in layers))
        for part in PARTS:
            row = [res["layers"][str(n)][part] for n in layers]
            print(f"  {part:10s} " + " ".join(f"{w:8.0f} /{c:8.0f}" for w, c in row))
        for name, (w, c) in res["calls"].items():
            print(f"  single call {name:14s} {w:8.0f} /{c:8.0f}")
    print(f"\nload average: {' '.join('%.2f' % x for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
