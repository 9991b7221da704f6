"""embedding_train.py: a recommendation-style model whose embedding table
is sharded by rows over the ranks, instrumented with stepscope.shard_load.

The table (--rows rows of --dim floats) is cut into one contiguous block
of rows per rank (row-wise sharding): shard i, rows [i * rows / world,
(i + 1) * rows / world), lives on rank i.  Each rank draws a batch of
bags of ids from a Zipf distribution over the ids' popularity (exponent
--zipf), sends each id to the rank whose shard holds it
(torch.distributed.all_to_all_single, uneven splits), which gathers the
rows and sends them back; the rank sums each bag's rows (an embedding
bag), runs a small dense network on the sums, and the gradients go back
the same way to the shards.  The dense network is averaged with one
all-reduce per step.

Every step each rank records how many lookups its batch made in each
shard (stepscope.shard_load, a host int64 tensor from torch.bincount).
The controller sums them per shard and names a table whose lookups fall
on one shard (finding embedding_imbalance, with the shard's rank and the
share it served; docs/workloads.md).

Which rows are popular: by default the ids in popularity order are dealt
to the shards in turn (the k-th most popular row is in shard k mod
world), so each shard holds an even part of the hot rows; with the
default exponent shard 0 still serves 30 % of the lookups (25 % if
even), 1.2 x the mean shard, since it holds the most popular row.  With
--hot-shard K the most popular rows are the rows of shard K (a table
sorted by popularity, as a frequency-ordered vocabulary is), so shard K
serves most of the lookups (87 % with 4 shards and the defaults).

    stepscope run -n 4 -- python3 examples/embedding_train.py --steps 40
    stepscope run -n 4 -- python3 examples/embedding_train.py --steps 40 \\
        --hot-shard 2

Phases per step: forward, with lookup (the shards gathering rows) and
exchange (the all-to-all exchanges) in it; backward; allreduce;
optimizer.
"""
import argparse
import sys

import torch
import torch.distributed as dist
from torch import nn

import stepscope
from all_to_all import AllToAll

PROG = "embedding_train.py"
TABLE = "items"


def zipf_sampler(rows, exponent):
    """Probabilities of the popularity ranks 0..rows-1: rank k has weight
    1 / (k + 1) ** EXPONENT."""
    w = 1.0 / torch.arange(1, rows + 1, dtype=torch.float64) ** exponent
    return (w / w.sum()).to(torch.float32)


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    p.add_argument("--rows", type=int, default=40000, help="rows of the table (default 40000)")
    p.add_argument("--dim", type=int, default=64, help="embedding width (default 64)")
    p.add_argument("--batch", type=int, default=256, help="bags per rank and step (default 256)")
    p.add_argument("--bag", type=int, default=32, help="ids per bag (default 32)")
    p.add_argument("--zipf", type=float, default=1.0,
                   help="exponent of the ids' Zipf distribution (default 1.0)")
    p.add_argument("--hot-shard", type=int, default=-1, metavar="K",
                   help="put the most popular rows in shard K (default: spread)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed for model and data (default 0)")
    args = p.parse_args(argv)
    if min(args.steps, args.rows, args.dim, args.batch, args.bag) < 1 or args.zipf < 0:
        p.error("sizes and counts must be positive, --zipf 0 or more")
    return args


def main(argv):
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.rows % world:
        raise SystemExit(f"{PROG}: --rows ({args.rows}) must be a multiple of the world "
                         f"size ({world})")
    if args.hot_shard >= world:
        raise SystemExit(f"{PROG}: --hot-shard: shards are 0..{world - 1}")
    per = args.rows // world
    # popularity rank -> row: the same on every rank
    k = torch.arange(args.rows)
    if args.hot_shard >= 0:
        row_of = (k + args.hot_shard * per) % args.rows
    else:
        row_of = (k % world) * per + k // world
    probs = zipf_sampler(args.rows, args.zipf)
    torch.manual_seed(args.seed * 1000 + rank + 1)
    shard = nn.Parameter(torch.randn(per, args.dim) * 0.1)  # rows [rank*per, ...)
    torch.manual_seed(args.seed)
    dense = nn.Sequential(nn.Linear(args.dim, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD([shard, *dense.parameters()], lr=args.lr)
    data = torch.Generator().manual_seed(args.seed * 1000 + rank + 7)
    loss_value = float("nan")
    for step in range(args.steps):
        with stepscope.step(step):
            n = args.batch * args.bag
            ids = row_of[torch.multinomial(probs, n, replacement=True, generator=data)]
            y = (ids.reshape(args.batch, args.bag) % 7 == 0).float().mean(1, keepdim=True)
            with stepscope.phase("forward"):
                owner = ids // per
                counts = torch.bincount(owner, minlength=world)
                stepscope.shard_load(TABLE, counts)
                order = owner.argsort()
                with stepscope.phase("exchange"):
                    recv = torch.empty_like(counts)
                    dist.all_to_all_single(recv, counts)
                    send_l, recv_l = counts.tolist(), recv.tolist()
                    asked = torch.empty(sum(recv_l), dtype=torch.long)
                    dist.all_to_all_single(asked, ids[order], recv_l, send_l)
                with stepscope.phase("lookup"):
                    rows = shard[asked - rank * per]
                with stepscope.phase("exchange"):
                    got = AllToAll.apply(rows, send_l, recv_l)
                bag_of = order // args.bag
                pooled = torch.zeros(args.batch, args.dim).index_add(0, bag_of, got)
                loss = nn.functional.mse_loss(dense(pooled / args.bag), y)
            with stepscope.phase("backward"):
                loss.backward()
            with stepscope.phase("allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in dense.parameters()])
                dist.all_reduce(flat)
                flat /= world
                at = 0
                for p in dense.parameters():
                    k = p.numel()
                    p.grad.copy_(flat[at:at + k].view_as(p))
                    at += k
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
