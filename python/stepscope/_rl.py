"""stepscope._rl: the batch of a reinforcement-learning post-training step.

GRPO-style trainers sample GROUP_SIZE completions per prompt (a group),
score each with a reward, and turn the rewards into group-relative
advantages.  rl_batch(rewards, lengths, group_size, advantages=None)
records, for the open step of this rank, the batch's rewards, completion
lengths (tokens) and, when given, advantages, as three vectors of the
vector channel, one entry per completion in group order:

  rl.reward      the rewards
  rl.length      the completion lengths, in tokens
  rl.advantage   the advantages (only when given)

and the metric rl.group_size.  The controller derives the statistics (per
rank and step, and over all ranks: reward mean and std, the fraction of
groups whose rewards are all equal, advantage mean and std, completion
length mean and max, the share of the tokens in the longest completions)
and judges them (src/controller/analysis/detect_rl.c, docs/rl.md).

Cost: no statistics are computed here.  A list or tuple of numbers is
converted in C; a CPU tensor is read in place (after a cast to float64
when it is not one); a tensor on a device is not copied now: it joins the
step's device vectors, which stepscope.values copies to the host once, at
the end of the step.  A vector keeps at most the recorder's cap of values
(1024 per rank and step; the rest is counted as truncated).
"""
import sys

from . import _native

VECTORS = ("rl.reward", "rl.length", "rl.advantage")
GROUP_SIZE = "rl.group_size"


def _size(x, what):
    """The number of entries of X (a sequence or a tensor of at most one
    dimension), or TypeError / ValueError naming WHAT."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dim() > 1:
            raise ValueError("stepscope.rl_batch: %s must be 1-D, not %d-D"
                             % (what, x.dim()))
        return x.numel()
    try:
        return len(x)
    except TypeError:
        raise TypeError("stepscope.rl_batch: %s must be a sequence of "
                        "numbers or a 1-D tensor, not %s"
                        % (what, type(x).__name__)) from None


def check_args(rewards, lengths, group_size, advantages):
    """Raises TypeError or ValueError with a clear message for arguments
    rl_batch cannot record; returns the batch size."""
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError("stepscope.rl_batch: group_size must be an int, not "
                        "%s" % type(group_size).__name__)
    if group_size < 1:
        raise ValueError("stepscope.rl_batch: group_size must be at least "
                         "1, not %d" % group_size)
    n = _size(rewards, "rewards")
    if _size(lengths, "lengths") != n:
        raise ValueError("stepscope.rl_batch: %d rewards but %d lengths"
                         % (n, _size(lengths, "lengths")))
    if advantages is not None and _size(advantages, "advantages") != n:
        raise ValueError("stepscope.rl_batch: %d rewards but %d advantages"
                         % (n, _size(advantages, "advantages")))
    if n % group_size:
        raise ValueError("stepscope.rl_batch: %d completions are not whole "
                         "groups of %d" % (n, group_size))
    return n


def record(values, rewards, lengths, group_size, advantages):
    """Hands the batch to VALUES (stepscope.values) and the group size to
    the metric channel."""
    values("rl.reward", rewards)
    values("rl.length", lengths)
    if advantages is not None:
        values("rl.advantage", advantages)
    _native.metric(GROUP_SIZE, group_size)
