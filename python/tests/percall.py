"""Per-call cost of the stepscope Python API, in nanoseconds per call.

Times, with timeit in batches of BATCH calls (each batch inside one step,
median over the batches):

  loop          `pass`: the timing loop itself
  python_with   `with cm: pass` for a trivial Python context manager
  phase         `with stepscope.phase("x"): pass`, the name looked up each time
  phase_object  `with ph: pass` with ph = stepscope.phase("x") kept
  sync          `stepscope.sync("x")`

Under `stepscope run --auto` it also times a call of torch.nn.Identity,
A/B in the same process:

  module_plain      with torch's own Module.__call__
  module_outermost  with auto mode's wrapper, at the outermost level (the
                    Python callbacks and a "forward" phase run)
  module_nested     with auto mode's wrapper, nested in another module call

Run it bare for the disabled cost, and under a controller for the enabled
one (between batches it sleeps, untimed, so that the recorder's sender
drains the per-thread ring and no timed event is dropped):

    /usr/bin/python3 python/tests/percall.py
    build/stepscope run -n 1 --db /tmp/percall.db -- \\
        /usr/bin/python3 python/tests/percall.py
    build/stepscope run --auto -n 1 --db /tmp/percall.db -- \\
        /usr/bin/python3 python/tests/percall.py

Prints one JSON object: {"enabled": ..., "ns": {case: ns}, "counters": ...}.
"""
import argparse
import functools
import json
import os
import statistics
import time
import timeit

import stepscope

CASES = {
    "loop": "pass",
    "python_with": "with cm:\n    pass",
    "phase": "with stepscope.phase('x'):\n    pass",
    "phase_object": "with ph:\n    pass",
    "sync": "stepscope.sync('x')",
}


class Nothing:
    """The trivial context manager to compare with."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def measure(stmt, batch, reps, pause, env=None, setup=None, around=None):
    """Median ns per execution of STMT over REPS batches of BATCH, each
    batch in its own step; SETUP() runs (untimed) before each batch and
    AROUND, when given, is a wrapper that runs the timed batch."""
    env = env or {"stepscope": stepscope, "cm": Nothing(),
                  "ph": stepscope.phase("x")}
    per_call = []
    for _ in range(reps):
        if setup:
            setup()
        with stepscope.step():
            run = functools.partial(timeit.timeit, stmt, globals=env,
                                    number=batch)
            t = around(run) if around else run()
        per_call.append(t / batch * 1e9)
        if pause:
            time.sleep(pause)
    return statistics.median(per_call)


def measure_modules(batch, reps, pause):
    """The module_* cases, or {} when not run under `stepscope run --auto`
    (importing torch there installs auto mode)."""
    if os.environ.get("STEPSCOPE_AUTO") != "1":
        return {}
    import torch
    from stepscope import _native
    wrapped = torch.nn.Module.__call__
    if not isinstance(wrapped, _native._Outermost):
        return {}
    plain = wrapped.__wrapped__
    env = {"m": torch.nn.Identity(), "x": torch.zeros(1)}
    nest = _native._Outermost(lambda run: run(), None, None, None)

    def use(call):
        return lambda: setattr(torch.nn.Module, "__call__", call)

    ns = {}
    for _ in range(3):  # interleaved, so that all three see the same load
        for name, call, around in (("module_plain", plain, None),
                                   ("module_outermost", wrapped, None),
                                   ("module_nested", wrapped, nest)):
            ns.setdefault(name, []).append(measure(
                "m(x)", min(batch, 1000), max(1, reps // 3), pause, env,
                use(call), around))
    torch.nn.Module.__call__ = wrapped
    return {k: statistics.median(v) for k, v in ns.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=2000,
                    help="calls per batch (at most 4000: ring size)")
    ap.add_argument("--reps", type=int, default=50, help="batches per case")
    args = ap.parse_args()
    enabled = stepscope.enabled()
    pause = 0.03 if enabled else 0.0
    ns = {name: measure(stmt, args.batch, args.reps, pause)
          for name, stmt in CASES.items()}
    ns.update(measure_modules(args.batch, args.reps, pause))
    ns = {k: round(v, 1) for k, v in ns.items()}
    print(json.dumps({"enabled": enabled, "ns": ns,
                      "counters": stepscope.counters()}), flush=True)


if __name__ == "__main__":
    main()
