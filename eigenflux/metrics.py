"""GET /metrics of the web process (django-prometheus), behind a bearer token when METRICS_TOKEN is set."""

from __future__ import annotations

from secrets import compare_digest

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView

from items.api.errors import error_response


def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.METRICS_TOKEN
    if expected:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not compare_digest(given.strip().encode(), expected.encode()):
            response = error_response(401, "unauthorized", "/metrics needs the bearer token set in METRICS_TOKEN")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return ExportToDjangoView(request)
