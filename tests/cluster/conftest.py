"""The Redis Cluster tests: a real 3-master cluster on loopback (tests.cluster.servers), started once for the
module and emptied before each test. REDIS_URL points at it (a redis+cluster:// URL); django-rq and the
channel layer keep the plain test Redis, as a cluster deployment must give them (RQ_REDIS_URL,
CHANNEL_REDIS_URLS)."""

from __future__ import annotations

import os

import pytest

from eigenflux.base.redis import get_redis
from tests.cluster.servers import RedisClusterServers
from tests.pipeline.runtime.conftest import effects  # noqa: F401 - fixture re-exported
from tests.pipeline.runtime.fixtures import database_url, run_pipeline  # noqa: F401 - fixture re-exported


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    servers = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"))
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def cluster(redis_cluster, settings, _redis_isolated):
    """The cluster, empty, with settings pointing at it; yields the servers (`.client` is the decoded client)."""
    plain = settings.REDIS_URL
    settings.REDIS_URL = redis_cluster.url
    settings.REDIS_CLUSTER = True
    settings.RQ_REDIS_URL = plain
    settings.CHANNEL_REDIS_URLS = [plain]
    redis_cluster.client = get_redis(redis_cluster.url)
    redis_cluster.client.flushall()
    yield redis_cluster
    redis_cluster.client.flushall()


@pytest.fixture
def pipeline_env(cluster, transactional_db, settings) -> dict[str, str]:
    """run_pipeline subprocesses on the test database and the cluster (RQ and the channel layer on the plain
    test Redis)."""
    from django.db import connection

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env.update(
        DATABASE_URL=database_url(connection.settings_dict),
        REDIS_URL=cluster.url,
        RQ_REDIS_URL=settings.RQ_REDIS_URL,
        CHANNEL_REDIS_URLS=",".join(settings.CHANNEL_REDIS_URLS),
        PIPELINE_METRICS_PORT="0",
        PYTHONUNBUFFERED="1",
        DB_CONN_MAX_AGE="600",
    )
    return env
