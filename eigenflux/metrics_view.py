"""GET /metrics of the web process (django-prometheus), behind the bearer token in METRICS_TOKEN. Without one it
is served only with DEBUG on: a production server that forgot the token refuses (403) rather than publish its
internals to whoever can reach it (`check --deploy` warns, eigenflux.W002)."""

from __future__ import annotations

from secrets import compare_digest

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView

from items.api.errors import error_response


def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.METRICS_TOKEN
    if not expected and not settings.DEBUG:
        return error_response(403, "forbidden", "/metrics is off: set METRICS_TOKEN (required unless DEBUG is on)")
    if expected:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not compare_digest(given.strip().encode(), expected.encode()):
            response = error_response(401, "unauthorized", "/metrics needs the bearer token set in METRICS_TOKEN")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return ExportToDjangoView(request)
