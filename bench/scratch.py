"""A scratch database and Redis db for a benchmark: created fresh on the configured (or embedded) servers,
migrated, pointed at by the process's environment, and Django set up on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
