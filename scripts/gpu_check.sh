#!/bin/sh
# The check a machine with NVIDIA or AMD GPUs runs (docs/gpu.md): the unit
# tests read NVML and AMD SMI only through test doubles, so this is where
# stepscope's readers (src/controller/host/nvml.c, amdsmi.c) meet a real
# driver, and auto mode's CUDA events and device memory a real GPU.
#
# Usage: scripts/gpu_check.sh [--no-build] [--seconds S] [--steps N]
#   BUILD=DIR      the build directory (default build/)
#   PYTHON=PATH    the Python with PyTorch for steps 4 and 6 (default
#                  python3)
#   --no-build     use the stepscope already built in $BUILD
#   --seconds S    how long to watch the GPUs under load (default 5)
#   --steps N      steps of the auto-mode job of step 6 (default 200)
#
# It builds stepscope (`make`), then:
#  1. `stepscope gpus --require`: every GPU must be read (exit 1 otherwise),
#     through NVML, else AMD SMI;
#  2. with nvidia-smi (NVIDIA) or amd-smi (AMD): the same number of GPUs,
#     and each of its UUIDs (NVIDIA) or PCI bus ids (AMD);
#  3. the rank-to-GPU rule: the last GPU by UUID (NVIDIA:
#     CUDA_VISIBLE_DEVICES=<UUID>) or by index (AMD: HIP_VISIBLE_DEVICES=<n>)
#     must map to the last GPU, CUDA_VISIBLE_DEVICES=0 to GPU 0;
#  4. with PyTorch and a GPU: a matrix-multiply load on GPU 0 while
#     `stepscope gpus --watch S` samples; GPU 0's utilisation over the
#     watch must reach 50 % and its clock be known;
#  5. a short `stepscope run` of the example job (2 ranks on GPU 0): every
#     rank-step must carry GPU 0's evidence (report --json shows
#     ranks[].host_evidence.gpu with the GPU's index and a clock);
#  6. with PyTorch and a GPU: a real DDP job (NCCL or RCCL with a GPU per
#     rank, gloo when the ranks share one) under `stepscope run --auto`,
#     2 to 4 ranks, the last rank's GPU slowed by a busy kernel (extra
#     matrix multiplies inside its forward) and rank 0 holding 4 GiB more
#     device memory: every rank must have its GPU's evidence, a device
#     memory peak and GPU phase times from CUDA events (gpu_forward,
#     gpu_backward), the slow rank the longest gpu_forward; auto mode must
#     not have called torch.cuda.synchronize(); the findings must name the
#     slow rank a straggler and rank 0's device memory an imbalance.
#     Clocks are not capped: that changes the machine for its next user.
# On a machine without a GPU library it says so and exits 0 (set
# GPU_CHECK_REQUIRE=1 to make that a failure).  Exit status: 0 passed or
# nothing to check, 1 a check failed, 2 bad usage.  The test suite runs it
# against NVML's and AMD SMI's test doubles (ctest -R gpu_check) so that
# it keeps working between visits to a GPU machine; there steps 4 and 6
# are skipped (no GPU for PyTorch).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECONDS_WATCHED=5
JOB_STEPS=200
DO_BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
    --no-build) DO_BUILD=0 ;;
    --seconds) SECONDS_WATCHED=$2; shift ;;
    --steps) JOB_STEPS=$2; shift ;;
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

for var in STEPSCOPE_NVML_LIB STEPSCOPE_AMDSMI_LIB; do
    eval "lib=\${$var:-}"
    case "$lib" in
    "" | /nonexistent/*) ;;
    *) echo "gpu_check: NOTE: $var=$lib is read, not the driver's library:" \
        "this checks the script, not a GPU" ;;
    esac
done
echo "== 1. stepscope gpus"
set +e
"$SS" gpus --require >"$TMP/gpus.txt" 2>&1
rc=$?
set -e
cat "$TMP/gpus.txt"
if grep -q '^no NVML' "$TMP/gpus.txt"; then
    if [ "${GPU_CHECK_REQUIRE:-0}" = 1 ]; then
        fail "no GPU library on a machine that should have GPUs"
    fi
    echo "gpu_check: no NVIDIA or AMD driver here: nothing to check (SKIPPED)"
    exit 0
fi
[ "$rc" = 0 ] || fail "a GPU library is present but stepscope could not read every GPU"
VENDOR=$(sed -n 's/^\(NVML\|AMD SMI\): [0-9]* GPU.*/\1/p' "$TMP/gpus.txt")
COUNT=$(sed -n 's/^\(NVML\|AMD SMI\): \([0-9]*\) GPU.*/\2/p' "$TMP/gpus.txt")
[ -n "$COUNT" ] && [ "$COUNT" -gt 0 ] || fail "no GPU listed"
echo "read through $VENDOR"

LAST=$((COUNT - 1))
if [ "$VENDOR" = NVML ]; then
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
    LAST_UUID=$(sed -n "s/^GPU $LAST  .*  \(GPU-[^ ]*\)  .*/\1/p" "$TMP/gpus.txt")
    [ -n "$LAST_UUID" ] || fail "GPU $LAST has no UUID"
    CUDA_VISIBLE_DEVICES=$LAST_UUID LOCAL_RANK=0 "$SS" gpus | grep -q -- "-> GPU $LAST\$" ||
        fail "CUDA_VISIBLE_DEVICES=$LAST_UUID does not map to GPU $LAST"
else
    echo "== 2. against amd-smi"
    if command -v amd-smi >/dev/null 2>&1; then
        amd-smi list >"$TMP/amd-smi.txt" 2>&1 || fail "amd-smi list failed"
        SMI_COUNT=$(grep -c '^GPU:' "$TMP/amd-smi.txt" || true)
        [ "$SMI_COUNT" = "$COUNT" ] ||
            fail "stepscope sees $COUNT GPUs, amd-smi $SMI_COUNT"
        # "BDF: 0000:23:00.0" there, "00000000:23:00.0" here.
        for bdf in $(sed -n 's/^ *BDF: *[0-9a-fA-F]*:\(.*\)/\1/p' "$TMP/amd-smi.txt"); do
            grep -qi -- ":$bdf\$" "$TMP/gpus.txt" || fail "GPU at $bdf not listed"
        done
        echo "same $COUNT GPU(s) and PCI bus ids as amd-smi"
    else
        echo "no amd-smi: skipped"
    fi
    echo "== 3. which GPU a rank uses"
    HIP_VISIBLE_DEVICES=$LAST LOCAL_RANK=0 "$SS" gpus | grep -q -- "-> GPU $LAST\$" ||
        fail "HIP_VISIBLE_DEVICES=$LAST does not map to GPU $LAST"
fi
CUDA_VISIBLE_DEVICES=0 LOCAL_RANK=0 "$SS" gpus | grep -q -- "-> GPU 0\$" ||
    fail "CUDA_VISIBLE_DEVICES=0 does not map to GPU 0"
echo "the rank's variables map as docs/gpu.md says"

echo "== 4. a live sample under load"
PY=${PYTHON:-python3}
HAVE_TORCH_GPU=0
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2>/dev/null; then
    HAVE_TORCH_GPU=1
fi
if [ "$HAVE_TORCH_GPU" = 1 ]; then
    # CUDA's device 0 is NVML's GPU 0 in PCI bus order (HIP's is AMD SMI's).
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
        fail "no clock for GPU 0 under load"
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

echo "== 6. a real job under stepscope run --auto, one rank's GPU slowed"
if [ "$HAVE_TORCH_GPU" = 1 ]; then
    NRANKS=$COUNT
    [ "$NRANKS" -ge 2 ] || NRANKS=2
    [ "$NRANKS" -le 4 ] || NRANKS=4
    SLOW=$((NRANKS - 1))
    cat >"$TMP/gpu_job.py" <<'EOF'
"""A DDP job on GPUs, instrumented from outside by stepscope run --auto.
argv: steps, slow rank, busy ms per step on it, rank holding HOG_MIB more."""
import os, sys, time
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

steps, slow, busy_ms, hog_mib = (int(sys.argv[1]), int(sys.argv[2]),
                                 float(sys.argv[3]), int(sys.argv[4]))
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
n_dev = torch.cuda.device_count()
dev = int(os.environ.get("LOCAL_RANK", rank)) % n_dev
torch.cuda.set_device(dev)
# NCCL (RCCL on ROCm) wants a GPU per rank; ranks sharing one use gloo.
dist.init_process_group("nccl" if n_dev >= world else "gloo")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(),
                      nn.Linear(4096, 4096)).cuda()
model = DDP(model, device_ids=[dev])
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(512, 4096, device="cuda")
hog = (torch.empty(hog_mib << 20, dtype=torch.uint8, device="cuda")
       if rank == 0 else None)
if rank == slow:
    # The busy kernel: matrix multiplies on this rank's GPU inside its
    # forward, sized to BUSY_MS (measured once, before the loop).
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    per = (time.perf_counter() - t) * 1000 / 10
    reps = max(1, int(busy_ms / max(per, 1e-3)))
    model.module[0].register_forward_hook(
        lambda m, i, o: [a @ a for _ in range(reps)] and None)
# Auto mode must never synchronize: count it from here on.
syncs = [0]
real_sync = torch.cuda.synchronize
def counting_sync(*a, **k):
    syncs[0] += 1
    return real_sync(*a, **k)
torch.cuda.synchronize = counting_sync
for step in range(steps):
    opt.zero_grad()
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
torch.cuda.synchronize = real_sync
torch.cuda.synchronize()
print("rank=%d gpu=%d synchronize_calls=%d" % (rank, dev, syncs[0]),
      flush=True)
dist.destroy_process_group()
EOF
    env -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES \
        CUDA_DEVICE_ORDER=PCI_BUS_ID \
        "$SS" run --auto -n "$NRANKS" --db "$TMP/auto.db" --no-http -q -- \
        "$PY" "$TMP/gpu_job.py" "$JOB_STEPS" "$SLOW" 40 4096 \
        >"$TMP/auto.txt" 2>&1 || { cat "$TMP/auto.txt"; fail "the auto-mode job failed"; }
    grep 'synchronize_calls=' "$TMP/auto.txt" || true
    if grep -q 'synchronize_calls=[1-9]' "$TMP/auto.txt"; then
        fail "auto mode called torch.cuda.synchronize() during the job"
    fi
    "$SS" report --json --db "$TMP/auto.db" >"$TMP/auto.json" ||
        fail "stepscope report failed"
    "$SS" report --db "$TMP/auto.db" | sed -n '1,60p'
    "$PY" - "$TMP/auto.json" "$NRANKS" "$SLOW" "$COUNT" <<'EOF' ||
import json, sys
report = json.load(open(sys.argv[1]))
nranks, slow, ngpus = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
bad = []
ranks = {r["rank"]: r for r in report["ranks"]}
fwd = {}
for k in range(nranks):
    r = ranks.get(k)
    if r is None:
        bad.append("rank %d missing from the report" % k)
        continue
    gpu = (r.get("host_evidence") or {}).get("gpu")
    want = k % ngpus
    if not gpu or gpu["total"]["gpu"] != want:
        bad.append("rank %d: no evidence of its GPU %d: %r" % (k, want, gpu))
    if not r.get("max_device_bytes"):
        bad.append("rank %d: no device memory peak" % k)
    ph = r.get("phase_median_ms") or {}
    for p in ("gpu_forward", "gpu_backward"):
        if p not in ph:
            bad.append("rank %d: no %s phase (CUDA events)" % (k, p))
    fwd[k] = ph.get("gpu_forward", 0)
    print("rank %d: GPU %s, device peak %.0f MiB, gpu_forward %.2f ms, "
          "gpu_backward %s ms" % (k, gpu and gpu["total"]["gpu"],
          (r.get("max_device_bytes") or 0) / 2**20, fwd[k],
          ph.get("gpu_backward")))
others = [v for k, v in fwd.items() if k != slow]
if fwd.get(slow, 0) <= 1.5 * max(others or [0]):
    bad.append("the slow rank's gpu_forward (%.2f ms) is not the longest "
               "by half again (%r)" % (fwd.get(slow, 0), fwd))
kinds = {}
for f in report["findings"]:
    kinds.setdefault(f["kind"], []).append(f)
    print("finding %s %s ranks %s: %s" % (f["severity"], f["kind"],
                                          f["ranks"], f["message"]))
if not any(slow in f["ranks"] for f in kinds.get("straggler", [])):
    bad.append("no straggler finding names rank %d" % slow)
if not any(f["evidence"].get("memory") == "device" and
           f["evidence"].get("worst_rank") == 0
           for f in kinds.get("memory_imbalance", [])):
    bad.append("no memory_imbalance finding on rank 0's device memory")
for b in bad:
    print("gpu_check: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
        fail "the auto-mode job's evidence or findings are not as expected"
    echo "every rank has its GPU's evidence, device memory and GPU phase times;"
    echo "rank $SLOW named a straggler, rank 0's device memory an imbalance"
else
    echo "no PyTorch with a GPU: skipped"
fi
echo "gpu_check: PASSED"
