"""The project's URLs with the client API turned off (EIGENFLUX_COMPAT_PREFIX empty), for the prefix test."""

from eigenflux.urls import compat_patterns, handler404, project_patterns

urlpatterns = [*compat_patterns(""), *project_patterns]
__all__ = ["handler404", "urlpatterns"]
