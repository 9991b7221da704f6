"""moe_train.py: a mixture-of-experts transformer with expert parallelism,
instrumented with stepscope.expert_load and stepscope.expert_placement.

Each rank runs the same small transformer (--layers blocks of
self-attention and a mixture-of-experts feed-forward) on its own batch.
Each block's router picks the --top-k experts of --experts for every
token; the experts are spread over the ranks (expert e on rank
e // (experts / world)), so the tokens travel to their expert's rank and
back with torch.distributed.all_to_all_single (gloo has it; gloo lacks the
list form, all_to_all) with uneven splits, autograd through both ways.
The dense parameters are averaged with one all-reduce per step; an
expert's parameters live on its rank alone.

Every step each rank records, per layer, how many tokens its router sent
to each global expert (stepscope.expert_load, a host int64 tensor from
torch.bincount); once, each layer's placement (stepscope.expert_placement).
The controller sums the ranks' loads per expert and names a layer whose
router favours a few experts (finding expert_imbalance), and explains a
rank that is late because the experts it hosts receive more tokens
(docs/workloads.md).

    stepscope run -n 4 -- python3 examples/moe_train.py --steps 40
    stepscope run -n 4 -- python3 examples/moe_train.py --steps 40 \\
        --skew-layer 1 --skew-experts 6,7

--skew-experts adds --skew to those experts' router logits in layer
--skew-layer (every rank alike), so that the router sends them several
times their share of the tokens.  Phases per step: forward (attention,
router in it), dispatch and combine (the all-to-all exchanges), moe (the
experts' forward), backward, allreduce, optimizer.  No sync point is
recorded: the ranks wait for the one hosting the busiest experts in
combine, and stepscope finds that phase from the data.
"""
import argparse
import math
import sys

import torch
import torch.distributed as dist
from torch import nn

import stepscope
from all_to_all import AllToAll

PROG = "moe_train.py"


class Experts(nn.Module):
    """This rank's experts of one layer: a two-layer MLP each."""

    def __init__(self, n_local, dim, hidden):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n_local, dim, hidden) / math.sqrt(dim))
        self.w2 = nn.Parameter(torch.randn(n_local, hidden, dim) / math.sqrt(hidden))

    def forward(self, x, local_ids):
        out = torch.empty_like(x)
        for e in range(self.w1.shape[0]):
            sel = (local_ids == e).nonzero(as_tuple=True)[0]
            if sel.numel():
                h = torch.relu(x[sel] @ self.w1[e])
                out = out.index_copy(0, sel, h @ self.w2[e])
        return out


class MoEBlock(nn.Module):
    """Self-attention, then a top-k routed mixture of experts, with the
    experts spread over the ranks."""

    def __init__(self, layer, args, rank, world):
        super().__init__()
        self.layer, self.args, self.rank, self.world = layer, args, rank, world
        d = args.dim
        self.attn = nn.MultiheadAttention(d, args.heads, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.router = nn.Linear(d, args.experts, bias=False)
        with torch.no_grad():  # rows of one norm: no expert favoured at first
            w = self.router.weight
            w.mul_(1.0 / w.norm(dim=1, keepdim=True))
        self.per_rank = args.experts // world
        self.experts = Experts(self.per_rank, d, args.expert_hidden)
        bias = torch.zeros(args.experts)
        if layer == args.skew_layer:
            for e in args.skew_experts:
                bias[e] = args.skew
        self.register_buffer("skew_bias", bias)
        stepscope.expert_placement(layer, [e // self.per_rank
                                           for e in range(args.experts)])

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        tokens = self.norm2(x).reshape(b * s, d)
        logits = self.router(tokens) + self.skew_bias
        probs = torch.softmax(logits, dim=-1)
        gate, chosen = probs.topk(self.args.top_k, dim=-1)  # (n, k)
        flat = chosen.reshape(-1)
        counts = torch.bincount(flat, minlength=self.args.experts)
        stepscope.expert_load(self.layer, counts)
        # the token copies sorted by expert, hence by destination rank
        order = flat.argsort()
        src = order // self.args.top_k
        send = counts.reshape(self.world, self.per_rank).sum(1)
        with stepscope.phase("dispatch"):
            recv = torch.empty_like(send)
            dist.all_to_all_single(recv, send)
            send_l, recv_l = send.tolist(), recv.tolist()
            # the local expert travels as one more column (exact in float)
            local = (flat[order] % self.per_rank).to(tokens.dtype).unsqueeze(1)
            x_out = AllToAll.apply(torch.cat([tokens[src], local], 1),
                                   recv_l, send_l)
        with stepscope.phase("moe"):
            y = self.experts(x_out[:, :-1], x_out[:, -1].detach().long())
        with stepscope.phase("combine"):
            back = AllToAll.apply(y, send_l, recv_l)
        weighted = back * gate.reshape(-1)[order].unsqueeze(1)
        moe = torch.zeros_like(tokens).index_add(0, src, weighted)
        return x + moe.reshape(b, s, d)


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--experts", type=int, default=8, help="experts per layer (default 8)")
    p.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    p.add_argument("--dim", type=int, default=64, help="model width (default 64)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--expert-hidden", type=int, default=512,
                   help="an expert's hidden width (default 512)")
    p.add_argument("--batch", type=int, default=4, help="sequences per rank (default 4)")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--lr", type=float, default=0.01, help="SGD learning rate (default 0.01)")
    p.add_argument("--seed", type=int, default=0, help="seed for model and data (default 0)")
    p.add_argument("--skew-layer", type=int, default=-1, metavar="L",
                   help="the layer whose router is skewed (default none)")
    p.add_argument("--skew-experts", default="", metavar="E1,E2",
                   help="the experts the skewed router favours")
    p.add_argument("--skew", type=float, default=2.0,
                   help="what is added to their router logits (default 2.0)")
    args = p.parse_args(argv)
    try:
        args.skew_experts = [int(e) for e in args.skew_experts.split(",") if e]
    except ValueError:
        p.error(f"--skew-experts: comma-separated expert numbers, not {args.skew_experts!r}")
    if min(args.steps, args.layers, args.experts, args.top_k, args.dim, args.batch,
           args.seq, args.expert_hidden) < 1:
        p.error("sizes and counts must be positive")
    if args.top_k > args.experts:
        p.error("--top-k must not exceed --experts")
    if any(not 0 <= e < args.experts for e in args.skew_experts):
        p.error(f"--skew-experts: experts are 0..{args.experts - 1}")
    if args.skew_experts and not 0 <= args.skew_layer < args.layers:
        p.error(f"--skew-layer: layers are 0..{args.layers - 1}")
    return args


def main(argv):
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.experts % world:
        raise SystemExit(f"{PROG}: --experts ({args.experts}) must be a multiple of "
                         f"the world size ({world})")
    torch.manual_seed(args.seed)
    # the dense parameters are the same on every rank; the experts differ
    model = nn.ModuleList(MoEBlock(i, args, rank, world) for i in range(args.layers))
    for blk in model:
        torch.manual_seed(args.seed * 1000 + rank + 1)
        for p in blk.experts.parameters():
            with torch.no_grad():
                p.normal_(0, 1 / math.sqrt(p.shape[1]))
    dense = [p for n, p in model.named_parameters() if ".experts." not in n]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    data = torch.Generator().manual_seed(args.seed * 1000 + rank + 7)
    teacher = torch.randn(args.dim, args.dim, generator=torch.Generator().manual_seed(3))
    loss_value = float("nan")
    for step in range(args.steps):
        with stepscope.step(step):
            x = torch.randn(args.batch, args.seq, args.dim, generator=data)
            target = torch.tanh(x @ teacher)
            with stepscope.phase("forward"):
                h = x
                for blk in model:
                    h = blk(h)
                loss = nn.functional.mse_loss(h, target)
            with stepscope.phase("backward"):
                loss.backward()
            with stepscope.phase("allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in dense])
                dist.all_reduce(flat)
                flat /= world
                at = 0
                for p in dense:
                    n = p.numel()
                    p.grad.copy_(flat[at:at + n].view_as(p))
                    at += n
            with stepscope.phase("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            loss_value = loss.item()
            stepscope.metric("loss", loss_value)
    if rank == 0:
        print(f"{PROG}: rank={rank} world={world} steps={args.steps} "
              f"loss={loss_value:.6g}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
