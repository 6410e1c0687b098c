"""Every error under /api/ is the API's JSON error body, whatever produced it: django-ninja's 405 (plain
text), Django's 400 for a Host header outside ALLOWED_HOSTS, a 404 for a path no API has (also with
DEBUG=True, where Django skips handler404 and renders its technical page), a 500 page. Under the EigenFlux
client's root (/<prefix>/api/) the same errors come in its `{code, msg}` envelope. Headers that tell the
client what to do next (Allow, Retry-After, WWW-Authenticate) are kept."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, JsonResponse

from items.api.errors import error_response
from items.compat.envelope import failure_response
from items.compat.paths import compat_root, is_compat_path, unsupported_feature

_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")
_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 500: "server_error"}


def is_native_api_path(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def is_client_api_path(path: str) -> bool:
    root = compat_root()
    return is_compat_path(path) or (root is not None and path == root.rstrip("/"))


def _message(request: HttpRequest, response: HttpResponse) -> str:
    status = response.status_code
    if status == 404:
        feature = unsupported_feature(request.path) if is_compat_path(request.path) else None
        return f"not supported by this server: {feature}" if feature else f"no such endpoint: {request.path}"
    if status == 405:
        return f"{request.method} is not allowed here; allowed: {response.get('Allow', 'none')}"
    if status == 400:
        return "bad request: the Host header is not served here, or the request is malformed"
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"


def api_error_response(request: HttpRequest, response: HttpResponse) -> JsonResponse | None:
    """The JSON version of an error `response` to an API path; None when it needs none."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith("application/json"):
        return None
    status = response.status_code
    if is_client_api_path(request.path):
        converted = failure_response(status, _message(request, response))
    elif is_native_api_path(request.path):
        code = _CODES.get(status, "server_error" if status >= 500 else "error")
        converted = error_response(status, code, _message(request, response))
    else:
        return None
    for header in _KEPT_HEADERS:
        if header in response:
            converted[header] = response[header]
    return converted


class JsonErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        return api_error_response(request, response) or response
