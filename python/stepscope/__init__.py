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

from . import _stacks  # noqa: E402

_stacks.install()

__all__ = [
    "Phase", "Step", "StepscopeError", "checkpoint_saved", "counters",
    "enabled", "memory_record", "memory_sample", "metric", "now_ns", "phase",
    "phase_begin", "phase_end", "phase_span", "resumed_from", "step",
    "step_begin",
    "step_end", "sync",
]


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
