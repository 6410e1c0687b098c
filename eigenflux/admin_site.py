"""The admin site: Django's, with a throttled login (eigenflux.login_throttle).

Installed through eigenflux.apps.EigenFluxAdminConfig (in INSTALLED_APPS instead of django.contrib.admin),
so every `admin.site.register` and `@admin.register` in the project lands here.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from eigenflux.base.clientaddr import request_client_address
from eigenflux.login_throttle import (
    CLEAR_COMMAND,
    DEVICE_COOKIE,
    device_cookie_value,
    device_of,
    login_failed,
    login_lockout,
    login_succeeded,
)

THROTTLED = "throttled"


def client_address(request) -> str:
    """The peer address, or behind a TRUSTED_PROXIES proxy the client address it forwards (as the API's
    limits use it)."""
    return request_client_address(request)


class ThrottledAuthenticationForm(AdminAuthenticationForm):
    """Refuses, without checking the password, while the attempt is locked out (eigenflux.login_throttle);
    counts every refused sign-in (wrong password, unknown user, not staff)."""

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request)
        cookies = self.request.COOKIES if self.request is not None else {}
        device = device_of(cookies.get(DEVICE_COOKIE), username)
        lockout = login_lockout(username=username, address=address, device=device)
        if lockout is not None:
            minutes = max(1, -(-lockout.seconds // 60))
            self.retry_after = lockout.seconds
            raise ValidationError(
                f"Too many failed sign-ins {lockout.scope}. Try again in {minutes} minutes, or ask an "
                f"operator to lift the lock with `{CLEAR_COMMAND}`.",
                code=THROTTLED,
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            login_failed(username=username, address=address, device=device)
            raise
        login_succeeded(username=username, address=address, device=device)
        return cleaned


class EigenFluxAdminSite(admin.AdminSite):
    login_form = ThrottledAuthenticationForm

    def login(self, request, extra_context=None):
        response = super().login(request, extra_context)
        form = (getattr(response, "context_data", None) or {}).get("form")
        if form is not None and form.is_bound and form.has_error(NON_FIELD_ERRORS, THROTTLED):
            response.status_code = 429
            response["Retry-After"] = str(getattr(form, "retry_after", 60))
        elif request.method == "POST" and request.user.is_authenticated and response.status_code == 302:
            # Signed in: this browser is the moderator's, and strangers' failures no longer hold it back.
            response.set_cookie(
                DEVICE_COOKIE,
                device_cookie_value(request.user.get_username()),
                max_age=settings.ADMIN_LOGIN_TRUST_DAYS * 86_400,
                secure=request.is_secure(),
                httponly=True,
                samesite="Lax",
            )
        return response
