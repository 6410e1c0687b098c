"""WSGI entry point (gunicorn; HTTP only): Django behind the streaming body limit."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")

from eigenflux.bodylimit import BodyLimitWSGI

application = BodyLimitWSGI(get_wsgi_application())
