"""bench_fp8_stats.py - what stepscope.fp8_stats costs on the training thread.

Times, on CPU tensors (one thread, as the ranks of the examples run):

  call_<shape>_<dtype>  one fp8_stats call (e4m3, a 0-d tensor scale) on
                        a tensor of that shape: the statistics computed
                        and kept for the step, median over steps of the
                        mean of CALLS calls (distinct names); wall time,
                        and the thread's CPU time (_cpu: what a shared
                        machine's load does not inflate)
  step_end_<k>          what the end of a step adds with K names recorded
                        in it, CPU time: the stack of the statistics and
                        the five vectors handed to the recorder (the
                        step's end with fp8_stats minus without)

Run it bare (fp8_stats checks its arguments and returns) and under a
controller for the recorded cost:

    OMP_NUM_THREADS=1 PYTHONPATH=python /usr/bin/python3 bench/bench_fp8_stats.py
    OMP_NUM_THREADS=1 PYTHONPATH=python build/stepscope run -n 1 \\
        --db /tmp/fp8-bench.db -- /usr/bin/python3 bench/bench_fp8_stats.py

Prints one JSON object: {"enabled": ..., "ms": {case: ms}}.
"""
import json
import statistics
import time

import torch

import stepscope

STEPS, CALLS = 15, 8


def time_calls(shape, dtype):
    x = torch.randn(*shape).to(dtype)
    scale = torch.tensor(448.0) / x.abs().max().float()
    wall, cpu = [], []
    for s in range(STEPS):
        with stepscope.step():
            t, c = time.perf_counter(), time.thread_time()
            for i in range(CALLS):
                stepscope.fp8_stats(f"l{i}.input", x, scale)
            wall.append((time.perf_counter() - t) / CALLS * 1e3)
            cpu.append((time.thread_time() - c) / CALLS * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def time_step_end(k):
    x = torch.randn(64, 64)
    scale = torch.tensor(1.0)
    with_stats, without = [], []
    for s in range(STEPS * 2):
        stepscope.step_begin()
        if s % 2 == 0:
            for i in range(k):
                stepscope.fp8_stats(f"m{i}.grad", x, scale, "e5m2")
        t = time.thread_time()
        stepscope.step_end()
        (with_stats if s % 2 == 0 else without).append(time.thread_time() - t)
    return (statistics.median(with_stats) - statistics.median(without)) * 1e3


def main():
    torch.set_num_threads(1)
    ms = {}
    for shape in ((1024, 1024), (64, 64)):
        for dtype in (torch.float32, torch.bfloat16):
            name = f"call_{shape[0]}x{shape[1]}_{str(dtype).split('.')[-1]}"
            wall, cpu = time_calls(shape, dtype)
            ms[name] = round(wall, 4)
            ms[name + "_cpu"] = round(cpu, 4)
    for k in (12, 300):
        ms[f"step_end_{k}"] = round(time_step_end(k), 4)
    print(json.dumps({"enabled": stepscope.enabled(), "ms": ms}))


if __name__ == "__main__":
    main()
