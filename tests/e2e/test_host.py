"""The host's evidence per rank and per step, from real ranks: a rank
stopped from outside has stopped time in about the share it was stopped and
the others none; a rank at nice 19 sharing its CPU with a busy process
waits for a CPU far more than the others; a rank whose cgroup has a small
CPU quota is throttled.  `report --json` shows it all."""
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import STEPSCOPE, Job, example, kill_quietly


def start_job(db, nprocs, cmd, extra=()):
    args = [str(STEPSCOPE), "run", "-n", str(nprocs), "--db", str(db),
            "--no-http", "-q", *extra, "--", *cmd]
    return subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def rank_pid(controller, rank, seconds=20.0):
    """The pid of RANK's process: the controller's child whose environment
    says RANK=rank."""
    want = f"RANK={rank}".encode()
    deadline = time.time() + seconds
    while time.time() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != controller:
                    continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if want in f.read().split(b"\0"):
                        return int(entry)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.02)
    raise AssertionError(f"rank {rank} of controller {controller} not found")


def finish(proc, db, timeout=240):
    out, err = proc.communicate(timeout=timeout)
    job = Job(subprocess.CompletedProcess(proc.args, proc.returncode, out,
                                          err), db)
    assert job.returncode == 0, job.stderr
    return job


def host_rows(db):
    """{rank: [(step_ns, runq, stopped, cpu, throttled), ...]} of the rank
    steps with host evidence."""
    con = sqlite3.connect(str(db))
    rows = {}
    for rank, step_ns, runq, stopped, cpu, thr in con.execute(
            "SELECT rank, step_ns, host_runq_ns, host_stopped_ns, "
            "host_cpu_ns, host_throttled_ns FROM rank_steps "
            "WHERE host_cpu_ns IS NOT NULL ORDER BY step"):
        rows.setdefault(rank, []).append((step_ns, runq, stopped, cpu, thr))
    con.close()
    return rows


def median(values):
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def test_stopped_rank_has_stopped_time_others_none(store):
    proc = start_job(store, 4, example("--steps", "200", "--compute-ms", "5"))
    stopped_s, stops = 0.0, 0
    try:
        pid = rank_pid(proc.pid, 2)
        done = threading.Event()

        def hiccups():
            nonlocal stopped_s, stops
            while not done.is_set():
                t = time.monotonic()
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    return  # the rank has finished
                try:
                    time.sleep(0.030)
                finally:
                    kill_quietly(pid, signal.SIGCONT)
                stopped_s += time.monotonic() - t
                stops += 1
                time.sleep(0.070)

        thread = threading.Thread(target=hiccups)
        thread.start()
        try:
            proc.wait(timeout=240)
        finally:
            done.set()
            thread.join()
        job = finish(proc, store)
    finally:
        if proc.poll() is None:
            proc.kill()
    rows = host_rows(store)
    assert sorted(rows) == [0, 1, 2, 3], rows.keys()
    for rank in (0, 1, 3):
        assert all(r[2] == 0 for r in rows[rank]), (rank, rows[rank][:5])
    steps_ns = sum(r[0] for r in rows[2])
    stopped_ns = sum(r[2] for r in rows[2])
    share = stopped_ns / steps_ns
    # The test stopped it 30 ms in every 100 ms (a little more on a loaded
    # machine); what falls between steps is not counted.
    assert 0.15 < share < 0.5, (share, stopped_ns, steps_ns)
    assert stopped_ns <= stopped_s * 1e9 * 1.05, (stopped_ns, stopped_s)
    # Each stop lands in a step (a step is much shorter than the 70 ms
    # between stops), or in two when the controller timestamps it late on
    # a loaded machine; the first and last may fall outside the steps.
    hit = sum(1 for r in rows[2] if r[2] > 0)
    assert stops * 0.7 - 2 <= hit <= 2 * stops, (hit, stops)

    report = job.report()
    ev = report["ranks"][2]["host_evidence"]
    assert ev["steps"] == len(rows[2])
    assert ev["stopped_steps"] == hit
    assert ev["max"]["stopped_ms"] >= 25.0
    assert ev["total"]["stopped_ms"] > 0
    for field in ("cpu_ms", "runq_ms", "invol_switches", "major_faults",
                  "throttled_ms", "psi_cpu_ms"):
        assert field in ev["median"], field
    assert report["ranks"][0]["host_evidence"]["stopped_steps"] == 0
    # A short step's CPU time may round to 0 ms (without schedstat it
    # comes in 1/HZ ticks); the run's total does not.
    assert report["ranks"][0]["host_evidence"]["total"]["cpu_ms"] > 0


def freeze(stop, every, seconds=2.0):
    """Stops the processes STOP (SIGSTOP), waits SECONDS, and continues
    EVERY one of the job's ranks (SIGCONT), whatever happens meanwhile."""
    try:
        for pid in stop:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
    finally:
        for pid in every:
            kill_quietly(pid, signal.SIGCONT)


def blamed_for_the_freeze(findings, stall):
    """The findings that blame a rank for the freeze of STALL: any
    `stopped`, and a `straggler` whose steps hold the stalled step (one
    elsewhere is the loaded machine's scheduling of a clean job, which
    the accuracy matrix's clean rows measure, not the freeze)."""
    step = stall["first_step"]
    return [f for f in findings if f["kind"] == "stopped" or
            (f["kind"] == "straggler" and
             f["first_step"] <= step <= f["last_step"])]


def test_the_whole_job_frozen_once_is_a_stall(store):
    """Every rank stopped from outside for 2 s once (a freezer, a paused
    machine): one `stall` finding, no rank's, with the host's words; and
    neither a stopped rank nor a straggler over the stalled step."""
    proc = start_job(store, 3, example("--steps", "700", "--compute-ms", "4"))
    try:
        pids = [rank_pid(proc.pid, r) for r in range(3)]
        time.sleep(1.5)  # past the detectors' first 30 steps
        freeze(pids, pids)
        job = finish(proc, store)
    finally:
        if proc.poll() is None:
            proc.kill()
    findings = job.report()["findings"]
    stalls = [f for f in findings if f["kind"] == "stall"]
    assert len(stalls) == 1, findings
    msg = stalls[0]["message"]
    assert msg.startswith("the job stalled in step "), msg
    assert "every rank was stopped" in msg, msg
    assert stalls[0]["ranks"] == [], stalls[0]
    assert not blamed_for_the_freeze(findings, stalls[0]), findings


def process_state(pid):
    """The state letter of PID's /proc stat line ("T": stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_the_whole_job_frozen_past_one_ranks_collective_is_a_stall(store):
    """The job frozen from outside while rank 1 was past its step's
    all-reduce and its peers were done with that step: rank 1 is stopped
    in step 150 alone, the others in step 151 (rank 1 stops itself, the
    others are stopped 0.1 s later, every rank continued after 2 s).  One
    `stall`, and not rank 1's `stopped` (the previous code named it)."""
    proc = start_job(store, 3, example("--steps", "500", "--compute-ms", "4",
                                       "--stop", "1:150"))
    try:
        pids = [rank_pid(proc.pid, r) for r in range(3)]
        deadline = time.time() + 60
        while process_state(pids[1]) != "T":
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.002)
        time.sleep(0.1)  # the others finish step 150 and wait in 151
        freeze((pids[0], pids[2]), pids)
        job = finish(proc, store)
    finally:
        if proc.poll() is None:
            proc.kill()
    findings = job.report()["findings"]
    assert [f["kind"] for f in findings
            if f["kind"] != "straggler"] == ["stall"], findings
    stall = findings[[f["kind"] for f in findings].index("stall")]
    assert stall["ranks"] == [], stall
    assert "every rank was stopped" in stall["message"], stall
    assert not blamed_for_the_freeze(findings, stall), findings
    con = sqlite3.connect(str(store))
    stopped = dict(con.execute(
        "SELECT rank, MIN(step) FROM rank_steps WHERE host_stopped_ns > 1e9"
        " GROUP BY rank"))
    con.close()
    assert stopped[1] + 1 == stopped[0] == stopped[2], stopped


def test_niced_rank_sharing_its_cpu_waits_for_it(store):
    cpu = str(max(os.sched_getaffinity(0)))
    busy = subprocess.Popen(["taskset", "-c", cpu, "sh", "-c",
                             "while :; do :; done"])
    try:
        # Rank 1 runs at nice 19 on the busy process's CPU.
        cmd = ["sh", "-c",
               'if [ "$RANK" = 1 ]; then exec taskset -c "$0" nice -n 19 "$@";'
               ' else exec "$@"; fi', cpu,
               *example("--steps", "40", "--compute-ms", "2")]
        proc = start_job(store, 3, cmd)
        finish(proc, store)
    finally:
        busy.kill()
        busy.wait()
    rows = host_rows(store)
    assert sorted(rows) == [0, 1, 2], rows.keys()
    runq = {rank: median(r[1] for r in rows[rank]) for rank in rows}
    others = max(runq[0], runq[2])
    assert runq[1] > 3 * others and runq[1] > 2_000_000, runq


def cgroup_v1_cpu():
    """The v1 cpu controller's mount point when this process may make a
    cgroup there, else None."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                head, _, tail = line.partition(" - ")
                fs = tail.split()
                if fs and fs[0] == "cgroup" and "cpu" in fs[2].split(","):
                    mnt = head.split()[4]
                    return mnt if os.access(mnt, os.W_OK) else None
    except OSError:
        pass
    return None


def test_throttled_rank_in_a_cpu_quota(store):
    mnt = cgroup_v1_cpu()
    if not mnt:
        pytest.skip("no writable cgroup v1 cpu controller here (cgroup v2 "
                    "hosts: cpu.max would do the same)")
    group = Path(mnt) / f"stepscope-test-{os.getpid()}"
    try:
        group.mkdir()
    except OSError as e:
        pytest.skip(f"cannot make a cgroup: {e}")
    try:
        (group / "cpu.cfs_quota_us").write_text("10000\n")  # 10 % of a CPU
        proc = start_job(store, 3, example("--steps", "100", "--compute-ms",
                                           "5"))
        try:
            # Rank 1: rank 0 calibrates the compute time for all, and would
            # calibrate it short under the quota.
            pid = rank_pid(proc.pid, 1)
            (group / "cgroup.procs").write_text(f"{pid}\n")
            job = finish(proc, store)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    rows = host_rows(store)
    throttled = {rank: sum(r[4] or 0 for r in rows[rank]) for rank in rows}
    assert throttled[1] > 50_000_000, throttled
    assert throttled[0] == 0 and throttled[2] == 0, throttled
    ev = job.report()["ranks"][1]["host_evidence"]
    assert ev["throttled_steps"] > 0 and ev["total"]["throttled_ms"] > 50


def test_host_interval_zero_turns_it_off(store):
    proc = start_job(store, 2, example("--steps", "20", "--compute-ms", "2"),
                     extra=("--host-interval", "0"))
    job = finish(proc, store)
    assert host_rows(store) == {}
    ranks = job.report()["ranks"]
    assert [r["host_evidence"] for r in ranks] == [None, None]


def test_bad_host_interval_is_refused(store):
    for bad in ("-1", "ten", "60001"):
        r = subprocess.run([str(STEPSCOPE), "run", "-n", "1", "--db",
                            str(store), "--host-interval", bad, "--",
                            "true"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2, (bad, r.stderr)
        assert "--host-interval" in r.stderr, r.stderr
