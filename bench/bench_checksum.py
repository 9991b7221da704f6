"""bench_checksum.py - what replica checksums cost (docs/consistency.md).

    /usr/bin/python3 bench/bench_checksum.py [--mib 256] [--reps 7]

1. Bandwidth: in the same process, over the same buffer (--mib MiB of
   float32, cold for neither: each is run REPS times, the median kept),
   memcpy (torch's copy_ of one CPU tensor into another, one thread) and
   the checksum (stepscope._native._hash_ptrs, XXH3-64 over the tensor's
   memory in place), in GB/s, and their ratio.  A hash reads every byte
   once; a copy reads and writes each, so the ratio may exceed 1.
2. The cost on a model: the parameters of bench_torch_overhead.py's long
   model (examples/ddp_train.py --hidden 256 --batch 256: an MLP of 64
   features, 2 hidden layers, 10 classes) are hashed as auto mode does
   (stepscope._checksum.hash_tensors), beside one training step of that
   model in this process (forward, backward, SGD; no DDP), giving the
   cost per step, per GB of parameters, and the interval
   `--checksum-every auto` picks (docs/consistency.md).
Prints one JSON object.  Runs on one thread, as a rank does.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
for p in (BUILD / "python", SOURCE / "python"):
    if (p / "stepscope").is_dir():
        sys.path.insert(0, str(p))
        break

import torch  # noqa: E402

from stepscope import _checksum, _native  # noqa: E402


def median_s(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bandwidth(mib, reps):
    n = mib * 1024 * 1024 // 4
    src = torch.rand(n)
    dst = torch.empty(n)
    nbytes = n * 4
    copy_s = median_s(lambda: dst.copy_(src), reps)
    hash_s = median_s(lambda: _native._hash_ptrs([src.data_ptr()], [nbytes]),
                      reps)
    gb = nbytes / 1e9
    return {"bytes": nbytes, "memcpy_gb_s": round(gb / copy_s, 2),
            "checksum_gb_s": round(gb / hash_s, 2),
            "ratio": round(copy_s / hash_s, 3)}


def long_model(reps):
    layers = [torch.nn.Linear(64, 256), torch.nn.ReLU(),
              torch.nn.Linear(256, 256), torch.nn.ReLU(),
              torch.nn.Linear(256, 10)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(256, 64), torch.randint(0, 10, (256,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    params = list(model.parameters())
    step()
    step_s = median_s(step, reps * 3)
    hash_s = median_s(lambda: _checksum.hash_tensors(torch, params), reps * 3)
    nbytes = sum(p.numel() * p.element_size() for p in params)
    want = hash_s / (_checksum.TARGET_FRAC * step_s)
    every = 1
    while every < want and every < _checksum.MAX_EVERY:
        every *= 2
    return {"param_bytes": nbytes, "step_ms": round(step_s * 1e3, 3),
            "checksum_ms": round(hash_s * 1e3, 4),
            "frac_of_step_every_1": round(hash_s / step_s, 5),
            "ms_per_gb": round(hash_s * 1e3 / (nbytes / 1e9), 1),
            "auto_every": every,
            "frac_of_step_auto": round(hash_s / step_s / every, 5)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    torch.set_num_threads(1)
    out = {"bandwidth": bandwidth(a.mib, a.reps), "long_model": long_model(a.reps)}
    print(json.dumps(out, indent=1))
    return 0 if out["bandwidth"]["ratio"] >= 0.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
