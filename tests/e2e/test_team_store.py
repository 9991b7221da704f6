"""The team database (PostgreSQL) against a real server (docs/store.md,
"A team's store").

Each test module starts its own PostgreSQL server (tests/support/
pg_server.py: initdb and pg_ctl into a temporary directory, a Unix
socket, no system service).  One suite, two backends: the same job's
run is read from its SQLite store and from the team database it was
pushed to, and every reader's output must be equal but for run ids and
the store's name.  Then push's idempotence, the roles (a reader role reads
and cannot write), clear errors, `run --db postgresql://...` with the
server killed mid-run, `serve` picking up new runs, `top` of a live team
job, and 8 jobs at once.
Skipped, saying why, only where PostgreSQL's binaries are not installed.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import STEPSCOPE, example, run_job

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import pg_server  # noqa: E402

pytestmark = pytest.mark.skipif(
    pg_server.find_bin() is None,
    reason="PostgreSQL's binaries (Debian's postgresql package, "
           "scripts/install-deps.sh) are not installed")


@pytest.fixture(scope="module")
def pg():
    server = pg_server.PgServer()
    yield server
    server.close()


def ss(pg, *args, timeout=120, **env):
    return subprocess.run([str(STEPSCOPE), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=pg.env(**env))


def one_line(text):
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def without_ids(doc):
    """DOC without what differs by backend: run ids and the store's name."""
    if isinstance(doc, dict):
        return {k: without_ids(v) for k, v in doc.items()
                if k not in ("db", "id", "run_id", "run")
                or isinstance(v, (dict, list)) and k == "run"}
    if isinstance(doc, list):
        return [without_ids(x) for x in doc]
    return doc


@pytest.fixture(scope="module")
def pushed(pg, tmp_path_factory):
    """A finished run with a straggler, in SQLite and pushed."""
    db = tmp_path_factory.mktemp("team") / "local.db"
    # 80 steps: a 40-step job's straggler was missed once in a full
    # `make test` (the tests beside it loading both cores)
    job = run_job(db, 3, example("--steps", "80", "--compute-ms", "2",
                                 "--straggler", "1:8"))
    assert job.returncode == 0, job.stderr
    up = ss(pg, "upgrade", "--db", pg.uri())
    assert up.returncode == 0, up.stderr
    p = ss(pg, "push", "--db", db, "--to", pg.uri())
    assert p.returncode == 0, p.stderr
    assert "copied as run" in p.stdout, p.stdout
    return db


def test_schema_missing_then_created(pg):
    # Before `upgrade`, a reader says what to run; readers never migrate.
    fresh = "fresh"
    pg.psql(f"CREATE DATABASE {fresh}", db="postgres")
    uri = pg.uri(db=fresh)
    r = ss(pg, "runs", "--db", uri)
    assert r.returncode == 1
    line = one_line(r.stderr)
    assert "holds no stepscope schema" in line and "stepscope upgrade" in line
    assert pg.psql("SELECT count(*) FROM pg_tables WHERE schemaname = "
                   "'public'", db=fresh) == "0"
    up = ss(pg, "upgrade", "--db", uri)
    assert up.returncode == 0 and "created" in up.stdout, up.stderr
    again = ss(pg, "upgrade", "--db", uri)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    r = ss(pg, "runs", "--json", "--db", uri)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runs"] == []


def test_bad_uris_and_servers_are_one_clear_line(pg, tmp_path):
    cases = [
        ("postgresql://admin:hunter2@/stepscope?host=" + str(pg.sock),
         "password in it"),
        (pg.uri() + "&password=hunter2", "password in it"),
        (f"postgresql://admin@/stepscope?host={tmp_path}", "cannot connect"),
        (pg.uri(db="nosuchdb"), 'database "nosuchdb" does not exist'),
        ("postgresql://admin@/stepscope?nosuchoption=1",
         "not a valid database URI"),
    ]
    for uri, want in cases:
        r = ss(pg, "report", "--db", uri)
        assert r.returncode == 1, (uri, r.stdout)
        assert want in one_line(r.stderr), (uri, r.stderr)
        assert "hunter2" not in r.stderr
    # A wrong password (the password file is the only source).
    bad = tmp_path / "pgpass"
    bad.write_text("*:*:*:admin:wrong\n")
    bad.chmod(0o600)
    r = ss(pg, "runs", "--db", pg.uri(), PGPASSFILE=str(bad))
    assert r.returncode == 1
    assert "password authentication failed" in one_line(r.stderr)


READERS = [
    ("report", "--json"),
    ("runs", "--json"),
    ("goodput", "--json"),
]


def test_same_answers_from_both_backends(pg, pushed):
    for cmd in READERS:
        a = ss(pg, *cmd, "--db", pushed)
        b = ss(pg, *cmd, "--db", pg.uri())
        assert a.returncode == 0 and b.returncode == 0, (cmd, a.stderr,
                                                        b.stderr)
        ja, jb = json.loads(a.stdout), json.loads(b.stdout)
        assert jb.get("db", pg.uri()) == pg.uri()
        assert without_ids(ja) == without_ids(jb), cmd
    # The straggler finding survived the trip.
    rep = json.loads(ss(pg, "report", "--json", "--db", pg.uri()).stdout)
    assert any(f["kind"] == "straggler" for f in rep["findings"]), rep
    # Text report and trace: equal but for the store's name and run ids.
    ta = ss(pg, "report", "--db", pushed).stdout
    tb = ss(pg, "report", "--db", pg.uri()).stdout
    norm = lambda t: re.sub(r"run \d+|--db \S+|store \S+", "", t)  # noqa
    assert norm(ta) == norm(tb)
    ca = ss(pg, "trace", "--db", pushed, "-o", "-").stdout
    cb = ss(pg, "trace", "--db", pg.uri(), "-o", "-").stdout
    assert without_ids(json.loads(ca)) == without_ids(json.loads(cb))
    # guard reads the team database too (one run: nothing to compare).
    g = ss(pg, "guard", "--db", pg.uri(), "--json")
    assert "cannot" not in g.stderr, g.stderr
    json.loads(g.stdout)


def test_push_twice_changes_nothing(pg, pushed):
    before = pg.psql("SELECT count(*) FROM rank_steps") + "/" + \
        pg.psql("SELECT count(*) FROM runs")
    p = ss(pg, "push", "--db", pushed, "--to", pg.uri())
    assert p.returncode == 0, p.stderr
    assert "already in the team database" in p.stdout
    assert "0 runs copied, 1 already there" in p.stdout
    after = pg.psql("SELECT count(*) FROM rank_steps") + "/" + \
        pg.psql("SELECT count(*) FROM runs")
    assert before == after


def test_reader_role_reads_but_cannot_write(pg, pushed):
    r = ss(pg, "report", "--json", "--db", pg.uri("reader"))
    assert r.returncode == 0, r.stderr
    p = ss(pg, "push", "--db", pushed, "--to", pg.uri("reader"))
    assert p.returncode == 1
    assert "permission denied" in p.stderr and "may not write" in p.stderr
    u = ss(pg, "upgrade", "--db", pg.uri("reader"))
    # Up to date: nothing to write, so the reader's upgrade passes; a
    # writer cannot create a schema in an empty database.
    assert u.returncode == 0, u.stderr
    pg.psql("CREATE DATABASE empty_for_writer", db="postgres")
    w = ss(pg, "upgrade", "--db", pg.uri("writer", "empty_for_writer"))
    assert w.returncode == 1
    assert "permission denied" in one_line(w.stderr)


def test_run_into_team_database_and_serve_sees_it(pg, tmp_path):
    env = dict(XDG_DATA_HOME=str(tmp_path), STEPSCOPE_PUSH_INTERVAL_MS="300",
               STEPSCOPE_TEAM_REFRESH_S="1")
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", pg.uri(),
                            "--http", "127.0.0.1:0"], env=pg.env(**env),
                           stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for _ in range(10):
            line = srv.stderr.readline()
            m = re.search(r"(http://\S+?)/? ", line)
            if m:
                url = m.group(1)
                break
        assert url, "serve printed no URL"
        before = json.loads(urllib.request.urlopen(url + "/api/runs").read())
        job = ss(pg, "run", "--db", pg.uri(), "-n", "2", "--name",
                 "team-job", "--", *example("--steps", "30",
                                            "--compute-ms", "2"), **env)
        assert job.returncode == 0, job.stderr
        assert "copied to the team database" in job.stderr
        assert re.search(r"the run is in the team database \S+ as run \d+",
                         job.stderr), job.stderr
        spool = tmp_path / "stepscope" / "stepscope.db"
        assert spool.exists()
        deadline = time.time() + 20
        names = []
        while time.time() < deadline:
            doc = json.loads(urllib.request.urlopen(url + "/api/runs").read())
            names = [r["name"] for r in doc["runs"]]
            if "team-job" in names:
                break
            time.sleep(0.5)
        assert "team-job" in names and len(doc["runs"]) > len(before["runs"])
        hist = urllib.request.urlopen(url + "/api/history?name=team-job")
        assert hist.status == 200
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    # The spool's run and the team database's read the same.
    a = json.loads(ss(pg, "report", "--json", "--db", spool).stdout)
    b = json.loads(ss(pg, "report", "--json", "--db", pg.uri(),
                      "team-job").stdout)
    assert without_ids(a) == without_ids(b)


def test_readers_keep_a_private_copy_and_take_only_what_changed(pg, pushed,
                                                               tmp_path):
    """A reader's copy of the team database stays in the user's cache
    (0600 in a 0700 directory, one per URI and role); the next command
    reads only the runs table when nothing changed, and the same answers;
    a damaged copy is taken anew; STEPSCOPE_TEAM_CACHE=off keeps none."""
    cache = tmp_path / "cache"
    env = dict(XDG_CACHE_HOME=str(cache))
    first = ss(pg, "runs", "--json", "--db", pg.uri(), **env)
    assert first.returncode == 0, first.stderr
    team = cache / "stepscope" / "team"
    files = list(team.glob("*.db"))
    assert len(files) == 1
    assert files[0].stat().st_mode & 0o777 == 0o600
    assert team.stat().st_mode & 0o777 == 0o700
    pg.psql("ALTER SYSTEM SET log_statement = 'all'", db="postgres")
    pg.psql("SELECT pg_reload_conf()", db="postgres")
    try:
        time.sleep(0.5)
        before = pg.log.read_text(errors="replace")
        second = ss(pg, "runs", "--json", "--db", pg.uri(), **env)
        after = pg.log.read_text(errors="replace")[len(before):]
    finally:
        pg.psql("ALTER SYSTEM RESET log_statement", db="postgres")
        pg.psql("SELECT pg_reload_conf()", db="postgres")
    assert second.returncode == 0 and second.stdout == first.stdout
    copies = re.findall(r"statement: COPY \(SELECT .*? FROM (\w+)", after)
    assert copies == ["runs"], copies
    reader = ss(pg, "runs", "--json", "--db", pg.uri("reader"), **env)
    assert json.loads(reader.stdout)["runs"] == \
        json.loads(first.stdout)["runs"]
    assert len(list(team.glob("*.db"))) == 2
    files[0].write_bytes(b"not a database at all " * 100)
    again = ss(pg, "runs", "--json", "--db", pg.uri(), **env)
    assert again.returncode == 0 and again.stdout == first.stdout, \
        again.stderr
    off = dict(XDG_CACHE_HOME=str(tmp_path / "cache-off"),
               STEPSCOPE_TEAM_CACHE="off")
    none = ss(pg, "runs", "--json", "--db", pg.uri(), **off)
    assert none.stdout == first.stdout
    assert not (tmp_path / "cache-off" / "stepscope" / "team").exists() or \
        not list((tmp_path / "cache-off" / "stepscope" / "team").iterdir())


def test_serve_refreshes_only_what_changed_and_stays_whole(pg, pushed,
                                                         tmp_path):
    """serve's copy of the team database is refreshed in place: a run the
    server copies again (or anew) is taken again, the others stay as they
    were, and every document equals a fresh reader's."""
    env = dict(XDG_DATA_HOME=str(tmp_path), STEPSCOPE_TEAM_REFRESH_S="1")
    srv = subprocess.Popen([str(STEPSCOPE), "serve", "--db", pg.uri(),
                            "--http", "127.0.0.1:0"], env=pg.env(**env),
                           stderr=subprocess.PIPE, text=True)

    def get(url, path):
        return json.loads(urllib.request.urlopen(url + path).read())

    try:
        url = None
        for _ in range(10):
            m = re.search(r"(http://\S+?)/? ", srv.stderr.readline())
            if m:
                url = m.group(1)
                break
        assert url, "serve printed no URL"
        runs = {r["name"]: r["id"] for r in get(url, "/api/runs")["runs"]}
        old_id = next(iter(runs.values()))
        docs = {p: get(url, "/api/runs/%d%s" % (old_id, p))
                for p in ("/findings", "/ranks", "/steps")}
        job = ss(pg, "run", "--db", pg.uri(), "-n", "2", "--name",
                 "refresh-job", "--", *example("--steps", "20",
                                               "--compute-ms", "2"), **env)
        assert job.returncode == 0, job.stderr
        deadline = time.time() + 20
        while time.time() < deadline:
            now = {r["name"]: r["id"] for r in get(url, "/api/runs")["runs"]}
            if "refresh-job" in now:
                break
            time.sleep(0.5)
        assert "refresh-job" in now, now
        time.sleep(2.5)  # refreshes with nothing new: nothing may change
        for p, doc in docs.items():
            assert get(url, "/api/runs/%d%s" % (old_id, p)) == doc, p
        new_id = now["refresh-job"]
        steps = get(url, "/api/runs/%d/steps" % new_id)
        assert len(steps["steps"]) == 20
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    fresh = json.loads(ss(pg, "report", "--json", "--db", pg.uri(),
                          "refresh-job").stdout)
    assert fresh["steps"]["count"] == 20


def test_top_of_a_team_job_on_its_node(pg, tmp_path):
    """A live job recording into the team database is watched as any job on
    its node (it records into the default store first); `top --db URI`
    says in one line where to look instead of failing obscurely."""
    env = dict(XDG_DATA_HOME=str(tmp_path))
    job = subprocess.Popen(
        [str(STEPSCOPE), "run", "--db", pg.uri(), "-n", "2", "--name",
         "team-live", "--", *example("--steps", "100000", "--compute-ms",
                                     "5")],
        env=pg.env(**env), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        top = None
        while time.time() < deadline:
            top = ss(pg, "top", "--once", **env)
            if top.returncode == 0 and "team-live" in top.stdout:
                break
            time.sleep(0.5)
        assert top.returncode == 0 and "team-live" in top.stdout, \
            top.stdout + top.stderr
        bad = ss(pg, "top", "--once", "--db", pg.uri(), **env)
        assert bad.returncode == 2
        line = one_line(bad.stderr)
        assert "does not say where a live run listens" in line
        assert "without --db" in line and "--url" in line
    finally:
        job.terminate()
        job.wait(timeout=60)


def test_server_killed_mid_run(pg, tmp_path):
    env = dict(XDG_DATA_HOME=str(tmp_path), STEPSCOPE_PUSH_INTERVAL_MS="200")
    ss(pg, "upgrade", "--db", pg.uri())
    proc = subprocess.Popen(
        [str(STEPSCOPE), "run", "--db", pg.uri(), "-n", "2", "--name",
         "survivor", "--", *example("--steps", "400", "--compute-ms", "10")],
        env=pg.env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if pg.psql("SELECT count(*) FROM runs WHERE name = "
                       "'survivor'") == "1":
                break
            time.sleep(0.2)
        pg.stop("immediate")  # as if the server died
        time.sleep(2)
        assert proc.poll() is None, "the job ended with its server"
        pg.start()
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "cannot copy the run to the team database" in err
    assert "the team database is back" in err
    m = re.search(r"the run is in the team database \S+ as run (\d+) "
                  r"\(\d+ rows\); (\d+) of (\d+) copies failed", err)
    assert m, err
    assert int(m.group(2)) >= 1
    spool = tmp_path / "stepscope" / "stepscope.db"
    a = json.loads(ss(pg, "report", "--json", "--db", spool).stdout)
    b = json.loads(ss(pg, "report", "--json", "--db", pg.uri(),
                      m.group(1)).stdout)
    assert a["run"]["status"] == b["run"]["status"] == "succeeded"
    assert without_ids(a) == without_ids(b)


def test_server_gone_for_the_whole_run_keeps_it_in_the_spool(pg, tmp_path):
    env = dict(XDG_DATA_HOME=str(tmp_path), STEPSCOPE_PUSH_INTERVAL_MS="200")
    nowhere = f"postgresql://admin@/stepscope?host={tmp_path}"
    job = ss(pg, "run", "--db", nowhere, "-n", "2", "--name", "offline",
             "--", *example("--steps", "10", "--compute-ms", "1"), **env)
    assert job.returncode == 0, job.stderr
    assert "could not be copied to the team database" in job.stderr
    assert "stepscope push --db" in job.stderr
    spool = tmp_path / "stepscope" / "stepscope.db"
    p = ss(pg, "push", "--db", spool, "--to", pg.uri(), "offline")
    assert p.returncode == 0 and "copied as run" in p.stdout, p.stderr


def test_eight_jobs_at_once(pg, tmp_path):
    env = dict(STEPSCOPE_PUSH_INTERVAL_MS="300")
    results = [None] * 8

    def one(i):
        d = tmp_path / f"job{i}"
        d.mkdir()
        results[i] = ss(pg, "run", "--db", pg.uri("writer"), "-n", "2",
                        "--name", f"many-{i}", "--",
                        *example("--steps", "30", "--compute-ms", "2"),
                        timeout=300, XDG_DATA_HOME=str(d), **env)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert r.returncode == 0, r.stderr
        assert "the run is in the team database" in r.stderr, r.stderr
        assert "failed" not in r.stderr.split("team database")[-1]
    ids = pg.psql("SELECT id FROM runs WHERE name LIKE 'many-%' AND status "
                  "= 'succeeded'").split()
    assert len(set(ids)) == 8
