"""Refuses oversized agent-API bodies with 413 before anything reads them, for the native API (/api/) and the
EigenFlux client's API (/<prefix>/api/, in its envelope). Other non-JSON errors of both (a wrong method's 405,
an unknown path's 404) are converted by items.api.json_errors."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from items.api.errors import error_response
from items.compat.envelope import failure_response
from items.compat.paths import is_compat_path


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        compat = is_compat_path(request.path)
        if compat or request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                if compat:
                    return failure_response(400, "invalid Content-Length header")
                return error_response(400, "bad_request", "invalid Content-Length header")
            limit = settings.API_MAX_BODY_BYTES
            if length > limit:
                message = f"request body is {length} bytes; the limit is {limit}"
                if compat:
                    return failure_response(413, message)
                return error_response(413, "payload_too_large", message)
        return self.get_response(request)
