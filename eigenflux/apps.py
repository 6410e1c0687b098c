"""App configs of the project wiring: Django's admin with the project's admin site (eigenflux.admin_site)."""

from django.contrib.admin.apps import AdminConfig


class EigenFluxAdminConfig(AdminConfig):
    default_site = "eigenflux.admin_site.EigenFluxAdminSite"
