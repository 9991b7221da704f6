"""forward_forward.py - layer-local training with the forward-forward
algorithm (Hinton 2022), data parallel over gloo, instrumented by hand with
one stepscope phase per layer.

    stepscope run -n 4 -- python3 examples/forward_forward.py
    stepscope run -n 4 -- python3 examples/forward_forward.py \\
        --slow-rank 2 --slow-layer 1 --slow-ms 30
    stepscope report

There is no end-to-end backward pass: each layer has its own loss and its
own optimizer.  A layer sees positive data (an input with its true label
written into its first features) and negative data (the same input with a
wrong label); its "goodness" is the mean square of its activations, and its
loss, softplus(theta - goodness(pos)) + softplus(goodness(neg) - theta),
pushes goodness above theta for positive data and below it for negative
data.  The next layer gets the layer's normalized, detached output.

Data parallel: every rank trains every layer on its own shard of the
synthetic data, and after each layer's local backward the layer's
gradients are averaged over the ranks (all_reduce) before its optimizer
steps.  So layer l's update waits for every rank's layer l: a rank slow in
one layer makes the others wait at that layer's all_reduce, and stepscope
blames that rank and that layer by name, since every layer's work is a
phase ("layer0", "layer1", ...) with its loss and its update nested in it
("layer1.loss", "layer1.update", the update holding the all_reduce):
the rank that waits least in a layer's update is the one the others wait
for, and the phase it spends its extra time in names the layer.

  --slow-rank R --slow-layer L --slow-ms MS
                    rank R spends MS more ms of real compute (matrix
                    multiplies) in layer L's forward, every step

Rank 0 ends with one line of key=value pairs (steps, median step ms,
final mean layer loss).  Exit status: 0 done, 1 an error, 2 bad usage.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import stepscope

PROG = "forward_forward"
CLASSES = 10
BURN_MATRIX = torch.ones(64, 64) / 64


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--theta", type=float, default=2.0)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-layer", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.steps < 1 or a.layers < 1 or a.hidden <= CLASSES or a.batch < 1:
        p.error(f"--steps, --layers and --batch must be at least 1 and "
                f"--hidden above {CLASSES}")
    if a.slow_ms < 0 or a.slow_layer >= a.layers:
        p.error("--slow-ms must be at least 0 and --slow-layer below "
                "--layers")
    return a


def burn(seconds):
    """Real compute for SECONDS: what a slower device does, not a sleep."""
    end = time.perf_counter() + seconds
    m = BURN_MATRIX
    with torch.no_grad():
        while time.perf_counter() < end:
            m = torch.mm(m, BURN_MATRIX)


def with_label(x, y):
    """X with the one-hot label Y written over its first CLASSES features."""
    x = x.clone()
    x[:, :CLASSES] = F.one_hot(y, CLASSES).to(x.dtype)
    return x


def batch(a, gen):
    x = torch.randn(a.batch, a.hidden, generator=gen)
    y = torch.randint(0, CLASSES, (a.batch,), generator=gen)
    wrong = (y + torch.randint(1, CLASSES, (a.batch,), generator=gen)) % CLASSES
    return with_label(x, y), with_label(x, wrong)


def train_layer(a, l, layer, opt, pos, neg, world, slow_s):
    """One layer's local step: its forward on positive and negative data,
    its own loss and backward, the gradients averaged over the ranks, its
    update.  Returns the layer's normalized outputs for the next layer
    and its loss."""
    with stepscope.phase(f"layer{l}"):
        with stepscope.phase(f"layer{l}.loss"):
            if slow_s:
                burn(slow_s)
            h_pos, h_neg = F.relu(layer(pos)), F.relu(layer(neg))
            g_pos, g_neg = h_pos.pow(2).mean(1), h_neg.pow(2).mean(1)
            loss = (F.softplus(a.theta - g_pos) +
                    F.softplus(g_neg - a.theta)).mean()
            opt.zero_grad()
            loss.backward()
        with stepscope.phase(f"layer{l}.update"):
            for p in layer.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
    def norm(h):
        return (h / (h.norm(dim=1, keepdim=True) + 1e-6)).detach()
    return norm(h_pos), norm(h_neg), loss.item()


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)  # the same initial layers on every rank
    layers = [nn.Linear(a.hidden, a.hidden) for _ in range(a.layers)]
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in layers]
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)  # own shard
    times, losses = [], []
    for step in range(a.steps):
        pos, neg = batch(a, gen)
        t0 = time.perf_counter()
        with stepscope.step(step):
            losses = []
            for l, (layer, opt) in enumerate(zip(layers, opts)):
                slow = a.slow_ms / 1e3 if (rank == a.slow_rank and
                                           l == a.slow_layer) else 0.0
                pos, neg, loss = train_layer(a, l, layer, opt, pos, neg,
                                             world, slow)
                losses.append(loss)
        times.append(time.perf_counter() - t0)
    dist.barrier()
    if rank == 0:
        print(f"steps={a.steps} median_step_ms="
              f"{statistics.median(times) * 1e3:.1f} "
              f"mean_layer_loss={statistics.mean(losses):.4f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # one line, not a traceback per rank
        print(f"{PROG}: rank {os.environ.get('RANK', '?')}: {e!r}",
              file=sys.stderr)
        sys.exit(1)
