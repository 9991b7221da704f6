"""ddp_train.py - a small, ordinary PyTorch DDP training job with switches to
inject the faults stepscope is meant to explain.

    stepscope run --auto -n 4 -- python3 examples/ddp_train.py --slow-rank 2
    stepscope report

It trains an MLP classifier on synthetic data on the CPU: a Dataset read
through a DataLoader with a DistributedSampler, DistributedDataParallel over
gloo, cross-entropy, SGD with momentum, optional gradient accumulation.  It
reads the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
so `torchrun` or `stepscope run` can launch it, and it does NOT import
stepscope: under `stepscope run --auto` it is instrumented from the outside.
`--explicit` instead instruments it with the stepscope Python API, the way a
user would by hand (only then is stepscope imported).

Faults (all on the rank named, every other rank runs normally):
  --slow-rank R --slow-ms MS [--slow-phase P]
                                MS of extra matrix multiplies every step,
                                inside the model's forward (the default),
                                its backward, the optimizer's step or the
                                read of each batch (P = forward, backward,
                                optimizer, data); with --slow-kind sleep
                                it sleeps MS there instead (a wait of its
                                own, no CPU)
  --stall-rank R --stall-ms MS --stall-every K
                                the Dataset's __getitem__ sleeps MS (a slow
                                read) once every K steps
  --leak-rank R --leak-mb MB    keeps MB MiB of new tensors alive per step
  --spike-rank R --spike-step S --spike-mb MB
                                holds MB MiB of new tensors during step S
                                only (freed in step S+1)
  --imbalance-rank R --imbalance-mb MB
                                holds MB MiB of tensors for the whole run
  --crash-rank R --crash-step S raises RuntimeError in step S
  --leave-rank R --leave-step S exits with status 0 at the start of step S
                                (its data ran out first, a condition only it
                                took): the others' next all-reduce fails
  --eval-rank R --eval-every K --eval-ms MS
                                after every K-th optimizer step, rank R
                                alone evaluates the model for MS (forwards
                                under no_grad) while the others go on to
                                the next all-reduce and wait for it

Rank 0 ends with one line of key=value pairs (steps, median and mean step
time and CPU time per step after the warm-up, final loss); `--profile` runs
the loop under torch.profiler and `--traceml` under TraceML (its
`trace_step` around every step, for `traceml run`), for comparisons (see
bench/bench_torch_overhead.py).  A leaking rank also prints how many
bytes per step it kept and how much its RSS grew per step.  Exit status: 0
done, 1 an exception (an injected crash included), 2 bad usage.
"""
import argparse
import contextlib
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

PROG = "ddp_train"
SLOW_PHASES = ("forward", "backward", "optimizer", "data", "after")


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60, help="optimizer steps (default 60)")
    p.add_argument("--batch", type=int, default=32, help="samples per batch and rank (default 32)")
    p.add_argument("--accum", type=int, default=1,
                   help="batches per optimizer step: gradient accumulation (default 1)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    p.add_argument("--features", type=int, default=64, help="input features (default 64)")
    p.add_argument("--hidden", type=int, default=256, help="hidden layer width (default 256)")
    p.add_argument("--layers", type=int, default=2, help="hidden layers (default 2)")
    p.add_argument("--classes", type=int, default=10, help="output classes (default 10)")
    p.add_argument("--samples", type=int, default=8192, help="dataset size (default 8192)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed for data and model (default 0)")
    p.add_argument("--warmup", type=int, default=5,
                   help="steps left out of the step-time summary (default 5)")
    p.add_argument("--log-every", type=int, default=0,
                   help="rank 0 prints the loss every K steps (default 0: never)")
    p.add_argument("--explicit", action="store_true",
                   help="instrument with the stepscope API instead of relying on --auto")
    p.add_argument("--profile", action="store_true",
                   help="run under torch.profiler recording every step but the first (for comparisons)")
    p.add_argument("--traceml", action="store_true",
                   help="wrap every step in TraceML's trace_step, for `traceml run` (for comparisons)")
    p.add_argument("--slow-rank", type=int, default=-1, metavar="R")
    p.add_argument("--slow-ms", type=float, default=30.0, metavar="MS",
                   help="extra compute per step on --slow-rank (default 30)")
    p.add_argument("--slow-phase", choices=SLOW_PHASES, default="forward",
                   help="where --slow-rank computes longer (default forward)")
    p.add_argument("--slow-kind", choices=("compute", "sleep"), default="compute",
                   help="how --slow-rank is slower: it computes, or it waits "
                        "(a sleep, as on a lock or a slow read: no CPU) (default compute)")
    p.add_argument("--stall-rank", type=int, default=-1, metavar="R")
    p.add_argument("--stall-ms", type=float, default=100.0, metavar="MS",
                   help="length of one data stall on --stall-rank (default 100)")
    p.add_argument("--stall-every", type=int, default=5, metavar="K",
                   help="one data stall every K steps (default 5)")
    p.add_argument("--leak-rank", type=int, default=-1, metavar="R")
    p.add_argument("--leak-mb", type=float, default=4.0, metavar="MB",
                   help="MiB kept alive per step on --leak-rank (default 4)")
    p.add_argument("--spike-rank", type=int, default=-1, metavar="R")
    p.add_argument("--spike-step", type=int, default=30, metavar="S",
                   help="step in which --spike-rank holds --spike-mb more (default 30)")
    p.add_argument("--spike-mb", type=float, default=512.0, metavar="MB",
                   help="MiB held for one step on --spike-rank (default 512)")
    p.add_argument("--imbalance-rank", type=int, default=-1, metavar="R")
    p.add_argument("--imbalance-mb", type=float, default=768.0, metavar="MB",
                   help="MiB held for the whole run on --imbalance-rank (default 768)")
    p.add_argument("--eval-rank", type=int, default=-1, metavar="R")
    p.add_argument("--eval-every", type=int, default=50, metavar="K",
                   help="--eval-rank evaluates after every K-th step (default 50)")
    p.add_argument("--eval-ms", type=float, default=2000.0, metavar="MS",
                   help="how long each evaluation takes (default 2000)")
    p.add_argument("--crash-rank", type=int, default=-1, metavar="R")
    p.add_argument("--crash-step", type=int, default=10, metavar="S",
                   help="step in which --crash-rank raises (default 10)")
    p.add_argument("--leave-rank", type=int, default=-1, metavar="R")
    p.add_argument("--leave-step", type=int, default=10, metavar="S",
                   help="step at whose start --leave-rank exits with status 0 (default 10)")
    args = p.parse_args(argv)
    for name in ("steps", "batch", "accum", "features", "hidden", "classes", "samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if (args.layers < 0 or args.workers < 0 or args.warmup < 0 or args.stall_every < 1
            or args.eval_every < 1):
        p.error("--layers, --workers and --warmup must be >= 0, "
                "--stall-every and --eval-every >= 1")
    if min(args.slow_ms, args.stall_ms, args.leak_mb, args.spike_mb, args.imbalance_mb,
           args.eval_ms) < 0:
        p.error("durations and sizes must be >= 0")
    if args.explicit and args.profile:
        p.error("--explicit and --profile are separate configurations")
    if args.traceml and (args.explicit or args.profile):
        p.error("--traceml is a configuration of its own")
    return args


BURN_MATRIX = torch.ones(64, 64) / 64


def burn(seconds):
    """Real compute for SECONDS, 64x64 matrix multiplies: what a rank on a
    slower or busier device does, not a sleep."""
    with torch.no_grad():
        end = time.perf_counter() + seconds
        m = BURN_MATRIX
        while time.perf_counter() < end:
            m = torch.mm(m, BURN_MATRIX)


SLOW_KIND = "compute"  # --slow-kind, set once by main()


def slow_down(seconds):
    """The slow rank's extra time: burn() it, or sleep it with --slow-kind
    sleep (a rank waiting of its own accord uses no CPU)."""
    if SLOW_KIND == "sleep":
        time.sleep(seconds)
    else:
        burn(seconds)


class SyntheticDataset(Dataset):
    """Gaussian clusters, one per class, drawn once from a fixed seed so every
    rank sees the same data set.  On the stalling rank, every
    `stall_period`-th read sleeps `stall_s`, like a slow file system; on a
    rank slow in data, every `burn_period`-th read (the first of each
    batch) computes for `burn_s`, like a costly decode."""

    def __init__(self, args, stall_period=0, stall_s=0.0, burn_period=0, burn_s=0.0):
        g = torch.Generator().manual_seed(args.seed)
        centers = torch.randn(args.classes, args.features, generator=g) * 0.5
        self.y = torch.randint(0, args.classes, (args.samples,), generator=g)
        self.x = centers[self.y] + torch.randn(args.samples, args.features, generator=g)
        self.stall_period = stall_period
        self.stall_s = stall_s
        self.burn_period = burn_period
        self.burn_s = burn_s
        self.reads = 0

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.stall_period and self.reads % self.stall_period == 0:
            time.sleep(self.stall_s)
        if self.burn_period and self.reads % self.burn_period == 0:
            slow_down(self.burn_s)
        self.reads += 1
        return self.x[i], self.y[i]


class BurnInBackward(torch.autograd.Function):
    """The identity, whose backward first computes for `seconds`.  Applied
    to the model's output, its backward runs first in loss.backward(),
    before any parameter's gradient and so before DDP's all-reduce: a rank
    slower in backward, as on a slower or throttled GPU."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        slow_down(ctx.seconds)
        return grad, None


class MLP(nn.Module):
    """A plain MLP.  On a rank slow in forward, forward() also computes for
    `forward_s` seconds; on one slow in backward, its backward computes
    for `backward_s` seconds (BurnInBackward)."""

    def __init__(self, args, forward_s=0.0, backward_s=0.0):
        super().__init__()
        dims = [args.features] + [args.hidden] * args.layers
        layers = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(dims[-1], args.classes))
        self.net = nn.Sequential(*layers)
        self.forward_s = forward_s
        self.backward_s = backward_s

    def forward(self, x):
        if self.forward_s > 0:
            slow_down(self.forward_s)
        out = self.net(x)
        if self.backward_s > 0:
            out = BurnInBackward.apply(out, self.backward_s)
        return out


class SlowSGD(torch.optim.SGD):
    """SGD whose step() first computes for `slow_s` seconds: a rank whose
    optimizer step is slower (say, one offloaded to a busy CPU)."""

    def __init__(self, params, slow_s, **kwargs):
        super().__init__(params, **kwargs)
        self.slow_s = slow_s

    def step(self, closure=None):
        slow_down(self.slow_s)
        return super().step(closure)


def evaluate(model, x, seconds):
    """Forwards of the model (not its DDP wrapper) under no_grad for
    SECONDS: an evaluation one rank runs alone between two steps."""
    end = time.perf_counter() + seconds
    with torch.no_grad():
        while time.perf_counter() < end:
            model(x)


def batches(loader, sampler):
    """Batches forever, epoch after epoch, reshuffled per epoch."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for b in loader:
            yield b
        epoch += 1


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv):
    global SLOW_KIND
    args = parse_args(argv)
    SLOW_KIND = args.slow_kind
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for opt in ("slow_rank", "stall_rank", "leak_rank", "spike_rank", "imbalance_rank",
                "crash_rank", "leave_rank", "eval_rank"):
        if getattr(args, opt) >= world:
            print(f"{PROG}: --{opt.replace('_', '-')} {getattr(args, opt)} is not below "
                  f"WORLD_SIZE {world}", file=sys.stderr)
            return 2
    torch.manual_seed(args.seed)
    traceml = None
    if args.traceml:
        import traceml_ai as traceml  # only this configuration uses TraceML
        traceml.init(mode="auto")

    if args.explicit:
        import stepscope  # only this configuration uses the API
        phase = stepscope.phase
    else:
        stepscope = None
        phase = lambda name: contextlib.nullcontext()  # noqa: E731

    stalling = rank == args.stall_rank
    slow = {p: args.slow_ms / 1000.0 if rank == args.slow_rank and args.slow_phase == p else 0.0
            for p in SLOW_PHASES}
    dataset = SyntheticDataset(
        args,
        stall_period=args.batch * args.accum * args.stall_every if stalling else 0,
        stall_s=args.stall_ms / 1000.0,
        burn_period=args.batch if slow["data"] else 0, burn_s=slow["data"])
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler,
                        num_workers=args.workers, drop_last=True,
                        persistent_workers=args.workers > 0)
    model = MLP(args, forward_s=slow["forward"], backward_s=slow["backward"])
    ddp = DDP(model)
    arrival = {"armed": False}
    if args.explicit:
        mark_allreduce_arrival(model, stepscope, arrival)
    if slow["optimizer"]:
        optimizer = SlowSGD(ddp.parameters(), slow["optimizer"], lr=args.lr, momentum=0.9)
    else:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    leak, leak_numel = [], 0
    if rank == args.leak_rank:
        leak_numel = int(args.leak_mb * (1 << 20)) // 4  # float32
    rss_marks = []
    held = None  # the imbalance: tensors kept for the whole run
    if rank == args.imbalance_rank:
        held = torch.ones(int(args.imbalance_mb * (1 << 20)) // 4)
    spike = None

    profiler = None
    if args.profile:
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=max(1, args.steps - 1),
                                             repeat=1))
        profiler.start()

    data = batches(loader, sampler)
    starts, cpu = [], []  # wall clock at every step start; CPU time after the warm-up
    loss_value = float("nan")
    for step in range(args.steps):
        starts.append(time.perf_counter())
        if step == min(args.warmup, args.steps - 1):
            cpu.append(time.process_time())
        step_ctx = (stepscope.step(step) if stepscope else
                    traceml.trace_step(ddp) if traceml else contextlib.nullcontext())
        if rank == args.leave_rank and step == args.leave_step:
            sys.exit(0)  # without a word, as a rank whose loop ended early
        with step_ctx:
            if rank == args.crash_rank and step == args.crash_step:
                raise RuntimeError(f"injected crash on rank {rank} in step {step}")
            if leak_numel:
                leak.append(torch.ones(leak_numel))
            if rank == args.spike_rank:
                spike = (torch.ones(int(args.spike_mb * (1 << 20)) // 4)
                         if step == args.spike_step else None)
            total = 0.0
            for micro in range(args.accum):
                with phase("data"):
                    x, y = next(data)
                syncing = micro == args.accum - 1
                arrival["armed"] = syncing
                with contextlib.nullcontext() if syncing else ddp.no_sync():
                    with phase("forward"):
                        loss = criterion(ddp(x), y) / args.accum
                    with phase("backward"):
                        loss.backward()
                total += loss.item()
            with phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            loss_value = total
            if stepscope:
                stepscope.metric("loss", loss_value)
                stepscope.memory_sample()
            if profiler:
                profiler.step()
            if leak_numel:
                rss_marks.append(rss_bytes())
            if slow["after"]:  # past the optimizer step, in no phase
                slow_down(slow["after"])
        if rank == args.eval_rank and step % args.eval_every == args.eval_every - 1:
            evaluate(model, x, args.eval_ms / 1000.0)
        if rank == 0 and args.log_every and step % args.log_every == 0:
            print(f"{PROG}: step {step} loss {loss_value:.4f}", flush=True)
    starts.append(time.perf_counter())
    cpu.append(time.process_time())
    if profiler:
        profiler.stop()

    del held, spike
    if leak_numel:
        report_leak(rank, args, leak_numel * 4, rss_marks)
    if rank == 0:
        report_times(args, starts, cpu, loss_value)
    dist.destroy_process_group()
    return 0


def mark_allreduce_arrival(model, stepscope, arrival):
    """Records this rank's arrival at the gradient all-reduce: DDP launches it
    from inside backward() once the last gradient of its bucket is computed,
    and for this MLP (one bucket) that is the first layer's weight, whose
    gradient backward() produces last.  Micro-batches that accumulate without
    syncing (arrival["armed"] false) do not count.  (A DDP communication
    hook written in Python could mark the all-reduce itself, but with
    PyTorch 1.13 and gloo such a hook runs Python on gloo's threads, which
    can hang or abort the process when it exits.)"""
    first = next(model.parameters())

    def hook(grad):
        if arrival["armed"]:
            stepscope.sync("allreduce")

    first.register_hook(hook)


def report_times(args, starts, cpu, loss_value):
    """Rank 0's summary: wall time per step (median, mean) and CPU time per
    step of this process, all threads, over the steps after the warm-up."""
    first = min(args.warmup, args.steps - 1)
    durations = [b - a for a, b in zip(starts, starts[1:])][first:]
    print(f"{PROG}: rank=0 steps={args.steps} warmup={first} "
          f"step_ms_median={statistics.median(durations) * 1e3:.3f} "
          f"step_ms_mean={statistics.fmean(durations) * 1e3:.3f} "
          f"cpu_ms_per_step={(cpu[1] - cpu[0]) / len(durations) * 1e3:.3f} "
          f"loss={loss_value:.4f}", flush=True)


def report_leak(rank, args, bytes_per_step, rss_marks):
    """The truth a memory-creep detector should find: bytes kept per step and
    the RSS growth per step measured over the steps after the warm-up."""
    first = min(args.warmup, len(rss_marks) - 1)
    span = len(rss_marks) - 1 - first
    grown = (rss_marks[-1] - rss_marks[first]) / span if span > 0 else float("nan")
    print(f"{PROG}: rank={rank} leak_bytes_per_step={bytes_per_step} "
          f"rss_bytes_per_step={grown:.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
