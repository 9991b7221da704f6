#!/bin/sh
# The demo: four ranks of the C example workload synchronise every step
# through a shared-memory all-reduce; rank 2 computes 20 ms longer than the
# others.  stepscope launches them, records every step, and the report names
# rank 2 and its compute phase.  Run through `make demo`.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DB="$BUILD/demo/stepscope.db"
mkdir -p "$BUILD/demo"
rm -f "$DB" "$DB-wal" "$DB-shm"

echo "== stepscope run -n 4 -- ss_allreduce --straggler 2:20:compute"
"$BUILD/stepscope" run -n 4 --name demo --db "$DB" --quiet -- \
    "$BUILD/examples/ss_allreduce" --steps 120 --compute-ms 8 \
    --straggler 2:20:compute
echo
echo "== stepscope report --db $DB"
"$BUILD/stepscope" report --db "$DB"
