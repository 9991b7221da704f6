"""Replica consistency on real gloo DDP ranks under `stepscope run --auto`
(examples/ddp_replica.py, docs/consistency.md).

One bit flipped in one parameter on one rank at step k is found as a
critical replica_divergence at the first checksum step at or after k,
naming that rank and that parameter (several parameters, ranks, bits and
intervals); a rank whose optimizer update is lost is found at that step;
clean runs of 2 to 4 ranks give no finding; replica groups declared with
stepscope.replica_group are compared within themselves only; two ranks
that disagree have no majority; --on-divergence stop ends the job with
status 65; every rank's stacks are stored with the finding (dump);
--on-divergence restart resumes from the last checkpoint taken before the
divergence and completes with the clean run's loss to the bit.  `stepscope diff`: the same seed twice is identical (exit 0), a
perturbation at step k on one rank or another seed diverges (exit 1)
naming the step and the rank, different world sizes cannot be compared
(exit 2).  The runs are short: the machine's cores are shared."""
import importlib.util
import json
import sqlite3
import subprocess

import pytest

from conftest import SOURCE, STEPSCOPE, run_job
from test_ddp import JOB_TIMEOUT, ddp_env, python_cmd

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

SCRIPT = SOURCE / "examples" / "ddp_replica.py"
DIVERGED_EXIT = 65


def run(store, nprocs, *args, every=1, extra=(), steps=10, numerics="off"):
    """`stepscope run --auto` of ddp_replica.py with checksums every EVERY
    steps."""
    cmd = python_cmd(SCRIPT, "--steps", str(steps), *args)
    return run_job(store, nprocs, cmd,
                   extra=("--auto", "--no-http", "--numerics", numerics,
                          "--checksum-every", str(every), *extra),
                   env=ddp_env(), timeout=JOB_TIMEOUT)


def divergences(job):
    fs = [f for f in job.findings() if f["kind"] == "replica_divergence"]
    for f in fs:
        if not isinstance(f["evidence"], dict):
            f["evidence"] = json.loads(f["evidence"])
    return fs


class Attempt:
    """One attempt of a finished job, for divergences()."""

    def __init__(self, job, attempt):
        self.job, self.attempt = job, attempt
        self.stderr = job.stderr

    def findings(self):
        out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                              str(self.job.db), "--attempt",
                              str(self.attempt)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["findings"]


def the_divergence(job):
    fs = divergences(job)
    assert len(fs) == 1, (fs, job.stderr[-2000:])
    assert fs[0]["severity"] == "critical", fs[0]
    return fs[0], fs[0]["evidence"]


# (parameter, rank, step, bit, interval): first, middle and last
# parameters, every rank position, mantissa bits, the lowest exponent bit
# and the sign bit, every step and every 4th.  (A flip of a high exponent
# bit makes the value huge, the loss NaN and, through the all-reduce,
# every replica's parameters NaN alike: the nonfinite finding's case.)
FLIPS = [("embed.weight", 0, 3, 22, 1),
         ("blocks.1.fc2.weight", 2, 5, 0, 1),
         ("head.bias", 1, 4, 31, 1),
         ("blocks.0.fc1.bias", 2, 5, 23, 4)]


@pytest.mark.parametrize("param,rank,step,bit,every", FLIPS)
def test_bit_flip_names_rank_step_parameter(store, param, rank, step, bit,
                                            every):
    job = run(store, 3, "--flip-rank", str(rank), "--flip-step", str(step),
              "--flip-param", param, "--flip-bit", str(bit), every=every)
    assert job.returncode == 0, job.stderr
    f, ev = the_divergence(job)
    found_at = -(-step // every) * every  # first multiple of EVERY >= step
    assert f["first_step"] == found_at, f
    assert f["ranks"] == [rank], f
    assert ev["first_param"] == param, ev
    assert ev["params_differ"] == 1 and ev["no_majority"] == 0, ev
    assert ev["majority"] == 2 and ev["ranks_compared"] == 3, ev
    assert param in f["message"] and "rank %d" % rank in f["message"]


def test_lost_update_is_found_at_its_step(store):
    job = run(store, 3, "--skip-rank", "1", "--skip-step", "4")
    assert job.returncode == 0, job.stderr
    f, ev = the_divergence(job)
    assert f["first_step"] == 4 and f["ranks"] == [1], f
    # every parameter took an update that rank 1 lost
    assert ev["first_param"] == "embed.weight", ev
    assert ev["params_differ"] == ev["params_total"] == 16, ev


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_clean_runs_never_diverge(store, nprocs):
    job = run(store, nprocs, steps=8)
    assert job.returncode == 0, job.stderr
    assert divergences(job) == [], job.stderr
    # the checksums were there to compare: every rank, every step
    con = __import__("sqlite3").connect(str(store))
    n = con.execute("SELECT count(*) FROM rank_values WHERE name = "
                    "'checksum.lo'").fetchone()[0]
    con.close()
    assert n == nprocs * 8


def test_two_ranks_have_no_majority(store):
    job = run(store, 2, "--flip-rank", "1", "--flip-step", "2",
              "--flip-param", "head.weight", steps=6)
    f, ev = the_divergence(job)
    assert ev["no_majority"] == 1 and f["first_step"] == 2, ev
    assert sorted(f["ranks"]) == [0, 1], f
    assert ev["first_param"] == "head.weight", ev
    assert "no majority" in f["message"]


def test_groups_are_compared_within_themselves(store):
    # two DDP groups with different seeds: different parameters across
    # groups are expected; the flip in group {2, 3} has no majority there
    job = run(store, 4, "--groups", "0,1;2,3", "--flip-rank", "3",
              "--flip-step", "3", "--flip-param", "head.bias", steps=6)
    assert job.returncode == 0, job.stderr
    f, ev = the_divergence(job)
    assert ev["group"] == 2 and ev["ranks_compared"] == 2, ev
    assert sorted(f["ranks"]) == [2, 3] and f["first_step"] == 3, f


@pytest.mark.parametrize("flag", [False, True])
def test_groups_inferred_from_ddp_or_the_flag(store, flag):
    # not declared in the script: DDP's process groups, or the flag
    extra = ("--replica-groups", "0,1;2,3") if flag else ()
    job = run(store, 4, "--groups", "0,1;2,3", "--undeclared",
              "--flip-rank", "1", "--flip-step", "2", "--flip-param",
              "embed.bias", steps=4, extra=extra)
    assert job.returncode == 0, job.stderr
    f, ev = the_divergence(job)
    assert ev["group"] == 0 and sorted(f["ranks"]) == [0, 1], ev


def test_on_divergence_stop_ends_the_job(store):
    job = run(store, 3, "--flip-rank", "2", "--flip-step", "2",
              "--flip-param", "head.weight", steps=200,
              extra=("--on-divergence", "stop"))
    assert job.returncode == DIVERGED_EXIT, job.stderr
    f, _ = the_divergence(job)
    assert f["first_step"] == 2 and f["ranks"] == [2]
    assert "replica divergence at step 2" in job.stderr


def stack_snapshots(db, finding_id):
    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT trigger, json FROM stack_snapshots WHERE "
                       "finding_id = ?", (finding_id,)).fetchall()
    con.close()
    return [(t, json.loads(j)) for t, j in rows]


def test_dump_stores_every_ranks_stacks_and_goes_on(store):
    job = run(store, 3, "--flip-rank", "1", "--flip-step", "3",
              "--flip-param", "head.weight", "--step-ms", "150", steps=14)
    assert job.returncode == 0, job.stderr
    f, _ = the_divergence(job)
    st = job.report()["stacks"]
    assert st is not None and st["trigger"] == "divergence", st
    assert st["finding_id"] == f["id"], (st, f)
    assert len(st["document"]["ranks"]) == 3
    assert [t for t, _ in stack_snapshots(store, f["id"])] == ["divergence"]
    assert len(job.results()) == 1  # rank 0 finished its 14 steps
    text = subprocess.run([str(STEPSCOPE), "report", "--db", str(store)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "on a replica divergence" in text, text


def test_on_divergence_restart_resumes_before_it_and_completes(store,
                                                               tmp_path):
    # a clean run to compare with, then the same run with a bit flipped on
    # rank 2 at step 9 in the first attempt: saves after steps 3, 7, 11,
    # ...; the restart must resume from step 7's, not from a later one
    # that already holds the corruption's effect
    steps, ckpt = 30, ("--save-every", "4", "--step-ms", "150")
    clean = run(store, 3, "--checkpoint", str(tmp_path / "clean"), *ckpt,
                steps=steps)
    assert clean.returncode == 0, clean.stderr
    job = run(store, 3, "--checkpoint", str(tmp_path / "ckpt"), *ckpt,
              "--flip-rank", "2", "--flip-step", "9", "--flip-param",
              "blocks.0.fc2.weight", steps=steps,
              extra=("--on-divergence", "restart", "--max-restarts", "1",
                     "--restart-backoff", "0"))
    assert job.returncode == 0, job.stderr
    assert "replica divergence at step 9: ending attempt 0" in job.stderr
    assert divergences(job) == []  # none in attempt 1, the latest
    f, ev = the_divergence(Attempt(job, 0))
    assert f["first_step"] == 9 and f["ranks"] == [2], f
    assert ev["first_param"] == "blocks.0.fc2.weight", ev
    assert [t for t, _ in stack_snapshots(store, f["id"])] == ["divergence"]
    con = sqlite3.connect(str(store))
    attempts = con.execute("SELECT attempt, cause, resumed_from, last_step "
                           "FROM attempts WHERE run_id = 2 ORDER BY "
                           "attempt").fetchall()
    con.close()
    assert [(a, c) for a, c, _, _ in attempts] == [(0, "divergence"),
                                                   (1, "completed")], attempts
    assert attempts[1][2] == 7 and attempts[1][3] == steps - 1, attempts
    res = job.results()[0]
    assert res["resumed_from"] == 7, res
    # attempt 0 went on to save after the divergence (the choice mattered)
    assert (tmp_path / "ckpt" / "step-11.pt").exists()
    # resumed before the corruption: the same bits as the clean run
    assert res["loss"] == clean.results()[0]["loss"], (res, clean.results())


def test_bad_options_are_refused(store):
    for opt in (["--checksum-every", "-1"], ["--checksum", "all"],
                ["--replica-groups", "0,1;1,2"],
                ["--on-divergence", "panic"]):
        out = subprocess.run([str(STEPSCOPE), "run", "--db", str(store),
                              "-n", "1", *opt, "--", "true"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2, (opt, out.stderr)
        assert opt[0] in out.stderr, out.stderr


# ---- stepscope diff ----

def diff(store, a, b, *extra, db_b=None):
    args = [str(STEPSCOPE), "diff", "--db", str(store), "--json", str(a),
            str(b), *extra]
    if db_b:
        args += ["--db-b", str(db_b)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return out.returncode, json.loads(out.stdout) if out.stdout else None


def test_diff_same_seed_perturbation_and_other_seed(store, tmp_path):
    # the loss and numerics (--numerics light) name the perturbed rank: its
    # gradient norm differs in step k, before the all-reduce spreads it
    other = tmp_path / "other.db"
    for db, args in ((store, ()), (store, ()),
                     (store, ("--perturb-rank", "2", "--perturb-step", "4")),
                     (store, ("--seed", "1")), (other, ())):
        job = run(db, 3, *args, steps=7, numerics="light")
        assert job.returncode == 0, job.stderr
    rc, same = diff(store, 1, 2)
    assert rc == 0 and same["status"] == "identical", same
    assert same["common_steps"] == 7 and same["checksum_steps"] == 7
    rc, pert = diff(store, 1, 3)
    assert rc == 1, pert
    d = pert["divergence"]
    assert d["step"] == 4 and d["ranks"] == [2], d
    assert d["first_param"] == "embed.weight", d
    rc, seed = diff(store, 1, 4)
    assert rc == 1 and seed["divergence"]["step"] == 0, seed
    assert seed["divergence"]["what"] == "loss", seed
    # across two stores: the same seed is identical
    rc, two = diff(store, 1, 1, db_b=other)
    assert rc == 0, two
    text = subprocess.run([str(STEPSCOPE), "diff", "--db", str(store), "1",
                           "3"], capture_output=True, text=True, timeout=60)
    assert text.returncode == 1
    assert "diverged at step 4 on rank 2" in text.stdout, text.stdout


def test_diff_cannot_compare(store):
    assert run(store, 2, steps=4, numerics="light").returncode == 0
    assert run(store, 3, steps=4, numerics="light").returncode == 0
    assert run(store, 2, steps=4, every=0,
               numerics="light").returncode == 0
    rc, out = diff(store, 1, 2)
    assert rc == 2 and "world size" in out["reason"], out
    rc, out = diff(store, 1, 3)
    assert rc == 2 and "no checksums" in out["reason"], out
    bad = subprocess.run([str(STEPSCOPE), "diff", "--db", str(store), "1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "two runs" in bad.stderr


# ---- multi-node: the options reach node 1's ranks ----

def test_options_reach_every_nodes_ranks(tmp_path):
    """Two nodes on loopback, two ranks each: --checksum-every,
    --checksum and --replica-groups given on every node's command line
    reach node 1's ranks (started by its agent) as they reach node 0's."""
    from test_multinode import Scenario, assert_nothing_left, finish, \
        start_pair
    sc = Scenario(tmp_path)
    opts = ("--numerics", "off", "--checksum-every", "3", "--checksum",
            "optimizer", "--replica-groups", "0,1;2,3")
    cmd = python_cmd(SCRIPT, "--steps", "10", "--flip-rank", "3",
                     "--flip-step", "4", "--flip-param", "head.bias")
    try:
        p0, p1 = start_pair(sc, None, cmd, opts, opts)
        (rc0, _, err0), (rc1, _, err1) = finish([p0, p1])
        assert rc0 == 0, err0
        assert rc1 == 0, err1
        con = sqlite3.connect(str(sc.db))
        rows = con.execute("SELECT DISTINCT name, rank, step FROM rank_values "
                           "WHERE name LIKE 'checksum.%'").fetchall()
        con.close()
        for rank in range(4):
            steps = sorted({s for n, r, s in rows
                            if r == rank and n == "checksum.lo"})
            assert steps == [0, 3, 6, 9], (rank, steps)  # every 3rd step
            assert any(n == "checksum.opt.lo" and r == rank
                       for n, r, _ in rows), rank  # the optimizer's state
        # groups {0,1} and {2,3}: rank 3's flip at step 4 is found at step
        # 6 within {2,3}, two ranks without a majority
        out = subprocess.run([str(STEPSCOPE), "report", "--json", "--db",
                              str(sc.db)], capture_output=True, text=True,
                             timeout=60)
        fs = [f for f in json.loads(out.stdout)["findings"]
              if f["kind"] == "replica_divergence"]
        assert len(fs) == 1, fs
        ev = fs[0]["evidence"]
        ev = ev if isinstance(ev, dict) else json.loads(ev)
        assert fs[0]["first_step"] == 6 and sorted(fs[0]["ranks"]) == [2, 3]
        assert ev["group"] == 2 and ev["ranks_compared"] == 2, ev
    finally:
        assert_nothing_left(sc)


# ---- stepscope guard --set determinism=1 ----

def guard(store, *args):
    out = subprocess.run([str(STEPSCOPE), "guard", "--db", str(store),
                          "--metric", "step_time", "--set", "threshold=1000",
                          "--set", "warmup=0", "--set", "block=2", "--set",
                          "min_runs=2", "--set", "determinism=1", *args],
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


def test_guard_determinism(store, tmp_path):
    # runs 1-3 the same command and seed; run 4 rank 2 perturbed at step 4
    # (another command: judged against runs 1, 2 named with --baseline).
    # Only determinism can fail here: step_time's threshold is 1000 %.
    for args in ((), (), (), ("--perturb-rank", "2", "--perturb-step", "4")):
        job = run(store, 3, *args, steps=8, numerics="light")
        assert job.returncode == 0, job.stderr
    rc, out, err = guard(store, "3")
    assert rc == 0, (out, err)
    assert "determinism: identical to run 2 (8 common steps, 8 with " \
           "checksums)" in out, out
    rc, out, err = guard(store, "4", "--baseline", "1,2", "--json")
    assert rc == 1, (out, err)
    doc = json.loads(out)
    assert doc["verdict"] == "regression" and doc["settings"]["determinism"]
    det = doc["determinism"]
    assert det["against"] == 2, det
    assert det["diff"]["divergence"]["step"] == 4, det
    assert det["diff"]["divergence"]["ranks"] == [2], det
    assert "diverged from run 2 at step 4 on rank 2" in det["text"], det
    junit = tmp_path / "guard.xml"
    rc, out, _ = guard(store, "4", "--baseline", "1,2", "--junit", str(junit))
    assert rc == 1 and "REGRESSION: determinism: diverged" in out, out
    xml = junit.read_text()
    assert 'name="determinism"><failure message="diverged from run 2' in xml
    # without checksums there is nothing to hold the run to: not judged
    assert run(store, 3, steps=8, every=0, numerics="light").returncode == 0
    rc, out, _ = guard(store, "5", "--baseline", "1,2")
    assert rc == 2 and "determinism: no checksums in common" in out, out
