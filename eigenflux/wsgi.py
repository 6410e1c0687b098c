"""WSGI entry point (gunicorn; HTTP only): Django behind the streaming body limit."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")

from eigenflux.base import tracing
from eigenflux.base.bodylimit import BodyLimitWSGI

tracing.setup("web")  # before the application loads its middleware (the Django instrumentation adds one)

application = BodyLimitWSGI(get_wsgi_application())

from eigenflux.base.longlived import freeze, freeze_after_first_request  # noqa: E402

freeze("loading the application")
freeze_after_first_request()
