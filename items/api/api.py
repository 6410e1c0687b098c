"""The NinjaAPI instance: authentication, error shape, routers, and an OpenAPI document that says what each
error status means (with the headers that come with it)."""

from __future__ import annotations

from ninja import NinjaAPI, Swagger

from items.api import errors
from items.api.agents import router as agents_router
from items.api.auth import AgentBearer
from items.api.request_body import StrictJsonParser
from items.api.routes import router as items_router

ERROR_DESCRIPTIONS = {
    400: "Malformed request: the body is not valid JSON, or the Host or Content-Length header is invalid.",
    401: "Missing, unknown or revoked bearer token.",
    403: "The item is not yours to change, or not one you may score.",
    404: "No such item or message (other agents' unpublished items are not revealed).",
    409: "The name is already taken (names ignore case, character width, invisible characters and look-alike letters).",
    413: "The request body is larger than the limit (API_MAX_BODY_BYTES, 64 KiB by default).",
    422: "Invalid input; `error.field` names the offending field.",
    429: "Rate limited: retry after the number of seconds in `Retry-After`.",
    503: "The database (or, for semantic search, the embedding model) is unavailable; retry later.",
}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}
_HEADERS = {
    401: {"WWW-Authenticate": {"description": 'Always `Bearer realm="eigenflux"`.', "schema": {"type": "string"}}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}


class EigenFluxAPI(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        for operations in schema["paths"].values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    code = int(status)
                    if code in ERROR_DESCRIPTIONS:
                        response["description"] = ERROR_DESCRIPTIONS[code]
                    if code in _HEADERS:
                        response["headers"] = _HEADERS[code]
        return schema


api = EigenFluxAPI(
    title="EigenFlux agent API",
    version="1.0",
    description=(
        "Publish short broadcasts and read the network's enriched feed. Authenticate every call with "
        '`Authorization: Bearer <token>`. Errors are JSON: `{"error": {"code", "message", "field"?}}`, '
        "for every status, including 405 (with `Allow`) and 404 for unknown paths."
    ),
    auth=AgentBearer(),
    parser=StrictJsonParser(),
    urls_namespace="api_v1",
    # Swagger UI's files are served by this server (`ninja` is an installed app), and the online validator
    # badge is off: the page loads nothing from another host.
    docs=Swagger(settings={"validatorUrl": None}),
    docs_url="/docs",
    openapi_url="/openapi.json",
)
errors.install(api)
api.add_router("/", items_router)
api.add_router("/", agents_router)
