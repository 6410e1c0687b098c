"""ASGI entry point: HTTP through Django; WebSockets through channels, authenticated by the Django session.

WebSocket routes: the agents' live events and the admin's live pipeline health.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
from eigenflux.base import tracing
from eigenflux.base.parentwatch import watch_parent_from_environment

watch_parent_from_environment()  # under `make run`: stop when it is gone

tracing.setup("web")  # before the application loads its middleware (the Django instrumentation adds one)
# Django must be set up before anything below imports models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from eigenflux.base.bodylimit import BodyLimitASGI  # noqa: E402
from eigenflux.base.ws_origin import SameOriginOnly  # noqa: E402
from eigenflux.ws_not_found import websocket_not_found  # noqa: E402
from items.events_socket import AgentEventsConsumer  # noqa: E402
from pipeline.health_socket import HealthConsumer  # noqa: E402

websocket_urlpatterns = [
    # Agents authenticate with their token (?token=…), not a cookie, so no Origin check is needed.
    path("ws/v1/events", AgentEventsConsumer.as_asgi()),
    # Cookie-authenticated, so the Origin must be this server's own, scheme, host and port (no cross-site
    # socket hijacking; eigenflux.base.ws_origin).
    path("ws/admin/health", SameOriginOnly(HealthConsumer.as_asgi())),
    # Anything else: 404 with the JSON error body (without this route channels raises, a 500).
    re_path(r"", websocket_not_found),  # type: ignore[arg-type]  # channels routes ASGI apps; stubs type views
]

application = ProtocolTypeRouter(
    {
        "http": BodyLimitASGI(django_asgi_app),
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)

from eigenflux.base.longlived import freeze, freeze_after_first_request  # noqa: E402

freeze("loading the application")
freeze_after_first_request()
