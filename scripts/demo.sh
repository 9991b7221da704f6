#!/bin/sh
# The demo: a real 4-rank PyTorch DDP training job (gloo, CPU) runs under
# `stepscope run --auto`, which instruments the unmodified script from the
# outside.  Rank 2 does 40 ms of extra matrix multiplies in the model's
# forward every step, so the other ranks wait for it at the gradient
# all-reduce.  The report names rank 2 and its forward phase.
# Run through `make demo`.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
DB="$BUILD/demo/stepscope.db"
mkdir -p "$BUILD/demo"
rm -f "$DB" "$DB-wal" "$DB-shm"

echo "== stepscope run --auto -n 4 -- python3 examples/ddp_train.py --slow-rank 2 --slow-ms 40"
status=0
"$BUILD/stepscope" run --auto -n 4 --name demo --db "$DB" --quiet -- \
    "$PYTHON" examples/ddp_train.py --steps 100 --slow-rank 2 --slow-ms 40 ||
    status=$?
echo
echo "== stepscope report --db $DB"
"$BUILD/stepscope" report --db "$DB"
exit "$status"
