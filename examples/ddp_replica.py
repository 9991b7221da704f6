"""ddp_replica.py - a small PyTorch DDP job whose replicas can drift apart
on purpose: a bit flipped in one parameter on one rank (a simulated silent
data corruption), a rank whose optimizer update is lost, a perturbed
weight, another seed.

    stepscope run --auto --checksum-every 1 -n 4 -- python3 \
        examples/ddp_replica.py --flip-rank 2 --flip-step 7 \
        --flip-param blocks.1.fc2.weight
    stepscope report

The model is a residual MLP (embed, blocks.K.fc1/.fc2, head) on synthetic
data: a fixed random teacher labels Gaussian inputs drawn from a generator
seeded by (--seed, rank, step), so two runs with the same seed compute the
same bits.  CPU, DistributedDataParallel over gloo, SGD with momentum.  It
does not import stepscope unless --explicit or --groups asks for it.

  --flip-rank R --flip-step S --flip-param NAME [--flip-bit B]
      [--flip-index I]
      at the start of step S, on rank R, bit B (default 22, a mantissa
      bit of a float32) of element I (default 0) of parameter NAME is
      inverted.  "all" as NAME lists the parameters and exits.
  --skip-rank R --skip-step S
      rank R's optimizer update of step S is lost: its learning rate is 0
      for that one optimizer.step() (the step still counts), as when one
      rank's gradient scaler skips a step the others take
  --perturb-rank R --perturb-step S [--perturb-eps E]
      at the start of step S rank R adds E (default 1e-6) to the first
      element of the first parameter
  --groups "0,1;2,3"
      DDP within each group (torch.distributed.new_group), each group
      seeded differently (seed + its first rank): the groups hold
      different parameters, the replicas within one the same; declared
      with stepscope.replica_group
  --explicit
      records with the stepscope API: steps by hand and
      stepscope.checksum(model, optimizer) every --checksum-every steps
  --checkpoint DIR --save-every K [--step-ms MS]
      rank 0 saves {"step", "model", "optimizer"} to DIR/step-S.pt after
      optimizer step S whenever S + 1 is a multiple of K; a job that
      starts with checkpoints in DIR resumes from the latest one, or,
      after `stepscope run --on-divergence restart`, from the latest one
      taken before the step in STEPSCOPE_DIVERGED_AT.  Rank 0 chooses and
      broadcasts its choice (only node 0's ranks see STEPSCOPE_DIVERGED_AT).
      The injected faults (--flip-*, --skip-*, --perturb-*) happen in the
      job's first attempt only (TORCHELASTIC_RESTART_COUNT 0): a transient
      corruption.  --step-ms sleeps that long in every step (pacing).

Rank 0 ends with a line RESULT {"rank", "steps", "loss", "resumed_from"}
(resumed_from null when it started from scratch).
"""
import argparse
import json
import os
import re
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flip-rank", type=int, default=-1)
    p.add_argument("--flip-step", type=int, default=-1)
    p.add_argument("--flip-param", default="")
    p.add_argument("--flip-bit", type=int, default=22)
    p.add_argument("--flip-index", type=int, default=0)
    p.add_argument("--skip-rank", type=int, default=-1)
    p.add_argument("--skip-step", type=int, default=-1)
    p.add_argument("--perturb-rank", type=int, default=-1)
    p.add_argument("--perturb-step", type=int, default=-1)
    p.add_argument("--perturb-eps", type=float, default=1e-6)
    p.add_argument("--groups", default="")
    p.add_argument("--undeclared", action="store_true")
    p.add_argument("--explicit", action="store_true")
    p.add_argument("--checksum-every", type=int, default=1,
                   help="with --explicit: steps between checksums (default 1)")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory")
    p.add_argument("--save-every", type=int, default=4)
    p.add_argument("--step-ms", type=float, default=0.0)
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden)
        self.fc2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Linear(a.features, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden) for _ in range(a.blocks))
        self.head = nn.Linear(a.hidden, a.classes)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def flip_bit(param, index, bit):
    """Inverts bit BIT of element INDEX of PARAM, in place."""
    with torch.no_grad():
        flat = param.data.view(-1)
        raw = flat[index:index + 1].view(torch.int32)
        raw ^= (1 << bit) if bit < 31 else -(1 << 31)


def resume_step(directory, rank):
    """The step of the checkpoint to resume from (-1: none), rank 0's
    choice broadcast to every rank: the latest in DIRECTORY, or the latest
    before STEPSCOPE_DIVERGED_AT when the job restarts on a divergence."""
    choice = torch.tensor([-1], dtype=torch.int64)
    if rank == 0 and directory and os.path.isdir(directory):
        limit = os.environ.get("STEPSCOPE_DIVERGED_AT")
        steps = [int(m.group(1)) for m in
                 (re.fullmatch(r"step-(\d+)\.pt", f)
                  for f in os.listdir(directory)) if m]
        if limit is not None:
            steps = [s for s in steps if s < int(limit)]
        choice[0] = max(steps, default=-1)
    dist.broadcast(choice, 0)
    return int(choice[0])


def save(directory, step, model, opt):
    """Rank 0's checkpoint of STEP, written under a temporary name and
    renamed, so that a job stopped meanwhile leaves none half written."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "step-%d.pt" % step)
    torch.save({"step": step, "model": model.module.state_dict(),
                "optimizer": opt.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)


def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    if a.flip_param == "all":
        for n, _ in Net(a).named_parameters():
            print(n)
        return 0
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    ss = None
    if a.explicit or (a.groups and not a.undeclared):
        import stepscope as ss
    seed, pg = a.seed, None
    if a.groups:
        groups = [[int(r) for r in g.split(",")] for g in a.groups.split(";")]
        pgs = [dist.new_group(g) for g in groups]  # every rank makes every one
        for g, q in zip(groups, pgs):
            if rank in g:
                pg, seed = q, a.seed + g[0]
                if ss is not None:
                    ss.replica_group(g)
    torch.manual_seed(seed)
    teacher = torch.randn(a.features, a.classes)
    model = DDP(Net(a), process_group=pg)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    params = dict(model.module.named_parameters())
    loss_v = float("nan")
    start = resumed = resume_step(a.checkpoint, rank)
    if resumed >= 0:
        state = torch.load(os.path.join(a.checkpoint, "step-%d.pt" % resumed),
                           map_location="cpu")
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        a.flip_rank = a.skip_rank = a.perturb_rank = -1  # transient faults
    for step in range(start + 1, a.steps):
        cm = ss.step(step) if a.explicit else None
        if cm is not None:
            cm.__enter__()
        if a.step_ms:
            time.sleep(a.step_ms / 1000.0)
        if rank == a.flip_rank and step == a.flip_step:
            flip_bit(params[a.flip_param], a.flip_index, a.flip_bit)
        if rank == a.perturb_rank and step == a.perturb_step:
            with torch.no_grad():
                next(iter(params.values())).view(-1)[0] += a.perturb_eps
        g = torch.Generator().manual_seed(seed * 100003 + rank * 1009 + step)
        x = torch.randn(a.batch, a.features, generator=g)
        y = (x @ teacher).argmax(dim=1)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if rank == a.skip_rank and step == a.skip_step:
            lrs = [g["lr"] for g in opt.param_groups]
            for g in opt.param_groups:
                g["lr"] = 0.0
            opt.step()
            for g, lr in zip(opt.param_groups, lrs):
                g["lr"] = lr
        else:
            opt.step()
        loss_v = loss.item()
        if a.checkpoint and rank == 0 and (step + 1) % a.save_every == 0:
            save(a.checkpoint, step, model, opt)
        if cm is not None:
            ss.metric("loss", loss_v)
            if a.checksum_every > 0 and step % a.checksum_every == 0:
                ss.checksum(model.module, opt)
            cm.__exit__(None, None, None)
    if rank == 0:
        print("RESULT " + json.dumps({"rank": rank, "steps": a.steps,
                                      "loss": loss_v,
                                      "resumed_from": resumed
                                      if resumed >= 0 else None}),
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
