"""ddp_numerics.py - a small PyTorch DDP job that can go numerically wrong
on purpose: a non-finite value injected into a chosen module on a chosen
rank at a chosen step, forward or backward, or a loss spike.

    stepscope run --auto -n 4 -- python3 examples/ddp_numerics.py \
        --nan-rank 2 --nan-step 12 --nan-module blocks.1.fc1
    stepscope run --auto --numerics full -n 4 -- python3 \
        examples/ddp_numerics.py --nan-rank 2 --nan-step 12 \
        --nan-module blocks.1.fc1 --nan-dir backward
    stepscope report

A residual MLP deep enough to have a first, middle and last module:

    embed            Linear(features, hidden)
    blocks.K         K = 0 .. --blocks - 1, each
      .fc1 .act .fc2   Linear(hidden, hidden), GELU, Linear(hidden, hidden)
    head             Linear(hidden, classes)

on synthetic data (a fixed random teacher labels Gaussian inputs, so the
loss falls smoothly), on the CPU, DistributedDataParallel over gloo, SGD.
It does not import stepscope.

  --nan-rank R --nan-step S --nan-module NAME [--nan-dir forward|backward]
      at step S, on rank R, module NAME's output gets a NaN in its first
      element (forward), or the gradient flowing into its output does
      (backward); --nan-value inf injects an infinity instead.  The
      injection happens in every attempt that runs step S, so a restart
      from an earlier checkpoint meets it again.
  --nan-rank R --nan-step S --nan-dir input|output|loss
      the same outside every module: the batch's first element before the
      model (input), the model's output's first element on its way to the
      loss function, itself a module (output), or the loss after it, as a
      term the script adds would (loss); no --nan-module
  --spike-rank R --spike-step S [--spike-factor F]
      at step S rank R's loss (and so its gradients) is multiplied by F
      (default 50)
  --checkpoint FILE --save-every K
      rank 0 saves {"step", "model", "optimizer"} after every K steps
      whose loss was finite; a rank that starts while FILE exists resumes
      from it
  --list-modules
      prints the module names and exits

Each rank ends with a line RESULT {"rank", "first_step", "last_step",
"loss", "resumed_from"}.  A rank whose loss is NaN keeps training, as a
real job would.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


# --nan-dir values that inject outside every module
OUTSIDE = ("input", "output", "loss")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    p.add_argument("--batch", type=int, default=32, help="samples per batch and rank")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--blocks", type=int, default=3, help="residual blocks (default 3)")
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="extra milliseconds of sleep per step (pacing)")
    p.add_argument("--nan-rank", type=int, default=-1)
    p.add_argument("--nan-step", type=int, default=-1)
    p.add_argument("--nan-module", default="")
    p.add_argument("--nan-dir", default="forward",
                   choices=("forward", "backward") + OUTSIDE)
    p.add_argument("--nan-value", choices=("nan", "inf"), default="nan")
    p.add_argument("--spike-rank", type=int, default=-1)
    p.add_argument("--spike-step", type=int, default=-1)
    p.add_argument("--spike-factor", type=float, default=50.0)
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--save-every", type=int, default=5)
    p.add_argument("--list-modules", action="store_true")
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x))) * 0.5


class Net(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embed = nn.Linear(args.features, args.hidden)
        self.blocks = nn.ModuleList(Block(args.hidden) for _ in range(args.blocks))
        self.head = nn.Linear(args.hidden, args.classes)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class PoisonGrad(torch.autograd.Function):
    """Identity forward; backward puts VALUE into the gradient's first
    element."""

    @staticmethod
    def forward(ctx, x, value):
        ctx.value = value
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        grad.view(-1)[0] = ctx.value
        return grad, None


class Injector:
    """Arms a forward hook on one module for one step."""

    def __init__(self, module, direction, value):
        self.armed = False
        self.direction = direction
        self.value = value
        module.register_forward_hook(self.hook)

    def hook(self, _module, _inputs, output):
        if not self.armed:
            return None
        self.armed = False
        if self.direction == "forward":
            out = output.clone()
            out.view(-1)[0] = self.value
            return out
        return PoisonGrad.apply(output, self.value)


def main():
    args = parse_args()
    torch.manual_seed(0)
    net = Net(args)
    if args.list_modules:
        for name, _ in net.named_modules():
            print(name or "(Net)")
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    injector = None
    if rank == args.nan_rank and args.nan_dir not in OUTSIDE:
        modules = dict(net.named_modules())
        if args.nan_module not in modules:
            raise SystemExit("--nan-module: no module '%s' (try --list-modules)"
                             % args.nan_module)
        injector = Injector(modules[args.nan_module], args.nan_dir,
                            float(args.nan_value))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    start, resumed = 0, None
    if args.checkpoint and os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint, map_location="cpu")
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        resumed = state["step"]
        start = resumed + 1
    teacher = torch.Generator().manual_seed(7)
    w_teacher = torch.randn(args.features, args.classes, generator=teacher)
    loss_fn = nn.CrossEntropyLoss()
    last, loss_value = None, None
    for step in range(start, args.steps):
        gen = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(args.batch, args.features, generator=gen)
        y = (x @ w_teacher).argmax(dim=1)
        if injector is not None and step == args.nan_step:
            injector.armed = True
        outside = (args.nan_dir if rank == args.nan_rank
                   and step == args.nan_step else None)
        if outside == "input":
            x[0, 0] = float(args.nan_value)
        out = model(x)
        if outside == "output":
            out = out.clone()
            out.view(-1)[0] = float(args.nan_value)
        loss = loss_fn(out, y)
        if outside == "loss":
            loss = loss + float(args.nan_value)
        if rank == args.spike_rank and step == args.spike_step:
            loss = loss * args.spike_factor
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_value = loss.item()
        if args.step_ms:
            time.sleep(args.step_ms / 1000.0)
        last = step
        if (args.checkpoint and rank == 0 and math.isfinite(loss_value)
                and (step + 1) % args.save_every == 0):
            tmp = args.checkpoint + ".tmp"
            torch.save({"step": step, "model": model.module.state_dict(),
                        "optimizer": opt.state_dict()}, tmp)
            os.replace(tmp, args.checkpoint)
    print("RESULT " + json.dumps({
        "rank": rank, "first_step": start, "last_step": last,
        "loss": loss_value if loss_value is None or math.isfinite(loss_value)
        else str(loss_value), "resumed_from": resumed}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
