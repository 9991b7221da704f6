"""stepscope: step-aligned, rank-aware telemetry for distributed training.

The Python face of libstepscope, the per-rank recorder.  Under a controller
(`stepscope run`, which sets STEPSCOPE_ADDR) every call records an event
that the recorder folds into one record per training step; anywhere else
every call is a no-op costing a few tens of nanoseconds.

    import stepscope

    for batch in loader:
        with stepscope.step():                 # steps 0, 1, 2, ...
            with stepscope.phase("forward"):
                loss = model(batch)
            ...
            stepscope.sync("allreduce")        # arrival at a collective
            stepscope.metric("loss", loss.item())
            stepscope.values("grad_norms", norms)  # a vector per step

`phase(name)` and `step(n)` are context managers and decorators, both
implemented in C (stepscope/native_*.c) so that a phase costs well under a
microsecond.  Every error from the C library raises StepscopeError with its
message; arguments of the wrong type raise TypeError.

`stepscope run --auto` instruments unmodified PyTorch scripts; see
stepscope/auto.py and docs/python.md.
"""
import functools
import sys

try:
    from . import _native
except ImportError as e:  # the extension is built by CMake, see docs/python.md
    raise ImportError(
        "stepscope: the native extension stepscope._native is not built or "
        "not importable (%s); run `make` at the top of the repository, or "
        "put the build's python/ directory first on PYTHONPATH" % e) from e

from ._native import (  # noqa: E402  (after the helpful ImportError)
    Phase,
    Step,
    StepscopeError,
    checkpoint_saved,
    counters,
    enabled,
    memory_record,
    memory_sample,
    metric,
    now_ns,
    phase,
    phase_begin,
    phase_end,
    phase_span,
    resumed_from,
    step,
    step_begin,
    step_end,
    sync,
    values_labels,
)

__version__ = _native.__version__

from . import _fp8, _stacks  # noqa: E402
from ._checksum import checksum, replica_group  # noqa: E402
from ._pipeline import Microbatch, microbatch, pipeline  # noqa: E402
from . import _workloads as _wl  # noqa: E402
from . import _rl  # noqa: E402  (reinforcement learning: rl_batch)

_stacks.install()

__all__ = [
    "Phase", "Step", "StepscopeError", "checkpoint_saved", "checksum",
    "counters",
    "enabled", "expert_load", "expert_placement", "shard_load",
    "fp8_stats", "memory_record", "memory_sample", "metric",
    "Microbatch", "microbatch", "pipeline",
    "now_ns", "phase",
    "phase_begin", "phase_end", "phase_span", "replica_group",
    "resumed_from", "rl_batch", "step",
    "step_begin",
    "step_end", "sync", "values", "values_labels",
]

# Labels last sent per vector name (values(labels=...)), so that passing
# the same labels every step costs a comparison.
_labels_sent = {}
# Vectors of device tensors of the open step: (name, flat tensor), copied
# to the host together when the step ends (_flush_device_values).
_device_values = []


def values(name, x, labels=None):
    """Records the vector X under NAME for the current step.

    X is a sequence of numbers, an object with a buffer of doubles, or a
    tensor of at most one dimension.  A CPU tensor is read where it lies
    (as float64).  A tensor on a device is not copied now: the vectors of
    a step's device tensors are concatenated on the device and copied to
    the host once, when the step ends, so recording them never waits for
    the device.  The last vector of a name in a step wins; NaN and
    infinities are kept.  LABELS, a sequence of str, names the indices
    (sent once, and again when they change).  See docs/python.md."""
    if labels is not None:
        labels = list(labels)
        if _labels_sent.get(name) != labels:
            values_labels(name, labels)
            _labels_sent[name] = labels
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dim() > 1:
            raise ValueError("stepscope.values wants a 1-D tensor, not %d-D"
                             % x.dim())
        x = x.detach().reshape(-1)
        if x.device.type != "cpu":
            if _native._current_step() is not None:
                _device_values.append((name, x))
                _native._values_pending()
            return
        if x.dtype != torch.float64:
            x = x.to(torch.float64)
        x = x.contiguous()
        _native._values_ptr(name, x.data_ptr(), x.numel(), x)
        return
    _native.values(name, x)


def _flush_device_values():
    """Copies the open step's device vectors to the host, one copy per
    device, and records them (called by the native layer before the step
    ends).  The step's float8 statistics (fp8_stats) become vectors first,
    so that they travel in the same copy."""
    global _device_values
    _fp8.flush(values)
    _wl.flush(_native._values_ptr)
    pending, _device_values = _device_values, []
    torch = sys.modules.get("torch")
    if not pending or torch is None:
        return
    by_device = {}
    for name, t in pending:
        by_device.setdefault(t.device, []).append((name, t))
    for items in by_device.values():
        flat = torch.cat([t.to(torch.float64) for _, t in items]).cpu()
        base, at = flat.data_ptr(), 0
        for name, t in items:
            n = t.numel()
            _native._values_ptr(name, base + 8 * at, n, flat)
            at += n


_native._set_values_flush(_flush_device_values)


def fp8_stats(name, tensor, scale, fmt="e4m3"):
    """Records the float8 health of TENSOR cast with SCALE to FMT in this
    step under NAME ("LAYER.input", "LAYER.weight", "LAYER.grad"): its amax,
    the scale, the fraction of the elements the cast clips, the fraction of
    its non-zero elements that become zero, and whether the scale is a
    positive finite number.  SCALE is a number or a one-element tensor
    (tensorwise scaling); FMT is "e4m3", "e5m2", "e4m3fnuz" or "e5m2fnuz".
    Computed on TENSOR's device without synchronising; every call's
    statistics are copied to the host once, at the end of the step
    (stepscope/_fp8.py, docs/numerics.md).  A no-op, after the arguments
    are checked, when nothing is recorded or no step is open."""
    _fp8.check_args(name, tensor, scale, fmt)
    if _native.enabled() and _native._current_step() is not None:
        _fp8.record(name, tensor, scale, fmt)
        _native._values_pending()


def expert_load(layer, tokens_per_expert):
    """Records, for the current step, the tokens this rank's router sent
    to each global expert of mixture-of-experts layer LAYER (an int or a
    str): TOKENS_PER_EXPERT[i] for expert i, a 1-D tensor or a sequence of
    numbers.  The controller sums the ranks' vectors into each expert's
    load and judges its balance (expert_imbalance, docs/workloads.md).
    Sends LAYER's placement with it when expert_placement gave a new one.
    Ignored outside a step."""
    name = _wl._load_names.get(layer) or _wl.load_name(layer)
    if _wl._pending and _native._current_step() is not None:
        place = _wl.take_placement(layer)
        if place is not None:
            values(_wl.PLACEMENT + name[len(_wl.LOAD):], place)
    _load(name, tokens_per_expert)


def _load(name, x):
    """Records the load vector X under NAME.  A tensor is kept and read
    when the step ends: a device one with the step's other device vectors
    (one copy), a host one with the step's other host loads (one
    conversion), so that the call costs an append on the training thread
    (docs/workloads.md, "Cost").  Anything else goes to the recorder
    now."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dim() != 1:
            raise ValueError("stepscope: a load wants a 1-D tensor, not %d-D"
                             % x.dim())
        if _native._current_step() is not None:
            if x.is_cpu:
                _wl.host_loads.append((name, x))
            else:
                _device_values.append((name, x))
            _native._values_pending()
        return
    _native.values(name, x)


def expert_placement(layer, expert_to_rank):
    """Says which rank hosts each expert of LAYER, once (and again when
    it changes): EXPERT_TO_RANK is a mapping expert -> rank or a sequence
    whose i-th item is expert i's rank.  Kept here and sent with LAYER's
    next expert_load; with it the controller counts the tokens each
    expert-parallel rank received and explains a straggler by them.
    ValueError for a negative or non-integral expert or rank."""
    _wl.set_placement(layer, expert_to_rank)


def shard_load(table, lookups_per_shard):
    """Records, for the current step, the lookups this rank made in each
    row-wise shard of embedding table TABLE (an int or a str):
    LOOKUPS_PER_SHARD[i] for shard i, hosted by rank i; a 1-D tensor or a
    sequence of numbers.  The controller judges the shards' balance
    (embedding_imbalance, docs/workloads.md).  Ignored outside a step."""
    _load(_wl._shard_names.get(table) or _wl.shard_name(table),
          lookups_per_shard)
def rl_batch(rewards, lengths, group_size, advantages=None):
    """Records this step's reinforcement-learning batch on this rank: the
    REWARDS and completion LENGTHS (tokens) of its completions, GROUP_SIZE
    completions per prompt in group order, and their ADVANTAGES when
    given (each a sequence of numbers or a 1-D tensor, all of one size, a
    whole number of groups).  They travel as the vectors rl.reward,
    rl.length, rl.advantage and the metric rl.group_size; the controller
    derives the reward, advantage and length statistics and judges them
    (stepscope/_rl.py, docs/rl.md).  Host data is recorded at once; device
    tensors are copied to the host once, with the step's other device
    vectors, at the end of the step.  TypeError/ValueError for bad
    arguments; otherwise a no-op outside a step or without a controller."""
    _rl.check_args(rewards, lengths, group_size, advantages)
    if _native.enabled() and _native._current_step() is not None:
        _rl.record(values, rewards, lengths, group_size, advantages)


def _decorate(cm, func):
    """Returns FUNC wrapped so that every call runs inside `with cm`.

    Called by the C types when a phase or step object decorates a function;
    plain functions and methods are supported (not generators or coroutines,
    whose bodies run after the call returns)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with cm:
            return func(*args, **kwargs)

    return wrapper


_native._set_decorate(_decorate)
