#!/usr/bin/env python3
"""How often `stepscope guard` cries wolf, and how small a slowdown it sees.

    python3 bench/guard_accuracy.py [--rounds 4] [--clean-per-round 3]
                                    [--levels 2,5,10,20] [--workload steady]

Runs one job (examples/ss_allreduce, 4 ranks x 150 steps, through a wrapper
script so the command line never changes): 3 clean runs, then ROUNDS rounds
of CLEAN_PER_ROUND clean runs and one run per LEVEL slowed by that percent
of the clean step time on every rank (a longer sleep in the data phase for
the steady workload, busy work in the compute phase for the compute one).
Each run is judged against the last 10 clean runs before it (the slowed runs
carry another name, so they never enter a clean run's baseline): an exit 1
on a clean run is a false alarm (counted also with --set consecutive=2); on a
slowed run, step_time or the slowed phase flagged is a detection.  Interleaving
keeps a machine whose load drifts from biasing either count.  Prints one
table; docs/guard.md quotes it.

Workloads: "steady" (each step sleeps 6 ms in data and computes ~0.5 ms:
little of it depends on the machine's load) and "compute" (~4 ms of matrix
multiplies per step and no sleep: every bit of load shows, and busy work
injected on a machine with more runnable processes than cores grows by
the time the scheduler gives to the others).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", ROOT / "build"))
STEPSCOPE = BUILD / "stepscope"
EXAMPLE = BUILD / "examples" / "ss_allreduce"
RANKS, STEPS = 4, 150


def job_args(workload, slow_ms):
    """The job's options: in the steady workload a slowdown lengthens the
    data phase's sleep (a sleep keeps its length on a loaded machine); in
    the compute workload it adds busy work to the compute phase."""
    if workload == "steady":
        args = ["--compute-ms", "0.5"]
        args += [a for r in range(RANKS)
                 for a in ("--data-stall", f"{r}:1:{6 + slow_ms:.3f}")]
    else:
        args = ["--compute-ms", "4"]
        if slow_ms:
            args += [a for r in range(RANKS)
                     for a in ("--straggler", f"{r}:{slow_ms:.3f}:compute")]
    return ["--steps", str(STEPS), *args]


def run(db, script, workload, slow_ms=0.0, name="bench"):
    script.write_text("#!/bin/sh\nexec %s %s\n" %
                      (EXAMPLE, " ".join(job_args(workload, slow_ms))))
    script.chmod(0o755)
    p = subprocess.run([str(STEPSCOPE), "run", "-n", str(RANKS), "--db",
                        str(db), "--name", name, "--", str(script)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"run failed: {p.stderr}")


def guard(db, run_id, *extra):
    p = subprocess.run([str(STEPSCOPE), "guard", "--db", str(db), "--json",
                        *extra, str(run_id)],
                       capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout)
    regressed = [m["name"] for m in doc["metrics"]
                 if m["verdict"] == "regressed"]
    step = next((m for m in doc["metrics"] if m["name"] == "step_time"), None)
    return p.returncode, regressed, step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clean-per-round", type=int, default=3)
    ap.add_argument("--levels", default="2,5,10,20")
    ap.add_argument("--workload", choices=("steady", "compute"),
                    default="steady")
    a = ap.parse_args()
    levels = [float(x) for x in a.levels.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        db, script = Path(tmp) / "bench.db", Path(tmp) / "job.sh"
        clean_ids, next_id = [], 1
        for _ in range(3):  # the first baseline
            run(db, script, a.workload)
            clean_ids.append(next_id)
            next_id += 1
        judged = alarms = alarms2 = step_alarms = 0
        medians = []
        hits = {lv: 0 for lv in levels}
        phase_hits = {lv: 0 for lv in levels}
        slowed_phase = "phase.data" if a.workload == "steady" else \
            "phase.compute"
        changes = {lv: [] for lv in levels}
        step_ms = None
        for _ in range(a.rounds):
            for _ in range(a.clean_per_round):
                run(db, script, a.workload)
                # Against the last 10 clean runs (the slowed ones have
                # another name), alone and with the HUD's two-in-a-row.
                rc, regressed, step = guard(db, next_id)
                rc2, _, _ = guard(db, next_id, "--set", "consecutive=2")
                clean_ids.append(next_id)
                next_id += 1
                judged += 1
                alarms += rc == 1
                alarms2 += rc2 == 1
                step_alarms += "step_time" in regressed
                medians.append(step["value"])
                if rc == 1:
                    print(f"  false alarm on clean run {next_id - 1}: "
                          f"{', '.join(regressed)} (step_time "
                          f"{100 * step['relative']:+.1f} %, run-level bound "
                          f"{100 * step['run_level_bound']:.1f} %, history "
                          + " ".join(f"{h['value']:.2f}"
                                     for h in step["history"]) + ")")
            step_ms = statistics.median(medians)
            # One run per level, judged against the last 10 clean runs.
            for lv in levels:
                run(db, script, a.workload, slow_ms=step_ms * lv / 100,
                    name="bench-slow")
                base = ",".join(str(i) for i in clean_ids[-10:])
                rc, regressed, step = guard(db, next_id, "--baseline", base)
                next_id += 1
                hits[lv] += "step_time" in regressed
                phase_hits[lv] += slowed_phase in regressed
                changes[lv].append(100 * step["relative"])
        spread = statistics.stdev(medians) / step_ms * 100
        print(f"workload {a.workload}: step time median {step_ms:.2f} ms, "
              f"run-to-run sd of the clean runs' medians {spread:.1f} %")
        print(f"false alarms: {alarms} of {judged} judged clean runs "
              f"(on step_time: {step_alarms}; with consecutive=2: {alarms2})")
        print(f"injected  measured step_time change  detected (step_time)  "
              f"detected ({slowed_phase})")
        for lv in levels:
            print(f"{lv:6.0f} %   {statistics.median(changes[lv]):+8.1f} % "
                  f"(median)           {hits[lv]}/{a.rounds}"
                  f"                  {phase_hits[lv]}/{a.rounds}")


if __name__ == "__main__":
    main()
