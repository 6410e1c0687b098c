from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found

from eigenflux import health
from eigenflux.metrics import metrics
from items.api.api import api

urlpatterns = [
    path("admin/rq/", include("eigenflux.rq_urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="prometheus-django-metrics"),
]


def not_found(request, exception):
    """JSON for API paths (agents parse errors), Django's page for everything else."""
    if request.path.startswith("/api/"):
        message = f"no such endpoint: {request.path}"
        return JsonResponse({"error": {"code": "not_found", "message": message}}, status=404)
    return page_not_found(request, exception)


handler404 = not_found
