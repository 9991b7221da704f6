"""How long `stepscope stacks` takes for N ranks (docs/performance.md).

Starts `stepscope run -n N --auto` of plain Python ranks that sleep (one of
them in a different function, so the merge has two groups), waits until
every rank is ready, then asks for every rank's stacks REPS times and
prints the median and worst of the controller's own time (request to
merged document, "elapsed_ms") and of the whole command (process start,
HTTP, printing), with and without --native.  --via memory (the default
path: the ranks' memory is read) or signal (the controller runs under a
seccomp filter that refuses process_vm_readv, so every rank is asked by
the stack signal, the fallback); both by default, one job each.

    python3 bench/bench_stacks.py [--ranks 64] [--reps 7] [--via memory|signal]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
STEPSCOPE = BUILD / "stepscope"
RANKS_PY = SOURCE / "tests" / "e2e" / "stacks" / "stuck_ranks.py"
NO_MEMORY_READ = RANKS_PY.parent / "no_memory_read.py"


def measure(db, reps, native, via):
    inner, outer = [], []
    for _ in range(reps):
        t0 = time.monotonic()
        out = subprocess.run([str(STEPSCOPE), "stacks", "--json", "--db",
                              str(db)] + (["--native"] if native else []),
                             capture_output=True, text=True, timeout=120)
        outer.append((time.monotonic() - t0) * 1000)
        doc = json.loads(out.stdout)
        assert doc["answered"] == doc["ranks_total"], doc["merged_text"]
        assert {r["via"] for r in doc["ranks"]} == {via}, doc["ranks"][0]
        inner.append(doc["elapsed_ms"])
    return inner, outer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--via", choices=("memory", "signal"))
    a = ap.parse_args()
    for via in [a.via] if a.via else ["memory", "signal"]:
        run(a, via)


def run(a, via):
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        out = Path(tmp) / "out"
        env = dict(os.environ, STUCK="1:sleep", DDP="0")
        with open(out, "w") as o:
            wrap = [sys.executable, str(NO_MEMORY_READ)] \
                if via == "signal" else []
            job = subprocess.Popen(
                wrap + [str(STEPSCOPE), "run", "-n", str(a.ranks), "--auto",
                        "--db", str(db), "--", sys.executable,
                        str(RANKS_PY)],
                stdout=o, stderr=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + 300
            while out.read_text().count("READY") < a.ranks:
                assert time.monotonic() < deadline and job.poll() is None
                time.sleep(0.5)
            time.sleep(1)
            for native in (False, True):
                inner, outer = measure(db, a.reps, native, via)
                print(f"{a.ranks} ranks{' --native' if native else ''}, "
                      f"via {via}: "
                      f"controller median {statistics.median(inner):.0f} ms "
                      f"(max {max(inner):.0f}), command median "
                      f"{statistics.median(outer):.0f} ms "
                      f"(max {max(outer):.0f}), {a.reps} requests")
        finally:
            job.send_signal(signal.SIGINT)
            job.wait(timeout=60)


if __name__ == "__main__":
    main()
