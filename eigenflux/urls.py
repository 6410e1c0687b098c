from django.contrib import admin
from django.urls import include, path

from eigenflux import health
from items.api.api import api

urlpatterns = [
    path("admin/rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("", include("django_prometheus.urls")),
]
