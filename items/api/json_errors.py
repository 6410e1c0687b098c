"""Every error under /api/ is the API's JSON error body, whatever produced it: django-ninja's 405 (plain
text), Django's 400 for a Host header outside ALLOWED_HOSTS, a 500 page. Headers that tell the client what
to do next (Allow, Retry-After, WWW-Authenticate) are kept."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse

from items.api.errors import error_response

_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")
_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 500: "server_error"}


def _message(request: HttpRequest, response: HttpResponse) -> str:
    status = response.status_code
    if status == 405:
        return f"{request.method} is not allowed here; allowed: {response.get('Allow', 'none')}"
    if status == 400:
        return "bad request: the Host header is not served here, or the request is malformed"
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"


class JsonErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith("/api/")
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            status = response.status_code
            code = _CODES.get(status, "server_error" if status >= 500 else "error")
            converted = error_response(status, code, _message(request, response))
            for header in _KEPT_HEADERS:
                if header in response:
                    converted[header] = response[header]
            return converted
        return response
