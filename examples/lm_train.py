"""lm_train.py - a small transformer language model trained with DDP, the
way such scripts are commonly written: token embeddings, pre-norm blocks
of `nn.MultiheadAttention` and a GELU MLP, a cross-entropy loss computed
outside the model, AdamW, a cosine learning-rate schedule and gradient
clipping.  It knows nothing about stepscope; run it under `--auto`:

    stepscope run --auto -n 4 -- python3 examples/lm_train.py --steps 150
    stepscope run --auto -n 4 -- python3 examples/lm_train.py --steps 150 \\
        --sleep-rank 1 --sleep-ms 20 --sleep-where block

A rank can be made to wait of its own accord (a sleep: a slow read, a
lock), which costs it no CPU time: `--sleep-where block` sleeps inside
each block's forward (split over the blocks), `loss` between the model's
forward and the backward pass (where the loss and its bookkeeping run,
outside every module), `step` after the optimizer step.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

WHERE = ("block", "loss", "step")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=150, help="optimizer steps (default 150)")
    p.add_argument("--batch", type=int, default=8, help="sequences per batch and rank (default 8)")
    p.add_argument("--seq", type=int, default=16, help="tokens per sequence (default 16)")
    p.add_argument("--vocab", type=int, default=100, help="vocabulary size (default 100)")
    p.add_argument("--dim", type=int, default=64, help="model width (default 64)")
    p.add_argument("--blocks", type=int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    p.add_argument("--sleep-rank", type=int, default=-1, metavar="R",
                   help="the rank that sleeps every step (default none)")
    p.add_argument("--sleep-ms", type=float, default=20.0, metavar="MS",
                   help="how long it sleeps per step (default 20)")
    p.add_argument("--sleep-where", choices=WHERE, default="block",
                   help="where it sleeps: " + ", ".join(WHERE) + " (default block)")
    args = p.parse_args()
    if args.steps < 1 or args.batch < 1 or args.seq < 2 or args.blocks < 1:
        p.error("--steps, --batch and --blocks must be at least 1, --seq at least 2")
    if args.dim % args.heads:
        p.error(f"--dim {args.dim} is not a multiple of --heads {args.heads}")
    if args.sleep_ms < 0:
        p.error("--sleep-ms must not be negative")
    return args


class Tokens(Dataset):
    """Random token sequences, the same for a given index on every run."""

    def __init__(self, n, seq, vocab):
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, self.vocab, (self.seq + 1,), generator=g)


class Block(nn.Module):
    def __init__(self, dim, heads, sleep_s):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.sleep_s = sleep_s

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return x + self.mlp(self.norm2(x))


class LM(nn.Module):
    def __init__(self, args, sleep_s):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads, sleep_s)
                                    for _ in range(args.blocks))
        self.head = nn.Linear(args.dim, args.vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    sleeps = rank == args.sleep_rank
    sleep_s = args.sleep_ms / 1000.0 if sleeps else 0.0
    model = DDP(LM(args, sleep_s / args.blocks if args.sleep_where == "block" else 0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.steps)
    data = Tokens(args.steps * args.batch * dist.get_world_size(), args.seq, args.vocab)
    loader = DataLoader(data, batch_size=args.batch, sampler=DistributedSampler(data),
                        num_workers=args.workers)
    loss_fn = nn.CrossEntropyLoss()
    batches = iter(loader)
    for step in range(args.steps):
        tokens = next(batches)
        logits = model(tokens[:, :-1])
        loss = loss_fn(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
        if sleeps and args.sleep_where == "loss":
            time.sleep(sleep_s)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if sleeps and args.sleep_where == "step":
            time.sleep(sleep_s)
        if rank == 0 and (step + 1) % 50 == 0:
            print(f"step {step + 1}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
