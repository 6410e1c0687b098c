"""ASGI entry point: HTTP through Django; WebSocket routes are added by the live-events work."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
application = get_asgi_application()
