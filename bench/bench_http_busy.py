"""bench_http_busy.py - is the HTTP server still quick while it builds large
documents?

`stepscope serve` over a wide store (250 ranks, 4,000 steps of 6 phases,
every rank-step row kept: bench_store, ~340 MB, written once into the
scratch directory): in each round K clients ask for the 7 MB heatmap at
once, and 0.2 s later three other clients ask, one request each and at the
same moment, for /api/runs, the dashboard's page and the run's findings.
It prints the time each small request took (median and max over the
rounds) and how long each round's large documents took, for each stepscope
given, the builds interleaved round by round:

    /usr/bin/python3 bench/bench_http_busy.py [--heavy 4] [--rounds 5] \\
        [--scratch DIR] build/stepscope [OTHER/build/stepscope ...]
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SMALL = ["api/runs", "", "api/runs/1/findings"]
HEAVY = "api/runs/1/heatmap?from=0&limit=10000"


class Serve:
    """`stepscope serve --db DB` on a port of its own."""

    def __init__(self, exe, db, scratch):
        self.err_path = scratch / f"serve-{time.monotonic_ns()}.err"
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(
            [str(exe), "serve", "--db", str(db), "--http", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 30
        while True:
            m = re.search(r"at http://[^:/]+:(\d+)/",
                          self.err_path.read_text())
            if m:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"{exe} serve did not start: "
                         f"{self.err_path.read_text()}")
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{m.group(1)}/"

    def get(self, path):
        """Seconds to fetch PATH in full."""
        t0 = time.monotonic()
        with urllib.request.urlopen(self.base + path, timeout=300) as r:
            r.read()
        return time.monotonic() - t0

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.err.close()


def heavy_get(server, refused):
    """One heatmap; a 503 (more large documents than the server sends at
    once) is counted in REFUSED."""
    try:
        server.get(HEAVY)
    except urllib.error.HTTPError as e:
        if e.code != 503:
            raise
        refused.append(1)


def one_round(server, heavy, small_times, heavy_times, refused):
    big = [threading.Thread(target=heavy_get, args=(server, refused))
           for _ in range(heavy)]
    t0 = time.monotonic()
    for t in big:
        t.start()
    time.sleep(0.2)
    took = {}
    quick = [threading.Thread(
        target=lambda p=p: took.__setitem__(p, server.get(p))) for p in SMALL]
    for t in quick:
        t.start()
    for t in quick + big:
        t.join()
    heavy_times.append(time.monotonic() - t0)
    for p, v in took.items():
        small_times[p].append(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exes", nargs="+", type=pathlib.Path,
                    help="stepscope binaries to compare")
    ap.add_argument("--heavy", type=int, default=4,
                    help="clients asking for the heatmap in each round (0: "
                         "none, the small requests on an idle server)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scratch", type=pathlib.Path,
                    help="where the store is written (default: a temporary "
                         "directory, removed at the end)")
    args = ap.parse_args()
    stores = [e.parent / "bench" / "bench_store" for e in args.exes]
    bench_store = next((b for b in stores if b.exists()), None)
    if bench_store is None:
        sys.exit(f"{stores[0]} is not built (make)")
    tmp = None
    scratch = args.scratch
    if scratch is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_http_busy.")
        scratch = pathlib.Path(tmp.name)
    scratch.mkdir(parents=True, exist_ok=True)
    db = scratch / "wide.db"
    if not db.exists():
        print("writing the wide store (250 ranks x 4,000 steps)...",
              file=sys.stderr)
        subprocess.run([str(bench_store), "-r", "250", "-s", "4000", "-p",
                        "6", "--keep-all", "--db", str(db)], check=True,
                       capture_output=True)
    servers = [Serve(exe, db, scratch) for exe in args.exes]
    small = [{p: [] for p in SMALL} for _ in servers]
    heavy = [[] for _ in servers]
    refused = [[] for _ in servers]
    try:
        for s in servers:  # warm the page cache and the pools
            s.get("api/runs")
            s.get(HEAVY)
        for _ in range(args.rounds):
            for i, s in enumerate(servers):
                one_round(s, args.heavy, small[i], heavy[i], refused[i])
    finally:
        for s in servers:
            s.stop()
    for i, exe in enumerate(args.exes):
        if not args.heavy:
            print(f"{exe}: no heatmap asked (the server idle), "
                  f"{args.rounds} rounds")
        else:
            print(f"{exe}: {args.heavy} heatmaps of 7 MB at once, "
                  f"{args.rounds} rounds; each round's heatmaps took "
                  + " ".join(f"{t:.2f}" for t in heavy[i]) + " s"
                  + (f"; {len(refused[i])} answered 503 (large documents "
                     f"are sent 8 at a time)" if refused[i] else ""))
        for p, v in small[i].items():
            print(f"  /{p:22s} median {statistics.median(v) * 1000:8.1f} ms"
                  f"   max {max(v) * 1000:8.1f} ms")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
