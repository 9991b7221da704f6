"""all_to_all.py - the token and lookup exchange of examples/moe_train.py
and examples/embedding_train.py: torch.distributed.all_to_all_single with
uneven splits as an autograd function, whose gradient goes back the other
way (the gloo of torch 1.13 has all_to_all_single but no list all_to_all).
Imported by those scripts from their own directory."""

import torch
import torch.distributed as dist


class AllToAll(torch.autograd.Function):
    """all_to_all_single with uneven splits; its gradient goes back the
    other way."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits):
        ctx.splits = (out_splits, in_splits)
        out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits)
        return back, None, None
