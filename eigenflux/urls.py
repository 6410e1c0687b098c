from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.defaults import page_not_found

from eigenflux import probe_views
from eigenflux.metrics_view import metrics
from items.api.api import api
from items.api.json_errors import api_error_response
from items.compat.api import compat_api

project_patterns = [
    path("admin/rq/", include("eigenflux.rq_urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", probe_views.healthz, name="healthz"),
    path("readyz", probe_views.readyz, name="readyz"),
    path("metrics", metrics, name="prometheus-django-metrics"),
]


def compat_patterns(prefix: str) -> list:
    """The EigenFlux client's API: a client whose server endpoint is http://host:port/<prefix> appends /api/v1."""
    return [path(f"{prefix}/api/v1/", compat_api.urls)] if prefix else []


urlpatterns = [*compat_patterns(settings.EIGENFLUX_COMPAT_PREFIX), *project_patterns]


def not_found(request, exception):
    """JSON for API paths (agents parse errors), Django's page for everything else."""
    response = page_not_found(request, exception)
    return api_error_response(request, response) or response


handler404 = not_found
