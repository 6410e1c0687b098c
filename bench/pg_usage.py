"""What a bench's requests cost PostgreSQL in buffers, and the memory the processes hold (issue 46's cost curve).

- `BufferMeter`: shared buffers hit and read (not in PostgreSQL's buffer pool: from the page cache or the disk)
  by the connected database, from `pg_stat_database`, sampled after forcing this backend's pending statistics
  out (`pg_stat_force_next_flush`, PostgreSQL 15+), less what sampling itself costs. Every other client of the
  same database counts too: run a bench on its own scratch database.
- `memory_report()`: this process's peak resident memory (a web process serving the same requests), its
  PostgreSQL backend's (VmRSS, the shared buffers it touched included) and `shared_buffers`.
- `page_cache_warm(tables)`: the tables' files read into the page cache first.
"""

from __future__ import annotations

import resource
from pathlib import Path

from django.db import connection

_SAMPLE = "SELECT blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()"  # read after the flush


def _flushed_blocks() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this statement's end reports the backend's counts
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # read the shared counters afresh, not a cached snapshot
        cursor.execute(_SAMPLE)
        hit, read = cursor.fetchone()
    return int(hit), int(read)


class BufferMeter:
    """Buffers hit and read per request kind: call `mark()` before a request and `add(name)` after it."""

    def __init__(self) -> None:
        self.hit: dict[str, int] = {}
        self.read: dict[str, int] = {}
        self.count: dict[str, int] = {}
        first = _flushed_blocks()
        second = _flushed_blocks()
        self._own = (second[0] - first[0], second[1] - first[1])  # what one sample adds by itself
        self._last = second

    def mark(self) -> None:
        self._last = _flushed_blocks()

    def add(self, name: str, requests: int = 1) -> None:
        """What the `requests` requests since the last mark() or add() cost, counted under `name`."""
        now = _flushed_blocks()
        self.hit[name] = self.hit.get(name, 0) + max(0, now[0] - self._last[0] - self._own[0])
        self.read[name] = self.read.get(name, 0) + max(0, now[1] - self._last[1] - self._own[1])
        self.count[name] = self.count.get(name, 0) + requests
        self._last = now

    def per_request(self, name: str) -> tuple[float, float]:
        """Mean shared buffers (hit, read) per request of this kind (8 KB each)."""
        count = self.count.get(name, 0) or 1
        return self.hit.get(name, 0) / count, self.read.get(name, 0) / count


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (Linux /proc; 0 where it cannot be read)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def memory_report() -> str:
    """This process's peak resident memory (Linux reports ru_maxrss in KB; a web process serving the same
    requests), its PostgreSQL backend's (the shared buffers it touched included) and the server's shared_buffers."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        pool = cursor.fetchone()[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return (
        f"this process (a web process's work) peak RSS {peak:.0f} MB, its PostgreSQL backend "
        f"{rss_mb(backend_pid()):.0f} MB (touched shared buffers included), shared_buffers {pool}"
    )


def page_cache_warm(tables: list[str]) -> float:
    """Read the files of these tables, their indexes and their TOAST into the operating system's page cache (what
    a server that has been serving for a while holds; PostgreSQL's own pool is far smaller than a 1M network's
    graphs), and return the GB read: 0 when the server's files are not on this machine or not readable."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        root = Path(cursor.fetchone()[0])
        cursor.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid = ANY(%(tables)s::regclass[]) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY(%(tables)s::regclass[])) "
            "OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE oid = ANY(%(tables)s::regclass[]))",
            {"tables": tables},
        )
        paths = [root / row[0] for row in cursor.fetchall() if row[0]]
    read = 0
    for path in paths:
        for segment in [path, *sorted(path.parent.glob(f"{path.name}.[0-9]*"))]:
            try:
                with segment.open("rb") as stream:
                    while chunk := stream.read(1 << 20):
                        read += len(chunk)
            except OSError:
                continue  # another machine's server, or not ours to read
    return read / 1e9
