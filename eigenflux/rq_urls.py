"""django-rq's pages (dashboard, queues, jobs, scheduled jobs, workers, schedulers, its stats JSON and
metrics), mounted at /admin/rq/ behind the permission the moderators group grants (`django_rq.admin`).

django-rq itself only asks for a staff user. Its own admin entry (/admin/django_rq/dashboard/…) is switched
off in settings (RQ_SHOW_ADMIN_LINK), so these are the only routes to the pages."""

from __future__ import annotations

import importlib.util
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.urls import URLPattern, reverse
from django_rq.urls import get_admin_urlpatterns, get_api_urlpatterns

PERMISSION = "django_rq.admin"
app_name = "django_rq"


def moderators_only(view):
    """Anonymous or non-staff users go to the admin login; staff without the permission get 403."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        user = request.user
        if not (user.is_active and user.is_staff):
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        if not user.has_perm(PERMISSION):
            raise PermissionDenied(f"the {PERMISSION} permission is needed for the job queues")
        return view(request, *args, **kwargs)

    return guarded


# The rq-scheduler page fails (500) unless that optional package is installed; this project schedules with
# rq's own scheduler (`rqworker --with-scheduler`), whose jobs show on each queue's "scheduled" page.
_UNUSABLE = set() if importlib.util.find_spec("rq_scheduler") else {"scheduler_jobs"}

urlpatterns = [
    URLPattern(pattern.pattern, moderators_only(pattern.callback), pattern.default_args, pattern.name)
    for pattern in [*get_api_urlpatterns(), *get_admin_urlpatterns()]
    if pattern.name not in _UNUSABLE
]
