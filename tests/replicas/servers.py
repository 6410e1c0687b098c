"""A real streaming replica of the test PostgreSQL (tests only): `pg_basebackup -R` from the pgserver package's
binaries, then a second `postgres` in hot standby on a unix socket of its own and a free loopback port.

PostgreSQL refuses to run as root: under root the replica runs as the user that owns the primary's socket
directory (the embedded server's own user).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pgserver
import psycopg

BIN = Path(pgserver.__file__).parent / "pginstall" / "bin"
BACKUP = ("-R", "-X", "stream", "-c", "fast")  # write standby.signal + primary_conninfo; stream WAL meanwhile
STANDBY = ("-c", "listen_addresses=127.0.0.1", "-c", "hot_standby=on", "-c", "logging_collector=off")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StreamingReplica:
    def __init__(self, *, primary_socket_dir: str):
        self.primary_socket_dir = primary_socket_dir
        self.root = Path(tempfile.mkdtemp(prefix="pg-replica-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.owner = Path(primary_socket_dir).stat().st_uid

    def _as_owner(self):
        if os.geteuid() != 0:
            return None
        owner = self.owner

        def demote() -> None:
            os.setgid(os.stat(self.primary_socket_dir).st_gid)
            os.setuid(owner)

        return demote

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        if os.geteuid() == 0:
            os.chown(self.root, self.owner, -1)
        subprocess.run(
            [
                str(BIN / "pg_basebackup"),
                "-h",
                self.primary_socket_dir,
                "-U",
                "postgres",
                "-D",
                str(self.data),
                *BACKUP,
            ],
            check=True,
            capture_output=True,
            preexec_fn=self._as_owner(),
            timeout=120,
        )
        self.proc = subprocess.Popen(
            [str(BIN / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.root), *STANDBY],
            stdout=open(self.root / "replica.log", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            preexec_fn=self._as_owner(),
        )
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(psycopg.Error), psycopg.connect(self.url("postgres"), connect_timeout=2) as conn:
                if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the replica did not start:\n{(self.root / 'replica.log').read_text()[-2000:]}")
            time.sleep(0.2)

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # smart shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
