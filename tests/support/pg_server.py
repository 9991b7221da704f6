"""A real PostgreSQL server for the tests of the team database.

PgServer() runs Debian's PostgreSQL binaries (initdb, pg_ctl, postgres)
in a temporary directory: no system service, no TCP port (listen_addresses
is empty), a Unix socket in that directory.  PostgreSQL refuses to run as
root, so as root the directory belongs to the `postgres` user (or
`nobody`) and the server runs as that user; a client connects as root
through the socket.  Roles and passwords: `admin` (owns the database),
`writer` (may write runs, not change the schema) and `reader` (may only
read); their passwords are in a 0600 password file that PGPASSFILE names
in env().  `find_bin()` is None where the binaries are not installed (the
tests then skip, saying so).

As a program it runs one command beside a fresh server (fsync on), with
{uri} in its arguments replaced by the admin's URI, and exits with its
status (77, ctest's "skipped", where the binaries are not installed),
e.g. the benchmark:

    python3 tests/support/pg_server.py build/bench/bench_store --pg {uri}
"""
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

PASSWORDS = {"admin": "admin-secret", "writer": "writer-secret",
             "reader": "reader-secret"}


def find_bin():
    """The directory of initdb and pg_ctl, or None."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    found = shutil.which("pg_ctl")
    return os.path.dirname(found) if found else None


def _server_user():
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    raise RuntimeError("no unprivileged user to run PostgreSQL as")


class PgServer:
    def __init__(self, fsync=False):
        self.bin = find_bin()
        if not self.bin:
            raise RuntimeError("PostgreSQL's binaries are not installed")
        self.user = _server_user()
        self.base = Path(tempfile.mkdtemp(prefix="stepscope-pg-", dir="/tmp"))
        os.chmod(self.base, 0o755)
        self.data = self.base / "data"
        self.sock = self.base / "sock"
        self.sock.mkdir()
        self.log = self.base / "server.log"
        self.pwfile = self.base / "admin.pw"
        self.pwfile.write_text(PASSWORDS["admin"] + "\n")
        if self.user:
            for p in (self.base, self.sock, self.pwfile):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        self.fsync = fsync
        self.passfile = Path(tempfile.mkdtemp(prefix="stepscope-pgpass-",
                                              dir="/tmp")) / "pgpass"
        self.passfile.write_text("".join(
            f"*:*:*:{u}:{p}\n" for u, p in PASSWORDS.items()))
        os.chmod(self.passfile, 0o600)
        self._as_server([f"{self.bin}/initdb", "-D", str(self.data),
                         "-U", "admin", "--pwfile", str(self.pwfile),
                         "--auth-local=scram-sha-256",
                         "--auth-host=scram-sha-256", "-E", "UTF8",
                         "--no-sync", "--no-instructions"])
        self.start()
        self.psql("CREATE DATABASE stepscope", db="postgres")
        self.psql(
            f"CREATE ROLE writer LOGIN PASSWORD '{PASSWORDS['writer']}';"
            f"CREATE ROLE reader LOGIN PASSWORD '{PASSWORDS['reader']}';"
            "GRANT CONNECT ON DATABASE stepscope TO writer, reader;"
            "GRANT USAGE ON SCHEMA public TO writer, reader;"
            "ALTER DEFAULT PRIVILEGES FOR ROLE admin IN SCHEMA public "
            "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO writer;"
            "ALTER DEFAULT PRIVILEGES FOR ROLE admin IN SCHEMA public "
            "GRANT USAGE ON SEQUENCES TO writer;"
            "ALTER DEFAULT PRIVILEGES FOR ROLE admin IN SCHEMA public "
            "GRANT SELECT ON TABLES TO reader;")

    def _as_server(self, argv, check=True):
        """Runs ARGV as the server's user; its output goes to a file, so
        that the server pg_ctl leaves running holds no pipe of ours."""
        if self.user:
            argv = ["runuser", "-u", self.user.pw_name, "--"] + argv
        with tempfile.TemporaryFile(mode="w+") as out:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, timeout=120)
            out.seek(0)
            r.stdout, r.stderr = out.read(), ""
        if check and r.returncode != 0:
            raise RuntimeError(f"{argv}: {r.stdout}")
        return r

    def start(self):
        opts = (f"-k {self.sock} -c listen_addresses='' "
                f"-c fsync={'on' if self.fsync else 'off'} "
                "-c max_connections=100")
        r = self._as_server([f"{self.bin}/pg_ctl", "-D", str(self.data),
                             "-o", opts, "-l", str(self.log), "-w", "-t",
                             "60", "start"], check=False)
        if r.returncode != 0:
            raise RuntimeError("pg_ctl start failed: " + r.stdout + r.stderr
                               + self.log.read_text())

    def stop(self, mode="fast"):
        """Stops the server (mode "immediate": as if it died)."""
        self._as_server([f"{self.bin}/pg_ctl", "-D", str(self.data), "-m",
                         mode, "-w", "stop"], check=False)

    def uri(self, user="admin", db="stepscope"):
        """The server's URI for USER (the socket directory as host=)."""
        return f"postgresql://{user}@/{db}?host={self.sock}"

    def env(self, **extra):
        """The environment for a client: PGPASSFILE set, no PG* leaks, the
        readers' cached copies (XDG_CACHE_HOME) kept beside the password
        file and removed with it."""
        e = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        e["PGPASSFILE"] = str(self.passfile)
        e["XDG_CACHE_HOME"] = str(self.passfile.parent / "cache")
        e.update(extra)
        return e

    def psql(self, sql, user="admin", db="stepscope"):
        """Runs SQL with psql as USER; returns its output (unaligned)."""
        r = subprocess.run([f"{self.bin}/psql", "-X", "-q", "-A", "-t",
                            "-v", "ON_ERROR_STOP=1", "-d",
                            self.uri(user, db), "-c", sql],
                           capture_output=True, text=True, env=self.env(),
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {r.stderr}")
        return r.stdout.strip()

    def close(self):
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.passfile.parent, ignore_errors=True)


if __name__ == "__main__":
    import sys
    if not find_bin():
        print("PostgreSQL's binaries are not installed "
              "(scripts/install-deps.sh installs them): skipped")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    server = PgServer(fsync=True)
    try:
        argv = [a.replace("{uri}", server.uri()) for a in sys.argv[1:]]
        code = subprocess.run(argv, env=server.env()).returncode
    finally:
        server.close()
    sys.exit(code)
