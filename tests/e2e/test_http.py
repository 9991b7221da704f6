"""The HTTP API of `stepscope run` and `stepscope serve` (docs/api.md).

A real 3-rank job runs under `stepscope run`; while it runs every endpoint
is fetched with urllib and checked against the documented shapes (the
live-only fields included), the event stream delivers steps, bad requests
get 4xx JSON errors, and the live-run file points at the server.  After the
job, `stepscope serve` serves the finished store.  Loopback only; every
wait is bounded.
"""
import json
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import STEPSCOPE, example, kill_quietly

URL_RE = re.compile(r"dashboard (http://127\.0\.0\.1:\d+/)")


def wait_line(path, pattern, proc, timeout=30.0):
    """The first match of PATTERN in the file PATH, waiting for it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = pattern.search(path.read_text(errors="replace"))
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"no {pattern.pattern!r} in {path.read_text()!r}")


def get(url, timeout=20):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def get_json(url):
    status, ctype, body = get(url)
    assert status == 200
    assert ctype.startswith("application/json")
    return json.loads(body)


def get_error(url):
    try:
        get(url)
    except urllib.error.HTTPError as e:
        body = json.loads(e.read().decode())
        assert isinstance(body["error"], str) and body["error"]
        return e.code
    raise AssertionError(f"{url} did not fail")


def stop(proc, timeout=30):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_quietly(proc.pid)
            proc.wait()


RUN_KEYS = {"id", "uuid", "name", "status", "world_size", "started_at",
            "ended_at", "steps", "findings", "live"}
STEP_KEYS = {"step", "n_present", "missing_ranks", "step_ms", "phases",
             "syncs"}
STAT_KEYS = {"min", "median", "p90", "max", "worst_rank"}
SELF_KEYS = {"median", "max", "worst_rank"}
RANK_KEYS = {"rank", "state", "host", "pid", "last_step", "phase",
             "last_heard_s", "exit_code", "signal", "median_step_ms",
             "max_rss_bytes", "dropped_events", "dropped_records"}


def check_step(s):
    assert STEP_KEYS <= s.keys()
    assert STAT_KEYS == set(s["step_ms"])
    assert s["step_ms"]["min"] <= s["step_ms"]["median"] <= s["step_ms"]["max"]
    assert {"data", "compute", "allreduce", "optimizer"} <= s["phases"].keys()
    for st in s["phases"].values():
        assert STAT_KEYS | {"self"} == set(st)
        # nothing nests in ss_allreduce's phases: self time is all of it
        assert SELF_KEYS == set(st["self"])
        assert st["self"]["median"] == st["median"]
    assert set(s["syncs"]["allreduce"]) == {"skew_ms", "late_ms", "worst_rank"}


def test_api_while_running_then_serve(tmp_path):
    db = tmp_path / "store.db"
    err = tmp_path / "run.err"
    with open(err, "w") as ef:
        proc = subprocess.Popen(
            [str(STEPSCOPE), "run", "-n", "3", "-q", "--db", str(db), "--",
             *example("--steps", "400", "--compute-ms", "5")],
            stdout=subprocess.DEVNULL, stderr=ef)
    try:
        base = wait_line(err, URL_RE, proc).group(1)
        live = get_json(base + "api/live")
        rid = live["run_id"]
        assert live["world_size"] == 3 and live["running"] is True

        # the live-run file, for `stepscope top`
        live_file = db.parent / f"{db.name}.d" / "live" / f"run-{rid}.json"
        info = json.loads(live_file.read_text())
        assert info["url"] == base and info["run_id"] == rid
        assert "token" not in info

        deadline = time.time() + 30
        while get_json(f"{base}api/runs/{rid}")["summary"]["steps"] < 5:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)

        # the event stream: finalized steps as they happen
        with urllib.request.urlopen(f"{base}api/runs/{rid}/stream",
                                    timeout=20) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            buf = ""
            while "event: step\ndata: " not in buf or not buf.endswith("\n\n"):
                chunk = r.read1(65536).decode()
                assert chunk, "stream ended early"
                buf += chunk
        data = buf.split("event: step\ndata: ", 1)[1].split("\n", 1)[0]
        check_step(json.loads(data))

        runs = get_json(base + "api/runs")["runs"]
        assert len(runs) == 1 and RUN_KEYS <= runs[0].keys()
        assert runs[0]["live"] is True and runs[0]["status"] == "running"

        doc = get_json(f"{base}api/runs/{rid}")
        assert doc["run"]["command"].endswith("--steps 400 --compute-ms 5")
        assert doc["run"]["exit_code"] is None
        for which in ("median_rank", "worst_rank"):
            assert set(doc["summary"]["step_ms"][which]) == {"p50", "p90", "p99"}

        steps = get_json(f"{base}api/runs/{rid}/steps")["steps"]
        assert steps and [s["step"] for s in steps] == sorted(s["step"] for s in steps)
        for s in steps:
            check_step(s)
        first = get_json(f"{base}api/runs/{rid}/steps?from=0&limit=3")["steps"]
        assert [s["step"] for s in first] == [steps[0]["step"] + i for i in range(3)] \
            or len(steps) < 3

        heat = get_json(f"{base}api/runs/{rid}/heatmap?limit=20")
        assert heat["ranks"] == [0, 1, 2]
        assert 0 < len(heat["steps"]) <= 20
        assert len(heat["step_ms"]) == 3
        assert all(len(row) == len(heat["steps"]) for row in heat["step_ms"])
        # lateness at the sync point and each phase's self time, same shape
        assert len(heat["late_ms"]) == 3
        assert all(len(row) == len(heat["steps"]) for row in heat["late_ms"])
        assert {"compute", "allreduce"} <= set(heat["phase_self_ms"])
        assert all(len(row) == len(heat["steps"])
                   for rows in heat["phase_self_ms"].values() for row in rows)

        ranks = get_json(f"{base}api/runs/{rid}/ranks")["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1, 2]
        for r in ranks:
            assert RANK_KEYS <= r.keys()
            assert r["state"] == "running"
            assert r["last_heard_s"] is not None and r["last_heard_s"] < 10
            assert r["pid"] > 0 and r["last_step"] >= 1

        assert get_json(f"{base}api/runs/{rid}/findings") == {"findings": [],
                                                              "stacks": None}
        events = get_json(f"{base}api/runs/{rid}/events?after=0")["events"]
        assert events[0]["kind"] == "run_started"
        assert {"id", "at", "kind", "rank", "message"} == set(events[0])
        later = get_json(f"{base}api/runs/{rid}/events?after={events[0]['id']}")
        assert all(e["id"] > events[0]["id"] for e in later["events"])

        status, ctype, text = get(base + "metrics")
        assert ctype.startswith("text/plain; version=0.0.4")
        assert f'stepscope_world_size{{run="{rid}"}} 3' in text
        m = re.search(rf'stepscope_steps_finalized_total{{run="{rid}"}} (\d+)', text)
        assert m and int(m.group(1)) >= 5

        # bad requests
        assert get_error(f"{base}api/runs/abc") == 400
        assert get_error(f"{base}api/runs/{rid + 100}") == 404
        assert get_error(f"{base}api/runs/{rid}/steps?limit=-1") == 400
        assert get_error(f"{base}api/runs/{rid}/nope") == 404
        assert get_error(f"{base}api/nope") == 404
        req = urllib.request.Request(base + "api/runs", data=b"{}",
                                     method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=20)
        assert e.value.code == 405

        assert proc.wait(timeout=120) == 0
    finally:
        stop(proc)
    assert not live_file.exists()

    # the finished store through `stepscope serve`
    serr = tmp_path / "serve.err"
    with open(serr, "w") as ef:
        srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", str(db),
                                "--http", "127.0.0.1:0"],
                               stdout=subprocess.DEVNULL, stderr=ef)
    try:
        base = wait_line(serr, re.compile(r"at (http://127\.0\.0\.1:\d+/)"),
                         srv).group(1)
        runs = get_json(base + "api/runs")["runs"]
        assert runs[0]["status"] == "succeeded" and runs[0]["live"] is False
        assert runs[0]["steps"] == 400
        doc = get_json(f"{base}api/runs/{rid}")
        assert doc["run"]["exit_code"] == 0 and doc["summary"]["steps"] == 400
        steps = get_json(f"{base}api/runs/{rid}/steps?from=0&limit=10000")["steps"]
        assert [s["step"] for s in steps] == list(range(1, 401))
        assert len(get_json(f"{base}api/runs/{rid}/steps")["steps"]) == 400
        ranks = get_json(f"{base}api/runs/{rid}/ranks")["ranks"]
        assert [r["state"] for r in ranks] == ["exited"] * 3
        assert all(r["exit_code"] == 0 and r["last_step"] == 400 and
                   r["phase"] is None and r["last_heard_s"] is None
                   for r in ranks)
        assert get_error(base + "api/live") == 404
        assert get_error(f"{base}api/runs/{rid}/stream") == 404
        srv.send_signal(signal.SIGINT)
        assert srv.wait(timeout=20) == 0
    finally:
        stop(srv)


def test_no_http_and_busy_port(tmp_path):
    db = tmp_path / "store.db"
    out = subprocess.run(
        [str(STEPSCOPE), "run", "-n", "1", "-q", "--no-http", "--db", str(db),
         "--", *example("--steps", "5", "--compute-ms", "1")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "dashboard" not in out.stderr
    assert not (tmp_path / "live" / "run-1.json").exists()

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        out = subprocess.run(
            [str(STEPSCOPE), "run", "-n", "1", "-q", "--db", str(db),
             "--http", f"127.0.0.1:{port}", "--",
             *example("--steps", "5", "--compute-ms", "1")],
            capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in out.stderr
    out = subprocess.run(
        [str(STEPSCOPE), "run", "-n", "1", "--http", "nowhere:1", "--db",
         str(db), "--", "true"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "not a numeric IPv4 or IPv6 address" in out.stderr
