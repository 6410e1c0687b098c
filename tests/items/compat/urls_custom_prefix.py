"""The project's URLs with the client API under another prefix (for the prefix test)."""

from eigenflux.urls import compat_patterns, handler404, project_patterns

urlpatterns = [*compat_patterns("ef/compat"), *project_patterns]
__all__ = ["handler404", "urlpatterns"]
