"""A real PgBouncer in transaction mode on loopback, in front of the test PostgreSQL (tests only).

PgBouncer refuses to run as root: under root it runs as the user that owns the PostgreSQL socket directory
(the embedded server's own user), which can reach the socket. Without the `pgbouncer` binary the tests fail,
loudly: `.ci/run` installs it (Debian package `pgbouncer`), and so can anyone with `apt-get install pgbouncer`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.web.servers import free_port


def pgbouncer_binary() -> str:
    path = shutil.which("pgbouncer")
    if path is None:
        pytest.fail(
            "pgbouncer is not installed, so the pooler tests cannot run: `apt-get install -y pgbouncer` "
            "(.ci/run does this before `make test`)",
            pytrace=False,
        )
    return path


class PgBouncer:
    def __init__(self, *, socket_dir: str, port: int | None = None):
        self.socket_dir = socket_dir
        # A free port, not a fixed one: a second checkout's test run may have its own PgBouncer listening.
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        self.proc: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        binary = pgbouncer_binary()
        (self.root / "userlist.txt").write_text('"postgres" ""\n')
        config = self.root / "pgbouncer.ini"
        config.write_text(
            "\n".join(
                [
                    "[databases]",
                    f"* = host={self.socket_dir} user=postgres",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.root / 'userlist.txt'}",
                    "pool_mode = transaction",
                    "default_pool_size = 4",
                    "max_client_conn = 200",
                    "admin_users = postgres",
                    "ignore_startup_parameters = extra_float_digits,options",
                    f"logfile = {self.root / 'pgbouncer.log'}",
                    f"pidfile = {self.root / 'pgbouncer.pid'}",
                ]
            )
            + "\n"
        )
        command = [binary, str(config)]
        if os.geteuid() == 0:
            owner = Path(self.socket_dir).stat().st_uid
            user = pwd.getpwuid(owner).pw_name
            for path in self.root.iterdir():
                os.chown(path, owner, -1)
            os.chown(self.root, owner, -1)
            command = [binary, "-u", user, str(config)]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(
                    self.url("pgbouncer"), autocommit=True, connect_timeout=2, cursor_factory=psycopg.ClientCursor
                ) as conn,
            ):
                config = dict(row[:2] for row in conn.execute("SHOW CONFIG").fetchall())
                if config.get("logfile") == str(self.root / "pgbouncer.log"):
                    return
                raise RuntimeError(f"another pgbouncer answers on port {self.port}, not the one started here")
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.root / "pgbouncer.log"
                raise RuntimeError(f"pgbouncer did not start:\n{log.read_text()[-2000:] if log.exists() else ''}")
            time.sleep(0.1)

    def stats(self, database: str) -> dict:
        """The admin console's SHOW STATS row of `database`."""
        # The admin console speaks only the simple query protocol: a client-side-binding cursor uses it.
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            cursor = conn.execute("SHOW STATS")
            names = [column.name for column in cursor.description]
            for row in cursor.fetchall():
                if row[0] == database:
                    return dict(zip(names, row, strict=True))
        return {}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
