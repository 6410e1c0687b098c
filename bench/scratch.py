"""A scratch database and Redis db for a benchmark: created fresh on the configured (or embedded) servers,
migrated, pointed at by the process's environment, and Django set up on it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def offline_django() -> None:
    """Set Django up for a benchmark that runs the offline analyzer: no model key or provider from the caller's
    environment, warnings-only logging."""
    for name in ("LLM_API_KEY", "OPENAI_API_KEY", "LLM_PROVIDER"):
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def scratch_drop(db: str) -> None:
    """Drop the scratch database `db`, from the server DATABASE_URL names (after the benchmark has closed its
    connections; the maintenance database `postgres` serves to reach it)."""
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], dbname="postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def scratch_environment(db: str, redis_db: int, **extra: str) -> dict[str, str]:
    """Drop and create `db`, point DATABASE_URL / REDIS_URL (db `redis_db`) at it with `extra` settings,
    migrate, set Django up; returns the environment for child processes."""
    import psycopg

    from eigenflux.base import embedded

    data_dir = Path(os.environ.get("EIGENFLUX_DATA_DIR") or ROOT / ".data")
    base_db = os.environ.get("DATABASE_URL") or embedded.postgres_url(data_dir)
    base_redis = os.environ.get("REDIS_URL") or embedded.redis_url(data_dir)
    with psycopg.connect(base_db, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db}")
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "eigenflux.settings",
            "LOG_LEVEL": "WARNING",
            "DATABASE_URL": base_db.rsplit("/", 1)[0] + f"/{db}",
            "REDIS_URL": base_redis.split("?")[0] + f"?db={redis_db}",
            "RATE_LIMIT_PUBLISH_PER_MINUTE": "0",
            "PIPELINE_METRICS_PORT": "0",
            **extra,
        }
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=os.environ, check=True)
    import django

    django.setup()
    return dict(os.environ)


@contextmanager
def scratch_test_db(name: str, default_redis_db: int) -> Iterator[None]:
    """In a process where Django is set up: a test database `name` (created with migrations, dropped on the way out)
    and Redis db BENCH_REDIS_DB (default `default_redis_db`), flushed before and after; publishing is not rate
    limited meanwhile."""
    from django.conf import settings
    from django.db import connection

    from eigenflux.base.redis import get_redis
    from tests.conftest import redis_url_with_db

    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", str(default_redis_db))))
    settings.REDIS_URL = url
    settings.RATE_LIMIT_PUBLISH_PER_MINUTE = 0
    redis = get_redis(url)
    redis.flushdb()
    connection.settings_dict["TEST"]["NAME"] = name
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        redis.flushdb()
