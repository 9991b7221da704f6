"""Tests of the stepscope Python API: a no-op without a controller, errors,
context managers and decorators, the real thing under `stepscope run`, and a
loose sanity bound on the per-call cost."""
import ast
import ctypes
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

import stepscope
from stepscope import StepscopeError
from conftest import HERE, PYTHON, SANITIZED, clean_env, run_job


def run_python(code, env=None, timeout=60):
    """Runs CODE in a fresh /usr/bin/python3 and returns its stdout."""
    out = subprocess.run([PYTHON, "-c", textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=timeout,
                         env=env if env is not None else clean_env())
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_noop_without_controller():
    out = run_python("""
        import stepscope as s
        assert not s.enabled()
        with s.step() as a:
            with s.phase("p"):
                s.sync("x"); s.metric("m", 1.5); s.memory_sample()
                s.memory_record("device_peak", 10); s.checkpoint_saved(0)
                s.values("v", [1.0, 2.0], labels=["a", "b"])
        with s.step() as b:
            pass
        s.step_begin(7); s.phase_begin("q"); s.phase_end("q"); s.step_end()
        s.phase_span("q", s.now_ns(), s.now_ns())
        print(a, b, s.counters(), s.enabled())
    """)
    assert out.split("\n")[0] == \
        "0 1 {'dropped_events': 0, 'dropped_records': 0, " \
        "'dropped_vectors': 0, 'truncated_values': 0} False"


def test_only_pyinit_is_exported():
    lib = ctypes.CDLL(stepscope._native.__file__)
    assert lib.PyInit__native
    for sym in ("ss_init", "ss_phase_begin", "ss_name", "wire_decoder_next"):
        with pytest.raises(AttributeError):
            getattr(lib, sym)


def test_stubs_match_the_module():
    stub = Path(stepscope.__file__).with_name("__init__.pyi").read_text()
    names = {n.name for n in ast.parse(stub).body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert names == set(stepscope.__all__)
    assert all(hasattr(stepscope, n) for n in names)


@pytest.mark.parametrize("call, exc, words", [
    (lambda: stepscope.phase(3), TypeError, "must be a str, not int"),
    (lambda: stepscope.phase(b"x"), TypeError, "must be a str, not bytes"),
    (lambda: stepscope.phase(""), StepscopeError, "1 to 63 bytes"),
    (lambda: stepscope.phase("x" * 64), StepscopeError, "(64 bytes)"),
    (lambda: stepscope.phase("\u00e9" * 32), StepscopeError, "(64 bytes)"),
    (lambda: stepscope.sync("a\nb"), StepscopeError, "control characters"),
    (lambda: stepscope.metric(None, 1.0), TypeError, "must be a str"),
    (lambda: stepscope.metric("m", "x"), TypeError, "real number"),
    (lambda: stepscope.metric("m"), TypeError, "takes 2 arguments"),
    (lambda: stepscope.step(-1), StepscopeError, "a step must be from 0"),
    (lambda: stepscope.step(2 ** 63), StepscopeError, "a step must be from 0"),
    (lambda: stepscope.step(1.0), TypeError, "must be an int or None"),
    (lambda: stepscope.step(True), TypeError, "must be an int or None"),
    (lambda: stepscope.step(1, 2), TypeError, "at most one argument"),
    (lambda: stepscope.step_begin(-3), StepscopeError, "a step must be"),
    (lambda: stepscope.checkpoint_saved(-1), StepscopeError, "a step must be"),
    (lambda: stepscope.checkpoint_saved(None), TypeError, "must be an int"),
    (lambda: stepscope.resumed_from(-1), StepscopeError, "a step must be"),
    (lambda: stepscope.resumed_from("3"), TypeError, "must be an int"),
    (lambda: stepscope.memory_record("host", 1), StepscopeError,
     "'device_allocated' or 'device_peak'"),
    (lambda: stepscope.memory_record("device_peak", -1), StepscopeError,
     "nbytes must be"),
    (lambda: stepscope.memory_record("device_peak", 1.5), TypeError,
     "nbytes must be an int"),
    (lambda: stepscope.phase_span("x", 10, 5), StepscopeError, "before it"),
    (lambda: stepscope.phase_span("x", -1, 5), StepscopeError, "a time must"),
    (lambda: stepscope.phase("x")(42), TypeError, "decorates a callable"),
])
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


def test_error_carries_the_c_message():
    with pytest.raises(StepscopeError) as info:
        stepscope.phase("")
    assert str(info.value).startswith("invalid argument: ")
    assert issubclass(StepscopeError, Exception)
    assert StepscopeError.__module__ == "stepscope"


def test_name_limits():
    assert stepscope.phase("x" * 63).name == "x" * 63
    out = run_python("""
        import stepscope as s
        used = len([s.phase("n%d" % i) for i in range(255)])
        try:
            s.phase("one-too-many")
        except s.StepscopeError as e:
            print(used, e)
        s.phase("n0")  # known names still work
    """)
    assert out.startswith("255 the name table is full: cannot add "
                          "'one-too-many'"), out


def test_same_object_per_name_and_str_subclass():
    class Name(str):
        pass
    assert stepscope.phase("same") is stepscope.phase("same")
    assert stepscope.phase(Name("same")) is stepscope.phase("same")
    assert repr(stepscope.phase("same")) == "stepscope.phase('same')"


def test_step_numbers_and_decorators():
    out = run_python("""
        import stepscope as s
        from stepscope import _native
        seen = []
        with s.step() as n: seen.append(n)
        with s.step(10) as n: seen.append(n)
        with s.step() as n: seen.append(n)
        @s.step()
        def train_step(x):
            seen.append(_native._current_step()); return x * 2
        @s.phase("work")
        def work(x):
            '''Doc.'''
            return x + 1
        assert train_step(2) == 4 and train_step(3) == 6
        assert work(1) == 2 and work.__name__ == "work"
        assert work.__doc__ == "Doc."
        try:
            with s.phase("boom"):
                raise KeyError("k")
        except KeyError:
            seen.append("raised")
        assert _native._current_step() is None
        print(seen, s.step_begin(), _native._current_step())
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with s.step(3) as n:              # does not increase: refused
                assert _native._current_step() is None
        print(n, str(w[0].message), s.step_begin())
    """)
    first, second = out.strip().split("\n")
    assert first == "[0, 10, 11, 12, 13, 'raised'] 14 14"
    assert second == "3 stepscope: step 3 does not follow step 14 (steps " \
        "must increase), so it is not recorded 15"


def test_resumed_from_numbers_the_steps_after_it():
    out = run_python("""
        import stepscope as s
        s.resumed_from(3)
        s.resumed_from(41)                  # before any step: replaces it
        with s.step() as a: pass
        with s.step() as b: pass
        try:
            s.resumed_from(7)
        except s.StepscopeError as e:
            print(a, b, e)
    """)
    assert out.strip() == "42 43 call not valid in the current state: " \
        "resumed_from(7) after a step was begun: call it before the first step"


RESUME_SCRIPT = r'''
import stepscope as s
s.resumed_from(9)
for i in range(3):
    with s.step():
        s.sync("barrier")
'''


def test_resumed_from_reaches_the_store(store, tmp_path):
    script = tmp_path / "resume_script.py"
    script.write_text(RESUME_SCRIPT)
    job = run_job(store, 2, [PYTHON, str(script)])
    assert job.returncode == 0, job.stderr
    rep = job.report()
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (10, 12)
    [attempt] = rep["goodput"]["attempts"]
    assert attempt["resumed_from"] == 9
    assert (attempt["first_step"], attempt["last_step"]) == (10, 12)
    assert attempt["cause"] == "completed"
    assert sum(e["kind"] == "resumed" for e in rep["events"]) == 2
    ms = rep["goodput"]["ms"]
    assert abs(sum(ms.values()) - rep["goodput"]["wall_ms"]) < 0.01


API_SCRIPT = r'''
import json, os, time
import stepscope as s
assert s.enabled()

@s.phase("decorated")
def helper():
    time.sleep(0.001)

for i in range(5):
    with s.step():
        with s.phase("outer"):
            with s.phase("inner"):
                time.sleep(0.002)
            with s.phase("outer"):       # same name nested: counted once
                pass
        helper()
        s.sync("barrier")
        s.metric("loss", 1.0 / (i + 1))
        s.memory_sample()
        s.memory_record("device_peak", 1000 + i)
        b = s.now_ns()
        s.phase_span("measured", b - 3000000, b)
        if i == 2:
            s.checkpoint_saved(2)
    if i == 3:                           # a forked child is disabled
        pid = os.fork()
        if pid == 0:
            ok = not s.enabled()
            with s.step(100):
                with s.phase("child"):
                    s.sync("child")
            os._exit(0 if ok else 1)
        assert os.waitpid(pid, 0)[1] == 0
print("RESULT " + json.dumps({"rank": int(os.environ["RANK"]),
                              "counters": s.counters()}), flush=True)
'''


def test_under_controller(store, tmp_path):
    script = tmp_path / "api_script.py"
    script.write_text(API_SCRIPT)
    job = run_job(store, 2, [PYTHON, str(script)])
    assert job.returncode == 0, job.stderr
    for r in job.results().values():
        assert r["counters"] == {"dropped_events": 0, "dropped_records": 0,
                                 "dropped_vectors": 0,
                                 "truncated_values": 0}
    rep = job.report()
    assert rep["steps"]["count"] == 5
    assert (rep["steps"]["first"], rep["steps"]["last"]) == (0, 4)
    phases = {p["name"]: p for p in rep["steps"]["phases"]}
    assert set(phases) == {"outer", "inner", "decorated", "measured"}
    assert all(p["steps"] == 5 for p in phases.values())
    assert phases["inner"]["median_rank_ms"]["p50"] >= 2.0
    assert 2.9 <= phases["measured"]["median_rank_ms"]["p50"] <= 3.1
    assert [x["name"] for x in rep["steps"]["syncs"]] == ["barrier"]
    # The last value of the metric in each step, the last step's here.
    assert rep["metrics"] == [{"name": "loss", "steps": 5, "last_step": 4,
                               "last": {"ranks": 2, "median": 0.2,
                                        "min": 0.2, "min_rank": 0,
                                        "max": 0.2, "max_rank": 1}}]
    for rank in rep["ranks"]:
        assert rank["state"] == "exited" and rank["last_step"] == 4
        assert rank["max_rss_bytes"] > 1 << 20
        assert rank["max_device_bytes"] == 1004
    assert sum(e["kind"] == "checkpoint" for e in rep["events"]) == 2
    rows = job.rank_steps()
    assert len(rows) == 10
    for row in rows.values():
        assert row["counts"].get("outer", 1) == 1      # nested once
        assert "child" not in row["phases"]


def test_per_call_cost_sanity(store):
    """Loose bounds only (a shared 2-core machine): docs/python.md has the
    measured numbers."""
    percall = [PYTHON, str(HERE / "percall.py"), "--reps", "5"]
    bound = 20000 if SANITIZED else 2000
    off = json.loads(run_python_file(percall))
    job = run_job(store, 1, percall)
    assert job.returncode == 0, job.stderr
    on = json.loads(job.stdout.split("] ", 1)[1])
    assert not off["enabled"] and on["enabled"]
    for res in (off, on):
        assert res["ns"]["phase"] < bound, res
        assert res["ns"]["sync"] < bound, res


def run_python_file(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                         env=clean_env())
    assert out.returncode == 0, out.stderr
    return out.stdout


VALUES_SCRIPT = """
import math, stepscope, torch
nan, inf = float("nan"), float("inf")
for i in range(3):
    with stepscope.step():
        stepscope.values("norms", [1.5, nan, inf, -inf, float(i)],
                         labels=["a", "b", "c", "d", "e"])
        stepscope.values("t", torch.tensor([i, nan, -inf],
                                           dtype=torch.float32))
        stepscope.values("big", list(range(1030)))
print(stepscope.counters())
"""


def test_values_land_in_the_store_with_nan_and_inf(store, tmp_path):
    """stepscope.values of a list and of a CPU tensor, under a real
    controller, reach rank_values bit for bit (NaN, +inf, -inf kept), with
    their labels; a vector over the cap is cut and counted."""
    import math
    import sqlite3
    import struct
    script = tmp_path / "values_script.py"
    script.write_text(VALUES_SCRIPT)
    job = run_job(store, 2, [PYTHON, str(script)])
    assert job.returncode == 0, job.stderr
    db = sqlite3.connect(str(store))
    rows = db.execute("SELECT name, step, rank, n, truncated, data "
                      "FROM rank_values ORDER BY name, step, rank").fetchall()
    by = {(name, step, rank): (n, cut, struct.unpack("<%dd" % n, data))
          for name, step, rank, n, cut, data in rows}
    assert len(by) == 3 * 3 * 2
    for step in range(3):
        for rank in range(2):
            n, cut, v = by[("norms", step, rank)]
            assert (n, cut) == (5, 0)
            assert v[0] == 1.5 and math.isnan(v[1])
            assert v[2] == math.inf and v[3] == -math.inf and v[4] == step
            n, cut, v = by[("t", step, rank)]
            assert n == 3 and v[0] == step and math.isnan(v[1])
            assert v[2] == -math.inf
            n, cut, v = by[("big", step, rank)]
            assert (n, cut) == (1024, 6) and v[1023] == 1023
    labels = db.execute("SELECT rank, labels FROM value_labels "
                        "WHERE name = 'norms' ORDER BY rank").fetchall()
    assert labels == [(0, '["a","b","c","d","e"]'),
                      (1, '["a","b","c","d","e"]')]
    assert job.stdout.count("'truncated_values': 18") == 2  # 3 steps x 6
    # the controller shows what the ranks' cap cut: in the end-of-run
    # summary, in an event of the report, and in its VALUES line
    assert "36 vector elements truncated by ranks" in job.stderr
    rep = job.report()
    [ev] = [e for e in rep["events"] if e["kind"] == "vectors_dropped"]
    assert ev["message"] == \
        "36 elements truncated by the ranks' per-vector cap"
    assert rep["dropped"]["vectors"] == 0
    names = {v["name"]: v for v in rep["values"]["names"]}
    assert names["big"]["truncated"] == 36 and names["big"]["max_n"] == 1024
    assert names["norms"]["latest"]["ranks"][0]["values"] == \
        [1.5, "nan", "inf", "-inf", 2]
