#!/bin/sh
# The check a machine with NVIDIA GPUs runs (docs/gpu.md): the unit tests
# read NVML only through a test double, so this is where stepscope's NVML
# reader (src/controller/host/nvml.c) meets a real driver.
#
# Usage: scripts/gpu_check.sh [--no-build] [--seconds S]
#   BUILD=DIR      the build directory (default build/)
#   --no-build     use the stepscope already built in $BUILD
#   --seconds S    how long to watch the GPUs under load (default 5)
#
# It builds stepscope (`make`), then:
#  1. `stepscope gpus --require`: every GPU must be read (exit 1 otherwise);
#  2. with nvidia-smi: the same number of GPUs, and each of its UUIDs;
#  3. the rank-to-GPU rule: CUDA_VISIBLE_DEVICES=<UUID of the last GPU>
#     must map to the last GPU, CUDA_VISIBLE_DEVICES=0 to GPU 0;
#  4. with PyTorch and CUDA: a matrix-multiply load on GPU 0 while
#     `stepscope gpus --watch S` samples; GPU 0's utilisation over the
#     watch must reach 50 % and its SM clock be known;
#  5. a short `stepscope run` of the example job (2 ranks on GPU 0): every
#     rank-step must carry GPU 0's evidence (report --json shows
#     ranks[].host_evidence.gpu with the GPU's index and an SM clock).
# On a machine without NVIDIA's driver it says so and exits 0 (set
# GPU_CHECK_REQUIRE=1 to make that a failure).  Exit status: 0 passed or
# nothing to check, 1 a check failed, 2 bad usage.  The test suite runs it
# against NVML's test double (ctest -R gpu_check) so that it keeps working
# between visits to a GPU machine.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_WATCHED=5
DO_BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
    --no-build) DO_BUILD=0 ;;
    --seconds) SECONDS_WATCHED=$2; shift ;;
    -h | --help) sed -n '2,/^set -eu/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done

fail() {
    echo "gpu_check: FAIL: $*" >&2
    exit 1
}

if [ "$DO_BUILD" = 1 ]; then
    make BUILD="$BUILD" >/dev/null || fail "the build failed (make BUILD=$BUILD)"
fi
SS="$BUILD/stepscope"
[ -x "$SS" ] || fail "no $SS: build first (make)"
TMP=$(mktemp -d)
LOAD_PID=""
cleanup() {
    [ -z "$LOAD_PID" ] || kill "$LOAD_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

if [ -n "${STEPSCOPE_NVML_LIB:-}" ]; then
    echo "gpu_check: NOTE: STEPSCOPE_NVML_LIB=$STEPSCOPE_NVML_LIB is read, not" \
        "the driver's NVML: this checks the script, not a GPU"
fi
echo "== 1. stepscope gpus"
set +e
"$SS" gpus --require >"$TMP/gpus.txt" 2>&1
rc=$?
set -e
cat "$TMP/gpus.txt"
if grep -q '^no NVML' "$TMP/gpus.txt"; then
    if [ "${GPU_CHECK_REQUIRE:-0}" = 1 ]; then
        fail "no NVML on a machine that should have GPUs"
    fi
    echo "gpu_check: no NVIDIA driver here: nothing to check (SKIPPED)"
    exit 0
fi
[ "$rc" = 0 ] || fail "NVML is present but stepscope could not read every GPU"
COUNT=$(sed -n 's/^NVML: \([0-9]*\) GPU.*/\1/p' "$TMP/gpus.txt")
[ -n "$COUNT" ] && [ "$COUNT" -gt 0 ] || fail "no GPU listed"

echo "== 2. against nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=uuid --format=csv,noheader >"$TMP/uuids.txt" ||
        fail "nvidia-smi failed"
    SMI_COUNT=$(grep -c . "$TMP/uuids.txt" || true)
    [ "$SMI_COUNT" = "$COUNT" ] ||
        fail "stepscope sees $COUNT GPUs, nvidia-smi $SMI_COUNT"
    while read -r uuid; do
        grep -q -- "$uuid" "$TMP/gpus.txt" || fail "GPU $uuid not listed"
    done <"$TMP/uuids.txt"
    echo "same $COUNT GPU(s) and UUIDs as nvidia-smi"
else
    echo "no nvidia-smi: skipped"
fi

echo "== 3. which GPU a rank uses"
LAST=$((COUNT - 1))
LAST_UUID=$(sed -n "s/^GPU $LAST  .*  \(GPU-[^ ]*\)  .*/\1/p" "$TMP/gpus.txt")
[ -n "$LAST_UUID" ] || fail "GPU $LAST has no UUID"
CUDA_VISIBLE_DEVICES=$LAST_UUID LOCAL_RANK=0 "$SS" gpus | grep -q -- "-> GPU $LAST\$" ||
    fail "CUDA_VISIBLE_DEVICES=$LAST_UUID does not map to GPU $LAST"
CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=0 "$SS" gpus | grep -q -- "-> GPU 0\$" ||
    fail "CUDA_VISIBLE_DEVICES=0 does not map to GPU 0"
echo "UUID and index entries map as docs/gpu.md says"

echo "== 4. a live sample under load"
PY=${PYTHON:-python3}
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2>/dev/null; then
    # CUDA's device 0 is NVML's GPU 0 in PCI bus order.
    CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0 "$PY" - \
        "$((SECONDS_WATCHED + 6))" <<'EOF' &
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda")
stop = time.time() + float(sys.argv[1])
while time.time() < stop:
    b = a @ a
    torch.cuda.synchronize()
EOF
    LOAD_PID=$!
    sleep 3 # CUDA context and the first kernels
    "$SS" gpus --watch "$SECONDS_WATCHED" --interval 250 --require \
        >"$TMP/watch.txt" 2>&1 || { cat "$TMP/watch.txt"; fail "the watch failed"; }
    kill "$LOAD_PID" 2>/dev/null || true
    wait "$LOAD_PID" 2>/dev/null || true
    LOAD_PID=""
    grep '^summary' "$TMP/watch.txt"
    UTIL=$(sed -n 's/^summary gpu=0 util=\([0-9]*\) .*/\1/p' "$TMP/watch.txt")
    [ -n "$UTIL" ] || fail "no utilisation for GPU 0 under load"
    [ "$UTIL" -ge 50 ] || fail "GPU 0 under load shows $UTIL % utilisation"
    grep -q '^summary gpu=0 util=[0-9]* sm_mhz=[0-9]' "$TMP/watch.txt" ||
        fail "no SM clock for GPU 0 under load"
    echo "GPU 0 under load: $UTIL % utilisation"
else
    echo "no PyTorch with CUDA: skipped"
fi

echo "== 5. GPU evidence per rank-step under stepscope run"
EX="$BUILD/examples/ss_allreduce"
[ -x "$EX" ] || fail "no $EX: build first (make)"
CUDA_VISIBLE_DEVICES=0 "$SS" run -n 2 --db "$TMP/run.db" --no-http -q -- \
    "$EX" --steps 60 --compute-ms 20 >"$TMP/run.txt" 2>&1 ||
    { cat "$TMP/run.txt"; fail "stepscope run failed"; }
"$SS" report --json --db "$TMP/run.db" >"$TMP/report.json" ||
    fail "stepscope report failed"
N_GPU=$(grep -o '"gpu": {"steps": [0-9]*, [^}]*"total": {"gpu": 0, [^}]*"sm_clock_mhz": [0-9]' \
    "$TMP/report.json" | grep -c . || true)
[ "$N_GPU" = 2 ] ||
    fail "the report shows GPU 0's evidence for $N_GPU of 2 ranks"
echo "both ranks have GPU 0's evidence per step"
echo "gpu_check: PASSED"
