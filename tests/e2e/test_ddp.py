"""Real PyTorch DistributedDataParallel jobs (gloo, CPU) under `stepscope
run`, instrumented two ways: by hand with the Python API (`--explicit`) and
from the outside (`stepscope run --auto`, the script unmodified).  Injected
faults are found on the right rank with the right phase (a rank slowed
inside backward, where the all-reduce wait nests, by its self time), a
clean job has no finding, a script written like PyTorch's DDP tutorial
runs unmodified and resumes from its snapshot, and a rank that raises is
named with its step; a rank of a transformer that sleeps in its forward
on oversubscribed cores is named too.  Small faults on short steps and
faults of the host are found too: a 3 ms straggler on a ~10 ms step, a
rank starved of CPU (nice 19 on a CPU a busy process shares) and a rank
stopped from outside for 30 ms every 100 ms are each named with their
cause.  `stepscope guard` judges a history of real DDP runs: a run
slowed in one phase is a regression, a clean one is not, another world
size cannot be judged.

torch is slow to import and the machine may have two cores, so each job is
small (tens of steps, three ranks where three show the point) and two
faults share one job: rank 2 computes longer in forward while rank 1 reads
some batches slowly.
"""
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import BUILD, SOURCE, STEPSCOPE, Job, run_job
from jobs import job_args, rank_pid, stored_steps

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="PyTorch is not installed for this Python")

TRAIN = SOURCE / "examples" / "ddp_train.py"
TUTORIAL = SOURCE / "examples" / "ddp_tutorial.py"
LM = SOURCE / "examples" / "lm_train.py"
MODES = ("explicit", "auto")

SLOW_RANK, SLOW_MS = 2, 50
STALL_RANK, STALL_MS, STALL_EVERY = 1, 100, 10
LEAK_RANK, LEAK_MB = 1, 4
STEPS = 60
JOB_TIMEOUT = 180  # seconds; a job takes 10-30 (more under the sanitizers)


def sanitizer_runtime():
    """The ASan runtime the build's CLI links, or None for a plain build."""
    try:
        out = subprocess.run(["ldd", str(STEPSCOPE)], capture_output=True,
                             text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.search(r"libasan\.so\S* => (\S+)", out)
    return m.group(1) if m else None


def ddp_env():
    """The test's environment, with the build's stepscope package importable
    (the default build puts it in python/, the others in <build>/python/)
    and one thread per rank, as torchrun sets it."""
    env = dict(os.environ)
    pkg = BUILD / "python"
    if not (pkg / "stepscope").is_dir():
        pkg = SOURCE / "python"
    path = str(pkg)
    env["PYTHONPATH"] = path + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else path
    env["OMP_NUM_THREADS"] = "1"
    return env


def python_cmd(script, *args):
    """The rank command running SCRIPT.  In a sanitizer build the extension
    needs the ASan runtime loaded first into the interpreter, which is not
    instrumented (and libstdc++ right after it), as the Python tests do
    (docs/python.md); only the ranks get that, the controller keeps its
    own sanitizer options."""
    prefix = []
    asan = sanitizer_runtime()
    if asan:
        prefix = ["env", f"LD_PRELOAD={asan}:libstdc++.so.6",
                  "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"]
    return [*prefix, sys.executable, str(script), *args]


def run_train(db, mode, nprocs, *args, extra=()):
    """Runs examples/ddp_train.py under `stepscope run`, instrumented by hand
    (mode "explicit") or by `--auto` (mode "auto")."""
    cmd = python_cmd(TRAIN, *args)
    if mode == "explicit":
        cmd.append("--explicit")
    else:
        extra = ("--auto", *extra)
    return run_job(db, nprocs, cmd, extra=extra, env=ddp_env(), timeout=JOB_TIMEOUT)


def kinds(findings):
    return sorted(f["kind"] for f in findings)


def of_kind(findings, kind):
    hits = [f for f in findings if f["kind"] == kind]
    assert hits, f"no {kind} finding in {findings}"
    return hits


def printed(stdout, rank, key):
    """A key=value the script printed on RANK's stdout."""
    m = re.search(rf"^\[rank {rank}\] ddp_train: rank={rank} .*\b{key}=(\S+)",
                  stdout, re.M)
    assert m, f"rank {rank} did not print {key}:\n{stdout}"
    return float(m.group(1))


@pytest.fixture(scope="module", params=MODES)
def faulty(request, tmp_path_factory):
    """One 3-rank job with a slow rank and a slow reader, run once per mode."""
    db = tmp_path_factory.mktemp(f"faulty-{request.param}") / "store.db"
    job = run_train(db, request.param, 3, "--steps", str(STEPS),
                    "--slow-rank", str(SLOW_RANK), "--slow-ms", str(SLOW_MS),
                    "--stall-rank", str(STALL_RANK), "--stall-ms", str(STALL_MS),
                    "--stall-every", str(STALL_EVERY))
    assert job.returncode == 0, job.stderr
    return job, job.report()


def test_faults_found_and_nothing_else(faulty):
    job, report = faulty
    assert kinds(report["findings"]) == ["data_stall", "straggler"], report["findings"]
    assert report["steps"]["count"] >= STEPS - 2
    assert report["steps"]["with_missing_ranks"] == 0
    assert sorted(r["rank"] for r in report["ranks"]) == [0, 1, 2]


def test_straggler_is_the_slow_rank_in_forward(faulty):
    job, report = faulty
    hits = of_kind(report["findings"], "straggler")
    # The ranks that wait for it (inside backward, where DDP all-reduces)
    # are not blamed, and nothing blames backward.
    assert [f["ranks"] for f in hits] == [[SLOW_RANK]] * len(hits), hits
    assert all(f["phase"] != "backward" for f in report["findings"]), report["findings"]
    assert hits[0]["phase"] == "forward", hits[0]
    ev = hits[0]["evidence"]
    assert ev["mode"] == "persistent", ev
    assert 0.6 * SLOW_MS <= ev["late_ms_median"] <= 2 * SLOW_MS, ev
    assert 0.6 * SLOW_MS <= ev["explained_ms"] <= 2 * SLOW_MS, ev
    assert f"rank {SLOW_RANK}" in hits[0]["message"]
    # The waiting shows up where it happens: the slow rank spends the least
    # time in backward, every other rank waits there for it.
    ranks = {r["rank"]: r for r in report["ranks"]}
    fwd = {r: ranks[r]["phase_median_ms"]["forward"] for r in ranks}
    bwd = {r: ranks[r]["phase_median_ms"]["backward"] for r in ranks}
    assert fwd[SLOW_RANK] - max(v for r, v in fwd.items() if r != SLOW_RANK) >= 0.6 * SLOW_MS
    assert bwd[SLOW_RANK] == min(bwd.values()), bwd


BWD_RANK, BWD_MS = 2, 40


def test_slow_backward_is_blamed_on_backward(tmp_path):
    """Auto mode nests each rank's all-reduce wait inside its backward, so
    the slow rank's backward (more compute, less waiting) lasts about as
    long as everyone's: only its self time tells.  The straggler is named
    with phase backward and the excess, about the injected compute."""
    job = run_train(tmp_path / "store.db", "auto", 4, "--steps", str(STEPS),
                    "--slow-rank", str(BWD_RANK), "--slow-ms", str(BWD_MS),
                    "--slow-phase", "backward")
    assert job.returncode == 0, job.stderr
    report = job.report()
    hits = of_kind(report["findings"], "straggler")
    assert [f["ranks"] for f in hits] == [[BWD_RANK]] * len(hits), report["findings"]
    assert all(f["ranks"] == [BWD_RANK] for f in report["findings"]), report["findings"]
    assert hits[0]["phase"] == "backward", hits[0]
    ev = hits[0]["evidence"]
    assert ev["phase_time"] == "self", ev
    assert 0.6 * BWD_MS <= ev["explained_ms"] <= 2 * BWD_MS, ev
    assert "backward phase (self time)" in hits[0]["message"], hits[0]
    # The tables say why: backward nests the all-reduce wait; by inclusive
    # time the slow rank's backward is unremarkable, by self time it stands
    # out by about the injected compute.
    phases = {p["name"]: p for p in report["steps"]["phases"]}
    assert phases["backward"]["nests"] is True, phases["backward"]
    ranks = {r["rank"]: r for r in report["ranks"]}
    own = {r: ranks[r]["phase_self_median_ms"]["backward"] for r in ranks}
    assert own[BWD_RANK] - max(v for r, v in own.items() if r != BWD_RANK) >= 0.6 * BWD_MS, own
    wait = {r: ranks[r]["phase_self_median_ms"]["allreduce"] for r in ranks}
    assert wait[BWD_RANK] == min(wait.values()), wait


def test_rank_sleeping_on_oversubscribed_cores(tmp_path):
    """Four ranks of a small transformer on fewer cores, one sleeping 20 ms
    per step in its blocks' forward (a wait of its own, no CPU time): it
    gives its core to its peers while it sleeps, so its lateness scatters
    as widely as theirs and stays within what every rank loses to the run
    queue, yet it is the last rank in most steps.  It is named, its
    forward blamed."""
    cmd = python_cmd(LM, "--steps", "150", "--sleep-rank", "3", "--sleep-ms", "20",
                     "--sleep-where", "block")
    job = run_job(tmp_path / "store.db", 4, cmd, extra=("--auto",), env=ddp_env(),
                  timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr
    findings = job.report()["findings"]
    hits = of_kind(findings, "straggler")
    assert all(f["ranks"] == [3] for f in findings), findings
    assert hits[0]["phase"] == "forward", hits[0]


def test_data_stall_on_the_slow_reader(faulty):
    job, report = faulty
    hits = of_kind(report["findings"], "data_stall")
    assert [f["ranks"] for f in hits] == [[STALL_RANK]], hits
    assert hits[0]["phase"] in ("data", None)
    ev = hits[0]["evidence"]
    # A stall every STALL_EVERY steps from step 0; the detectors skip the
    # first steps (warm-up).
    assert ev["stalls"] >= STEPS // STALL_EVERY - 2, ev
    assert 0.7 * STALL_MS <= ev["stall_ms_median"] <= 2 * STALL_MS, ev
    assert ev.get("period_steps") == STALL_EVERY, ev


@pytest.mark.parametrize("mode", MODES)
def test_memory_creep_measures_the_leak(store, mode):
    job = run_train(store, mode, 3, "--steps", str(STEPS),
                    "--leak-rank", str(LEAK_RANK), "--leak-mb", str(LEAK_MB))
    assert job.returncode == 0, job.stderr
    report = job.report()
    hits = of_kind(report["findings"], "memory_creep")
    assert [f["ranks"] for f in hits] == [[LEAK_RANK]], hits
    # Touching fresh pages takes time, so the leaking rank may also be late:
    # whatever is found blames the leaking rank only.
    assert all(f["ranks"] == [LEAK_RANK] for f in report["findings"]), report["findings"]
    # The truth: what the script keeps alive per step, which its own RSS
    # confirms (RSS grows by whole pages, a little more than the tensors).
    kept = printed(job.stdout, LEAK_RANK, "leak_bytes_per_step")
    assert kept == LEAK_MB * (1 << 20)
    grown = printed(job.stdout, LEAK_RANK, "rss_bytes_per_step")
    assert abs(grown - kept) / kept < 0.05, (grown, kept)
    slope = hits[0]["evidence"]["bytes_per_step"]
    assert abs(slope - kept) / kept < 0.2, (slope, kept)
    ranks = {r["rank"]: r for r in report["ranks"]}
    others = max(r["max_rss_bytes"] for k, r in ranks.items() if k != LEAK_RANK)
    assert ranks[LEAK_RANK]["max_rss_bytes"] - others >= 0.6 * kept * STEPS


@pytest.mark.parametrize("mode", MODES)
def test_clean_job_has_no_findings(store, mode):
    job = run_train(store, mode, 4, "--steps", str(STEPS))
    assert job.returncode == 0, job.stderr
    report = job.report()
    assert report["findings"] == [], report["findings"]
    assert report["steps"]["count"] >= STEPS - 2
    phases = {p["name"] for p in report["steps"]["phases"]}
    assert {"data", "forward", "backward", "optimizer"} <= phases, phases
    assert [s["name"] for s in report["steps"]["syncs"]] == ["allreduce"]
    assert all(r["max_rss_bytes"] for r in report["ranks"])


@pytest.mark.parametrize("mode", MODES)
def test_raising_rank_is_named_with_its_step(store, mode):
    crash_step = 20
    job = run_train(store, mode, 3, "--steps", "200", "--crash-rank", "1",
                    "--crash-step", str(crash_step))
    assert job.returncode == 1, job.stderr
    err = job.stderr
    assert "rank 1 failed first: exited with code 1" in err, err
    m = re.search(r"rank 1 failed first: .*last step: (\d+)", err)
    assert m, err
    # The raise opens step 20 (steps count from 0 in both modes), so the
    # last completed step is 19, or 18 if the last record did not leave the
    # rank before it died.
    assert crash_step - 2 <= int(m.group(1)) <= crash_step, err
    assert f"injected crash on rank 1 in step {crash_step}" in err
    report = job.report()
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert ranks[1]["state"] == "failed"
    assert ranks[1]["exit_code"] == 1
    assert report["run"]["exit_code"] == 1


def test_tutorial_script_unmodified_with_snapshot_resume(store, tmp_path):
    snapshot = tmp_path / "snapshot.pt"
    args = ["--dataset_size", "1024", "--batch_size", "32",
            "--snapshot_path", str(snapshot)]
    steps_per_epoch = 1024 // 2 // 32

    first = run_job(store, 2, python_cmd(TUTORIAL, "3", "2", *args),
                    extra=("--auto",), env=ddp_env(), timeout=JOB_TIMEOUT)
    assert first.returncode == 0, first.stderr
    assert snapshot.exists()
    assert "Epoch 2 | Training snapshot saved" in first.stdout
    report = first.report()
    assert report["run"]["id"] == 1
    assert 3 * steps_per_epoch - 2 <= report["steps"]["count"] <= 3 * steps_per_epoch
    phases = {p["name"] for p in report["steps"]["phases"]}
    assert {"data", "forward", "backward", "optimizer"} <= phases, phases
    assert not [f for f in report["findings"] if f["kind"] in ("straggler", "data_stall")], \
        report["findings"]

    second = run_job(store, 2, python_cmd(TUTORIAL, "5", "2", *args),
                     extra=("--auto",), env=ddp_env(), timeout=JOB_TIMEOUT)
    assert second.returncode == 0, second.stderr
    assert "Resuming training from snapshot at Epoch 3" in second.stdout
    report = second.report()
    assert report["run"]["id"] == 2
    assert 2 * steps_per_epoch - 2 <= report["steps"]["count"] <= 2 * steps_per_epoch


# A small straggler on a short step: rank 1 computes 3 ms more in forward
# of a step of about 10 ms (4 ranks, hidden 128, batch 16: ~7 ms clean on
# 2 idle cores).  It arrives ~3 ms late in most steps, too little for a
# floor of 5 ms or a vote of single steps.
SHORT_STEP = ("--hidden", "128", "--layers", "1", "--batch", "16")
SMALL_RANK, SMALL_MS = 1, 3


def test_small_straggler_on_a_short_step(tmp_path):
    job = run_train(tmp_path / "store.db", "auto", 4, "--steps", "250", *SHORT_STEP,
                    "--slow-rank", str(SMALL_RANK), "--slow-ms", str(SMALL_MS))
    assert job.returncode == 0, job.stderr
    report = job.report()
    # The test means what it says only if the step is short: 3 ms must be
    # a small part of it (measured 10 ms on 2 loaded cores; 25 ms would be
    # a machine too busy for the point).
    step = report["steps"]["step_time_ms"]["median_rank"]["p50"]
    assert 5 <= step <= 25, report["steps"]["step_time_ms"]
    hits = of_kind(report["findings"], "straggler")
    assert [f["ranks"] for f in hits] == [[SMALL_RANK]] * len(hits), report["findings"]
    assert hits[0]["phase"] == "forward", hits[0]
    ev = hits[0]["evidence"]
    assert 0.5 * SMALL_MS <= ev["late_ms_median"] <= 3 * SMALL_MS, ev
    assert 0.5 * SMALL_MS <= ev["explained_ms"] <= 3 * SMALL_MS, ev
    assert not blaming_others(report["findings"], SMALL_RANK), report["findings"]


HOST_KINDS = ("cpu_starved", "stopped", "cpu_throttled")


def blaming_others(findings, rank):
    """The findings that blame the job's lost time on a rank other than
    RANK.  Host findings are left out: they state what the host measured
    for that rank's own process, and on 2 cores shared with other work the
    scheduler now and then leaves one rank waiting for a CPU twice as long
    as its peers over a few dozen steps, which cpu_starved reports."""
    return [f for f in findings
            if f["kind"] not in HOST_KINDS and set(f["ranks"]) - {rank}]


def write_wrapper(path, body):
    """A shell script PATH whose body may branch on the rank's $RANK."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def train_line(*args, runner=()):
    """The shell line that execs the training script with ARGS under the
    RUNNER command (such as taskset); "$@" and "$RANK" stay for the shell
    to expand."""
    quoted = [a if a in ('"$@"', '"$RANK"') else shlex.quote(a)
              for a in (*runner, *python_cmd(TRAIN), *args)]
    return "exec " + " ".join(quoted) + "\n"


def host_cause_names(f, rank, cause, kind):
    """True when finding F names RANK alone with the host CAUSE: a finding
    of KIND, or a straggler whose evidence names CAUSE."""
    if f["ranks"] != [rank]:
        return False
    if f["kind"] == kind:
        return f["evidence"].get("cause") == cause
    return f["kind"] == "straggler" and f["evidence"].get("host_cause") == cause


STARVED_RANK = 2


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
                    reason="needs 2 CPUs and taskset")
def test_cpu_starved_rank_is_named_with_its_cause(tmp_path):
    """Rank 2 starts at nice 19, pinned to one CPU where a busy loop (also
    at nice 19) runs for the whole job: it gets half of what the other
    ranks leave of that CPU.  It is named with its cause, the run-queue
    delay the host measured for its process."""
    cpu = max(os.sched_getaffinity(0))
    wrapper = write_wrapper(
        tmp_path / "train.sh",
        f'if [ "$RANK" = {STARVED_RANK} ]; then\n  '
        + train_line('"$@"', runner=("taskset", "-c", str(cpu), "nice", "-n", "19"))
        + "fi\n" + train_line('"$@"'))
    # A machine busy with other work starves every rank, not only this one,
    # and can hide its share of the CPU: a miss is tried once more, in a
    # store of its own (the first job's findings are printed with it).
    for attempt in range(2):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            os.sched_setaffinity(hog.pid, {cpu})
            os.setpriority(os.PRIO_PROCESS, hog.pid, 19)
            job = run_job(tmp_path / f"store-{attempt}.db", 4,
                          [str(wrapper), "--steps", "250", *SHORT_STEP],
                          extra=("--auto",), env=ddp_env(), timeout=JOB_TIMEOUT)
        finally:
            hog.kill()
            hog.wait()
        assert job.returncode == 0, job.stderr
        findings = job.report()["findings"]
        named = [f for f in findings
                 if host_cause_names(f, STARVED_RANK, "run_queue", "cpu_starved")]
        if named:
            break
        print(f"attempt {attempt}: rank {STARVED_RANK} not named (load "
              f"average {os.getloadavg()}): {findings}")
    assert named, findings
    # If the scheduler left another rank waiting too, the starved rank
    # still lost the most.
    lost = {f["ranks"][0]: f["evidence"]["lost_ms_per_step"] for f in findings
            if f["kind"] == "cpu_starved" and len(f["ranks"]) == 1}
    assert not lost or max(lost, key=lost.get) == STARVED_RANK, findings
    message = named[0]["message"]
    assert f"rank {STARVED_RANK}" in message and "waited for a CPU" in message, message


STOPPED_RANK, STOP_MS, STOP_EVERY_MS = 3, 30, 100


class Stopper:
    """Stops one rank of a running job with SIGSTOP for STOP_MS every
    STOP_EVERY_MS, from the job's first stored step until stop(); the rank
    is always continued at the end."""

    def __init__(self, launcher_pid, rank, db):
        self.launcher_pid, self.rank, self.db = launcher_pid, rank, db
        self.pid = None
        self.stops = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + JOB_TIMEOUT
        while not self.done.is_set() and time.monotonic() < deadline:
            if self.pid is None:
                self.pid = rank_pid(self.launcher_pid, self.rank)
            if self.pid is not None and stored_steps(self.db) > 0:
                break
            self.done.wait(0.25)
        next_stop = time.monotonic()
        while not self.done.is_set() and self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGSTOP)
                try:
                    time.sleep(STOP_MS / 1000)
                finally:
                    os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                return
            self.stops += 1
            next_stop += STOP_EVERY_MS / 1000
            self.done.wait(max(0.0, next_stop - time.monotonic()))

    def stop(self):
        self.done.set()
        self.thread.join(timeout=10)
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def test_stopped_rank_is_named_not_its_peers(tmp_path):
    """Rank 3 is stopped for 30 ms every 100 ms: most stops land while it
    waits inside the all-reduce, where arrival times cannot tell, so only
    the host's evidence (its time stopped) names it.  The ranks that
    waited for it are not blamed."""
    db = tmp_path / "store.db"
    proc = subprocess.Popen(job_args(db, 4, python_cmd(TRAIN, "--steps", "200"),
                                     ("--auto",)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ddp_env())
    stopper = Stopper(proc.pid, STOPPED_RANK, db)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    finally:
        stopper.stop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    job = Job(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), db)
    assert job.returncode == 0, job.stderr
    assert stopper.stops >= 20, stopper.stops
    findings = job.report()["findings"]
    hits = [f for f in findings if host_cause_names(f, STOPPED_RANK, "stopped", "stopped")]
    assert hits, findings
    assert "stopped" in hits[0]["message"], hits[0]
    assert not [f for f in findings if f["kind"] == "jitter"
                and set(f["ranks"]) - {STOPPED_RANK}], findings
    assert not blaming_others(findings, STOPPED_RANK), findings


GUARD_RANKS, GUARD_STEPS, GUARD_MS = 2, 40, 20
NIGHTLY = "ddp-nightly"
# The clean checks' threshold: torch's compute follows the machine's load,
# and a clean run beside another test's ranks was 35 % slower than the three
# before it; the injected slowdown (GUARD_MS on a ~7 ms step) is near +300 %.
WIDE = ("--set", "threshold=75", "--metric", "step_time")


def write_nightly(path, slow_ms=0):
    """The job behind one command line: the training script, with every
    rank computing SLOW_MS more in forward when SLOW_MS is given (the
    wrapper passes each rank its own $RANK as the slow one)."""
    args = ["--steps", str(GUARD_STEPS)]
    if slow_ms:
        args += ["--slow-rank", '"$RANK"', "--slow-phase", "forward", "--slow-ms", str(slow_ms)]
    write_wrapper(path, train_line(*args))


def run_nightly(db, path, nprocs=GUARD_RANKS):
    job = run_job(db, nprocs, [str(path)], extra=("--auto", "--name", NIGHTLY),
                  env=ddp_env(), timeout=JOB_TIMEOUT)
    assert job.returncode == 0, job.stderr


def guard(db, *args):
    return subprocess.run([str(STEPSCOPE), "guard", "--db", str(db), "--name", NIGHTLY, *args],
                          capture_output=True, text=True, timeout=120)


def test_guard_over_real_ddp_runs(tmp_path):
    """Four clean runs, then one 20 ms slower in forward on every rank: a
    regression in step_time and phase.forward with its interval; a clean
    run after it is none; a run of 3 ranks has nothing to be compared
    with.  The clean checks judge only the step time with a threshold of
    75 % (WIDE): torch's compute follows the machine's load, which moves
    clean runs of a shared machine by 5-15 % (docs/guard.md) and a run
    beside another test's ranks by more, and this test is about the
    injected slowdown, far above either."""
    db, job = tmp_path / "store.db", tmp_path / "nightly.sh"
    write_nightly(job)
    for _ in range(4):
        run_nightly(db, job)
    g = guard(db, "--json", *WIDE)
    assert g.returncode == 0, g.stdout + g.stderr
    doc = json.loads(g.stdout)
    assert doc["verdict"] == "ok" and doc["baseline"] == [1, 2, 3], doc
    assert doc["fingerprint"]["world_size"] == GUARD_RANKS

    write_nightly(job, slow_ms=GUARD_MS)
    run_nightly(db, job)
    g = guard(db)
    assert g.returncode == 1, g.stdout + g.stderr
    regressions = {l.split()[1]: l for l in g.stdout.splitlines()
                   if l.startswith("REGRESSION: ")}
    assert {"step_time", "phase.forward"} <= set(regressions), g.stdout
    # "REGRESSION: phase.forward +X % [+LO %, +HI %] (A ms vs B ms, ...)":
    # the change lies in its interval, whose low end is far above zero,
    # and it is about the injected 20 ms.
    fwd = regressions["phase.forward"]
    m = re.search(r"\+([\d.]+) % \[\+([\d.]+) %, \+([\d.]+) %\] \(([\d.]+) ms vs ([\d.]+) ms", fwd)
    assert m, fwd
    change, lo, hi, now, before = (float(x) for x in m.groups())
    assert lo <= change <= hi and lo > 50, fwd
    assert 0.6 * GUARD_MS <= now - before <= 2 * GUARD_MS, fwd
    assert "since run 5" in regressions["step_time"], regressions["step_time"]
    phases = {name: float(l.split()[2]) for name, l in regressions.items()
              if name.startswith("phase.")}
    assert max(phases, key=phases.get) == "phase.forward", regressions

    write_nightly(job)
    run_nightly(db, job)
    g = guard(db, "--json", *WIDE)
    assert g.returncode == 0, g.stdout + g.stderr
    doc = json.loads(g.stdout)
    assert doc["run"] == 6 and doc["baseline"] == [1, 2, 3, 4, 5], doc

    run_nightly(db, job, nprocs=3)
    g = guard(db)
    assert g.returncode == 2, g.stdout + g.stderr
    assert f"cannot judge: 0 comparable runs of '{NIGHTLY}' before run 7" in g.stdout, g.stdout
    assert f"world_size 3 vs {GUARD_RANKS}" in g.stdout, g.stdout
