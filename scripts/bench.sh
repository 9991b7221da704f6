#!/bin/sh
# Runs every benchmark of docs/performance.md in one go, side by side.
# Usage: scripts/bench.sh [quick]   (quick: shorter runs)
set -eu
cd "$(dirname "$0")/.."
B=${BUILD:-build}/bench
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "== hot path: phase begin/end pair vs a bare pair of clock reads"
"$B/bench_hotpath"
echo
echo "== aggregation alone"
"$B/bench_aggregate"
echo
echo "== controller ingest over a unix socket (1024 ranks, unpaced)"
"$B/bench_ingest" --ranks 1024 --steps 1000
echo
echo "== store: rank-step rows per second"
"$B/bench_store" --db "$TMP/store.db"
if [ "${1:-}" != quick ]; then
    echo
    echo "== scale: 1024 ranks at 20 steps/s for 60 s, with the store"
    "$B/bench_ingest" --ranks 1024 --rate 20 --seconds 60 --store "$TMP/scale.db"
    echo
    echo "== scale with vectors: 1024 ranks x 64 vectors of 256 doubles at 10 steps/s"
    "$B/bench_ingest" --ranks 1024 --rate 10 --seconds 20 --vectors 64 \
        --vector-len 256 --store "$TMP/vectors.db"
fi
