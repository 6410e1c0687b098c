"""The test servers make sure the server that answers on their port is their own: another checkout's test run
may have its own PgBouncer or Redis Cluster listening, and a start check that only connects would talk to it."""

from __future__ import annotations

import pytest

from tests.cluster.servers import RedisClusterServers
from tests.pooler.servers import PgBouncer

pytestmark = pytest.mark.slow


def test_a_pgbouncer_whose_port_another_one_holds_does_not_pass_for_started(pgbouncer):
    second = PgBouncer(socket_dir=pgbouncer.socket_dir, port=pgbouncer.port)
    try:
        with pytest.raises(RuntimeError, match="pgbouncer"):
            second.start()
    finally:
        second.stop()
    assert pgbouncer.stats("pgbouncer") is not None  # the first one is untouched


def test_a_redis_node_whose_port_another_one_holds_does_not_pass_for_started(tmp_path):
    first = RedisClusterServers(tmp_path / "first")
    port = first.ports[0]
    second = RedisClusterServers(tmp_path / "second", ports=(port,))
    try:
        first._start(port)
        with pytest.raises(RuntimeError, match=f"port {port} did not start"):
            second._start(port)
        assert first.node(port).ping()
    finally:
        first.stop()
        second.stop()
