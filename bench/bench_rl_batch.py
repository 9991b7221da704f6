"""bench_rl_batch.py - what stepscope.rl_batch costs on the training thread.

Times one rl_batch call for a batch of N = 1024 completions (group size 8),
one call per step (as a trainer makes it), median over STEPS steps, wall and thread CPU time:

  lists          rewards a list of floats, lengths a list of ints
  lists_adv      the same with advantages (a list of floats)
  cpu_tensors    rewards float32, lengths int64 CPU tensors
  cpu_f64_adv    float64 CPU tensors, advantages included (read in place)

Run it bare (rl_batch checks its arguments and returns) and under a
controller for the recorded cost:

    OMP_NUM_THREADS=1 PYTHONPATH=python build/stepscope run -n 1 \\
        --db /tmp/rl-bench.db -- /usr/bin/python3 bench/bench_rl_batch.py

Prints one JSON object: {"enabled": ..., "us": {case: [wall, cpu]}}.
Device tensors are not timed here (no device on a CPU machine): they are
handed to stepscope.values, which copies a step's device vectors to the
host once, at the step's end.
"""
import json
import random
import statistics
import time

import torch

import stepscope

N, GROUP, STEPS, CALLS = 1024, 8, 200, 1


def time_case(args):
    wall, cpu = [], []
    for _ in range(STEPS):
        with stepscope.step():
            t, c = time.perf_counter(), time.thread_time()
            for _ in range(CALLS):
                stepscope.rl_batch(*args)
            wall.append((time.perf_counter() - t) / CALLS * 1e6)
            cpu.append((time.thread_time() - c) / CALLS * 1e6)
    return [round(statistics.median(wall), 2), round(statistics.median(cpu), 2)]


def main():
    rng = random.Random(0)
    rewards = [float(rng.random() < 0.3) for _ in range(N)]
    lengths = [rng.randint(1, 64) for _ in range(N)]
    adv = [rng.gauss(0, 1) for _ in range(N)]
    cases = {
        "lists": (rewards, lengths, GROUP),
        "lists_adv": (rewards, lengths, GROUP, adv),
        "cpu_tensors": (torch.tensor(rewards), torch.tensor(lengths), GROUP),
        "cpu_f64_adv": (torch.tensor(rewards, dtype=torch.float64),
                        torch.tensor(lengths, dtype=torch.float64), GROUP,
                        torch.tensor(adv, dtype=torch.float64)),
    }
    out = {name: time_case(args) for name, args in cases.items()}
    print(json.dumps({"enabled": stepscope.enabled(), "us": out}))


if __name__ == "__main__":
    main()
