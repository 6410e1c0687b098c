"""Django middleware of the whole site (the agent API's own error handling is in items.api.errors)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from items.api.errors import database_unavailable_response


class DatabaseUnavailableMiddleware:
    """A view that cannot get a database connection (server down, or the pool exhausted for DB_POOL_TIMEOUT)
    answers 503 JSON with Retry-After instead of a 500 page: the condition is temporary and says so."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, OperationalError | InterfaceError):
            return database_unavailable_response(exception)
        return None
