"""pipeline_train.py - a small pipeline-parallel training job, written out by
hand over point-to-point send/recv, instrumented with stepscope's pipeline
API.

    stepscope run -n 4 -- python3 examples/pipeline_train.py --schedule 1f1b
    stepscope run -n 4 -- python3 examples/pipeline_train.py --heavy-stage 2
    stepscope report

An MLP regressor is cut into as many stages as there are ranks (gloo, CPU);
rank r runs stage r.  Each step splits the batch into --microbatches
microbatches and runs them under one of two schedules:

  gpipe   every microbatch's forward, then every microbatch's backward;
  1f1b    p - s - 1 warm-up forwards on stage s, then one forward and one
          backward in turn, then the remaining backwards (PipeDream-Flush).

A stage receives its input activations (its output's gradient) with a
blocking recv before the microbatch's work and hands its output (its input's
gradient) on with isend after it, so that waiting for a neighbour lies
outside the microbatch spans: that is the bubble stepscope measures.  The
optimizer steps once per step, after the last backward.

  --heavy-stage S --heavy-factor K   stage S gets K times the layers of the
                                     others (an unbalanced layer split): the
                                     other stages wait for it

stepscope is imported by hand: stepscope.pipeline(...) once,
stepscope.step() around each step, stepscope.microbatch(i, "F"/"B") around
each microbatch's compute.  Without a controller every call is a no-op.
Rank 0 ends with one line of key=value pairs (steps, median step ms).
Exit status: 0 done, 1 an error, 2 bad usage.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import stepscope

PROG = "pipeline_train"


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), default="1f1b")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--microbatch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=2,
                   help="Linear+ReLU layers per stage")
    p.add_argument("--heavy-stage", type=int, default=-1)
    p.add_argument("--heavy-factor", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.steps < 1 or a.microbatches < 1 or a.microbatch_size < 1 or \
            a.hidden < 1 or a.layers < 1 or a.heavy_factor < 1:
        p.error("--steps, --microbatches, --microbatch-size, --hidden, "
                "--layers and --heavy-factor must be at least 1")
    return a


def stage_model(a, stage):
    n = a.layers * (a.heavy_factor if stage == a.heavy_stage else 1)
    layers = []
    for _ in range(n):
        layers += [nn.Linear(a.hidden, a.hidden), nn.ReLU()]
    return nn.Sequential(*layers)


class Stage:
    """One stage's part of a step: its microbatches' inputs and outputs
    kept from forward to backward, and the sends not yet completed."""

    def __init__(self, a, rank, world, model):
        self.a, self.rank, self.world, self.model = a, rank, world, model
        self.first, self.last = rank == 0, rank == world - 1
        self.shape = (a.microbatch_size, a.hidden)
        self.inputs, self.outputs, self.sends = {}, {}, []

    def forward(self, i, x, target):
        if self.first:
            inp = x[i]
        else:
            inp = torch.empty(self.shape)
            dist.recv(inp, self.rank - 1)
            inp.requires_grad_()
        with stepscope.microbatch(i, "F"):
            out = self.model(inp)
            if self.last:
                out = nn.functional.mse_loss(out, target[i])
        self.inputs[i], self.outputs[i] = inp, out
        if not self.last:
            self.sends.append(dist.isend(out.detach(), self.rank + 1))

    def backward(self, i):
        grad = None
        if not self.last:
            grad = torch.empty(self.shape)
            dist.recv(grad, self.rank + 1)
        with stepscope.microbatch(i, "B"):
            self.outputs.pop(i).backward(grad)
        inp = self.inputs.pop(i)
        if not self.first:
            self.sends.append(dist.isend(inp.grad, self.rank - 1))

    def finish(self):
        for w in self.sends:
            w.wait()
        self.sends = []


def run_step(st, schedule, m, x, target):
    s, p = st.rank, st.world
    if schedule == "gpipe":
        for i in range(m):
            st.forward(i, x, target)
        for i in range(m):
            st.backward(i)
    else:  # 1f1b
        warm = min(p - s - 1, m)
        for i in range(warm):
            st.forward(i, x, target)
        for i in range(m - warm):
            st.forward(warm + i, x, target)
            st.backward(i)
        for i in range(m - warm, m):
            st.backward(i)
    st.finish()


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if not -1 <= a.heavy_stage < world:
        print(f"{PROG}: --heavy-stage must be below the {world} stages",
              file=sys.stderr)
        return 2
    torch.manual_seed(a.seed + rank)
    model = stage_model(a, rank)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    st = Stage(a, rank, world, model)
    stepscope.pipeline(rank, world, a.schedule, a.microbatches)
    times = []
    for step in range(a.steps):
        g = torch.Generator().manual_seed(a.seed * 1000 + step)
        x = [torch.randn(st.shape, generator=g) for _ in range(a.microbatches)]
        target = [torch.randn(st.shape, generator=g)
                  for _ in range(a.microbatches)]
        t0 = time.perf_counter()
        with stepscope.step(step):
            opt.zero_grad()
            run_step(st, a.schedule, a.microbatches, x, target)
            opt.step()
        times.append(time.perf_counter() - t0)
    dist.barrier()
    if rank == 0:
        print(f"steps={a.steps} schedule={a.schedule} "
              f"median_step_ms={statistics.median(times) * 1e3:.1f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # one line, not a traceback per rank
        print(f"{PROG}: rank {os.environ.get('RANK', '?')}: {e!r}",
              file=sys.stderr)
        sys.exit(1)
