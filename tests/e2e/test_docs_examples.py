"""The docs' examples run verbatim and print what the docs show.

Every console block in docs/*.md marked `<!-- docs example: NAME ... -->`
is run as written: each `$ COMMAND` line through bash, in a fresh
directory where `build/` and `examples/` are this tree's, with the build's
`stepscope` first on PATH and a fresh HOME (so the default store is new);
`$ echo $?` checks the previous command's exit status.  Each line the doc
shows must appear in the output, in order (`...` stands for lines left
out), once what differs from run to run is blurred: times and durations,
dates, pids, ports and the home directory.

Two statements of the docs that are not console blocks are checked the
same way on real processes: how `stepscope top` says that the run ended
(docs/top.md, needs `script` for a terminal) and that a node that does
not join is said once, with no restart talk when none was asked for
(docs/multinode.md).
"""
import os
import re
import shutil
import subprocess
import time
import pytest

from conftest import BUILD, SOURCE
from jobs import free_port  # noqa: E402

MARK = re.compile(r"<!-- docs example: ([\w-]+)")


def examples():
    """(doc, name, lines) of every marked block."""
    found = []
    for doc in sorted((SOURCE / "docs").glob("*.md")):
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            m = MARK.match(line)
            if not m:
                continue
            assert lines[i + 1].startswith("```"), (doc, i)
            end = lines.index("```", i + 2)
            found.append((doc.name, m.group(1), lines[i + 2:end]))
    return found


def blur(line, home):
    line = line.replace(home, "~").rstrip()
    line = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "DATE", line)
    line = re.sub(r"\bpid \d+", "pid P", line)
    line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", line)
    line = re.sub(r"\b\d+(\.\d+)? s\b", "T s", line)
    return line


def workdir(tmp_path):
    (tmp_path / "build").symlink_to(BUILD)
    (tmp_path / "examples").symlink_to(SOURCE / "examples")
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_DATA_HOME", "PYTHONPATH", "STEPSCOPE_TOKEN")}
    env["HOME"] = str(tmp_path)
    env["PATH"] = f"{BUILD}:/usr/bin:/bin:" + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.parametrize("doc,name,lines", examples(),
                         ids=[f"{d}:{n}" for d, n, _ in examples()])
def test_docs_example_prints_what_the_doc_shows(tmp_path, doc, name, lines):
    if "python3" in " ".join(lines) and shutil.which("python3") is None:
        pytest.skip("no python3")
    env = workdir(tmp_path)
    home = str(tmp_path)
    status = None
    i = 0
    while i < len(lines):
        cmd = lines[i]
        assert cmd.startswith("$ "), (doc, name, cmd)
        want = []
        i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            want.append(lines[i])
            i += 1
        if cmd == "$ echo $?":
            assert [str(status)] == want, (doc, name, status, want)
            continue
        out = subprocess.run(["bash", "-c", cmd[2:]], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=300)
        status = out.returncode
        got = [blur(g, home) for g in out.stdout.splitlines()]
        at = 0
        for w in want:
            if w.strip() == "...":
                continue
            bw = blur(w, home)
            while at < len(got) and got[at] != bw:
                at += 1
            assert at < len(got), (f"{doc} ({name}): `{cmd}` did not print, "
                                   f"in this order:\n{bw}\nit printed:\n"
                                   + out.stdout)
            at += 1


def test_every_marked_example_is_found():
    names = {(d, n) for d, n, _ in examples()}
    assert ("debug.md", "hang") in names, names
    assert ("fault-tolerance.md", "fault-injection") in names, names


def test_top_says_the_run_ended_as_top_md_says(tmp_path):
    if not shutil.which("script"):
        pytest.skip("no script(1) for a terminal")
    env = workdir(tmp_path)
    job = subprocess.Popen(
        ["stepscope", "run", "-n", "2", "-q", "--db", "t.db", "--http",
         "127.0.0.1:0", "--", "build/examples/ss_allreduce", "--steps", "40",
         "--compute-ms", "50"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        live = tmp_path / "t.db.d" / "live"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(live.glob("*.json")):
            time.sleep(0.1)
        top = subprocess.run(["script", "-qc", "stepscope top --db t.db",
                              "/dev/null"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    finally:
        job.wait(timeout=120)
    last = top.stdout.strip().splitlines()[-1].strip()
    text = " ".join((SOURCE / "docs" / "top.md").read_text().split())
    said = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:8470", last)
    said = re.sub(r"run \d+ has", "run 3 has", said)
    assert f"`{said}`" in text, (last, "is not what docs/top.md says")


def test_a_node_that_does_not_join_is_said_once(tmp_path):
    env = workdir(tmp_path)
    token = tmp_path / "token"
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    port = free_port()
    out = subprocess.run(
        ["stepscope", "run", "--nnodes", "2", "--node-rank", "0",
         "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--controller-port", str(free_port()), "-n", "1", "--token-file",
         str(token), "--db", "m.db", "--no-http", "-q", "--join-timeout",
         "3", "--", "build/examples/ss_allreduce", "--steps", "20"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("did not join within 3 s") == 1, out.stderr
    assert "not restarted" not in out.stderr, out.stderr
