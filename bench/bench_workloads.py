"""Per-call cost of stepscope.expert_load and shard_load on the training
thread, in nanoseconds per call, for host data of 256 experts: a Python
list of ints, an array('d'), a float64 CPU tensor and an int64 CPU tensor
(the dtype torch.bincount gives).  Times with timeit in batches of BATCH
calls, each batch inside one step, median over the batches; between
batches it sleeps, untimed, so that the recorder's sender drains the
thread's vector ring and no timed vector is dropped.  Run it under a
controller for the enabled cost (docs/workloads.md, "Cost"):

    build/stepscope run -n 1 --db /tmp/wl.db -- \\
        /usr/bin/python3 bench/bench_workloads.py

Prints one JSON object: {"enabled": ..., "ns": {case: ns}, "counters": ...}.
"""
import argparse
import array
import json
import statistics
import time
import timeit

import torch

import stepscope

N_EXPERTS = 256


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--batch", type=int, default=100)
    args = p.parse_args()
    counts = torch.randint(0, 100, (N_EXPERTS,))
    env = {
        "stepscope": stepscope,
        "as_list": counts.tolist(),
        "as_array": array.array("d", counts.tolist()),
        "as_f64": counts.to(torch.float64),
        "as_i64": counts,
    }
    cases = {
        "loop": "pass",
        "expert_load_list": "stepscope.expert_load(3, as_list)",
        "expert_load_array_d": "stepscope.expert_load(3, as_array)",
        "expert_load_tensor_f64": "stepscope.expert_load(3, as_f64)",
        "expert_load_tensor_i64": "stepscope.expert_load(3, as_i64)",
        "shard_load_array_d": "stepscope.shard_load('items', as_array)",
    }
    stepscope.expert_placement(3, [e % 4 for e in range(N_EXPERTS)])
    # a whole step with 32 layers' loads as int64 tensors, against an
    # empty step: what the step's end adds to copy them (per layer)
    step_cases = {
        "step_empty": "with stepscope.step():\n    pass",
        "step_32_layers_i64": "with stepscope.step():\n"
                              "    for layer in range(32):\n"
                              "        stepscope.expert_load(layer, as_i64)",
    }
    ns = {}
    for case, stmt in cases.items():
        t = timeit.Timer(stmt, globals=env)
        per = []
        for b in range(args.batches):
            with stepscope.step():
                per.append(t.timeit(args.batch) / args.batch * 1e9)
            time.sleep(0.002)
        ns[case] = round(statistics.median(per), 1)
    for case, stmt in step_cases.items():
        t = timeit.Timer(stmt, globals=env)
        per = []
        for b in range(args.batches):
            per.append(t.timeit(20) / 20 * 1e9)
            time.sleep(0.005)
        ns[case] = round(statistics.median(per), 1)
    ns["step_end_per_layer"] = round(
        (ns["step_32_layers_i64"] - ns["step_empty"]) / 32, 1)
    print(json.dumps({"enabled": stepscope.enabled(), "ns": ns,
                      "counters": stepscope.counters()}))


if __name__ == "__main__":
    main()
