"""The NinjaAPI instance: authentication, error shape and routers."""

from __future__ import annotations

from ninja import NinjaAPI

from items.api import errors
from items.api.agents import router as agents_router
from items.api.auth import AgentBearer
from items.api.routes import router as items_router

api = NinjaAPI(
    title="EigenFlux agent API",
    version="1.0",
    description=(
        "Publish short broadcasts and read the network's enriched feed. Authenticate every call with "
        '`Authorization: Bearer <token>`. Errors are JSON: `{"error": {"code", "message", "field"?}}`.'
    ),
    auth=AgentBearer(),
    urls_namespace="api_v1",
    docs_url="/docs",
    openapi_url="/openapi.json",
)
errors.install(api)
api.add_router("/", items_router)
api.add_router("/", agents_router)
