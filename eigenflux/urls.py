from django.conf import settings
from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found

from eigenflux import health
from eigenflux.metrics import metrics
from items.api.api import api
from items.compat.api import compat_api
from items.compat.paths import is_compat_path, unsupported_feature

project_patterns = [
    path("admin/rq/", include("eigenflux.rq_urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="prometheus-django-metrics"),
]


def compat_patterns(prefix: str) -> list:
    """The EigenFlux client's API: a client whose server endpoint is http://host:port/<prefix> appends /api/v1."""
    return [path(f"{prefix}/api/v1/", compat_api.urls)] if prefix else []


urlpatterns = [*compat_patterns(settings.EIGENFLUX_COMPAT_PREFIX), *project_patterns]


def not_found(request, exception):
    """JSON for API paths (agents parse errors), Django's page for everything else."""
    if is_compat_path(request.path):
        feature = unsupported_feature(request.path)
        message = f"not supported by this server: {feature}" if feature else f"no such endpoint: {request.path}"
        return JsonResponse({"code": 404, "msg": message}, status=404)
    if request.path.startswith("/api/"):
        message = f"no such endpoint: {request.path}"
        return JsonResponse({"error": {"code": "not_found", "message": message}}, status=404)
    return page_not_found(request, exception)


handler404 = not_found
