"""The embedded servers: shared by several processes, started once, stopped by the last user, and not
blocked by files a crashed run left behind. Each test uses its own data directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent

# A user process: joins (or starts) the server, prints its URL and the server's pid, then waits for stdin to close.
REDIS_USER = """
import sys
from pathlib import Path
import redis
from eigenflux.base import embedded
url = embedded.redis_url(Path(sys.argv[1]))
print(url, redis.Redis.from_url(url).info("server")["process_id"], flush=True)
sys.stdin.read()
"""

PG_USER = """
import sys
from pathlib import Path
import psycopg
from eigenflux.base import embedded
url = embedded.postgres_url(Path(sys.argv[1]))
with psycopg.connect(url) as conn:
    started = conn.execute("select pg_postmaster_start_time()").fetchone()[0]
    ext = conn.execute("select count(*) from pg_available_extensions where name='vector'").fetchone()[0]
print(url, started.isoformat(), ext, flush=True)
sys.stdin.read()
"""

# Uses both servers: prints the PostgreSQL and Redis server pids.
BOTH_USER = """
import sys
from pathlib import Path
import psycopg, redis
from eigenflux.base import embedded
data_dir = Path(sys.argv[1])
with psycopg.connect(embedded.postgres_url(data_dir)):
    pass
redis_pid = redis.Redis.from_url(embedded.redis_url(data_dir)).info("server")["process_id"]
postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
print(postmaster, redis_pid, flush=True)
sys.stdin.read()
"""


def start_user(script: str, data_dir: Path) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    line = proc.stdout.readline().split()
    assert line, "the user process printed nothing"
    return proc, line


def finish(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def redis_alive(url: str) -> bool:
    try:
        return redis.Redis.from_url(url, socket_timeout=1).ping()
    except (redis.RedisError, OSError):
        return False


@pytest.mark.slow  # starts processes
def test_redis_is_shared_and_stopped_by_the_last_user(tmp_path):
    first, (url, server_pid) = start_user(REDIS_USER, tmp_path)
    second, (url2, server_pid2) = start_user(REDIS_USER, tmp_path)
    assert (url2, server_pid2) == (url, server_pid), "a second process must join, not start another server"
    finish(first)
    assert redis_alive(url), "the server must outlive a user while another still uses it"
    finish(second)
    assert wait_until(lambda: not redis_alive(url)), "the last user must stop the server"


@pytest.mark.slow  # starts processes
def test_redis_starts_despite_stale_files_and_crashed_users(tmp_path):
    root = tmp_path / "redis"
    root.mkdir()
    (root / "redis.pid").write_text("999999\n")  # a pid that is not running
    (root / "redis.sock").write_text("")  # a socket file nobody listens on
    (root / "users.json").write_text("[999998]")  # a user that crashed
    crashed, (url, server_pid) = start_user(REDIS_USER, tmp_path)
    assert redis_alive(url)
    crashed.send_signal(signal.SIGKILL)
    crashed.wait()
    # The server survives the crash; the next user joins it and, as the last live user, stops it.
    survivor, (url2, server_pid2) = start_user(REDIS_USER, tmp_path)
    assert server_pid2 == server_pid
    finish(survivor)
    assert wait_until(lambda: not redis_alive(url2))


@pytest.mark.slow
def test_postgres_is_shared_has_pgvector_and_recovers_from_a_killed_server(tmp_path):
    first, (url, started, has_vector) = start_user(PG_USER, tmp_path)
    assert has_vector == "1"
    second, (url2, started2, _) = start_user(PG_USER, tmp_path)
    assert (url2, started2) == (url, started), "a second process must join the running server"
    finish(first)
    finish(second)
    pid_file = tmp_path / "pg" / "postmaster.pid"
    assert wait_until(lambda: not pid_file.exists(), 15), "the last user must stop PostgreSQL"

    # A crash of the server itself leaves postmaster.pid behind; the next start must not be blocked.
    third, _ = start_user(PG_USER, tmp_path)
    postmaster = int(pid_file.read_text().split()[0])
    os.kill(postmaster, signal.SIGKILL)
    assert wait_until(lambda: not _alive(postmaster))
    third.kill()
    third.wait()
    assert pid_file.exists()
    fourth, (_, started4, _) = start_user(PG_USER, tmp_path)
    assert started4 != started
    finish(fourth)
    # The third user was SIGKILLed and never left pgserver's list; the fourth must still stop the server.
    assert wait_until(lambda: not pid_file.exists(), 15), "a dead user's pid must not keep PostgreSQL running"


@pytest.mark.slow
def test_servers_stop_when_the_last_live_user_exits_even_after_a_user_was_killed(tmp_path):
    users = [start_user(BOTH_USER, tmp_path) for _ in range(3)]
    servers = {int(pid) for _, line in users for pid in line}
    assert len(servers) == 2, "every user must join the same PostgreSQL and Redis"
    crashed, _ = users[1]
    crashed.send_signal(signal.SIGKILL)  # no exit hooks: its pid stays in both lists
    crashed.wait()
    assert all(_alive(pid) for pid in servers), "the others still use the servers"
    finish(users[0][0])
    assert all(_alive(pid) for pid in servers), "one live user is left"
    finish(users[2][0])
    assert wait_until(lambda: not any(_alive(pid) for pid in servers), 20), "no server may outlive its last live user"


def _alive(pid: int) -> bool:
    """Until the process is reaped: pgserver takes a not-yet-reaped server for a running one."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_data_directory_of_another_postgresql_major_version_is_refused_with_what_to_do(tmp_path):
    """Until December 2026 the embedded server was PostgreSQL 16: its `.data/pg` is refused before anything starts,
    naming the directory and the way out, instead of a server that fails with its reason in a log file."""
    from eigenflux.base import embedded

    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("16\n")
    with pytest.raises(embedded.DataDirectoryTooOld) as refused:
        embedded.postgres_url(tmp_path)
    message = str(refused.value)
    assert str(pgdata) in message and "PostgreSQL 16" in message and "PostgreSQL 18" in message
    assert "make clean-data" in message and "pg_dumpall" in message
    assert sorted(path.name for path in pgdata.iterdir()) == ["PG_VERSION"]  # nothing started, nothing written
    (pgdata / "PG_VERSION").write_text("18\n")
    embedded.check_postgres_version(pgdata)  # its own version passes
