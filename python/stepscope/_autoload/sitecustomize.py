"""Start-up hook of `stepscope run --auto` (see stepscope/auto.py).

`stepscope run --auto` puts this directory first on PYTHONPATH and sets
STEPSCOPE_AUTO=1, so Python's site module imports this file when any Python
process of the job starts.  It does as little as possible:

- In the rank's own process only (not in Python processes that the rank
  starts later and that inherit the environment, such as multiprocessing
  "spawn" workers), it puts an import hook first on sys.meta_path that
  instruments torch right after `import torch` completes.  Nothing else is
  imported, so a script that never imports torch pays for one finder.
- It registers the handler that answers the controller's stack requests
  (stepscope/_stacks.py): a signal handler, no thread.
- It then runs the sitecustomize module that this one hides, if there is one
  further along sys.path (Debian's Python ships one).
"""
import os
import sys


def _owner():
    """True in the process `stepscope run` started, which finds
    STEPSCOPE_AUTO_PID empty and claims it; False in its Python children,
    which find the rank's pid there."""
    pid = str(os.getpid())
    if not os.environ.get("STEPSCOPE_AUTO_PID"):
        os.environ["STEPSCOPE_AUTO_PID"] = pid
    return os.environ["STEPSCOPE_AUTO_PID"] == pid


def _instrument():
    try:
        from stepscope import auto
        auto.install()
    except Exception as e:  # never break the program over its telemetry
        sys.stderr.write("stepscope: auto mode is off: %s: %s\n"
                         % (type(e).__name__, e))


class _TorchHook:
    """A one-shot meta path finder: finds torch through the other finders
    and makes its loader call _instrument() once torch is imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _instrument()

        spec.loader.exec_module = exec_module
        return spec


def _chain():
    """Runs the next sitecustomize on sys.path, the one this file hides.
    Its errors propagate to site.py, which reports them as it always does."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path
            if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _answer_stack_requests():
    """Lets the controller ask this rank for its stacks (stepscope/_stacks.py)
    from the start, also when the script never imports torch."""
    try:
        from stepscope import _stacks
        _stacks.install()
    except Exception:
        pass


if os.environ.get("STEPSCOPE_AUTO") == "1" and _owner():
    _answer_stack_requests()
    sys.meta_path.insert(0, _TorchHook())
_chain()
