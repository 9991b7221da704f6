"""A small DDP training script for the auto-mode tests, written as an
unmodified PyTorch script would be (it never imports stepscope unless told
to mix in explicit steps).

Runs under `stepscope run --auto -n N -- python3 train_ddp.py [options]` on
CPU with gloo: it calls init_process_group itself from the torchrun
variables the controller sets.  At the end it prints one line per rank,
"RESULT {json}", with what the tests cannot read from the report.
"""
import argparse
import contextlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps")
    ap.add_argument("--accum", type=int, default=1,
                    help="forward/backward passes per optimizer step")
    ap.add_argument("--no-sync", action="store_true",
                    help="accumulate under DDP.no_sync() but the last pass")
    ap.add_argument("--workers", type=int, default=0,
                    help="DataLoader workers")
    ap.add_argument("--explicit", action="store_true",
                    help="wrap each optimizer step in stepscope.step()")
    ap.add_argument("--user-hook", action="store_true",
                    help="register the script's own DDP communication hook")
    ap.add_argument("--builtin-hook", action="store_true",
                    help="register DDP's built-in ALLREDUCE hook")
    ap.add_argument("--static-graph", action="store_true",
                    help="DistributedDataParallel(static_graph=True)")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    batches = args.steps * args.accum
    data = TensorDataset(torch.randn(batches * 8, 16),
                         torch.randn(batches * 8, 1))
    loader = DataLoader(data, batch_size=8, num_workers=args.workers)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)),
        static_graph=args.static_graph)
    user_hook_calls = [0]
    if args.user_hook:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def counting_hook(state, bucket):
            user_hook_calls[0] += 1
            return default_hooks.allreduce_hook(state, bucket)

        model.register_comm_hook(None, counting_hook)
    if args.builtin_hook:
        model._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()

    it = iter(loader)
    for _ in range(args.steps):
        if args.explicit:
            import stepscope
            ctx = stepscope.step()
        else:
            ctx = None
        if ctx:
            ctx.__enter__()
        for micro in range(args.accum):
            x, y = next(it)
            skip = args.no_sync and micro < args.accum - 1
            with model.no_sync() if skip else contextlib.nullcontext():
                loss = loss_fn(model(x), y) / args.accum
                loss.backward()
        opt.step()
        opt.zero_grad()
        if ctx:
            ctx.__exit__(None, None, None)

    # Both ranks end with the same parameters: the all-reduce still works.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    dist.destroy_process_group()
    print("RESULT " + json.dumps({
        "rank": int(os.environ["RANK"]),
        "params_equal": same,
        "user_hook_calls": user_hook_calls[0],
        "cuda_initialized": torch.cuda.is_initialized(),
        "auto_loaded": "stepscope.auto" in sys.modules,
    }), flush=True)


if __name__ == "__main__":
    main()
