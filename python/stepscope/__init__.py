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

`phase(name)` and `step(n)` are context managers and decorators, both
implemented in C (stepscope/_native.c) so that a phase costs well under a
microsecond.  Every error from the C library raises StepscopeError with its
message; arguments of the wrong type raise TypeError.

`stepscope run --auto` instruments unmodified PyTorch scripts; see
stepscope/auto.py and docs/python.md.
"""
import functools

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
)

__version__ = _native.__version__

from . import _fp8, _stacks  # noqa: E402

_stacks.install()

__all__ = [
    "Phase", "Step", "StepscopeError", "checkpoint_saved", "counters",
    "enabled", "fp8_stats", "memory_record", "memory_sample", "metric", "now_ns", "phase",
    "phase_begin", "phase_end", "phase_span", "resumed_from", "step",
    "step_begin",
    "step_end", "sync",
]


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
    are checked, when nothing is recorded."""
    _fp8.check_args(name, tensor, scale, fmt)
    if _native.enabled():
        _fp8.record(name, tensor, scale, fmt)


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
