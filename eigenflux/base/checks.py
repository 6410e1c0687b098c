"""System checks: the deployment's database connection budget fits the server's max_connections, and
`check --deploy` warns (eigenflux.W002) when METRICS_TOKEN is unset, since /metrics then refuses every scrape.

Each pooled process holds at most its pool's max_size, so the whole deployment needs
    WEB_PROCESSES x DB_POOL_MAX_SIZE
  + PIPELINE_PROCESSES x (PIPELINE_DB_POOL_MAX_SIZE + 1)   (+1: the relay's LISTEN connection, outside the pool)
  + JOB_WORKERS x 2                                       (the rq worker and the job process it forks)
  + DB_RESERVED_CONNECTIONS                               (superuser slots, psql, migrations, monitoring)
and `manage.py check` warns (eigenflux.W001) when that exceeds the server's max_connections.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from django.conf import settings
from django.core.checks import Info, Warning, register


@dataclass(frozen=True)
class ConnectionBudget:
    web: int
    pipeline: int
    jobs: int
    reserved: int

    @property
    def total(self) -> int:
        return self.web + self.pipeline + self.jobs + self.reserved

    def explain(self) -> str:
        return (
            f"{settings.WEB_PROCESSES} web x {settings.DB_POOL_MAX_SIZE} + "
            f"{settings.PIPELINE_PROCESSES} run_pipeline x ({settings.PIPELINE_DB_POOL_MAX_SIZE} + 1) + "
            f"{settings.JOB_WORKERS} job workers x 2 + {self.reserved} reserved = {self.total}"
        )


def connection_budget() -> ConnectionBudget:
    return ConnectionBudget(
        web=settings.WEB_PROCESSES * settings.DB_POOL_MAX_SIZE,
        pipeline=settings.PIPELINE_PROCESSES * (settings.PIPELINE_DB_POOL_MAX_SIZE + 1),
        jobs=settings.JOB_WORKERS * 2,
        reserved=settings.DB_RESERVED_CONNECTIONS,
    )


def server_max_connections() -> int:
    """max_connections of the configured server, on a connection of its own (never a pooled one)."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    params.pop("pool", None)
    with psycopg.connect(**params, connect_timeout=3, autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    if row is None:
        raise RuntimeError("SHOW max_connections returned no row")
    return int(row[0])


@register("eigenflux")
def check_connection_budget(app_configs=None, **kwargs) -> list:
    if not settings.DB_POOL:
        return []  # unpooled (e.g. behind PgBouncer): the bound is the bouncer's, not ours
    try:
        limit = server_max_connections()
    except Exception as exc:  # an unreachable or non-PostgreSQL endpoint (PgBouncer) cannot answer SHOW
        return [
            Info(
                f"connection budget not checked: cannot read max_connections ({exc.__class__.__name__})",
                id="eigenflux.I001",
            )
        ]
    budget = connection_budget()
    if budget.total <= limit:
        return []
    return [
        Warning(
            f"the database connection budget ({budget.explain()}) exceeds the server's max_connections ({limit})",
            hint=(
                "Lower DB_POOL_MAX_SIZE / PIPELINE_DB_POOL_MAX_SIZE, run fewer processes, raise max_connections, "
                "or put PgBouncer in front (DB_POOL=false). WEB_PROCESSES, PIPELINE_PROCESSES and JOB_WORKERS "
                "describe the deployment."
            ),
            id="eigenflux.W001",
        )
    ]


@register("eigenflux", deploy=True)
def check_metrics_token(app_configs=None, **kwargs) -> list:
    if settings.METRICS_TOKEN or settings.DEBUG:
        return []
    return [
        Warning(
            "METRICS_TOKEN is unset: outside DEBUG, GET /metrics refuses every request (403)",
            hint="Set METRICS_TOKEN and give Prometheus the same value as its bearer token (deploy/prometheus).",
            id="eigenflux.W002",
        )
    ]


# A proxy is one address, or a few (a load balancer's subnet); a trusted public network wider than this lets
# anyone in it write X-Forwarded-For, and so choose the client address every per-client limit counts.
_TRUSTED_PROXY_MAX_PUBLIC_ADDRESSES = 256


@register("eigenflux")
def check_trusted_proxies(app_configs=None, **kwargs) -> list:
    wide = []
    for entry in settings.TRUSTED_PROXIES:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue  # eigenflux.base.clientaddr names it when a request first reads the setting
        if network.num_addresses > _TRUSTED_PROXY_MAX_PUBLIC_ADDRESSES and not network.is_private:
            wide.append(entry)
    if not wide:
        return []
    return [
        Warning(
            f"TRUSTED_PROXIES trusts wide public networks ({', '.join(wide)}): any host in them can forge "
            "X-Forwarded-For and pick the client address every per-client limit counts",
            hint="List only your reverse proxies' own addresses (or their private subnet).",
            id="eigenflux.W003",
        )
    ]
