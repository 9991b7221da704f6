"""`stepscope guard` on real runs: a history of clean runs of one name, then
a run slowed in one phase is a regression (exit 1) naming the metric, the
phase and the size of the change with its interval; another clean run is
not (exit 0); a slowdown that returns and stays is dated to its first run;
a run with another world size is not compared with them (exit 2 with the
reason); the Markdown, JUnit and JSON outputs say the same.

The job is ss_allreduce behind a wrapper script, so the command line stays
the same while the script changes, as code does between two nightly runs.
Its steps are dominated by a sleep in the data phase (--data-stall), which
a loaded machine disturbs little; the slowdown is busy work in the compute
phase (--straggler, wall-clock time, so its size does not depend on the
load either).
"""
import json
import subprocess
import xml.etree.ElementTree as ET

from conftest import EXAMPLE, STEPSCOPE, run_job

RANKS = 4
STEPS = 150
WIDE = ("--set", "threshold=25", "--metric", "step_time")
SLOW_MS = 8  # the slowdown's busy work in compute, per rank and step


def write_job(path, slow_ms=0.0, ranks=RANKS):
    """The wrapper: every rank sleeps 6 ms in its data phase per step and
    computes ~0.5 ms; SLOW_MS more busy work in compute on every rank."""
    args = ["--steps", str(STEPS), "--compute-ms", "0.5"]
    for r in range(ranks):
        args += ["--data-stall", f"{r}:1:6"]
        if slow_ms:
            args += ["--straggler", f"{r}:{slow_ms}:compute"]
    path.write_text("#!/bin/sh\nexec %s %s\n" % (EXAMPLE, " ".join(args)))
    path.chmod(0o755)


def run(store, job, nprocs=RANKS):
    j = run_job(store, nprocs, [str(job)], extra=("--name", "nightly"))
    assert j.returncode == 0, j.stderr


def guard(store, *args):
    return subprocess.run([str(STEPSCOPE), "guard", "--db", str(store), *args],
                          capture_output=True, text=True, timeout=120)


def test_guard_over_a_history_of_real_runs(store, tmp_path):
    job = tmp_path / "nightly.sh"
    write_job(job)
    for _ in range(4):
        run(store, job)

    # Four clean runs: the latest is judged against the three before it.
    # A shared test machine moves clean runs by 5-15 % (docs/guard.md,
    # accuracy), and the phases of this job follow its load (the waiting
    # times, and the compute work calibrated at each start), so the clean
    # checks look at the step time with a threshold of 25 %; the slowdown
    # below is judged on every metric with the defaults.
    g = guard(store, "--name", "nightly", "--json", *WIDE)
    assert g.returncode == 0, g.stdout + g.stderr
    doc = json.loads(g.stdout)
    assert doc["verdict"] == "ok" and doc["baseline"] == [1, 2, 3]
    assert doc["fingerprint"]["world_size"] == RANKS
    assert doc["fingerprint"]["command"] == str(job)

    # Slower by 8 ms of compute per step on every rank.  Clean runs of
    # this job on a shared machine sometimes fall into two levels 14 %
    # apart (7.4 and 8.4 ms); judged against three of them, the run-level
    # bound reached 91 %, above the +87 % that 4 ms made of the step on 4
    # ranks sharing 2 cores, and the step time read "same" (1 run in 4).
    write_job(job, slow_ms=SLOW_MS)
    run(store, job)
    md, junit = tmp_path / "guard.md", tmp_path / "guard.xml"
    g = guard(store, "--markdown", str(md), "--junit", str(junit))
    assert g.returncode == 1, g.stdout + g.stderr
    lines = g.stdout.splitlines()
    regressions = [l for l in lines if l.startswith("REGRESSION: ")]
    names = [l.split()[1] for l in regressions]
    assert "step_time" in names and "phase.compute" in names, g.stdout
    # The size and its interval: compute goes from ~0.5 ms to ~8.5 ms, the
    # step from ~7 ms to 15 ms or more.
    compute = next(l for l in regressions if l.split()[1] == "phase.compute")
    change = float(compute.split()[2])
    lo = float(compute.split("[")[1].split()[0])
    hi = float(compute.split(", ")[1].split()[0])
    assert lo <= change <= hi and lo > 100, compute
    step = next(l for l in regressions if l.split()[1] == "step_time")
    assert float(step.split()[2]) > 25, step
    assert "since run 5" in step
    # The phase to blame is compute: its change is the largest of the
    # phases (four busy ranks on a small machine also delay the others a
    # little, which may show too).
    phase_changes = {l.split()[1]: float(l.split()[2]) for l in regressions
                     if l.split()[1].startswith("phase.")}
    assert max(phase_changes, key=phase_changes.get) == "phase.compute"

    text = md.read_text()
    assert "**regression** in run 5" in text
    assert "| phase.compute (ms) |" in text and "**regressed** since run 5" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = {c.get("name") for c in suite.findall("testcase")
              if c.find("failure") is not None}
    assert {"step_time", "phase.compute"} <= failed
    assert int(suite.get("failures")) == len(failed)

    # Back to clean: no regression against runs 1..5 (the slow one is the
    # outlier left out of the run-to-run spread, not the reference).
    write_job(job)
    run(store, job)
    g = guard(store, "--json", *WIDE)
    assert g.returncode == 0, g.stdout + g.stderr
    doc = json.loads(g.stdout)
    assert doc["run"] == 6 and doc["baseline"] == [1, 2, 3, 4, 5]
    step = next(m for m in doc["metrics"] if m["name"] == "step_time")
    assert step["verdict"] in ("same", "improved")
    assert [h["run"] for h in step["history"]] == [1, 2, 3, 4, 5, 6]

    # Only a family of metrics, and an explicit baseline.
    g = guard(store, "--metric", "phase.", "--baseline", "1-3", "--json",
              "6")
    assert g.returncode in (0, 1), g.stdout + g.stderr
    doc = json.loads(g.stdout)
    assert doc["baseline"] == [1, 2, 3]
    assert {m["name"] for m in doc["metrics"]} >= {"phase.compute", "phase.data"}
    assert all(m["name"].startswith("phase.") for m in doc["metrics"])

    # The slowdown comes back and stays: the second slow run in a row is
    # dated to the first.
    write_job(job, slow_ms=SLOW_MS)
    run(store, job)
    run(store, job)
    g = guard(store)
    assert g.returncode == 1, g.stdout + g.stderr
    step = next(l for l in g.stdout.splitlines()
                if l.startswith("REGRESSION: step_time "))
    assert step.endswith("since run 7"), g.stdout

    # Another world size is not comparable: nothing to judge it against.
    write_job(job, ranks=2)
    run(store, job, nprocs=2)
    g = guard(store, "--name", "nightly")
    assert g.returncode == 2, g.stdout + g.stderr
    assert "cannot judge: 0 comparable runs of 'nightly' before run 9" in g.stdout
    assert "world_size 2 vs 4" in g.stdout
    # Asked explicitly, it is compared, and the difference is said.
    g = guard(store, "--baseline", "1-3")
    assert "compared although they differ: run 3: world_size 2 vs 4" in g.stdout


def test_guard_refuses_bad_arguments(store, tmp_path):
    g = guard(store)
    assert g.returncode == 2 and "no store at" in g.stderr
    job = tmp_path / "j.sh"
    write_job(job)
    run(store, job)
    g = guard(store)
    assert g.returncode == 2
    assert "0 comparable runs of 'nightly' before run 1" in g.stdout
    for bad in (["--set", "alpha=2"], ["--set", "nonsense=1"],
                ["--baseline", "x"], ["--last", "0"], ["1", "2"],
                ["--name", "nightly", "1"], ["--frobnicate"]):
        g = guard(store, *bad)
        assert g.returncode == 2, bad
        assert g.stderr.startswith("stepscope guard: "), (bad, g.stderr)
    g = guard(store, "nope")
    assert g.returncode == 2 and "no run 'nope'" in g.stderr
