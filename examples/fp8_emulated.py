"""fp8_emulated.py - float8 training emulated in float32, with switches for the
three ways a float8 recipe fails silently, and stepscope.fp8_stats called
for every cast.

    stepscope run -n 3 -- python3 examples/fp8_emulated.py \\
        --outlier fc1:2:6 --underflow fc4:0:8 --zero-input fc3:1:12
    stepscope report

A real PyTorch DDP job (gloo, CPU) trains an MLP of --layers linear layers
(fc1, fc2, ...; ReLU between them) to match a fixed random teacher, with the
float8 recipe of float8 training libraries: every linear layer casts its
input and weight to e4m3 and, in backward, the gradient of its output to
e5m2, each with a tensorwise scale (the format's largest value over the
tensor's amax), and multiplies the cast tensors.  torch here has no float8
dtype, so the cast is emulated: the scaled value is rounded to the format's
grid in float32 (round to nearest even, subnormals included, clipped at the
largest value as a saturating cast does), then divided by the scale again.

Scaling, per layer and tensor:
  dynamic  the scale comes from the tensor's own amax (the default): the
           largest element lands on the format's largest value, so nothing
           ever saturates
  delayed  the scale comes from the largest amax of the previous
           --amax-history steps (non-finite ones left out), the current one
           on the first step: cheaper, and it lags behind a tensor that
           grows or shrinks
--scaling delayed makes every tensor delayed; the faults below make the
tensor they hit delayed on every rank.

Faults, LAYER:RANK:STEP, each repeatable (the fault acts on RANK alone):
  --outlier     from STEP, input channel 0 of LAYER holds an outlier that
                starts at 16 and grows 25 % a step (activation outliers grow
                during training); LAYER's input is delayed-scaled, its scale
                lags one step behind, and the cast clips the outlier:
                saturation of LAYER's input
  --underflow   from STEP, the gradient arriving at LAYER is 2^-32 of what
                it was (as a loss scaled down by mistake); LAYER's gradient
                is delayed-scaled, its scale still fits the old gradients,
                and most values flush to zero in e5m2 until the history
                forgets them: underflow of LAYER's gradient
  --zero-input  in STEP, LAYER's input is all zeros: amax = 0, the dynamic
                scale is infinite, and the cast makes NaN (0 x inf): an
                invalid scale of LAYER's input

The gradients' norm is clipped (--clip), and a step whose all-reduced
gradients are not finite is skipped by every rank (as training loops do),
so one invalid scale does not end the run.

stepscope.fp8_stats(name, tensor, scale, fmt) records each cast's amax,
scale, saturated and underflowed fractions under "LAYER.input",
"LAYER.weight" and "LAYER.grad"; the controller's float8 detector turns
them into findings (docs/numerics.md).  Without a controller the calls
cost nothing.  Rank 0 ends with one line of key=value pairs (steps, skipped
steps, final loss).  Exit status: 0 done, 1 an exception, 2 bad usage.
"""
import argparse
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import stepscope

PROG = "fp8_emulated"

# name: (largest value, mantissa bits, smallest normal exponent)
FORMATS = {"e4m3": (448.0, 3, -6), "e5m2": (57344.0, 2, -14)}

OUTLIER_START, OUTLIER_GROWTH, OUTLIER_CAP = 16.0, 1.25, 1024.0
UNDERFLOW_FACTOR = 2.0 ** -32


def round_to_format(y, fmt):
    """Y (float32) rounded to the grid of FMT: round to nearest even at the
    spacing of each value's binade (never finer than the subnormals'), then
    clipped at the largest value, as a saturating cast to float8 and back.
    Non-finite values: NaN stays NaN, infinities clip."""
    fmax, mbits, emin = FORMATS[fmt]
    a = y.abs()
    _, e = torch.frexp(a)                        # a = m * 2^e, m in [0.5, 1)
    e = torch.clamp(e - 1, min=emin)             # the binade's exponent
    step = torch.ldexp(torch.ones_like(a), e - mbits)
    r = torch.round(a / step) * step             # exact: powers of two
    r = torch.clamp(r, max=fmax)
    return torch.copysign(r, y)


class Scaler:
    """The scale of one tensor of one layer, dynamic or delayed."""

    def __init__(self, fmt, delayed, history):
        self.fmax = FORMATS[fmt][0]
        self.delayed = delayed
        self.history = torch.zeros(history)
        self.seen = 0

    def scale(self, x):
        """The scale for X (a 0-d tensor, computed on X's device)."""
        amax = x.detach().abs().max().to(torch.float32)
        if not self.delayed or self.seen == 0:
            s = self.fmax / amax
        else:
            s = self.fmax / self.history.max()
        if self.delayed:
            self.history[self.seen % len(self.history)] = torch.where(
                torch.isfinite(amax), amax, torch.zeros_like(amax))
            self.seen += 1
        return s


def cast(x, scale, fmt):
    """X through the emulated float8 cast with SCALE, back in X's units."""
    return round_to_format(x.to(torch.float32) * scale, fmt) / scale


class _Fp8Matmul(torch.autograd.Function):
    """x @ w.T with x and w cast to e4m3 and the output's gradient to e5m2,
    each cast's statistics recorded."""

    @staticmethod
    def forward(ctx, x, w, layer):
        sx = layer.scalers["input"].scale(x)
        sw = layer.scalers["weight"].scale(w)
        stepscope.fp8_stats(layer.label + ".input", x, sx, "e4m3")
        stepscope.fp8_stats(layer.label + ".weight", w, sw, "e4m3")
        xq, wq = cast(x, sx, "e4m3"), cast(w, sw, "e4m3")
        ctx.save_for_backward(xq, wq)
        ctx.layer = layer
        return xq @ wq.t()

    @staticmethod
    def backward(ctx, g):
        xq, wq = ctx.saved_tensors
        layer = ctx.layer
        if layer.fault_active("underflow"):
            g = g * UNDERFLOW_FACTOR
        sg = layer.scalers["grad"].scale(g)
        stepscope.fp8_stats(layer.label + ".grad", g, sg, "e5m2")
        gq = cast(g, sg, "e5m2")
        return gq @ wq, gq.t() @ xq, None


class Fp8Linear(nn.Module):
    """A linear layer trained in emulated float8."""

    def __init__(self, label, n_in, n_out, args, faults, clock):
        super().__init__()
        self.label = label
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / math.sqrt(n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.faults = {kind: step for kind, lay, step in faults if lay == label}
        self.clock = clock
        delayed = {t: args.scaling == "delayed" for t in ("input", "weight", "grad")}
        delayed["input"] |= "outlier" in self.faults
        delayed["grad"] |= "underflow" in self.faults
        self.scalers = {
            "input": Scaler("e4m3", delayed["input"], args.amax_history),
            "weight": Scaler("e4m3", delayed["weight"], args.amax_history),
            "grad": Scaler("e5m2", delayed["grad"], args.amax_history),
        }

    def fault_active(self, kind):
        step = self.faults.get(kind)
        if step is None:
            return False
        return self.clock[0] == step if kind == "zero-input" else self.clock[0] >= step

    def forward(self, x):
        if self.fault_active("zero-input"):
            x = x * 0  # zeros that keep the graph (DDP wants every gradient)
        if self.fault_active("outlier"):
            x = x.clone()
            grown = OUTLIER_GROWTH ** (self.clock[0] - self.faults["outlier"])
            x[:, 0] = OUTLIER_START * min(grown, OUTLIER_CAP)
        return _Fp8Matmul.apply(x, self.weight, self) + self.bias


class Net(nn.Module):
    def __init__(self, args, faults, clock):
        super().__init__()
        self.layers = nn.ModuleList(
            Fp8Linear(f"fc{i + 1}", args.hidden, args.hidden if i + 1 < args.layers else args.outputs,
                      args, faults, clock)
            for i in range(args.layers))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


def parse_fault(kind):
    def parse(text):
        try:
            layer, rank, step = text.rsplit(":", 2)
            return kind, layer, int(rank), int(step)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{kind}: LAYER:RANK:STEP, not {text!r}")
    return parse


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    p.add_argument("--batch", type=int, default=64, help="samples per batch and rank (default 64)")
    p.add_argument("--hidden", type=int, default=64, help="layer width and input features (default 64)")
    p.add_argument("--layers", type=int, default=4, help="linear layers, fc1..fcN (default 4)")
    p.add_argument("--outputs", type=int, default=32, help="outputs of the last layer (default 32)")
    p.add_argument("--lr", type=float, default=0.01, help="SGD learning rate (default 0.01)")
    p.add_argument("--clip", type=float, default=1.0,
                   help="gradient norm clipped to this (default 1.0)")
    p.add_argument("--seed", type=int, default=0, help="seed for data and model (default 0)")
    p.add_argument("--scaling", choices=("dynamic", "delayed"), default="dynamic",
                   help="how every tensor is scaled (default dynamic)")
    p.add_argument("--amax-history", type=int, default=16, metavar="N",
                   help="steps of amax a delayed scale looks back on (default 16)")
    for kind in ("outlier", "underflow", "zero-input"):
        p.add_argument(f"--{kind}", type=parse_fault(kind), action="append", default=[],
                       metavar="LAYER:RANK:STEP")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch < 1 or args.hidden < 1 or args.layers < 1 \
            or args.outputs < 1 or args.amax_history < 1:
        p.error("--steps, --batch, --hidden, --layers, --outputs and --amax-history must be positive")
    names = {f"fc{i + 1}" for i in range(args.layers)}
    for kind, layer, _, step in args.outlier + args.underflow + args.zero_input:
        if layer not in names:
            p.error(f"--{kind}: no layer {layer!r} (the layers are fc1..fc{args.layers})")
        if step < 0:
            p.error(f"--{kind}: the step must be 0 or more")
    return args


def main(argv):
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    faults = [(kind, layer, step)
              for kind, layer, r, step in args.outlier + args.underflow + args.zero_input
              if r == rank]
    torch.manual_seed(args.seed)  # the same model and teacher on every rank
    clock = [0]                   # the step, read by the layers' faults
    model = Net(args, faults, clock)
    teacher = torch.randn(args.outputs, args.hidden) / math.sqrt(args.hidden)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    data = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)
    skipped, loss_value = 0, float("nan")
    for step in range(args.steps):
        clock[0] = step
        with stepscope.step(step):
            x = torch.randn(args.batch, args.hidden, generator=data)
            y = x @ teacher.t()
            with stepscope.phase("forward"):
                loss = nn.functional.mse_loss(ddp(x), y)
            with stepscope.phase("backward"):
                loss.backward()
            with stepscope.phase("optimizer"):
                norm = nn.utils.clip_grad_norm_(ddp.parameters(), args.clip)
                if torch.isfinite(norm):
                    opt.step()
                else:
                    skipped += 1
                opt.zero_grad(set_to_none=True)
            loss_value = loss.item()
            stepscope.metric("loss", loss_value)
    if rank == 0:
        print(f"{PROG}: rank={rank} world={world} steps={args.steps} skipped={skipped} "
              f"loss={loss_value:.6g}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
