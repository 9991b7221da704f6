"""Pipeline parallelism: which stage this rank runs under which schedule,
and the spans of its microbatches (docs/workloads.md#pipelines).

    stepscope.pipeline(stage, stages, "1f1b", microbatches=8)
    for batch in loader:
        with stepscope.step():
            for i in range(8):
                with stepscope.microbatch(i, "F"):
                    ...forward of microbatch i...
            ...

`microbatch` is the C type in stepscope/native_pipeline.c: entering and
leaving it store a timestamp in the calling thread's buffer
(src/lib/pipeline.c), which goes to the controller once per step, as the
vectors pipeline.spans and pipeline.config, when that thread ends the step.
Record the microbatches on the thread that runs the step.
"""
from . import _native

# Schedule names to their ss_pipe_schedule codes (include/stepscope.h).
SCHEDULES = {"gpipe": 1, "1f1b": 2, "interleaved": 3, "zb1p": 4,
             "dualpipe": 5}

microbatch = _native.microbatch
Microbatch = _native.Microbatch


def pipeline(stage, stages, schedule, microbatches, chunks=None):
    """Declares this rank pipeline stage STAGE (0-based) of STAGES, run under
    SCHEDULE ("gpipe", "1f1b", "interleaved", "zb1p" or "dualpipe") with
    MICROBATCHES microbatches per step.  CHUNKS, the model chunks per stage,
    is required for "interleaved" (at least 2) and must be left out or 1
    otherwise.  Call it once, before the first step; the controller then
    compares each stage's measured bubble with the schedule's formula.
    Raises ValueError for a bad argument."""
    for name, v in (("stage", stage), ("stages", stages),
                    ("microbatches", microbatches)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("pipeline: %s must be an int, not %s"
                            % (name, type(v).__name__))
    code = SCHEDULES.get(schedule)
    if code is None:
        raise ValueError("pipeline: schedule must be one of %s, not %r"
                         % (", ".join(SCHEDULES), schedule))
    if not 1 <= stages <= 4096 or not 0 <= stage < stages:
        raise ValueError("pipeline: stage must be from 0 to stages - 1 and "
                         "stages from 1 to 4096, not stage=%r stages=%r"
                         % (stage, stages))
    if not 1 <= microbatches < 2**32:
        raise ValueError("pipeline: microbatches must be at least 1, not %r"
                         % (microbatches,))
    if schedule == "interleaved":
        if chunks is None or isinstance(chunks, bool) or \
                not isinstance(chunks, int) or not 2 <= chunks < 2**32:
            raise ValueError("pipeline: the interleaved schedule needs "
                             "chunks, the model chunks per stage (2 or "
                             "more), not %r" % (chunks,))
    elif chunks not in (None, 1):
        raise ValueError("pipeline: chunks is for the interleaved schedule "
                         "alone, not %r" % (schedule,))
    if schedule == "dualpipe" and stages % 2:
        raise ValueError("pipeline: dualpipe needs an even number of stages, "
                         "not %d" % stages)
    _native._pipeline(stage, stages, code, microbatches, chunks or 1)
