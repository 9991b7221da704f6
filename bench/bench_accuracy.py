"""bench_accuracy.py - does stepscope name the right rank, phase and cause?

A scenario matrix on real PyTorch DDP jobs (examples/ddp_train.py: gloo,
CPU) under `stepscope run --auto`, and emulated float8 training
(examples/fp8_emulated.py, which records its float8 statistics itself, so
it runs without --auto; a right float8 finding also has the layer, the
tensor and the first step).  Each scenario injects one fault (or
none, in the clean runs) and says what a correct diagnosis is: the kind of
finding, the rank, and the phase or the cause.  Faults inside the script
are its own switches (--slow-rank/--slow-phase, --stall-rank, --leak-rank,
--spike-rank, --imbalance-rank); faults of the host are applied from
outside to the rank's process once the job has begun stepping:

  nice      the rank's threads at nice 19 (its CPU goes to the others)
  hog       the rank and busy loops pinned to the same CPU
  throttle  the rank moved into a new cgroup with a CPU quota (cgroup v2
            cpu.max where the cpu controller is on v2, else v1
            cpu.cfs_quota_us / cpu.cfs_period_us; needs root)
  stops     SIGSTOP for 30 ms every 100 ms, then SIGCONT
  stops-rare  SIGSTOP for 30 ms every 250 ms (few stops on short steps)
  freeze    every rank of the job (on every node) stopped once for 2 s,
            from step 60: the job frozen from outside, no rank's fault
  load      no fault of a rank: busy loops, one per CPU, on the cores the
            job runs on (a loaded machine; every rank suffers alike)

Every run's findings (`stepscope report --json`) are graded against the
scenario's expectations, the table EXPECT below:

  right   a finding matches one of the expected alternatives: its kind,
          exactly the expected rank, and the phase or cause when one is
          given (a clean run is right when it has no finding)
  wrong   findings, but none that matches
  missed  no finding at all
  error   the job failed or timed out (counted as not right)

The numerics scenarios (nan-*, numerics-*; examples/ddp_numerics.py, 3
ranks) inject a NaN into one module (first, middle, last) on one rank (0,
the middle, the last) at one step, forward or backward, under --numerics
light and full: right is a `nonfinite` finding whose first rank and step
are the injected ones and, in full mode, whose module and direction are
too; a loss spike on one rank wants loss_spike naming it.

The replica scenarios (replica-*; examples/ddp_replica.py, `--checksum-every
1` unless said) flip one bit of one parameter (first, middle, last in
module order) on one rank (0, the middle, the last; mantissa bit 22, and
bit 0 and the sign bit on 4 ranks) at step 5, or lose one rank's
optimizer update: right is a `replica_divergence` naming exactly that rank,
the first checksum step at or after the fault and that parameter (for a
lost update the first in module order).  Clean runs of 2, 3 and 4 ranks
(checksums every step, and `--checksum-every auto`) want no finding.

The workload scenarios (docs/workloads.md): pipeline-* run
examples/pipeline_train.py on 4 ranks, one stage each, with one stage given
3x the layers at the first, a middle and the last position under 1F1B and
GPipe (right: a `pipeline_bubble` naming that stage's rank and stage), or
balanced (no finding); ff-* run examples/forward_forward.py, layer-local
training on 4 data-parallel ranks, with one rank 400 ms slower in one
layer (right: a straggler naming that rank and the layer's loss phase), or
none (no finding).

Findings of a fault run that match nothing and do not name the faulty rank
are counted as unrelated (false) findings.  The output is a table, one row
per scenario, with the totals: recall over the fault runs, how many
scenarios were right in every repetition, and the findings on clean runs
split into critical and warning.  It is a benchmark, not a test: on a
shared machine the numbers move from run to run.

    /usr/bin/python3 bench/bench_accuracy.py [--reps 3] [--only A,B,'nan-*'] [--list]
                                             [--out FILE.md] [--keep-db DIR]
                                             [--nodes 2 [--aggregate rank,node]]

With --nodes 2 every scenario of an even number of ranks runs on two
virtual nodes (tests/netns.py: a network and UTS namespace each, as root),
half of its ranks on each: `stepscope run --nnodes 2` on node 0 (the
controller) and on node 1 (an agent), once per aggregation mode of
--aggregate (docs/multinode.md); host faults reach the rank's process on
whichever node it runs.  The table then has a row per scenario and mode,
and a last section compares the findings (kind, ranks, phase) of the two
modes run by run.

Needs the build (STEPSCOPE_BUILD, default ./build; `make bench-accuracy`
builds it first) and PyTorch.  The full matrix takes about 20 minutes on
2 cores.  Exit status: 0 when every run was made, 1 when some run could
not be (a job error or timeout), 2 for a usage error.
"""
import argparse
import datetime
import fnmatch
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("STEPSCOPE_BUILD", SOURCE / "build"))
TRAIN = SOURCE / "examples" / "ddp_train.py"
NUMERICS = SOURCE / "examples" / "ddp_numerics.py"
FP8 = SOURCE / "examples" / "fp8_emulated.py"
REPLICA = SOURCE / "examples" / "ddp_replica.py"
PIPELINE = SOURCE / "examples" / "pipeline_train.py"
FORWARD_FORWARD = SOURCE / "examples" / "forward_forward.py"
MOE = SOURCE / "examples" / "moe_train.py"
EMBEDDING = SOURCE / "examples" / "embedding_train.py"
GRPO = SOURCE / "examples" / "grpo_train.py"
LM = SOURCE / "examples" / "lm_train.py"
RANK_PYTHON = "/usr/bin/python3"  # the interpreter with torch (as the demo uses)

sys.path.insert(0, str(SOURCE / "tests"))
from jobs import descendants, rank_pid, secret_file, stored_steps, threads  # noqa: E402
import netns  # noqa: E402

NODE_PORT = 29611  # in a virtual node: the ranks' rendezvous; the controller +1


# ---------------------------------------------------------------------------
# What a correct diagnosis is, per scenario.  Each entry lists alternatives;
# a run is right when one finding matches one of them.  Adjust here as the
# detectors learn to name more (e.g. a cause).

ANY = "any phase"


@dataclass(frozen=True)
class Want:
    """One acceptable finding: KIND naming exactly [RANK] (no rank when
    RANK is None); PHASE unless it is ANY (None: the finding must name no
    phase); CAUSE when given, a substring of the finding's cause (its
    `cause` field or evidence key); EVIDENCE, (key, value) pairs the
    finding's evidence must hold; STEP, its first step, when given."""
    kind: str
    rank: int
    phase: object = ANY
    cause: str = None
    evidence: tuple = ()  # (key, value) pairs the finding's evidence holds
    step: int = None     # nonfinite, spikes, float8: the first step...
    module: str = None   # ...and the module where it began (evidence)
    param: str = None    # replica_divergence: exactly [RANK], the first
                         # differing parameter (evidence first_param)

    def describe(self):
        text = f"{self.kind} " + ("(no rank)" if self.rank is None else f"r{self.rank}")
        if self.step is not None:
            text += f" s{self.step}"
        if self.module:
            text += f" {self.module}"
        if self.param:
            text += f" {self.param}"
        if self.phase != ANY:
            text += f" {self.phase or '-'}"
        if self.cause:
            text += f" cause~{self.cause}"
        if self.evidence:
            text += " " + ".".join(str(v) for _, v in self.evidence)
        if self.step is not None:
            text += f" s{self.step}"
        return text


CLEAN = ()  # no finding at all

EXPECT = {
    "clean-1": CLEAN,
    "clean-2": CLEAN,
    "clean-3": CLEAN,
    "clean-4": CLEAN,
    "clean-8": CLEAN,
    "clean-2-short": CLEAN,
    "clean-3-short": CLEAN,
    "clean-4-short": CLEAN,
    "clean-8-short": CLEAN,
    "clean-4-long": CLEAN,
    "clean-2-long": CLEAN,
    "slow-forward": (Want("straggler", 2, "forward"),),
    "slow-backward": (Want("straggler", 1, "backward"),),
    "slow-optimizer": (Want("straggler", 3, "optimizer"),),
    "slow-data": (Want("straggler", 2, "data"), Want("data_stall", 2)),
    "data-stall": (Want("data_stall", 1),),
    "data-stall-2-ranks": (Want("data_stall", 1),),
    "data-stall-1-rank": (Want("data_stall", 0),),
    "slow-3ms-11ms-step": (Want("straggler", 1, "forward"),),
    "slow-1ms-short-step": (Want("straggler", 1, "forward"),),
    "slow-forward-8-ranks": (Want("straggler", 5, "forward"),),
    "sleep-forward": (Want("straggler", 2, "forward"),),
    "sleep-after-8-ranks-loaded": (Want("straggler", 6, None),),
    "sleep-backward-2-ranks": (Want("straggler", 0, "backward"),),
    "sleep-8ms-3-ranks": (Want("straggler", 1, "forward"),),
    "slow-backward-3-ranks": (Want("straggler", 2, "backward"),),
    "sleep-4ms-2-ranks-loaded": (Want("straggler", 1, "forward"),),
    "sleep-4ms-2-ranks-long": (Want("straggler", 1, "forward"),),
    "sleep-3ms-11ms-step": (Want("straggler", 1, "forward"),),
    "lm-sleep-block": (Want("straggler", 1, "forward"),),
    "lm-sleep-loss": (Want("straggler", 2, None),),
    "eval-rank0-every-50": (Want("straggler", 0, "forward"),),
    "eval-rank3-every-120": (Want("straggler", 3, "forward"),),
    "nice-19": (Want("cpu_starved", 2), Want("straggler", 2, cause="cpu")),
    "nice-19-3-ranks": (Want("cpu_starved", 0), Want("straggler", 0, cause="cpu")),
    "cgroup-throttle-3-ranks": (Want("cpu_throttled", 1), Want("straggler", 1, cause="throttl")),
    "sigstop-hiccups-3-ranks": (Want("stopped", 2), Want("straggler", 2, cause="stop"),
                                Want("jitter", 2, cause="stop")),
    "memory-leak-3-ranks": (Want("memory_creep", 2),),
    "cpu-hog": (Want("cpu_starved", 1), Want("straggler", 1, cause="cpu")),
    "cgroup-throttle": (Want("cpu_throttled", 2), Want("straggler", 2, cause="throttl")),
    "freeze-all": (Want("stall", None, cause="stop"),),
    "sigstop-hiccups": (Want("stopped", 3), Want("straggler", 3, cause="stop"),
                        Want("jitter", 3, cause="stop")),
    # a loaded machine: the clean runs with busy loops on every core
    "lm-clean-4": CLEAN,
    "clean-2-loaded": CLEAN,
    "clean-3-loaded": CLEAN,
    "clean-4-loaded": CLEAN,
    "clean-2-short-loaded": CLEAN,
    "clean-4-short-loaded": CLEAN,
    "clean-8-short-loaded": CLEAN,
    "clean-8-loaded": CLEAN,
    "sigstop-short-steps": (Want("stopped", 3), Want("straggler", 3, cause="stop"),
                            Want("jitter", 3, cause="stop")),
    "memory-leak": (Want("memory_creep", 1),),
    "memory-spike": (Want("memory_spike", 2),),
    "memory-imbalance": (Want("memory_imbalance", 3),),
    "memory-imbalance-2-ranks": (Want("memory_imbalance", 0),),
    # float8 health (examples/fp8_emulated.py): the layer, tensor and step
    "fp8-clean": CLEAN,
    "fp8-clean-delayed": CLEAN,
    "fp8-outlier": (Want("fp8_saturation", 1, evidence=(("layer", "fc2"), ("tensor", "input")),
                         step=6),),
    "fp8-underflow": (Want("fp8_underflow", 2, evidence=(("layer", "fc3"), ("tensor", "grad")),
                           step=8),),
    "fp8-zero-amax": (Want("fp8_scale", 0, evidence=(("layer", "fc1"), ("tensor", "input")),
                           step=10),),
}

# The numerics matrix: module depth x rank position x direction x mode.
NAN_MODULES = (("first", "embed"), ("middle", "blocks.1.fc1"), ("last", "head"))
NAN_RANKS = (("r0", 0), ("mid", 1), ("last", 2))
NAN_STEP = 7
for _mode in ("full", "light"):
    for _depth, _module in NAN_MODULES:
        for _pos, _rank in NAN_RANKS:
            for _dir in ("forward", "backward"):
                EXPECT[f"nan-{_mode}-{_depth}-{_dir}-{_pos}"] = (
                    Want("nonfinite", _rank, _dir if _mode == "full" else None,
                         step=NAN_STEP, module=_module if _mode == "full" else None),)
EXPECT["numerics-clean-light"] = CLEAN
EXPECT["numerics-clean-full"] = CLEAN
EXPECT["numerics-loss-spike"] = (Want("loss_spike", 1, step=25),)

# The replica matrix: parameter position x rank position (3 ranks), bits
# and an interval on 4 ranks, a lost update, clean runs.
FLIP_PARAMS = (("first", "embed.weight"), ("middle", "blocks.1.fc2.weight"),
               ("last", "head.bias"))
FLIP_RANKS = (("r0", 0), ("mid", 1), ("last", 2))
FLIP_STEP = 5
REPLICA_FAULTS = tuple(
    (f"replica-flip-{depth}-{pos}",
     f"bit 22 of {param}[0] flipped on rank {rank} at step {FLIP_STEP}",
     3, ("--flip-rank", str(rank), "--flip-step", str(FLIP_STEP),
         "--flip-param", param), 1, Want("replica_divergence", rank,
                                         step=FLIP_STEP, param=param))
    for depth, param in FLIP_PARAMS for pos, rank in FLIP_RANKS) + (
    ("replica-flip-bit0-4-ranks", "bit 0 of blocks.0.fc1.weight[7] on rank 3",
     4, ("--flip-rank", "3", "--flip-step", str(FLIP_STEP), "--flip-param",
         "blocks.0.fc1.weight", "--flip-index", "7", "--flip-bit", "0"), 1,
     Want("replica_divergence", 3, step=FLIP_STEP, param="blocks.0.fc1.weight")),
    ("replica-flip-sign-4-ranks", "the sign bit of blocks.2.fc1.bias[3] on rank 1",
     4, ("--flip-rank", "1", "--flip-step", str(FLIP_STEP), "--flip-param",
         "blocks.2.fc1.bias", "--flip-index", "3", "--flip-bit", "31"), 1,
     Want("replica_divergence", 1, step=FLIP_STEP, param="blocks.2.fc1.bias")),
    ("replica-flip-every-4", "bit 22 of blocks.1.fc1.weight on rank 2, "
     "--checksum-every 4", 4, ("--flip-rank", "2", "--flip-step",
                               str(FLIP_STEP), "--flip-param",
                               "blocks.1.fc1.weight"), 4,
     Want("replica_divergence", 2, step=8, param="blocks.1.fc1.weight")),
    ("replica-lost-update", "rank 1's optimizer update of step 4 lost", 3,
     ("--skip-rank", "1", "--skip-step", "4"), 1,
     Want("replica_divergence", 1, step=4, param="embed.weight")),
)
for _name, _what, _ranks, _args, _every, _want in REPLICA_FAULTS:
    EXPECT[_name] = (_want,)
for _n in (2, 3, 4):
    EXPECT[f"replica-clean-{_n}"] = CLEAN
EXPECT["replica-clean-4-auto"] = CLEAN
# pipelines and layer-local training (docs/workloads.md)
PIPELINE_HEAVY = (("1f1b", 0), ("1f1b", 2), ("1f1b", 3), ("gpipe", 1))
for _sched, _stage in PIPELINE_HEAVY:
    EXPECT[f"pipeline-{_sched}-heavy-{_stage}"] = (
        Want("pipeline_bubble", _stage, evidence=(("stage", _stage),)),)
EXPECT["pipeline-1f1b-clean"] = CLEAN
EXPECT["pipeline-gpipe-clean"] = CLEAN
FF_SLOW = ((2, 1), (0, 3))
for _rank, _layer in FF_SLOW:
    EXPECT[f"ff-slow-rank{_rank}-layer{_layer}"] = (
        Want("straggler", _rank, phase=f"layer{_layer}.loss"),)
EXPECT["ff-clean"] = CLEAN
EXPECT.update({
    # parallel workloads (examples/moe_train.py, embedding_train.py): the
    # layer or table and the rank hosting the hot experts or shard
    "moe-balanced": CLEAN,
    "moe-skew-experts-6-7": (Want("expert_imbalance", 3, evidence=(("layer", "1"),)),),
    "moe-skew-expert-2": (Want("expert_imbalance", 1, evidence=(("layer", "1"),
                                                                ("hot_experts", "2"))),),
    "embedding-spread": CLEAN,
    "embedding-hot-shard-2": (Want("embedding_imbalance", 2,
                                   evidence=(("table", "items"), ("hot_shard", 2))),),
    "embedding-hot-shard-0": (Want("embedding_imbalance", 0,
                                   evidence=(("table", "items"), ("hot_shard", 0))),),
})
# RL post-training (examples/grpo_train.py, docs/rl.md)
EXPECT["grpo-clean"] = CLEAN
EXPECT["grpo-long-tail-r2"] = (Want("rollout_long_tail", 2, "rollout"),)
EXPECT["grpo-long-tail-r0"] = (Want("rollout_long_tail", 0, "rollout"),)
EXPECT["grpo-constant-reward"] = (Want("reward_collapse", 0, step=12),)
EXPECT["grpo-lr-blowup"] = (Want("kl_spike", 0, step=15),)


# ---------------------------------------------------------------------------
# The workloads.  Step times measured on 2 idle cores: default model ~23 ms
# on 4 ranks, ~57 ms on 8; "short" ~1.3 ms on 2 ranks, ~6 ms on 4; the
# 11 ms step ~9 ms before its 3 ms straggler; "long" ~125 ms on 4.

SHORT = ("--hidden", "32", "--layers", "1", "--batch", "8")
MID = ("--hidden", "128", "--layers", "1", "--batch", "16")
LONG = ("--hidden", "512", "--layers", "2", "--batch", "64")


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str               # one line for people
    ranks: int
    steps: int
    args: tuple = ()        # more ddp_train.py arguments
    host: str = None        # a host fault: nice, hog, throttle, stops
    host_rank: int = None
    timeout_s: int = 180
    script: Path = TRAIN    # the rank program; FP8 imports stepscope itself,
    auto: bool = True       # so it runs without --auto
    run_args: tuple = ()    # more `stepscope run` arguments


SCENARIOS = (
    Scenario("clean-1", "no fault, one rank", 1, 150),
    Scenario("clean-2", "no fault", 2, 150),
    Scenario("clean-3", "no fault", 3, 150),
    Scenario("clean-4", "no fault", 4, 150),
    Scenario("clean-8", "no fault, ranks outnumber cores", 8, 100),
    Scenario("clean-2-short", "no fault, ~1.3 ms steps", 2, 400, SHORT),
    Scenario("clean-3-short", "no fault, short steps", 3, 300, SHORT),
    Scenario("clean-4-short", "no fault, ~6 ms steps", 4, 300, SHORT),
    Scenario("clean-8-short", "no fault, short steps, ranks outnumber cores", 8, 200, SHORT),
    Scenario("clean-4-long", "no fault, ~125 ms steps", 4, 50, LONG),
    Scenario("clean-2-long", "no fault, ~40 ms steps of 2 ranks", 2, 150, LONG),
    Scenario("slow-forward", "rank 2: +40 ms compute in forward", 4, 100,
             ("--slow-rank", "2", "--slow-phase", "forward", "--slow-ms", "40")),
    Scenario("slow-backward", "rank 1: +40 ms compute in backward", 4, 100,
             ("--slow-rank", "1", "--slow-phase", "backward", "--slow-ms", "40")),
    Scenario("slow-optimizer", "rank 3: +40 ms compute in the optimizer step", 4, 100,
             ("--slow-rank", "3", "--slow-phase", "optimizer", "--slow-ms", "40")),
    Scenario("slow-data", "rank 2: +40 ms compute reading each batch", 4, 100,
             ("--slow-rank", "2", "--slow-phase", "data", "--slow-ms", "40")),
    Scenario("data-stall", "rank 1: a 150 ms read every 10 steps", 4, 120,
             ("--stall-rank", "1", "--stall-ms", "150", "--stall-every", "10")),
    Scenario("data-stall-2-ranks", "rank 1 of 2: a 150 ms read every 2 steps", 2, 120,
             ("--stall-rank", "1", "--stall-ms", "150", "--stall-every", "2")),
    Scenario("data-stall-1-rank", "a job of one rank: a 150 ms read every 2 steps", 1, 120,
             ("--stall-rank", "0", "--stall-ms", "150", "--stall-every", "2")),
    Scenario("slow-3ms-11ms-step", "rank 1: +3 ms in forward of a ~11 ms step", 4, 250,
             MID + ("--slow-rank", "1", "--slow-ms", "3")),
    Scenario("slow-1ms-short-step", "rank 1: +1 ms in forward of a ~1.3 ms step", 2, 400,
             SHORT + ("--slow-rank", "1", "--slow-ms", "1")),
    Scenario("slow-forward-8-ranks", "rank 5: +40 ms compute in forward", 8, 100,
             ("--slow-rank", "5", "--slow-ms", "40")),
    Scenario("sleep-after-8-ranks-loaded", "rank 6 of 8: sleeps 15 ms past its "
             "optimizer step, in no phase (no CPU), busy loops on every core", 8, 150,
             ("--slow-rank", "6", "--slow-ms", "15", "--slow-phase", "after",
              "--slow-kind", "sleep"), host="load"),
    Scenario("sleep-forward", "rank 2: sleeps 40 ms in forward (no CPU)", 4, 100,
             ("--slow-rank", "2", "--slow-ms", "40", "--slow-kind", "sleep")),
    Scenario("sleep-8ms-3-ranks", "rank 1 of 3: sleeps 8 ms in forward (no CPU)", 3, 150,
             ("--slow-rank", "1", "--slow-ms", "8", "--slow-kind", "sleep")),
    Scenario("slow-backward-3-ranks", "rank 2 of 3: +10 ms compute in backward", 3, 150,
             ("--slow-rank", "2", "--slow-phase", "backward", "--slow-ms", "10")),
    Scenario("sleep-backward-2-ranks", "rank 0: sleeps 10 ms in backward (no CPU)", 2, 150,
             ("--slow-rank", "0", "--slow-ms", "10", "--slow-phase", "backward",
              "--slow-kind", "sleep")),
    Scenario("sleep-4ms-2-ranks-loaded", "rank 1: sleeps 4 ms in forward, busy loops on every core",
             2, 150, ("--slow-rank", "1", "--slow-ms", "4", "--slow-kind", "sleep"),
             host="load"),
    Scenario("sleep-4ms-2-ranks-long", "rank 1: sleeps 4 ms in forward of a ~40 ms step", 2, 150,
             LONG + ("--slow-rank", "1", "--slow-ms", "4", "--slow-kind", "sleep")),
    Scenario("eval-rank0-every-50", "rank 0 alone evaluates 1.5 s after every 50th step", 3, 200,
             ("--eval-rank", "0", "--eval-every", "50", "--eval-ms", "1500")),
    Scenario("eval-rank3-every-120", "rank 3 alone evaluates 1 s after every 120th step", 4, 300,
             ("--eval-rank", "3", "--eval-every", "120", "--eval-ms", "1000")),
    Scenario("sleep-3ms-11ms-step", "rank 1: sleeps 3 ms in forward of a ~11 ms step", 4, 250,
             MID + ("--slow-rank", "1", "--slow-ms", "3", "--slow-kind", "sleep")),
    Scenario("lm-clean-4", "a small transformer LM (~60 ms steps, 4 ranks on 2 cores), no fault",
             4, 150, script=LM),
    Scenario("lm-sleep-block", "transformer LM: rank 1 sleeps 20 ms in its blocks' forward",
             4, 150, ("--sleep-rank", "1", "--sleep-where", "block"), script=LM),
    Scenario("lm-sleep-loss", "transformer LM: rank 2 sleeps 20 ms between forward and backward",
             4, 150, ("--sleep-rank", "2", "--sleep-where", "loss"), script=LM),
    Scenario("nice-19", "rank 2 at nice 19", 4, 200, host="nice", host_rank=2),
    Scenario("cpu-hog", "rank 1 pinned to a CPU with 2 busy loops", 2, 200,
             host="hog", host_rank=1),
    Scenario("cgroup-throttle", "rank 2 in a cgroup with 10 % of a CPU", 4, 120,
             host="throttle", host_rank=2),
    Scenario("sigstop-hiccups", "rank 3 stopped 30 ms every 100 ms", 4, 200,
             host="stops", host_rank=3),
    Scenario("nice-19-3-ranks", "rank 0 of 3 at nice 19", 3, 200, host="nice", host_rank=0),
    Scenario("cgroup-throttle-3-ranks", "rank 1 of 3 in a cgroup with 10 % of a CPU", 3, 120,
             host="throttle", host_rank=1),
    Scenario("sigstop-hiccups-3-ranks", "rank 2 of 3 stopped 30 ms every 100 ms", 3, 200,
             host="stops", host_rank=2),
    Scenario("memory-leak-3-ranks", "rank 2 of 3 keeps 4 MiB more per step", 3, 120,
             ("--leak-rank", "2", "--leak-mb", "4")),
    Scenario("freeze-all", "every rank stopped 2 s once from outside", 4, 200,
             host="freeze"),
    Scenario("clean-2-loaded", "no fault, busy loops on every core", 2, 150,
             host="load"),
    Scenario("clean-3-loaded", "no fault, busy loops on every core", 3, 150,
             host="load"),
    Scenario("clean-4-loaded", "no fault, busy loops on every core", 4, 150,
             host="load"),
    Scenario("clean-2-short-loaded", "no fault, ~1.3 ms steps, busy loops on every core",
             2, 400, SHORT, host="load"),
    Scenario("clean-4-short-loaded", "no fault, ~6 ms steps, busy loops on every core",
             4, 300, SHORT, host="load"),
    Scenario("clean-8-short-loaded", "no fault, short steps, 8 ranks, busy loops on "
             "every core", 8, 200, SHORT, host="load"),
    Scenario("clean-8-loaded", "no fault, 8 ranks, busy loops on every core", 8, 150,
             host="load"),
    Scenario("sigstop-short-steps", "rank 3 stopped 30 ms every 250 ms, ~6 ms steps",
             4, 600, SHORT, host="stops-rare", host_rank=3),
    Scenario("memory-leak", "rank 1 keeps 4 MiB more per step", 4, 120,
             ("--leak-rank", "1", "--leak-mb", "4")),
    Scenario("memory-spike", "rank 2 holds 512 MiB more in step 40", 4, 80,
             ("--spike-rank", "2", "--spike-step", "40", "--spike-mb", "512")),
    Scenario("memory-imbalance", "rank 3 holds 768 MiB more throughout", 4, 80,
             ("--imbalance-rank", "3", "--imbalance-mb", "768")),
    Scenario("memory-imbalance-2-ranks", "rank 0 of 2 holds 768 MiB more throughout", 2, 80,
             ("--imbalance-rank", "0", "--imbalance-mb", "768")),
) + tuple(
    Scenario(f"nan-{mode}-{depth}-{d}-{pos}",
             f"NaN in {module} {d}, rank {rank}, step {NAN_STEP}, --numerics {mode}",
             3, 12, ("--nan-rank", str(rank), "--nan-step", str(NAN_STEP),
                     "--nan-module", module, "--nan-dir", d),
             script=NUMERICS, run_args=("--numerics", mode))
    for mode in ("full", "light") for depth, module in NAN_MODULES
    for pos, rank in NAN_RANKS for d in ("forward", "backward")
) + (
    Scenario("numerics-clean-light", "no fault, --numerics light", 3, 60,
             script=NUMERICS, run_args=("--numerics", "light")),
    Scenario("numerics-clean-full", "no fault, --numerics full", 3, 60,
             script=NUMERICS, run_args=("--numerics", "full")),
    Scenario("numerics-loss-spike", "rank 1: loss x50 at step 25", 3, 40,
             ("--spike-rank", "1", "--spike-step", "25"), script=NUMERICS),
    Scenario("fp8-clean", "emulated float8, dynamic scaling", 3, 60,
             script=FP8, auto=False),
    Scenario("fp8-clean-delayed", "emulated float8, delayed scaling", 3, 60,
             ("--scaling", "delayed"), script=FP8, auto=False),
    Scenario("fp8-outlier", "rank 1: a growing outlier channel in fc2's input "
             "from step 6, delayed scale", 3, 30, ("--outlier", "fc2:1:6"),
             script=FP8, auto=False),
    Scenario("fp8-underflow", "rank 2: fc3's gradients 2^-32 from step 8, "
             "delayed scale", 3, 30, ("--underflow", "fc3:2:8"), script=FP8, auto=False),
    Scenario("fp8-zero-amax", "rank 0: fc1's input all zeros in step 10", 3, 30,
             ("--zero-input", "fc1:0:10"), script=FP8, auto=False),
) + tuple(
    Scenario(name, what, ranks, 12, args, script=REPLICA,
             run_args=("--checksum-every", str(every)))
    for name, what, ranks, args, every, _ in REPLICA_FAULTS
) + tuple(
    Scenario(f"replica-clean-{n}", "no fault, checksums every step", n, 30,
             script=REPLICA, run_args=("--checksum-every", "1"))
    for n in (2, 3, 4)
) + (
    Scenario("replica-clean-4-auto", "no fault, --checksum-every auto", 4, 30,
             script=REPLICA, run_args=("--checksum-every", "auto")),
) + tuple(
    Scenario(f"pipeline-{sched}-heavy-{stage}",
             f"{sched}, stage {stage} with 3x the layers", 4, 12,
             ("--schedule", sched, "--heavy-stage", str(stage),
              "--heavy-factor", "3"), script=PIPELINE, auto=False)
    for sched, stage in PIPELINE_HEAVY
) + (
    Scenario("pipeline-1f1b-clean", "1f1b, balanced stages", 4, 12,
             ("--schedule", "1f1b"), script=PIPELINE, auto=False),
    Scenario("pipeline-gpipe-clean", "gpipe, balanced stages", 4, 12,
             ("--schedule", "gpipe"), script=PIPELINE, auto=False),
) + tuple(
    Scenario(f"ff-slow-rank{rank}-layer{layer}",
             f"forward-forward, rank {rank}: +400 ms in layer {layer}", 4, 30,
             ("--slow-rank", str(rank), "--slow-layer", str(layer),
              "--slow-ms", "400"), script=FORWARD_FORWARD, auto=False)
    for rank, layer in FF_SLOW
) + (
    Scenario("ff-clean", "forward-forward, no slow layer", 4, 30,
             script=FORWARD_FORWARD, auto=False),
) + (
    Scenario("moe-balanced", "8 experts, top-2, 2 per rank, unskewed router", 4, 30,
             script=MOE, auto=False, timeout_s=300),
    Scenario("moe-skew-experts-6-7", "layer 1's router +2 on experts 6 and 7 (rank 3)",
             4, 30, ("--skew-layer", "1", "--skew-experts", "6,7"),
             script=MOE, auto=False, timeout_s=300),
    Scenario("moe-skew-expert-2", "layer 1's router +3 on expert 2 (rank 1)", 4, 30,
             ("--skew-layer", "1", "--skew-experts", "2", "--skew", "3"),
             script=MOE, auto=False, timeout_s=300),
    Scenario("embedding-spread", "Zipf ids, popular rows dealt to the shards in turn",
             4, 30, script=EMBEDDING, auto=False),
    Scenario("embedding-hot-shard-2", "Zipf ids, popular rows in shard 2", 4, 30,
             ("--hot-shard", "2"), script=EMBEDDING, auto=False),
    Scenario("embedding-hot-shard-0", "Zipf ids, popular rows in shard 0", 4, 30,
             ("--hot-shard", "0"), script=EMBEDDING, auto=False),
) + (
    Scenario("grpo-clean", "GRPO, no fault", 4, 40, script=GRPO, auto=False),
    Scenario("grpo-long-tail-r2", "GRPO, rank 2's sampler never stops "
             "(24 tokens against 2)", 4, 40, ("--long-rank", "2"),
             script=GRPO, auto=False),
    Scenario("grpo-long-tail-r0", "GRPO, rank 0's sampler never stops", 4, 40,
             ("--long-rank", "0"), script=GRPO, auto=False),
    Scenario("grpo-constant-reward", "GRPO, reward 1 for all from step 12", 4,
             40, ("--constant-reward-step", "12"), script=GRPO, auto=False),
    Scenario("grpo-lr-blowup", "GRPO, learning rate x3 from step 15", 4, 40,
             ("--lr-blowup-step", "15"), script=GRPO, auto=False),
)

THROTTLE_QUOTA_US, THROTTLE_PERIOD_US = 10000, 100000
STOP_MS, STOP_EVERY_MS = 30, 100
FREEZE_FROM_STEP, FREEZE_S = 60, 2.0  # freeze: past the detectors' first steps
RARE_STOP_EVERY_MS = 250  # stops-rare: a few stops per window of short steps
HOG_LOOPS = 2  # busy loops beside the rank on its CPU: it gets a third of it
FAULT_START_TIMEOUT_S = 90  # waiting for the job's first stored steps


# ---------------------------------------------------------------------------
# Grading

def finding_cause(f):
    """The cause a finding names, or None: a `cause` field of the finding
    or of its evidence (string; or a dict's `kind`), or the host's cause
    alike on every rank (a stall's `host_cause`)."""
    ev = f.get("evidence") or {}
    for cause in (f.get("cause"), ev.get("cause"), ev.get("host_cause")):
        if isinstance(cause, dict):
            cause = cause.get("kind")
        if isinstance(cause, str) and cause:
            return cause
    return None


def describe_finding(f):
    ranks = ",".join(str(r) for r in f.get("ranks") or []) or "-"
    text = f"{f['kind']} r{ranks} {f.get('phase') or '-'}"
    if f["kind"] == "replica_divergence":
        ev = f.get("evidence") or {}
        text += f" s{f.get('first_step')} {ev.get('first_param')}"
    cause = finding_cause(f)
    if cause:
        text += f" cause={cause}"
    return text + (" [crit]" if f.get("severity") == "critical" else " [warn]")


def matches(want, f):
    if want.step is not None:
        # nonfinite and spikes: the first rank (the others are where it
        # spread), the step and the module
        ev = f.get("evidence") or {}
        if (f["kind"] != want.kind or (f.get("ranks") or [None])[0] != want.rank
                or f.get("first_step") != want.step
                or (want.module and ev.get("module") != want.module)
                or any(ev.get(k) != v for k, v in want.evidence)
                or (want.param and (ev.get("first_param") != want.param
                                    or f.get("ranks") != [want.rank]))):
            return False
        return want.phase == ANY or (f.get("phase") or None) == want.phase
    if f["kind"] != want.kind or f.get("ranks") != ([] if want.rank is None else [want.rank]):
        return False
    if want.phase != ANY and f.get("phase") != want.phase:
        return False
    evidence = f.get("evidence") or {}
    if any(evidence.get(k) != v for k, v in want.evidence):
        return False
    if want.cause:
        cause = finding_cause(f)
        return cause is not None and want.cause in cause.lower()
    return True


@dataclass
class Grade:
    result: str                      # right, wrong, missed, error, skipped
    found: str                       # the findings, described
    note: str = ""                   # why wrong / error / skipped
    findings: list = field(default_factory=list)   # as `report --json` gave them
    unrelated: list = field(default_factory=list)  # those of a fault run matching nothing


def grade(expect, findings):
    """Grades one run's findings against EXPECT's alternatives."""
    found = "; ".join(describe_finding(f) for f in findings) or "none"
    if expect == CLEAN:
        return Grade("right" if not findings else "wrong", found, findings=findings)
    fault_ranks = {w.rank for w in expect}
    unrelated = [f for f in findings
                 if not any(matches(w, f) for w in expect)
                 and not fault_ranks & set(f.get("ranks") or [])]
    if any(matches(w, f) for w in expect for f in findings):
        return Grade("right", found, findings=findings, unrelated=unrelated)
    if not findings:
        return Grade("missed", found)
    kinds = {w.kind for w in expect}
    if any(f["kind"] in kinds and f.get("ranks") == [w.rank]
           for f in findings for w in expect):
        note = "right kind and rank, wrong phase or cause"
    elif any(fault_ranks & set(f.get("ranks") or []) for f in findings):
        note = "names the rank, but not as expected"
    else:
        note = "names other ranks"
    return Grade("wrong", found, note, findings, unrelated)


# ---------------------------------------------------------------------------
# The processes of a run (tests/jobs.py finds them)

def cgroup_cpu_base():
    """(version, directory under which to make a cgroup with a CPU limit),
    or (None, why not).  Prefers cgroup v2 when its cpu controller is
    available, else the v1 cpu controller; the new group goes under this
    process's own group."""
    if os.geteuid() != 0:
        return None, "needs root"
    mounts = []
    with open("/proc/mounts") as f:
        for line in f:
            _, where, kind, opts = line.split()[:4]
            mounts.append((where, kind, opts.split(",")))
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            own[controllers] = path
    for where, kind, _ in mounts:
        if kind == "cgroup2":
            try:
                with open(os.path.join(where, "cgroup.controllers")) as f:
                    if "cpu" in f.read().split():
                        return 2, where + own.get("", "/").rstrip("/")
            except OSError:
                pass
    for where, kind, opts in mounts:
        if kind == "cgroup" and "cpu" in opts:
            path = next((p for c, p in own.items() if "cpu" in c.split(",")), "/")
            return 1, where + path.rstrip("/")
    return None, "no cgroup cpu controller"


class HostFault:
    """Applies a host fault to one rank's process from outside, in a thread
    of its own, from the moment the job has stored its first steps until
    stop(); cleanup() undoes what is left (a stopped rank is continued, the
    busy loops killed, the cgroup removed) and is safe to call always."""

    def __init__(self, kind, rank, launcher_pid, db, tag, every_rank=()):
        self.kind = kind
        self.every_rank = every_rank  # freeze: (launcher pid, rank) of each
        self.frozen = []
        self.rank = rank if rank is not None else 0  # load: any rank tells the job began
        self.launcher_pid, self.db = launcher_pid, db
        self.tag = tag
        self.pid = None
        self.hogs = []
        self.cgroup = None
        self.applied = False
        self.from_step = None  # steps the job had stored when the fault began
        self.problem = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def unavailable(kind):
        """Why KIND cannot be applied on this machine, or None."""
        if kind == "throttle":
            version, why = cgroup_cpu_base()
            return None if version else why
        if kind == "hog" and len(os.sched_getaffinity(0)) < 2:
            return "needs 2 CPUs"
        return None

    def start(self):
        self.thread.start()

    def stop(self):
        self.done.set()
        self.thread.join(timeout=10)

    def _run(self):
        try:
            deadline = time.monotonic() + FAULT_START_TIMEOUT_S
            while not self.done.is_set() and time.monotonic() < deadline:
                if self.pid is None:
                    self.pid = rank_pid(self.launcher_pid, self.rank)
                if self.pid is not None:
                    self.from_step = stored_steps(self.db)
                    if self.from_step > 0:
                        break
                self.done.wait(0.25)
            else:
                if not self.done.is_set():
                    self.problem = "the job never stored a step"
                return
            self._apply()
        except Exception as e:  # reported in the table, never fatal
            self.problem = f"{type(e).__name__}: {e}"

    def _apply(self):
        if self.kind == "throttle":
            self._throttle()
        elif self.kind == "hog":
            cpu = max(os.sched_getaffinity(0))
            for _ in range(HOG_LOOPS):
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                self.hogs.append(hog)
                os.sched_setaffinity(hog.pid, {cpu})
        elif self.kind == "load":
            for _ in os.sched_getaffinity(0):  # one busy loop per CPU, unpinned
                self.hogs.append(subprocess.Popen([sys.executable, "-c",
                                                   "while True: pass"]))
        self.applied = True
        if self.kind == "freeze":
            self._freeze()
            return
        if self.kind in ("stops", "stops-rare"):
            self._stops(STOP_EVERY_MS if self.kind == "stops" else RARE_STOP_EVERY_MS)
            return
        if self.kind == "load":
            self.done.wait()
            return
        # nice and the pinning apply per thread: threads made since are
        # caught on the next pass.
        while not self.done.is_set():
            for tid in threads(self.pid):
                try:
                    if self.kind == "nice":
                        os.setpriority(os.PRIO_PROCESS, tid, 19)
                    elif self.kind == "hog":
                        os.sched_setaffinity(tid, {cpu})
                except OSError:
                    pass  # the thread ended
            self.done.wait(0.2)

    def _stops(self, every_ms):
        period, pause = every_ms / 1000.0, STOP_MS / 1000.0
        next_stop = time.monotonic()
        while not self.done.is_set():
            try:
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(pause)
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                return
            next_stop += period
            self.done.wait(max(0.0, next_stop - time.monotonic()))

    def _freeze(self):
        while stored_steps(self.db) < FREEZE_FROM_STEP:
            if self.done.wait(0.05):
                return
        pids = [rank_pid(launcher, rank) for launcher, rank in self.every_rank]
        if None in pids:
            raise RuntimeError("a rank's process was not found")
        self.from_step = stored_steps(self.db)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            self.frozen.append(pid)
        time.sleep(FREEZE_S)
        self._thaw()

    def _thaw(self):
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def _throttle(self):
        version, base = cgroup_cpu_base()
        if version is None:
            raise RuntimeError(base)
        self.cgroup = os.path.join(base, f"stepscope-bench-{os.getpid()}-{self.tag}")
        if version == 2:  # the cpu controller must be on for the children
            try:
                write(os.path.join(base, "cgroup.subtree_control"), "+cpu")
            except OSError:
                pass  # already on, or refused: cpu.max below then fails clearly
        os.mkdir(self.cgroup)
        if version == 2:
            write(os.path.join(self.cgroup, "cpu.max"),
                  f"{THROTTLE_QUOTA_US} {THROTTLE_PERIOD_US}")
        else:
            write(os.path.join(self.cgroup, "cpu.cfs_period_us"), str(THROTTLE_PERIOD_US))
            write(os.path.join(self.cgroup, "cpu.cfs_quota_us"), str(THROTTLE_QUOTA_US))
        write(os.path.join(self.cgroup, "cgroup.procs"), str(self.pid))

    def cleanup(self):
        self.stop()
        self._thaw()
        if self.kind in ("stops", "stops-rare") and self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        for hog in self.hogs:
            hog.kill()
            hog.wait()
        if self.cgroup is not None:
            remove_cgroup(self.cgroup)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def remove_cgroup(path):
    """Removes a cgroup made here, moving any process still in it (the
    job should be gone by now) to the parent first."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        write(os.path.join(os.path.dirname(path), "cgroup.procs"), pid)
            except OSError:
                pass
            time.sleep(0.1)
    print(f"bench_accuracy: could not remove cgroup {path}", file=sys.stderr)


def stop_job(job):
    """Stops a job still running (a timeout, or the harness interrupted):
    SIGTERM to the launcher, which stops its ranks (SIGTERM, then SIGKILL
    after its grace period), then SIGKILL if it is still there."""
    job.terminate()
    try:
        job.wait(timeout=15)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()


def start_time(pid):
    """PID's start time (clock ticks since boot), None when it is gone:
    with the pid, it names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def end_processes(seen):
    """SIGKILL to each process of SEEN (pid -> start time) still alive:
    only the job's own processes, which the launcher should have ended."""
    for pid, started in seen.items():
        if started is not None and start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------
# One run

def run_argv(sc, stepscope, db, tag, nodes=None):
    """`stepscope run` of SC: on one host (NODES None), or for node K of two
    virtual nodes (NODES = (k, master address, aggregation mode, token
    file)), half of SC's ranks each."""
    argv = [str(stepscope), "run", *(["--auto"] if sc.auto else []),
            "--name", tag, *sc.run_args]
    if nodes is None:
        argv += ["-n", str(sc.ranks), "--db", str(db), "--no-http", "--quiet"]
    else:
        k, master, mode, token = nodes
        argv += ["-n", str(sc.ranks // 2), "--nnodes", "2", "--node-rank", str(k),
                 "--master-addr", master, "--master-port", str(NODE_PORT),
                 "--token-file", str(token), "--aggregate", mode, "--grace", "2"]
        if k == 0:
            argv += ["--db", str(db), "--no-http"]
    return [*argv, "--", RANK_PYTHON, str(sc.script), "--steps", str(sc.steps), *sc.args]


AGREE = re.compile(r"agree with the per-rank aggregation on (\d+) of (\d+) steps")


def aggregation_remark(log, mode):
    """What node 0's log says of the run's aggregation: under node mode,
    on how many steps the merged partials agreed with the per-rank
    aggregation; a run that did not aggregate as asked says so."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log of node 0) "
    if f"aggregation by {mode}:" not in text:
        return f"(node 0 did not say 'aggregation by {mode}') "
    m = AGREE.search(text)
    return f"(partials agree on {m.group(1)} of {m.group(2)} steps) " if m else ""


def run_once(sc, rep, stepscope, workdir, mode=None):
    """Runs scenario SC once, on this host or (MODE: the aggregation mode)
    on two virtual nodes; returns (Grade, seconds, a remark on the host
    fault for the progress line)."""
    tag = f"{sc.name}-{rep}" + (f"-{mode}" if mode else "")
    db = workdir / f"{tag}.db"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if not sc.auto:  # the script imports stepscope: the build's package
        pkg = BUILD / "python" if (BUILD / "python" / "stepscope").is_dir() else SOURCE / "python"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pkg), env.get("PYTHONPATH")]))
    started = time.monotonic()
    jobs, fault, cluster = [], None, None
    timed_out = False
    seen = {}  # every process of the job seen: pid -> start time
    logs = []
    try:
        if mode is None:
            logs.append(open(workdir / f"{tag}.out", "w"))
            jobs.append(subprocess.Popen(run_argv(sc, stepscope, db, tag), stdout=logs[0],
                                         stderr=subprocess.STDOUT, env=env))
        else:
            cluster = netns.Cluster(2)
            cluster.start()
            token = secret_file(workdir / f"{tag}.token")
            for k in range(2):
                logs.append(open(workdir / f"{tag}-node{k}.out", "w"))
                argv = run_argv(sc, stepscope, db, tag, (k, cluster.addr(0), mode, token))
                jobs.append(cluster.popen(k, argv, stdout=logs[k], stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env))
        if sc.host:
            node = 0 if mode is None or sc.host_rank is None else \
                sc.host_rank // (sc.ranks // 2)
            half = sc.ranks // 2
            every_rank = [(jobs[0 if mode is None else r // half].pid, r)
                          for r in range(sc.ranks)]
            fault = HostFault(sc.host, sc.host_rank, jobs[node].pid, db, tag, every_rank)
            fault.start()
        deadline = started + sc.timeout_s
        while any(j.poll() is None for j in jobs) and time.monotonic() < deadline:
            for j in jobs:
                for pid in descendants(j.pid):
                    seen.setdefault(pid, start_time(pid))
            time.sleep(0.5)
        timed_out = any(j.poll() is None for j in jobs)
    finally:
        if fault is not None:
            fault.cleanup()
        for j in jobs:
            if j.poll() is None:
                stop_job(j)
        end_processes(seen)
        if cluster is not None:
            cluster.close()
        for log in logs:
            log.close()
    seconds = time.monotonic() - started
    remark = f"({sc.host} from step {fault.from_step}) " if fault and fault.applied else ""
    if mode is not None:
        remark += aggregation_remark(workdir / f"{tag}-node0.out", mode)
    if timed_out:
        return Grade("error", "-", f"timed out after {sc.timeout_s} s"), seconds, remark
    failed = [(k, j.returncode) for k, j in enumerate(jobs) if j.returncode != 0]
    if failed:
        where = "" if mode is None else f"node {failed[0][0]}: "
        return Grade("error", "-", f"{where}job exit status {failed[0][1]}"), seconds, remark
    if fault is not None and not fault.applied:
        return Grade("error", "-", f"host fault not applied: {fault.problem}"), seconds, remark
    out = subprocess.run([str(stepscope), "report", "--json", "--db", str(db)],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return Grade("error", "-", f"report: {out.stderr.strip()}"), seconds, remark
    return grade(EXPECT[sc.name], json.loads(out.stdout)["findings"]), seconds, remark


# ---------------------------------------------------------------------------
# The table

def base(key):
    """The scenario of a result key: its name, less " [MODE]" on two nodes."""
    return key.split(" [", 1)[0]


def expected_text(name):
    expect = EXPECT[base(name)]
    return "no finding" if expect == CLEAN else " or ".join(w.describe() for w in expect)


def found_text(grades):
    """The distinct findings over the repetitions, with counts."""
    counts = {}
    for g in grades:
        text = g.found if g.result not in ("error", "skipped") else f"{g.result}: {g.note}"
        counts[text] = counts.get(text, 0) + 1
    return " / ".join(f"{text} (x{n})" if len(grades) > 1 else text for text, n in counts.items())


def result_text(grades):
    order = ("right", "wrong", "missed", "error", "skipped")
    n = {k: sum(g.result == k for g in grades) for k in order}
    return ", ".join(f"{n[k]} {k}" for k in order if n[k])


def totals(results):
    """The summary lines from {scenario name: [Grade, ...]}."""
    fault_runs = [g for name, gs in results.items() if EXPECT[base(name)] != CLEAN
                  for g in gs if g.result != "skipped"]
    clean_runs = [g for name, gs in results.items() if EXPECT[base(name)] == CLEAN
                  for g in gs if g.result != "skipped"]
    n = {k: sum(g.result == k for g in fault_runs) for k in ("right", "wrong", "missed", "error")}
    fault_scenarios = [name for name in results if EXPECT[base(name)] != CLEAN]
    all_right = [name for name in fault_scenarios
                 if results[name] and all(g.result == "right" for g in results[name])]
    unrelated = [f for g in fault_runs for f in g.unrelated]
    clean_findings = [f for g in clean_runs for f in g.findings]
    crit_clean = sum(f.get("severity") == "critical" for f in clean_findings)
    warn_clean = len(clean_findings) - crit_clean
    lines = []
    if fault_runs:
        lines.append(f"recall: {n['right']} of {len(fault_runs)} fault runs right "
                     f"({100.0 * n['right'] / len(fault_runs):.0f} %); "
                     f"{n['wrong']} wrong, {n['missed']} missed, {n['error']} errors")
        lines.append(f"fault scenarios right in every repetition: {len(all_right)} of "
                     f"{len(fault_scenarios)}")
        lines.append(f"unrelated findings in fault runs: {len(unrelated)} "
                     f"({sum(f.get('severity') == 'critical' for f in unrelated)} critical)")
    if clean_runs:
        quiet = sum(g.result == "right" for g in clean_runs)
        lines.append(f"clean runs without a finding: {quiet} of {len(clean_runs)}; "
                     f"findings on clean runs: {crit_clean} critical, {warn_clean} warning; "
                     f"{sum(g.result == 'error' for g in clean_runs)} errors")
    skipped = sum(g.result == "skipped" for gs in results.values() for g in gs)
    if skipped:
        lines.append(f"skipped runs: {skipped}")
    return lines


def table_rows(results):
    rows = []
    by_name = {sc.name: sc for sc in SCENARIOS}
    for name, grades in results.items():
        sc = by_name[base(name)]
        notes = sorted({g.note for g in grades if g.note and g.result in ("wrong", "skipped")})
        rows.append((name, f"{sc.what} ({sc.ranks} ranks, {sc.steps} steps)",
                     expected_text(name), found_text(grades),
                     result_text(grades) + (f" ({'; '.join(notes)})" if notes else "")))
    return rows


HEADER = ("scenario", "fault", "expected", "found", "result")


def findings_key(g):
    """What the accuracy matrix scores of a run's findings: kind, the set
    of ranks and phase of each (severity left out: a fault at a
    threshold's edge lands on either side of it in two runs of the same
    mode; rank order left out: jitter lists the ranks by how often each
    was slowest)."""
    return sorted((f["kind"], tuple(sorted(f.get("ranks") or ())), f.get("phase") or "")
                  for f in g.findings)


def mode_comparison(results, modes):
    """The lines comparing the aggregation modes run by run: per scenario,
    in how many repetitions every mode found the same (kind, ranks, phase),
    and the runs where they differ."""
    names = []
    for key in results:
        if base(key) not in names:
            names.append(base(key))
    same = pairs = 0
    lines = []
    for name in names:
        runs = [results.get(f"{name} [{m}]", []) for m in modes]
        for rep, grades in enumerate(zip(*runs), 1):
            if any(g.result in ("error", "skipped") for g in grades):
                continue
            pairs += 1
            keys = [findings_key(g) for g in grades]
            if all(k == keys[0] for k in keys):
                same += 1
            else:
                lines.append(f"  {name} rep {rep}: " + "; ".join(
                    f"{m}: {g.found}" for m, g in zip(modes, grades)))
    head = (f"findings the same under --aggregate {' and '.join(modes)} "
            f"(kind, ranks, phase): {same} of {pairs} runs")
    return [head] + lines


def markdown(results, reps, wall_s, nodes=1):
    cell = lambda s: s.replace("|", "\\|")  # noqa: E731
    out = [f"Scenario matrix, {reps} repetition(s) per scenario"
           + (" and aggregation mode, on two virtual nodes" if nodes == 2 else "")
           + ", "
           f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, "
           f"{os.cpu_count()} CPUs ({platform.machine()}), {wall_s / 60:.1f} minutes "
           f"(`make bench-accuracy`).", "",
           "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in table_rows(results):
        out.append("| " + " | ".join(cell(c) for c in row) + " |")
    out.append("")
    out += [f"- {line}" for line in totals(results)]
    return "\n".join(out) + "\n"


def print_table(results):
    rows = [HEADER] + table_rows(results)
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(len(HEADER))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    for line in totals(results):
        print(line)


# ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_accuracy",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3, help="repetitions per scenario (default 3)")
    p.add_argument("--only", default="", metavar="A,B,...",
                   help="run only these scenarios (shell patterns: 'nan-*,numerics-*')")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--out", metavar="FILE.md", help="also write the table as markdown")
    p.add_argument("--keep-db", metavar="DIR",
                   help="keep each run's store and output in DIR (default: a temporary "
                        "directory, removed)")
    p.add_argument("--nodes", type=int, default=1, choices=(1, 2),
                   help="2: run the scenarios of an even number of ranks on two virtual "
                        "nodes (network namespaces; root), half of the ranks each")
    p.add_argument("--aggregate", default="rank,node", metavar="MODES",
                   help="with --nodes 2: the aggregation modes to run each scenario "
                        "under (default rank,node)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    args.modes = [None]
    if args.nodes == 2:
        args.modes = [m for m in args.aggregate.split(",") if m]
        if not args.modes or any(m not in ("rank", "node") for m in args.modes):
            p.error(f"bad --aggregate '{args.aggregate}' (rank, node or rank,node)")
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if not fnmatch.filter(EXPECT, n)]
    if unknown:
        p.error(f"unknown scenario(s) {', '.join(unknown)} (see --list)")
    args.scenarios = [sc for sc in SCENARIOS
                      if not names or any(fnmatch.fnmatchcase(sc.name, n) for n in names)]
    if args.nodes == 2:
        args.scenarios = [sc for sc in args.scenarios if sc.ranks % 2 == 0]
        if not args.scenarios:
            p.error("no scenario of an even number of ranks selected for --nodes 2")
    return args


def main(argv):
    assert sorted(sc.name for sc in SCENARIOS) == sorted(EXPECT), "SCENARIOS and EXPECT disagree"
    args = parse_args(argv)
    if args.list:
        for sc in args.scenarios:
            print(f"{sc.name:22} {sc.what}; expected: {expected_text(sc.name)}")
        return 0
    stepscope = BUILD / "stepscope"
    if args.nodes == 2:
        ok, why = netns.available()
        if not ok:
            print(f"bench_accuracy: --nodes 2 needs virtual nodes: {why}", file=sys.stderr)
            return 1
    if not stepscope.exists():
        print(f"bench_accuracy: {stepscope} not found: build first (make)", file=sys.stderr)
        return 1
    if args.keep_db:
        workdir = Path(args.keep_db)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        # Not "stepscope-*": controllers sweep /tmp/stepscope-* directories
        # they take for dead controllers' socket directories (job/sockdir.c).
        tmp = tempfile.TemporaryDirectory(prefix="ss-accuracy-")
        workdir = Path(tmp.name)
    # Stopped from outside, still clean up (the finally clauses below).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    results = {(sc.name if mode is None else f"{sc.name} [{mode}]"): []
               for sc in args.scenarios for mode in args.modes}
    total = len(results) * args.reps
    began = time.monotonic()
    done = 0
    interrupted = False
    try:
        for rep in range(1, args.reps + 1):  # repetitions outermost: noise spreads evenly
            for sc in args.scenarios:
                for mode in args.modes:
                    key = sc.name if mode is None else f"{sc.name} [{mode}]"
                    why = HostFault.unavailable(sc.host) if sc.host else None
                    if why:
                        g, seconds, remark = Grade("skipped", "-", f"{sc.host}: {why}"), 0.0, ""
                    else:
                        g, seconds, remark = run_once(sc, rep, stepscope, workdir, mode)
                    results[key].append(g)
                    done += 1
                    detail = g.found if g.result not in ("error", "skipped") else g.note
                    print(f"[{done:2}/{total}] {key:29} rep {rep}  {seconds:5.1f} s  "
                          f"{g.result:7} {remark}{detail}", flush=True)
    except (KeyboardInterrupt, SystemExit):
        interrupted = True  # the run in progress was cleaned up; report the others
    finally:
        if tmp is not None:
            tmp.cleanup()
    wall = time.monotonic() - began
    results = {name: grades for name, grades in results.items() if grades}
    print()
    print_table(results)
    comparison = mode_comparison(results, args.modes) if args.nodes == 2 else []
    for line in comparison:
        print(line)
    print(f"\n{done} of {total} runs in {wall / 60:.1f} minutes"
          + (" (interrupted)" if interrupted else ""))
    if args.out:
        text = markdown(results, args.reps, wall, args.nodes)
        if comparison:
            text += "\n" + comparison[0] + "\n" + "".join(
                f"\n-{line[1:]}" for line in comparison[1:]) + "\n"
        Path(args.out).write_text(text)
        print(f"table written to {args.out}")
    if interrupted:
        return 130
    return 1 if any(g.result == "error" for gs in results.values() for g in gs) else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
