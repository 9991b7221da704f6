"""bench_torch_overhead.py - what stepscope costs a real PyTorch DDP job.

Runs the same DDP training job (examples/ddp_train.py: gloo, CPU, 2 ranks)
in four configurations, alternating them trial after trial so that the
machine's noise spreads over all of them alike:

  plain     launched by `stepscope run` without --auto; the script does not
            import stepscope, so nothing is recorded: the baseline
  explicit  the same with --explicit: the script records its steps, phases,
            all-reduce arrival, loss and RSS through the stepscope API
  auto      `stepscope run --auto --numerics off`: the unmodified script,
            instrumented from the outside (timings only)
  auto+light, auto+full
            the same with --numerics light (auto mode's default) or full:
            what the numerics add (docs/numerics.md)
  profiler  like plain, with the script running torch.profiler (CPU
            activities, a schedule whose active window covers every step)
  traceml   TraceML (https://github.com/traceopt-ai/traceml) run from its
            source the way its README recommends: `traceml run` (its
            launcher, summary mode, its aggregator beside the ranks), the
            script calling traceml.init(mode="auto") and wrapping every
            step in traceml.trace_step (ddp_train.py --traceml).  The
            source is found at --traceml PATH or $TRACEML_SOURCE (a clone
            of the repository); without it the configuration is skipped
            with a note.  Whole jobs only (it has no switch to turn it off
            inside a job).

Every job is launched the same way, by `stepscope run`, so they differ only
in what runs inside the ranks.  Each job's rank 0 times its own steps (a
clock read per step, identical in every configuration) and prints the
median and mean step time after a warm-up; overheads are the ratios to the
plain job of the same trial, and the report gives their median over trials
with the min-max spread.  Two models: a short step (~5 ms) and a long one
(~50 ms).

Whole jobs started seconds apart on a shared machine differ by tens of
percent, far more than the overheads in question, so the same comparison is
also made inside one job ("paired blocks"): the script runs itself as a
2-rank DDP job (the same model, data and loop as examples/ddp_train.py) and
alternates blocks of steps with the instrumentation off and on, in the order
off-on-on-off, so that each pair of neighbouring blocks ran under the same
conditions; the overhead is the median over pairs of on/off block medians.
"on" means: explicit, the API calls are made; auto, auto mode's switch is on
(off, its wrappers pass straight through and its gradient hook still runs,
so their own few calls per step count as baseline); profiler, the block runs inside torch.profiler (its stop,
which processes the trace, falls between blocks, untimed).

It also times single API calls (the micro-benchmark): the script runs
itself under `stepscope run -n 1` so that the recorder is enabled and
connected, and once more bare, where every call is a no-op; and under
`stepscope run --auto -n 1`, what auto mode costs one tiny DDP step (see
auto_step_cost).

--whole measures instead the whole job's cost on a tiny step (~2 ms), the
tool's own processes included (stepscope's controller, TraceML's launcher
and aggregator), against the same job under torchrun: rank 0's step times
and the CPU time of the ranks and of the tool's other processes, in
rotating rounds (see bench_whole).

    /usr/bin/python3 bench/bench_torch_overhead.py [--trials 5] [--quick]
        [--traceml PATH]
    /usr/bin/python3 bench/bench_torch_overhead.py --whole [--repeats 5]
        [--whole-configs torchrun,plain,auto-off,auto,traceml]
        [--before-build DIR]

Needs the build (STEPSCOPE_BUILD, default ./build) and PyTorch.
"""
import argparse
import json
import os
import platform
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
TRAIN = SOURCE / "examples" / "ddp_train.py"

CONFIGS = ("plain", "explicit", "auto", "auto+light", "auto+full", "profiler", "traceml")
DEFAULT_CONFIGS = ("plain", "explicit", "auto", "auto+light", "profiler", "traceml")
WHOLE_ONLY = ("traceml",)  # no paired blocks: nothing switches them off inside a job
AUTO_FLAGS = {"auto": ["--auto", "--numerics", "off"],
              "auto+light": ["--auto", "--numerics", "light"],
              "auto+full": ["--auto", "--numerics", "full"]}
MODELS = {
    # name: (ddp_train.py arguments, steps, warm-up steps)
    "short": (["--hidden", "128", "--batch", "32"], 400, 40),
    "long": (["--hidden", "256", "--batch", "256"], 100, 10),
}
# Paired blocks: steps per block, blocks per job.
AB = {"short": (25, 16), "long": (8, 12)}
JOB_TIMEOUT_S = 300
MICRO_BATCH = 1000   # calls per timed batch, all inside one step
MICRO_BATCHES = 100
MICRO_PAUSE_S = 0.02  # between batches: the sender drains every ~10 ms


def python_path():
    """The stepscope package of this build (see tests/e2e/test_ddp.py)."""
    pkg = BUILD / "python"
    return pkg if (pkg / "stepscope").is_dir() else SOURCE / "python"


def child_env():
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(python_path()) + (os.pathsep + old if old else "")
    env["OMP_NUM_THREADS"] = "1"
    return env


class Finished:
    """What a child command left: returncode ("hung" when it had to be
    killed), stdout and stderr."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout or "", stderr or ""


def run_captured(cmd, env, timeout=JOB_TIMEOUT_S, cpus=None):
    """Runs CMD (on the CPUs CPUS, when given); a job that does not end
    within TIMEOUT (a rank hung at exit, say) is killed (its ranks follow
    the controller: PDEATHSIG) and what it printed until then is kept."""
    pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              preexec_fn=pin)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr
        return Finished("hung", out, err)
    return Finished(proc.returncode, proc.stdout, proc.stderr)


# ---- TraceML on this PyTorch ----
#
# TraceML is written for torch 2.x; two things it imports are missing here.
# Both are supplied from a directory put first on the ranks' PYTHONPATH,
# for the traceml configuration only:
#
# - torch.optim.optimizer.register_optimizer_step_pre_hook and
#   register_optimizer_step_post_hook (torch 2.0's global optimizer step
#   hooks): sitecustomize.py adds them when torch.optim.optimizer is first
#   imported, with torch 2.x's contract (pre: hook(opt, args, kwargs) may
#   return new (args, kwargs); post: hook(opt, args, kwargs); each returns
#   a removable handle), by wrapping each optimizer class's step once, as
#   torch 1.13 already does for its profiler label.
# - pynvml (nvidia-ml-py, not packaged by Debian): a stand-in that behaves
#   as the real binding does on a machine without NVIDIA's library (every
#   call raises NVMLError), which is what this CPU-only machine would give.

SHIM_SITECUSTOMIZE = """\
import importlib.abc
import importlib.util
import sys

try:  # Debian's own sitecustomize, which this one shadows
    import apport_python_hook
    apport_python_hook.install()
except ImportError:
    pass

_TARGET = "torch.optim.optimizer"


def _add_global_step_hooks(mod):
    if hasattr(mod, "register_optimizer_step_pre_hook"):
        return
    import collections
    import functools
    from torch.utils.hooks import RemovableHandle

    pre, post = collections.OrderedDict(), collections.OrderedDict()

    def register_optimizer_step_pre_hook(hook):
        handle = RemovableHandle(pre)
        pre[handle.id] = hook
        return handle

    def register_optimizer_step_post_hook(hook):
        handle = RemovableHandle(post)
        post[handle.id] = hook
        return handle

    def wrap(step):
        @functools.wraps(step)
        def step_with_hooks(self, *args, **kwargs):
            for hook in list(pre.values()):
                out = hook(self, args, kwargs)
                if out is not None:
                    args, kwargs = out
            result = step(self, *args, **kwargs)
            for hook in list(post.values()):
                hook(self, args, kwargs)
            return result
        step_with_hooks.global_hooks = True
        return step_with_hooks

    profile_hook = mod.Optimizer._hook_for_profile

    def hook_for_profile(self):
        profile_hook(self)
        cls = self.__class__
        if not getattr(cls.step, "global_hooks", False):
            hooked = getattr(cls.step, "hooked", None)
            cls.step = wrap(cls.step)
            cls.step.hooked = hooked

    mod.Optimizer._hook_for_profile = hook_for_profile
    mod.register_optimizer_step_pre_hook = register_optimizer_step_pre_hook
    mod.register_optimizer_step_post_hook = register_optimizer_step_post_hook


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_add(module):
            exec_module(module)
            _add_global_step_hooks(module)
        spec.loader.exec_module = exec_then_add
        return spec


sys.meta_path.insert(0, _Finder())
"""

SHIM_PYNVML = """\
NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    pass


def _missing(*args, **kwargs):
    raise NVMLError("NVML Shared Library Not Found")


def __getattr__(name):
    if name.startswith("nvml"):
        return _missing
    raise AttributeError(name)
"""


def traceml_source(option):
    """The TraceML checkout given by --traceml or $TRACEML_SOURCE (the
    directory holding src/traceml_ai), or None with the reason."""
    path = option or os.environ.get("TRACEML_SOURCE")
    if not path:
        return None, "no TraceML source (give --traceml PATH or set TRACEML_SOURCE)"
    src = Path(path) / "src"
    if not (src / "traceml_ai").is_dir():
        return None, f"{path} holds no src/traceml_ai (not a TraceML checkout)"
    return src, None


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def traceml_command(tmp, src, nprocs, script_args):
    """`traceml run` of ddp_train.py --traceml from the source SRC, with the
    shims above; returns (command, environment)."""
    shims = tmp / "traceml-shims"
    if not shims.is_dir():
        shims.mkdir()
        (shims / "sitecustomize.py").write_text(SHIM_SITECUSTOMIZE)
        (shims / "pynvml.py").write_text(SHIM_PYNVML)
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shims), str(src), env["PYTHONPATH"]])
    # Debian's torchrun fails on its own defaults for these.
    env.update(PET_REDIRECTS="9:0", PET_TEE="9:0")
    # What its `traceml` console script runs (the package has no __main__).
    entry = "import sys; from traceml_ai.launcher.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", entry, "run", str(TRAIN),
           f"--nproc-per-node={nprocs}", f"--master-port={free_port()}",
           f"--aggregator-port={free_port()}", "--logs-dir", str(tmp / "traceml-logs"),
           "--args", *script_args, "--traceml"]
    return cmd, env


def run_job(tmp, config, model, nprocs, traceml_src=None):
    """One DDP job; returns ((median ms, mean ms, CPU ms per step), exit status)."""
    args, steps, warmup = MODELS[model]
    script_args = [*args, "--steps", str(steps), "--warmup", str(warmup), "--samples", "65536"]
    if config == "traceml":
        cmd, env = traceml_command(tmp, traceml_src, nprocs, script_args)
    else:
        cmd = [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(tmp / "bench.db")]
        cmd += AUTO_FLAGS.get(config, [])
        cmd += ["--", sys.executable, str(TRAIN), *script_args]
        if config == "explicit":
            cmd.append("--explicit")
        if config == "profiler":
            cmd.append("--profile")
        env = child_env()
    proc = run_captured(cmd, env)
    m = re.search(r"ddp_train: rank=0 .*step_ms_median=(\S+) "
                  r"step_ms_mean=(\S+) cpu_ms_per_step=(\S+)", proc.stdout + proc.stderr)
    if not m:
        sys.exit(f"bench_torch_overhead: {config}/{model} printed no timing "
                 f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return tuple(float(m.group(i)) for i in (1, 2, 3)), proc.returncode


def spread(values, fmt):
    values = sorted(values)
    return f"{fmt.format(statistics.median(values))} ({fmt.format(values[0])} - {fmt.format(values[-1])})"


def bench_jobs(trials, nprocs, models, configs, traceml_src=None):
    results = {(m, c): [] for m in models for c in configs}
    failures = []
    with tempfile.TemporaryDirectory(prefix="ss-bench-torch-") as d:
        tmp = Path(d)
        for trial in range(trials):
            for model in models:
                order = configs[trial % len(configs):] + configs[:trial % len(configs)]
                for config in order:
                    times, rc = run_job(tmp, config, model, nprocs, traceml_src)
                    results[(model, config)].append(times)
                    if rc != 0:
                        failures.append(f"trial {trial} {model}/{config}: exit status {rc}")
                    print(f"  trial {trial} {model:5s} {config:8s} median {times[0]:8.3f} ms"
                          f"  mean {times[1]:8.3f} ms  cpu {times[2]:8.3f} ms/step"
                          + (f"  (exit {rc})" if rc else ""), flush=True)

    print()
    for model in models:
        print(f"model {model}: {' '.join(MODELS[model][0])}, {MODELS[model][1]} steps "
              f"({MODELS[model][2]} warm-up), {nprocs} ranks, {trials} trials")
        print(f"  {'config':9s} {'median step ms':>24s} {'ratio of medians':>22s} "
              f"{'ratio of means':>22s} {'CPU ms/step':>24s} {'CPU ratio':>22s} "
              f"{'CPU us/step over plain':>24s}")
        base = results[(model, "plain")]
        for config in configs:
            rows = results[(model, config)]
            cols = [[r[0] for r in rows],
                    [r[0] / b[0] for r, b in zip(rows, base)],
                    [r[1] / b[1] for r, b in zip(rows, base)],
                    [r[2] for r in rows],
                    [r[2] / b[2] for r, b in zip(rows, base)],
                    [(r[2] - b[2]) * 1e3 for r, b in zip(rows, base)]]
            fmts = ("{:.3f}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.3f}", "{:+.0f}")
            widths = (24, 22, 22, 24, 22, 24)
            print(f"  {config:9s} " + " ".join(f"{spread(c, f):>{w}s}"
                                               for c, f, w in zip(cols, fmts, widths)))
        print()
    for f in failures:
        print(f"note: {f}")


# ---- paired blocks inside one job ----

def ab_child(config, model):
    """Rank side of the paired-blocks job; rank 0 prints one JSON line with
    the median step time (ms) of every block and whether it was on."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    sys.path.insert(0, str(TRAIN.parent))
    import ddp_train as dt

    args = dt.parse_args(MODELS[model][0] + ["--samples", "65536"])
    block, blocks = AB[model]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    dataset = dt.SyntheticDataset(args)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=args.seed,
                                 drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)
    net = dt.MLP(args)
    ddp = DDP(net)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    data = dt.batches(loader, sampler)
    arrival = {"armed": False}
    stepscope = native = None
    if config == "explicit":
        import stepscope
        dt.mark_allreduce_arrival(net, stepscope, arrival)
    elif config in AUTO_FLAGS:
        from stepscope import _native as native

    def plain_step():
        x, y = next(data)
        loss = criterion(ddp(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    def explicit_step(n):
        with stepscope.step(n):
            with stepscope.phase("data"):
                x, y = next(data)
            with stepscope.phase("forward"):
                loss = criterion(ddp(x), y)
            with stepscope.phase("backward"):
                loss.backward()
            with stepscope.phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            value = loss.item()
            stepscope.metric("loss", value)
            stepscope.memory_sample()
        return value

    n = 0
    for _ in range(2 * block):  # warm-up, on
        arrival["armed"] = stepscope is not None
        explicit_step(n) if stepscope else plain_step()
        n += 1
    out = []
    for b in range(blocks):
        on = b % 4 in (1, 2)
        arrival["armed"] = on
        if native is not None:
            native._auto_enable(on)
        prof = None
        if config == "profiler" and on:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            prof.start()
        times = []
        c0 = time.process_time()
        for _ in range(block):
            t0 = time.perf_counter()
            explicit_step(n) if (stepscope is not None and on) else plain_step()
            times.append(time.perf_counter() - t0)
            n += 1
        cpu = (time.process_time() - c0) / block
        if prof is not None:
            prof.stop()
        out.append((on, statistics.median(times) * 1e3, cpu * 1e3))
    if native is not None:
        native._auto_enable(True)
    if rank == 0:
        print("AB " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def bench_ab(trials, models, configs):
    """Pairs of neighbouring off/on blocks; returns {(model, config): [ratios]}
    of the median step times, and prints the ratios of the blocks' CPU time
    per step (the rank process's, all its threads) beside them: on a
    loaded machine CPU time moves far less than wall time."""
    script = str(Path(__file__).resolve())
    ratios, cpu_ratios, failures = {}, {}, []
    with tempfile.TemporaryDirectory(prefix="ss-bench-ab-") as d:
        for trial in range(trials):
            for model in models:
                for config in configs:
                    cmd = [str(STEPSCOPE), "run", "-n", "2", "--db", f"{d}/ab.db"]
                    cmd += AUTO_FLAGS.get(config, [])
                    cmd += ["--", sys.executable, script, "--ab-child", config, model]
                    proc = run_captured(cmd, child_env())
                    m = re.search(r"^\[rank 0\] AB (\[.*\])", proc.stdout, re.M)
                    if not m:
                        sys.exit(f"bench_torch_overhead: paired blocks {config}/{model} failed "
                                 f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                                 f"{proc.stderr[-2000:]}")
                    if proc.returncode != 0:
                        failures.append(f"paired trial {trial} {model}/{config}: "
                                        f"exit status {proc.returncode}")
                    blocks = json.loads(m.group(1))
                    pairs = [(blocks[i], blocks[i + 1]) for i in range(0, len(blocks) - 1, 2)]
                    r = [(a[1] / b[1]) if a[0] else (b[1] / a[1]) for a, b in pairs]
                    c = [(a[2] / b[2]) if a[0] else (b[2] / a[2]) for a, b in pairs]
                    ratios.setdefault((model, config), []).extend(r)
                    cpu_ratios.setdefault((model, config), []).extend(c)
                    print(f"  paired trial {trial} {model:5s} {config:8s} on/off per pair: "
                          + " ".join(f"{x:.3f}" for x in r)
                          + "  cpu: " + " ".join(f"{x:.3f}" for x in c), flush=True)
    print()
    for model in models:
        block, blocks = AB[model]
        print(f"paired blocks, model {model}: {block} steps per block, {blocks} blocks per job, "
              f"{trials} jobs per configuration")
        print(f"  {'config':10s} {'on/off step time: median (quartiles, min - max)':>56s}  pairs"
              f"   {'on/off CPU time per step: median (quartiles)':>46s}")
        for config in configs:
            r = sorted(ratios[(model, config)])
            q = statistics.quantiles(r, n=4) if len(r) >= 2 else [r[0], r[0], r[0]]
            c = sorted(cpu_ratios[(model, config)])
            cq = statistics.quantiles(c, n=4) if len(c) >= 2 else [c[0], c[0], c[0]]
            print(f"  {config:10s} {statistics.median(r):>14.4f} ({q[0]:.4f} - {q[2]:.4f}, "
                  f"{r[0]:.4f} - {r[-1]:.4f})  {len(r):5d}   "
                  f"{statistics.median(c):>20.4f} ({cq[0]:.4f} - {cq[2]:.4f})")
        print()
    for f in failures:
        print(f"note: {f}")


# ---- the micro-benchmark ----

def micro_child():
    """Times single API calls in this process and prints one JSON line:
    nanoseconds per operation, each batch minus an adjacent batch of the
    bare loop.  Under --auto it times instead one whole tiny training step
    (DataLoader fetch, forward, backward, SGD step) with auto mode's switch
    on and off in alternating batches: the difference is what auto mode
    records per step."""
    import stepscope

    next_step = [0]

    def loop(n):
        for _ in range(n):
            pass

    def timed(body, base=loop, in_step=True, batch=MICRO_BATCH, before=None):
        # Each batch runs inside one step (unless it makes steps itself),
        # right after a batch of BASE, which is subtracted.  Between
        # batches, untimed, the sender gets time to drain the ring, so no
        # timed event is dropped.
        per_call = []
        for _ in range(MICRO_BATCHES):
            if in_step:
                stepscope.step_begin(next_step[0])
                next_step[0] += 1
            if before:
                before(False)
            t0 = time.perf_counter_ns()
            base(batch)
            t1 = time.perf_counter_ns()
            if before:
                before(True)
            body(batch)
            t2 = time.perf_counter_ns()
            if in_step:
                stepscope.step_end()
            else:
                next_step[0] += batch
            time.sleep(MICRO_PAUSE_S)
            per_call.append(((t2 - t1) - (t1 - t0)) / batch)
        return statistics.median(per_call)

    out = {"enabled": stepscope.enabled(), "ns": {}, "dropped": {}}
    if os.environ.get("STEPSCOPE_AUTO"):
        out["ns"]["auto_step_wall"], out["ns"]["auto_step_cpu"] = auto_step_cost()
    else:
        for name, body, in_step in micro_cases(stepscope, next_step):
            before = stepscope.counters()
            out["ns"][name] = timed(body, in_step=in_step)
            after = stepscope.counters()
            out["dropped"][name] = {k: after[k] - before[k] for k in after}
    print("MICRO " + json.dumps(out), flush=True)


def micro_cases(stepscope, next_step):
    def sync(n):
        s = stepscope.sync
        for _ in range(n):
            s("allreduce")

    def metric(n):
        m = stepscope.metric
        for _ in range(n):
            m("loss", 0.5)

    def phase(n):
        p = stepscope.phase
        for _ in range(n):
            with p("forward"):
                pass

    def step(n):
        st, first = stepscope.step, next_step[0]
        for i in range(n):
            with st(first + i):
                pass

    def memory(n):
        ms = stepscope.memory_sample
        for _ in range(n):
            ms()

    return (("sync", sync, True), ("metric", metric, True), ("phase_with", phase, True),
            ("step_with", step, False), ("memory_sample", memory, True))


def auto_step_cost():
    """ns per tiny training step (a DataLoader fetch, forward, backward and
    SGD step of a DDP-wrapped Linear(4, 1) in a 1-rank gloo group) with auto
    mode recording minus without, as (wall time, CPU time of the training
    thread), medians over batches of 100 steps.  Without: auto mode's switch
    off, on a twin DDP whose gradient hooks are removed, so the hooks count
    too.  At ~2,500 steps/s the controller is busy as well; when the job
    was started with a CPU for the controller (STEPSCOPE_BENCH_CPU names
    the rank's), the rank's threads (training, gloo, sender) are pinned to
    another one, so that what is measured is what the rank pays."""
    import torch
    import torch.distributed as dist
    from stepscope import _native, auto

    dist.init_process_group("gloo")
    models = {}
    for on in (True, False):
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        models[on] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01))
    weight = models[False][0].module.weight
    twin = [r for r in auto._S.clocks if r() is not None and r().params[0] is weight]
    for ref in twin:
        ref()._unhook()
    auto._S.clocks = [r for r in auto._S.clocks if r not in twin]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 4)),
                                         batch_size=1)
    state = {"it": iter(loader)}

    def steps(on, n):
        _native._auto_enable(on)
        model, opt = models[on]
        for _ in range(n):
            try:
                (x,) = next(state["it"])
            except StopIteration:
                state["it"] = iter(loader)
                (x,) = next(state["it"])
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()

    cpu = os.environ.get("STEPSCOPE_BENCH_CPU")
    if cpu is not None:
        for task in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(task), {int(cpu)})
    for on in (True, False, True, False):  # warm up, the controller too
        steps(on, 2000)
    wall, cpu = [], []
    clocks = (time.perf_counter_ns, time.thread_time_ns)
    for _ in range(MICRO_BATCHES):
        t0 = [c() for c in clocks]
        steps(False, 100)
        t1 = [c() for c in clocks]
        steps(True, 100)
        t2 = [c() for c in clocks]
        wall.append(((t2[0] - t1[0]) - (t1[0] - t0[0])) / 100)
        cpu.append(((t2[1] - t1[1]) - (t1[1] - t0[1])) / 100)
        time.sleep(MICRO_PAUSE_S)
    _native._auto_enable(True)
    dist.destroy_process_group()
    return statistics.median(wall), statistics.median(cpu)


def bench_micro():
    script = str(Path(__file__).resolve())
    env = child_env()
    bare_env = {k: v for k, v in env.items() if not k.startswith("STEPSCOPE_")}
    runs = {}
    with tempfile.TemporaryDirectory(prefix="ss-bench-micro-") as d:
        runs["disabled"] = run_captured([sys.executable, script, "--micro-child"], bare_env)
        # The auto run: the controller on one CPU, the rank on another.
        cpus = sorted(os.sched_getaffinity(0))
        auto_env = dict(env)
        if len(cpus) >= 2:
            auto_env["STEPSCOPE_BENCH_CPU"] = str(cpus[0])
        for label, extra in (("enabled", []), ("auto", ["--auto", "--numerics", "off"])):
            runs[label] = run_captured(
                [str(STEPSCOPE), "run", "-n", "1", "--db", f"{d}/m.db", *extra, "--",
                 sys.executable, script, "--micro-child"],
                auto_env if extra else env,
                cpus={cpus[1]} if extra and len(cpus) >= 2 else None)
    rows = {}
    for label, proc in runs.items():
        m = re.search(r"MICRO (\{.*\})", proc.stdout)
        if not m:
            sys.exit(f"bench_torch_overhead: micro-benchmark ({label}) failed:\n"
                     f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        rows[label] = json.loads(m.group(1))
    print(f"one API call, ns (median of {MICRO_BATCHES} batches of {MICRO_BATCH} calls, "
          f"each minus an adjacent batch of the bare loop)")
    print(f"  {'call':40s} {'enabled':>9s} {'disabled':>9s}")
    names = {"sync": "stepscope.sync(name)",
             "metric": "stepscope.metric(name, v)",
             "phase_with": "with stepscope.phase(name): (2 calls)",
             "step_with": "with stepscope.step(): (2 calls)",
             "memory_sample": "stepscope.memory_sample() (reads /proc)"}
    for key, label in names.items():
        print(f"  {label:40s} {rows['enabled']['ns'][key]:9.0f} {rows['disabled']['ns'][key]:9.0f}")
    print(f"  dropped while timing (enabled run): {rows['enabled']['dropped']}")
    auto = rows["auto"]["ns"]
    print(f"auto mode, one tiny DDP training step recorded minus not recorded: "
          f"{auto['auto_step_wall']:.0f} ns wall, {auto['auto_step_cpu']:.0f} ns CPU of the "
          f"training thread, per step")
    assert rows["enabled"]["enabled"] and not rows["disabled"]["enabled"]
    print()


# ---- the whole job's cost, the tool's own processes included ----
#
# On a tiny step two ranks fill both cores, so whatever else the tool runs
# (stepscope's controller: ingest, host evidence, detectors, store writer,
# live state and HTTP server; TraceML's launcher and aggregator) competes
# with them for the CPU and shows in the step time.  The baseline is the
# job without any tool: launched by torchrun.  Besides rank 0's own step
# times, the bench polls the job's process tree every WHOLE_POLL_S and
# sums the CPU time of the processes that are not ranks (a rank: a process
# with LOCAL_RANK in its environment), the last value it saw of each.

TINY = ["--hidden", "64", "--batch", "16"]   # ~2 ms per step here
WHOLE_STEPS, WHOLE_WARMUP = 3000, 300
WHOLE_POLL_S = 0.1
WHOLE_CONFIGS = {
    # name: stepscope run options (None: not stepscope)
    "torchrun": None,
    "plain": [],
    "auto": ["--auto"],
    "auto-off": ["--auto", "--numerics", "off"],
    "auto-nohttp": ["--auto", "--no-http"],
    "auto-nohost": ["--auto", "--host-interval", "0"],
    "auto-bare": ["--auto", "--no-http", "--host-interval", "0"],
    "traceml": None,
}
WHOLE_DEFAULT = ("torchrun", "plain", "auto-off", "auto", "traceml")


def proc_tree_cpu(root, seen):
    """Adds to SEEN {pid: (is_rank, CPU seconds)} every live descendant of
    ROOT (ROOT included) with its CPU time so far (user + system, all its
    threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _) in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    for pid in tree:
        if pid not in parents:
            continue
        is_rank = seen.get(pid, (False,))[0]
        if not is_rank:  # again until it is one: a rank starts as a fork of its launcher
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    is_rank = b"\0LOCAL_RANK=" in b"\0" + f.read()
            except OSError:
                continue
        seen[pid] = (is_rank, max(parents[pid][1], seen.get(pid, (0, 0.0))[1]))


def run_whole(tmp, config, nprocs, traceml_src, before=None):
    """One tiny-step job; returns (rank 0's (median ms, mean ms, CPU ms per
    step), the tool's CPU ms per step (its processes, all ranks' steps
    together), the ranks' CPU ms per step, the job's wall seconds), exit
    status."""
    import threading
    script_args = [*TINY, "--steps", str(WHOLE_STEPS), "--warmup", str(WHOLE_WARMUP),
                   "--samples", "65536"]
    env = child_env()
    if config == "traceml":
        cmd, env = traceml_command(tmp, traceml_src, nprocs, script_args)
    elif config == "torchrun":
        env.update(PET_REDIRECTS="9:0", PET_TEE="9:0")
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nprocs}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}",
               str(TRAIN), *script_args]
    else:
        name, at = config.split("@") if "@" in config else (config, None)
        binary = Path(before) / "stepscope" if at else STEPSCOPE
        cmd = [str(binary), "run", "-n", str(nprocs), "--db", str(tmp / "whole.db"),
               *WHOLE_CONFIGS[name], "--", sys.executable, str(TRAIN), *script_args]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen, done = {}, threading.Event()

    def poll():
        while not done.wait(WHOLE_POLL_S):
            proc_tree_cpu(proc.pid, seen)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        out, _ = proc.communicate(timeout=JOB_TIMEOUT_S)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        rc = "hung"
    wall = time.monotonic() - t0
    done.set()
    poller.join()
    m = re.search(r"ddp_train: rank=0 .*step_ms_median=(\S+) step_ms_mean=(\S+) "
                  r"cpu_ms_per_step=(\S+)", out)
    if not m:
        return None, f"printed no timing (exit {rc}): {out[-300:]!r}"
    tool = sum(c for r, c in seen.values() if not r) * 1e3 / WHOLE_STEPS
    ranks = sum(c for r, c in seen.values() if r) * 1e3 / WHOLE_STEPS
    return (*(float(m.group(i)) for i in (1, 2, 3)), tool, ranks, wall), rc


def bench_whole(repeats, nprocs, configs, traceml_src, before=None):
    """REPEATS rounds, each running every configuration once in a rotating
    order; ratios to the torchrun job of the same round."""
    rows = {c: [] for c in configs}
    loads, failures = [], []
    with tempfile.TemporaryDirectory(prefix="ss-bench-whole-") as d:
        for rep in range(repeats):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]
            for config in order:
                loads.append(os.getloadavg()[0])
                for attempt in range(3):  # a port taken by others between choice and bind
                    r, rc = run_whole(Path(d), config, nprocs, traceml_src, before)
                    if r is not None:
                        break
                    failures.append(f"whole round {rep} {config}: {rc}; run again")
                else:
                    sys.exit(f"bench_torch_overhead: whole job {config} failed 3 times: {rc}")
                rows[config].append(r)
                if rc != 0:
                    failures.append(f"whole round {rep} {config}: exit status {rc}")
                print(f"  whole round {rep} {config:11s} median {r[0]:7.3f} ms  mean {r[1]:7.3f} ms"
                      f"  rank0 cpu {r[2]:6.3f} ms/step  tool cpu {r[3]:7.3f} ms/step"
                      f"  ranks cpu {r[4]:7.3f} ms/step  wall {r[5]:6.1f} s"
                      + (f"  (exit {rc})" if rc else ""), flush=True)
    base = rows["torchrun"]
    print(f"\nthe whole job's cost: ddp_train.py {' '.join(TINY)}, {WHOLE_STEPS} steps "
          f"({WHOLE_WARMUP} warm-up), {nprocs} ranks, {repeats} rounds; load average "
          f"{min(loads):.1f} - {max(loads):.1f} (median {statistics.median(loads):.1f})")
    print(f"  {'config':11s} {'median step ms':>22s} {'ratio of medians':>22s} "
          f"{'ratio of means':>22s} {'tool CPU ms/step':>22s} {'ranks CPU ms/step':>22s}")
    for config in configs:
        rs = rows[config]
        cols = [[r[0] for r in rs], [r[0] / b[0] for r, b in zip(rs, base)],
                [r[1] / b[1] for r, b in zip(rs, base)], [r[3] for r in rs], [r[4] for r in rs]]
        fmts = ("{:.3f}", "{:.3f}", "{:.3f}", "{:.3f}", "{:.3f}")
        print(f"  {config:11s} " + " ".join(f"{spread(c, f):>22s}" for c, f in zip(cols, fmts)))
    print()
    for f in failures:
        print(f"note: {f}")


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch  # noqa: F401  (only for its version)
    load = os.getloadavg()[0]
    return (f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}, Python "
            f"{platform.python_version()}, torch {torch.__version__}, load average {load:.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=5, help="alternating trials (default 5)")
    p.add_argument("--nprocs", type=int, default=2, help="ranks per job (default 2)")
    p.add_argument("--quick", action="store_true", help="2 trials, short model only")
    p.add_argument("--skip-jobs", action="store_true", help="only the micro-benchmark")
    p.add_argument("--skip-whole", action="store_true", help="no whole-job comparison")
    p.add_argument("--skip-micro", action="store_true", help="no micro-benchmark")
    p.add_argument("--skip-paired", action="store_true", help="no paired blocks")
    p.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                   help="configurations to compare, comma-separated, of "
                        f"{', '.join(CONFIGS)} (default: all but auto+full; plain is "
                        "always the whole jobs' baseline)")
    p.add_argument("--traceml", metavar="PATH",
                   help="a TraceML source checkout for the traceml configuration "
                        "(default: $TRACEML_SOURCE; without either it is skipped)")
    p.add_argument("--models", default=",".join(MODELS),
                   help="models, comma-separated (default: short,long)")
    p.add_argument("--whole", action="store_true",
                   help="only the whole job's cost on a tiny step (the tool's processes "
                        "included), against torchrun")
    p.add_argument("--whole-configs", default=",".join(WHOLE_DEFAULT),
                   help="configurations of --whole, comma-separated, of "
                        f"{', '.join(WHOLE_CONFIGS)} (default: {','.join(WHOLE_DEFAULT)})")
    p.add_argument("--before-build", metavar="DIR",
                   help="another build's directory: a --whole configuration written "
                        "NAME@before runs that build's controller (the same Python "
                        "package), to compare two controllers in one run")
    p.add_argument("--repeats", type=int, default=5,
                   help="rounds of --whole (default 5, at least 1)")
    p.add_argument("--micro-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ab-child", nargs=2, metavar=("CONFIG", "MODEL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.micro_child:
        micro_child()
        return
    if args.ab_child:
        ab_child(*args.ab_child)
        return
    if not STEPSCOPE.exists():
        sys.exit(f"bench_torch_overhead: {STEPSCOPE} not found: run `make` first "
                 f"or set STEPSCOPE_BUILD")
    print(f"machine: {machine()}")
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}\n")
    configs = [c for c in args.configs.split(",") if c]
    models = [m for m in args.models.split(",") if m]
    bad = [c for c in configs if c not in CONFIGS] + [m for m in models if m not in MODELS]
    if bad:
        sys.exit(f"bench_torch_overhead: unknown configuration or model: {', '.join(bad)}")
    traceml_src = None
    if "traceml" in configs:
        traceml_src, why = traceml_source(args.traceml)
        if traceml_src is None:
            print(f"traceml: skipped: {why}\n")
            configs.remove("traceml")
    if args.whole:
        if args.repeats < 1:
            sys.exit("bench_torch_overhead: --repeats must be at least 1")
        wconfigs = [c for c in args.whole_configs.split(",") if c]
        bad = [c for c in wconfigs if c.split("@")[0] not in WHOLE_CONFIGS
               or ("@" in c and (c.split("@")[1] != "before" or not args.before_build
                                 or c.startswith(("torchrun@", "traceml@"))))]
        if bad:
            sys.exit(f"bench_torch_overhead: unknown --whole configuration: {', '.join(bad)}")
        if "torchrun" not in wconfigs:
            wconfigs.insert(0, "torchrun")
        if "traceml" in wconfigs:
            wsrc, why = traceml_source(args.traceml)
            if wsrc is None:
                print(f"traceml: skipped: {why}\n")
                wconfigs.remove("traceml")
        else:
            wsrc = None
        bench_whole(args.repeats, args.nprocs, wconfigs, wsrc, args.before_build)
        return
    if not args.skip_micro:
        bench_micro()
    if not args.skip_jobs:
        trials = 2 if args.quick else args.trials
        if args.quick:
            models = ["short"]
        paired = [c for c in configs if c != "plain" and c not in WHOLE_ONLY]
        if paired and not args.skip_paired:
            bench_ab(trials, models, paired)
        if not args.skip_whole:
            bench_jobs(trials, args.nprocs, models,
                       ["plain"] + [c for c in configs if c != "plain"], traceml_src)


if __name__ == "__main__":
    main()
