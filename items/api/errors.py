"""One JSON error shape for every failure: {"error": {"code", "message", "field"?}} (docs/api.md)."""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from eigenflux.base.dbpool import pool_exhausted
from eigenflux.base.dbprobe import postgres_answers_directly
from items.api.request_body import BODY, NOT_JSON, describe_validation, parse_failure

log = logging.getLogger(__name__)


class ApiError(HttpError):
    """An error with a stable machine-readable code (and optionally the offending field)."""

    def __init__(self, status_code: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(status_code, message)
        self.code = code
        self.field = field


def error_body(code: str, message: str, field: str | None = None) -> dict:
    error = {"code": code, "message": message}
    if field:
        error["field"] = field
    return {"error": error}


def error_response(status: int, code: str, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, field), status=status)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    422: "invalid",
    429: "rate_limited",
    503: "unavailable",
}


def install(api: NinjaAPI) -> None:
    @api.exception_handler(ValidationError)
    def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        if exc.errors and exc.errors[0].get("type") == "json_invalid":
            return api.create_response(request, error_body("bad_request", NOT_JSON, BODY), status=400)
        message, field = describe_validation(exc.errors)
        return api.create_response(request, error_body("invalid", message, field), status=422)

    @api.exception_handler(AuthenticationError)
    def unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = api.create_response(
            request,
            error_body("unauthorized", "missing, unknown or revoked bearer token"),
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="eigenflux"'
        return response

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        code = getattr(exc, "code", None) or _HTTP_CODES.get(exc.status_code, "error")
        message, field = parse_failure(exc) or (str(exc), getattr(exc, "field", None))
        body = error_body(code, message, field)
        response = api.create_response(request, body, status=exc.status_code)
        retry_after = getattr(exc, "retry_after", None)
        if exc.status_code == 429 and retry_after:
            response["Retry-After"] = str(retry_after)
        return response

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return api.create_response(request, error_body("not_found", "not found"), status=404)

    @api.exception_handler(RequestDataTooBig)
    def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return api.create_response(request, error_body("payload_too_large", "request body too large"), status=413)

    @api.exception_handler(DatabaseError)
    def database_down(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
        if isinstance(exc, DataError):
            # Input the validators let through but PostgreSQL cannot store or compare: the client's to fix.
            log.warning("database refused request data: %s", exc.__class__.__name__)
            return api.create_response(
                request, error_body("invalid", "the request contains data that cannot be stored"), status=422
            )
        if not isinstance(exc, OperationalError | InterfaceError):
            raise exc
        return database_unavailable_response(exc)


def database_unavailable_response(exc: BaseException) -> JsonResponse:
    """503 with Retry-After: the database is down, or every pooled connection stayed busy for DB_POOL_TIMEOUT
    (then only this request is refused; the others keep being served as connections free up). Both end in the
    pool's timeout when the server is down (the pool waits for a connection it cannot open), so the server is
    asked directly before the answer says "busy"."""
    if pool_exhausted(exc) and postgres_answers_directly():
        log.warning("no database connection free within DB_POOL_TIMEOUT; answering 503")
        response = error_response(503, "unavailable", "the server is busy (no database connection free); retry later")
        response["Retry-After"] = "1"
        return response
    log.error("database unavailable: %s", exc.__class__.__name__)
    response = error_response(503, "unavailable", "database unavailable; retry later")
    response["Retry-After"] = "5"
    return response
