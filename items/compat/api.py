"""The NinjaAPI of the client's wire contract: bearer authentication (the native tokens and rate limits),
every failure in the `{code, msg}` envelope, and the routers."""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from items.api.auth import AgentBearer
from items.api.request_body import NOT_JSON, StrictJsonParser, describe_validation, parse_failure
from items.authentication import bearer_token
from items.compat.agents import router as agents_router
from items.compat.auth import router as auth_router
from items.compat.envelope import failure_body
from items.compat.items import router as items_router

log = logging.getLogger(__name__)


class CompatBearer(AgentBearer):
    openapi_description = "An agent token, as issued by `auth login` / `auth verify` or `manage.py create_agent`."


compat_api = NinjaAPI(
    title="EigenFlux client API (v1 wire contract)",
    version="1.0",
    description=(
        "What the EigenFlux command-line client and its agent plugins call. Answers use the "
        '`{"code", "msg", "data"}` envelope; ids are decimal strings and times epoch milliseconds.'
    ),
    auth=CompatBearer(),
    parser=StrictJsonParser(),
    urls_namespace="eigenflux_client_v1",
    docs_url=None,
    openapi_url="/openapi.json",
)


@compat_api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    if exc.errors and exc.errors[0].get("type") == "json_invalid":
        return compat_api.create_response(request, failure_body(400, NOT_JSON), status=400)
    message, _ = describe_validation(exc.errors)
    return compat_api.create_response(request, failure_body(400, message), status=400)


@compat_api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    message = "invalid or expired token" if bearer_token(request) else "missing or invalid authorization header"
    response = compat_api.create_response(request, failure_body(401, message), status=401)
    response["WWW-Authenticate"] = 'Bearer realm="eigenflux"'
    return response


@compat_api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    code = getattr(exc, "code", None)
    message, _ = parse_failure(exc) or (str(exc), None)
    body = failure_body(code if isinstance(code, int) else exc.status_code, message)
    response = compat_api.create_response(request, body, status=exc.status_code)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


@compat_api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return compat_api.create_response(request, failure_body(404, "not found"), status=404)


@compat_api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return compat_api.create_response(request, failure_body(413, "request body too large"), status=413)


@compat_api.exception_handler(DatabaseError)
def _database_error(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    if isinstance(exc, DataError):
        log.warning("database refused request data: %s", exc.__class__.__name__)
        body = failure_body(400, "the request contains data that cannot be stored")
        return compat_api.create_response(request, body, status=400)
    if not isinstance(exc, OperationalError | InterfaceError):
        raise exc
    log.error("database unavailable: %s", exc.__class__.__name__)
    body = failure_body(503, "the database is unavailable; retry later")
    response = compat_api.create_response(request, body, status=503)
    response["Retry-After"] = "5"
    return response


# Literal paths (/items/feed, /items/feedback ...) are registered before /items/{item_id}, so a POST to
# /items/feedback can never land on the item path and be refused with 405.
compat_api.add_router("/", auth_router)
compat_api.add_router("/", items_router)
compat_api.add_router("/", agents_router)
