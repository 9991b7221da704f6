"""The worked example of docs/debug.md ("A worked example: a diagnosed
hang"): a 4-rank DDP job (gloo, CPU) whose rank 2 blocks in its data
loading at step 10, `time.sleep` standing in for a stuck file system.
Run it under `stepscope run -n 4 --auto --hang-timeout 5 --on-hang stop`
(the command in docs/debug.md): the hang is found, named and stopped."""
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_batch(step, rank):
    if rank == 2 and step == 10:
        time.sleep(100000)          # a data loader that never returns
    return torch.randn(64, 64)


def train():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(100):
        x = load_batch(step, rank)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


train()
