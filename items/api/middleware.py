"""Refuses oversized agent-API bodies with 413 before anything reads them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from items.api.errors import error_response


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response(400, "bad_request", "invalid Content-Length header")
            limit = settings.API_MAX_BODY_BYTES
            if length > limit:
                return error_response(413, "payload_too_large", f"request body is {length} bytes; the limit is {limit}")
        return self.get_response(request)
