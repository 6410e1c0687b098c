"""django-rq's pages need the moderators' permission (plain staff get 403), and the admin login is throttled
per username and per client address."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

RQ_PAGES = [
    ("home", []),
    ("home_json", []),
    ("metrics", []),
    ("jobs", [0]),
    ("queue_details", [0]),
    ("finished_jobs", [0]),
    ("failed_jobs", [0]),
    ("scheduled_jobs", [0]),
    ("started_jobs", [0]),
    ("deferred_jobs", [0]),
    ("workers", [0]),
    ("job_detail", [0, "no-such-job"]),
    ("delete_failed_jobs", [0]),
    ("clear", [0]),
    ("requeue_all", [0]),
]
# What a moderator sees (the job does not exist; the stats JSON and metrics answer as django-rq does).
MODERATOR_STATUS = {"job_detail": 404}


@pytest.mark.parametrize(("name", "args"), RQ_PAGES)
def test_plain_staff_get_403_on_every_rq_page(staff_client, name, args):
    url = reverse(f"django_rq:{name}", args=args)
    assert staff_client.get(url).status_code == 403
    assert staff_client.post(url).status_code == 403


@pytest.mark.parametrize(("name", "args"), RQ_PAGES[:12])
def test_moderators_open_the_rq_pages(mod_client, name, args):
    url = reverse(f"django_rq:{name}", args=args)
    assert mod_client.get(url).status_code == MODERATOR_STATUS.get(name, 200)


def test_anonymous_users_are_sent_to_the_admin_login(client):
    response = client.get(reverse("django_rq:home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_django_rqs_own_admin_entry_and_the_rq_scheduler_page_are_not_mounted(staff_client, mod_client):
    assert staff_client.get("/admin/django_rq/dashboard/").status_code == 404
    assert mod_client.get("/admin/django_rq/dashboard/").status_code == 404
    # Needs the optional rq-scheduler package (a 500 without it); rq's own scheduler is used instead.
    assert mod_client.get("/admin/rq/schedulers/0/").status_code == 404


def test_the_index_links_the_queues_only_for_those_who_may_open_them(mod_client, staff_client):
    assert reverse("django_rq:home") in mod_client.get(reverse("admin:index")).content.decode()
    assert reverse("django_rq:home") not in staff_client.get(reverse("admin:index")).content.decode()


# --- login throttling -------------------------------------------------------------------------------


@pytest.fixture
def moderator_with_password(moderator) -> User:
    moderator.set_password("correct horse battery")
    moderator.save()
    return moderator


def sign_in(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(reverse("admin:login"), {"username": username, "password": password})


def test_five_failures_lock_the_username_even_with_the_right_password(moderator_with_password, settings):
    user = moderator_with_password.username
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        response = sign_in(user, f"wrong-{n}", address=f"10.0.1.{n}")  # every attempt from another address
        assert response.status_code == 200
        assert "correct username and password" in response.content.decode()
    locked = sign_in(user, "correct horse battery", address="10.0.2.1")
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= settings.ADMIN_LOGIN_WINDOW_SECONDS
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "_auth_user_id" not in locked.wsgi_request.session
    # The username in another case is the same account.
    assert sign_in(user.upper(), "correct horse battery", address="10.0.2.2").status_code == 429


def test_five_failures_from_one_address_lock_that_address_for_every_username(moderator_with_password, settings):
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        assert sign_in(f"guess-{n}", "x", address="10.9.9.9").status_code == 200
    assert sign_in(moderator_with_password.username, "correct horse battery", address="10.9.9.9").status_code == 429
    elsewhere = sign_in(moderator_with_password.username, "correct horse battery", address="10.9.9.10")
    assert elsewhere.status_code == 302  # the account itself is not locked


def test_a_success_before_the_limit_clears_the_username_counter(moderator_with_password, settings):
    user = moderator_with_password.username
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES - 1):
        sign_in(user, "wrong", address=f"10.1.0.{n}")
    assert sign_in(user, "correct horse battery", address="10.1.1.1").status_code == 302
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES - 1):
        sign_in(user, "wrong", address=f"10.1.2.{n}")
    assert sign_in(user, "correct horse battery", address="10.1.3.1").status_code == 302


def test_the_lock_ends_with_the_window(moderator_with_password, settings, redis_client):
    user = moderator_with_password.username
    for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        sign_in(user, "wrong", address="10.2.0.1")
    assert sign_in(user, "correct horse battery", address="10.2.0.2").status_code == 429
    keys = redis_client.keys("admin-login:fail:*")
    assert len(keys) == 2
    assert all(0 < redis_client.ttl(key) <= settings.ADMIN_LOGIN_WINDOW_SECONDS for key in keys)
    for key in keys:  # what the window's end does
        redis_client.delete(key)
    assert sign_in(user, "correct horse battery", address="10.2.0.1").status_code == 302


def test_zero_switches_the_throttle_off(moderator_with_password, settings):
    settings.ADMIN_LOGIN_MAX_FAILURES = 0
    for _ in range(8):
        sign_in(moderator_with_password.username, "wrong")
    assert sign_in(moderator_with_password.username, "correct horse battery").status_code == 302
