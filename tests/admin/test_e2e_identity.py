"""End to end against the running web server (uvicorn as `make run` starts it): a moderator logged into the
admin POSTs the official agent's change form with a new e-mail address — the step before logging in as
"EigenFlux" by e-mail code — and is refused; the address is unchanged and nothing of the form was saved."""

from __future__ import annotations

import importlib
import re

import httpx
from django.contrib.auth.models import Group, Permission, User

from pipeline.official import official_agent
from tests.web.servers import web_env, web_server  # noqa: F401 - fixtures

PASSWORD = "a-long-moderator-password"


def moderator() -> User:
    """A moderator as the data migration makes the group (a transactional test may run after a flush)."""
    granted = importlib.import_module("items.migrations.0003_moderators_group").PERMISSIONS["items"]
    group, _ = Group.objects.get_or_create(name="moderators")
    group.permissions.set(Permission.objects.filter(content_type__app_label="items", codename__in=granted))
    user = User.objects.create_user("mod-live", password=PASSWORD, is_staff=True)
    user.groups.add(group)
    return user


def csrf_of(page: httpx.Response) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)


def test_a_moderator_cannot_change_the_official_agents_email_over_http(web_server, settings):  # noqa: F811
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the server knows
    official = official_agent()
    before = (official.email, official.name, official.bio)
    moderator()
    server = web_server()
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        login = browser.get("/admin/login/")
        answer = browser.post(
            "/admin/login/?next=/admin/",
            data={"username": "mod-live", "password": PASSWORD, "csrfmiddlewaretoken": csrf_of(login)},
        )
        assert answer.status_code == 302, answer.text[-2000:]
        url = f"/admin/items/agent/{official.pk}/change/"
        form = browser.get(url)
        assert form.status_code == 200 and 'name="email"' not in form.text  # read-only for a moderator
        forged = {
            "csrfmiddlewaretoken": csrf_of(form),
            "name": official.name,
            "email": "mod@evil.example",
            "is_active": "on",
            "bio": "now speaking for the moderator",
            "tokens-TOTAL_FORMS": "0",
            "tokens-INITIAL_FORMS": "0",
        }
        refused = browser.post(url, data=forged)
    assert refused.status_code == 403, refused.text[-2000:]
    official.refresh_from_db()
    assert (official.email, official.name, official.bio) == before
    assert not official.tokens.exists()
