"""Shared helpers for the Python package's tests.

The package is imported from PYTHONPATH (ctest sets it to the build's
python/ directory; from the top of the tree, PYTHONPATH=python works after
`make`).  Jobs run under the real controller, $STEPSCOPE_BUILD/stepscope
(default ./build), against a fresh store in a temporary directory, and the
tests assert on `stepscope report --json` and on the store's rank_steps rows
(tests/jobs.py runs the jobs).
"""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
from jobs import BUILD, SOURCE, STEPSCOPE, Job, run_job  # noqa: E402,F401
PYTHON = sys.executable  # the ranks run with the tests' interpreter
SANITIZED = os.environ.get("STEPSCOPE_SANITIZED") == "1"


def clean_env(**extra):
    """This process's environment without any STEPSCOPE_* variable (so the
    recorder is disabled), plus EXTRA."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STEPSCOPE_")}
    env.update(extra)
    return env


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store.db"
