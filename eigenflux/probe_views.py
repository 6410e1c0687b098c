"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Any

import redis
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import Gauge

from eigenflux.base.redis import get_redis

# Set by every /readyz (the orchestrator's readiness probe calls it every few seconds), so Prometheus sees
# what the probes see and can alert on it (deploy/prometheus/alerts.yml, EigenfluxNotReady).
READINESS = Gauge(
    "eigenflux_readiness_check_ok", "1 if the last /readyz of this process reached the dependency, else 0.", ["check"]
)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"postgresql": "ok", "redis": "ok"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means "not ready"; the class name says which
        checks["postgresql"] = f"unavailable ({exc.__class__.__name__})"
    try:
        get_redis().ping()
    except Exception as exc:
        checks["redis"] = f"unavailable ({exc.__class__.__name__})"
    for name, value in checks.items():
        READINESS.labels(name).set(1 if value == "ok" else 0)
    ready = all(value == "ok" for value in checks.values())
    body: dict[str, Any] = {"status": "ok" if ready else "unavailable", "checks": checks}
    if checks["redis"] == "ok":
        from pipeline.llm.reachability import model_degraded
        from pipeline.runtime import liveness

        try:
            statuses = liveness.live_consumers(get_redis())  # read once for both
        except redis.RedisError:
            statuses = []
        body["pipeline"] = {"breakers_open_too_long": pipeline_breakers_open_too_long(statuses)}
        # Still ready (the API serves, publishing works), but items wait: said, never failed on.
        model = model_degraded(statuses)
        if model:
            body["degraded"] = {"model": model}
            body["status"] = "degraded"
    return JsonResponse(body, status=200 if ready else 503)


def pipeline_breakers_open_too_long(statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The running pipeline consumers' circuit breakers open past PIPELINE_BREAKER_STUCK_SECONDS, as they report
    themselves (`statuses`, liveness.live_consumers). Shown, never failed on: this process is ready, and taking it
    out of service would close no pipeline breaker (EigenfluxBreakerStuckOpen pages; the pipeline's own /readyz
    answers 503)."""
    from pipeline.runtime import liveness

    return [
        {"consumer": status.get("consumer"), "group": status.get("group"), "dependency": name, "open_seconds": age}
        for status in statuses
        for name, age in liveness.stuck_breakers(status).items()
    ]
