"""ddp_checkpoint.py - a small PyTorch DDP job that saves a checkpoint every
few steps and resumes from the latest one when it starts again.

    stepscope run --auto -n 2 -- python3 examples/ddp_checkpoint.py \
        --checkpoint /tmp/ckpt.pt --crash-rank 1 --crash-step 10
    stepscope run --auto -n 2 -- python3 examples/ddp_checkpoint.py \
        --checkpoint /tmp/ckpt.pt
    stepscope goodput

An MLP on synthetic data, on the CPU, DistributedDataParallel over gloo,
SGD.  Rank 0 saves {"step": s, "model": ..., "optimizer": ...} with
torch.save after optimizer step s whenever s + 1 is a multiple of
--save-every; every rank that starts while the file exists loads it and
continues with step s + 1.  It does not import stepscope: under `stepscope
run --auto` the save is timed as the "checkpoint" phase and the load is
recognised as a resume, so the second run's steps continue the first's
numbering (docs/fault-tolerance.md).

  --crash-rank R --crash-step S   rank R raises RuntimeError at step S,
                                  unless it resumed from a checkpoint (so
                                  a restart gets past it)
  --crash-attempt A               ... only in attempt A
                                  (TORCHELASTIC_RESTART_COUNT), resumed or
                                  not
  --hang-rank R --hang-step S     rank R stops making progress (sleeps) at
                                  step S of attempt 0
  --pid-dir DIR                   each rank writes its pid to
                                  DIR/rank-R.attempt-A.pid after step 2 of
                                  its attempt (a test kills it by pid)

Each rank ends with a line RESULT {"rank", "first_step", "last_step",
"resumed_from"} (resumed_from null when it started from scratch).  Exit
status: 0 done, 1 an exception (the injected crash included).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=16, help="total optimizer steps (default 16)")
    p.add_argument("--save-every", type=int, default=4, help="save after every K steps (default 4)")
    p.add_argument("--checkpoint", default="checkpoint.pt", help="checkpoint file")
    p.add_argument("--batch", type=int, default=32, help="samples per batch and rank")
    p.add_argument("--hidden", type=int, default=256, help="hidden layer width")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="extra milliseconds of sleep per step (pacing)")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-step", type=int, default=-1)
    p.add_argument("--crash-attempt", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--pid-dir", default=None)
    return p.parse_args()


def main():
    args = parse_args()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(),
                              nn.Linear(args.hidden, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start, resumed = 0, None
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint, map_location="cpu")
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        resumed = state["step"]
        start = resumed + 1
    gen = torch.Generator().manual_seed(1000 + rank)
    loss_fn = nn.CrossEntropyLoss()
    last = None
    for step in range(start, args.steps):
        if rank == args.crash_rank and step == args.crash_step and (
                attempt == args.crash_attempt if args.crash_attempt >= 0
                else resumed is None):
            raise RuntimeError("injected crash at step %d" % step)
        if rank == args.hang_rank and step == args.hang_step and attempt == 0:
            while True:
                time.sleep(1)
        x = torch.randn(args.batch, 32, generator=gen)
        y = torch.randint(0, 4, (args.batch,), generator=gen)
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if args.step_ms:
            time.sleep(args.step_ms / 1000.0)
        last = step
        if args.pid_dir and step == start + 2:
            path = os.path.join(args.pid_dir, "rank-%d.attempt-%d.pid" % (rank, attempt))
            with open(path + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(path + ".tmp", path)
        if rank == 0 and (step + 1) % args.save_every == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"step": step, "model": model.module.state_dict(),
                        "optimizer": opt.state_dict()}, tmp)
            os.replace(tmp, args.checkpoint)
    print("RESULT " + json.dumps({"rank": rank, "first_step": start,
                                  "last_step": last, "resumed_from": resumed}),
          flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
