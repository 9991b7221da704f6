"""A tiny DDP (gloo, CPU) training script for tests/e2e/test_hang.py,
meant for `stepscope run --auto`: each step is a forward, a backward (DDP
all-reduces the gradients) and an optimizer step, then an explicit
torch.distributed.all_reduce of the loss.  One rank can be made to hang at
step --at: "sleep" sleeps forever before its forward; "gil" blocks
forever in a C call that holds the GIL (libc's pause through
ctypes.PyDLL) before its forward; "skip" leaves out that step's explicit
all_reduce (after DDP's) and sleeps forever.
Prints "STEP k" on rank 0 as it goes."""
import argparse
import ctypes
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--rank", type=int, default=-1)
p.add_argument("--at", type=int, default=-1)
p.add_argument("--fault", choices=("sleep", "gil", "skip"), default="sleep")
p.add_argument("--step-ms", type=float, default=20.0)
a = p.parse_args()



def hold_gil_forever():
    """A C call that never returns and keeps the GIL (PyDLL does not
    release it): no Python code runs in this process any more."""
    ctypes.PyDLL(None).pause()


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(a.steps):
    faulty = rank == a.rank and step == a.at
    if faulty and a.fault == "sleep":
        time.sleep(10 ** 6)
    if faulty and a.fault == "gil":
        hold_gil_forever()
    time.sleep(a.step_ms / 1000.0)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if faulty and a.fault == "skip":
        # gloo aborts when a skipped collective pairs with another of a
        # different size, so the rank that skips goes no further.
        time.sleep(10 ** 6)
    dist.all_reduce(loss.detach())
dist.barrier()
dist.destroy_process_group()
