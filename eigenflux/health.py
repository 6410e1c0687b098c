"""Liveness and readiness probes."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import Gauge

from eigenflux.redis import get_redis

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
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
