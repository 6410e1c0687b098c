"""django-rq's pages need the moderators' permission (plain staff get 403), and the admin login is throttled
per (username, address), with higher ceilings per username and per address, and a command lifts a lockout."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from eigenflux.login_throttle import DEVICE_COOKIE, device_cookie_value, device_of

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
# The job-queue actions (issue 44's own pass): each is behind the permission too, and needs the CSRF token.
RQ_ACTIONS = [
    ("actions", [0]),
    ("confirm_action", [0]),
    ("delete_job", [0, "no-such-job"]),
    ("requeue_job", [0, "no-such-job"]),
    ("enqueue_job", [0, "no-such-job"]),
    ("stop_job", [0, "no-such-job"]),
]
# What a moderator sees (the job does not exist; the stats JSON and metrics answer as django-rq does).
MODERATOR_STATUS = {"job_detail": 404}


@pytest.mark.parametrize(("name", "args"), RQ_PAGES)
def test_plain_staff_get_403_on_every_rq_page(staff_client, name, args):
    url = reverse(f"django_rq:{name}", args=args)
    assert staff_client.get(url).status_code == 403
    assert staff_client.post(url).status_code == 403


@pytest.mark.parametrize(("name", "args"), RQ_ACTIONS)
def test_plain_staff_get_403_on_every_rq_action(staff_client, name, args):
    assert staff_client.post(reverse(f"django_rq:{name}", args=args)).status_code == 403


@pytest.mark.parametrize(
    ("name", "args"), [*RQ_ACTIONS, ("clear", [0]), ("requeue_all", [0]), ("delete_failed_jobs", [0])]
)
def test_an_rq_action_without_the_csrf_token_is_refused(moderator, name, args):
    client = Client(enforce_csrf_checks=True)
    client.force_login(moderator)
    response = client.post(reverse(f"django_rq:{name}", args=args), {"action": "delete", "job_ids": ["x"]})
    assert response.status_code == 403 and b"CSRF" in response.content


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


def test_five_failures_lock_the_username_at_that_address_even_with_the_right_password(
    moderator_with_password, settings
):
    user = moderator_with_password.username
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        response = sign_in(user, f"wrong-{n}", address="10.0.1.1")
        assert response.status_code == 200
        assert "correct username and password" in response.content.decode()
    locked = sign_in(user, "correct horse battery", address="10.0.1.1")
    assert locked.status_code == 429
    assert "Too many failed sign-ins for this account from this address" in locked.content.decode()
    assert "manage.py clear_login_throttle [--username U] [--ip IP]" in locked.content.decode()
    assert "_auth_user_id" not in locked.wsgi_request.session
    assert sign_in(user.upper(), "correct horse battery", address="10.0.1.1").status_code == 429  # any case
    # Whoever failed there locked out only that address: the moderator still signs in from anywhere else.
    assert sign_in(user, "correct horse battery", address="10.0.2.1").status_code == 302


def test_a_username_is_locked_everywhere_only_past_its_higher_ceiling(moderator_with_password, settings):
    settings.ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME = 6
    user = moderator_with_password.username
    for n in range(6):
        assert sign_in(user, "wrong", address=f"10.0.3.{n}").status_code == 200  # six addresses, one try each
    locked = sign_in(user, "correct horse battery", address="10.0.4.1")
    assert locked.status_code == 429 and "for this account. Try again" in locked.content.decode()


def test_failures_for_a_user_who_does_not_exist_do_not_lock_the_real_admin_out(moderator_with_password, settings):
    for n in range(settings.ADMIN_LOGIN_MAX_FAILURES + 2):
        sign_in("no-such-admin", f"guess-{n}", address="127.0.0.1")
    assert sign_in("no-such-admin", "x", address="127.0.0.1").status_code == 429
    assert sign_in(moderator_with_password.username, "correct horse battery", address="127.0.0.1").status_code == 302


def test_an_address_is_locked_for_every_username_only_past_its_higher_ceiling(moderator_with_password, settings):
    per_address = settings.ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS
    assert per_address > settings.ADMIN_LOGIN_MAX_FAILURES
    for n in range(per_address):
        assert sign_in(f"guess-{n}", "x", address="10.9.9.9").status_code == 200
    locked = sign_in(moderator_with_password.username, "correct horse battery", address="10.9.9.9")
    assert locked.status_code == 429 and "from this address" in locked.content.decode()
    elsewhere = sign_in(moderator_with_password.username, "correct horse battery", address="10.9.9.10")
    assert elsewhere.status_code == 302  # the account itself is not locked


def test_a_success_before_the_limit_clears_the_counter_of_that_address(moderator_with_password, settings):
    user = moderator_with_password.username
    for _ in range(2):
        for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES - 1):
            sign_in(user, "wrong", address="10.1.0.1")
        assert sign_in(user, "correct horse battery", address="10.1.0.1").status_code == 302


def test_the_lock_slides_and_retry_after_is_the_real_wait(moderator_with_password, settings, redis_client):
    user = moderator_with_password.username
    for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        sign_in(user, "wrong", address="10.2.0.1")
    locked = sign_in(user, "correct horse battery", address="10.2.0.1")
    # One failure comes back every window / limit seconds (900 / 5), not at the end of a fixed window.
    step = settings.ADMIN_LOGIN_WINDOW_SECONDS // settings.ADMIN_LOGIN_MAX_FAILURES
    assert locked.status_code == 429 and step - 10 <= int(locked["Retry-After"]) <= step
    [pair] = redis_client.keys("admin-login:fail:{u:*}:addr:*")
    redis_client.set(pair, int(redis_client.get(pair)) - step * 1000, px=900_000)  # `step` seconds later
    assert sign_in(user, "correct horse battery", address="10.2.0.1").status_code == 302


def signed_in_browser(username: str, password: str, *, address: str) -> Client:
    browser = Client(REMOTE_ADDR=address)
    assert browser.post(reverse("admin:login"), {"username": username, "password": password}).status_code == 302
    assert DEVICE_COOKIE in browser.cookies
    return browser


def returning(browser: Client, address: str) -> Client:
    """The same browser later, signed out (its device cookie kept, the session gone), maybe on another network."""
    again = Client(REMOTE_ADDR=address)
    again.cookies[DEVICE_COOKIE] = browser.cookies[DEVICE_COOKIE].value
    return again


def test_a_full_username_ceiling_does_not_lock_out_a_moderator_known_by_browser_or_address(
    moderator_with_password, settings
):
    """Issue 44, item 4: ten addresses x five wrong passwords filled the per-username ceiling and locked the
    real moderator out. Strangers fill the ceiling still; a moderator's browser (its signed device cookie) and the
    addresses they signed in from are known, and count only in their own buckets."""
    settings.ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME = 20
    user, password = moderator_with_password.username, "correct horse battery"
    browser = signed_in_browser(user, password, address="10.7.0.1")
    for n in range(10):  # an IPv6 /56 has addresses enough; two failures each, under the pair's five
        for _ in range(2):
            assert sign_in(user, "wrong", address=f"2001:db8:0:{n:x}::1").status_code == 200
    assert sign_in(user, password, address="10.7.9.9").status_code == 429  # a stranger's attempt is held
    # The moderator's browser, from a network it never used: its cookie says who it is.
    assert (
        returning(browser, "10.7.9.9")
        .post(reverse("admin:login"), {"username": user, "password": password})
        .status_code
        == 302
    )
    # Another browser on the network the moderator signed in from: the address is known.
    assert sign_in(user, password, address="10.7.0.1").status_code == 302


def test_strangers_at_the_moderators_address_do_not_lock_out_the_moderators_browser(moderator_with_password, settings):
    user, password = moderator_with_password.username, "correct horse battery"
    first = signed_in_browser(user, password, address="10.8.0.1")
    for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        sign_in(user, "wrong", address="10.8.0.1")  # someone behind the same NAT
    assert sign_in(user, password, address="10.8.0.1").status_code == 429
    assert (
        returning(first, "10.8.0.1").post(reverse("admin:login"), {"username": user, "password": password}).status_code
        == 302
    )
    # The cookie proves only the browser; its own failures still lock it (guessing with it gains nothing).
    browser = returning(first, "10.8.0.1")
    for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        browser.post(reverse("admin:login"), {"username": user, "password": "wrong"})
    locked = browser.post(reverse("admin:login"), {"username": user, "password": password})
    assert locked.status_code == 429 and "in this browser" in locked.content.decode()


def test_a_device_cookie_is_the_signed_one_of_that_username(moderator_with_password):
    cookie = device_cookie_value(moderator_with_password.username)
    assert device_of(cookie, moderator_with_password.username.upper()) is not None  # usernames ignore case
    assert device_of(cookie, "someone-else") is None
    assert device_of(cookie[:-2] + "xx", moderator_with_password.username) is None  # forged
    assert device_of(None, moderator_with_password.username) is None


@pytest.mark.parametrize("options", [{"username": "MODERATOR-NAME", "ip": "10.3.0.1"}, {"username": "MODERATOR-NAME"}])
def test_clear_login_throttle_lifts_a_lockout(moderator_with_password, settings, options):
    user = moderator_with_password.username
    for _ in range(settings.ADMIN_LOGIN_MAX_FAILURES):
        sign_in(user, "wrong", address="10.3.0.1")
    assert sign_in(user, "correct horse battery", address="10.3.0.1").status_code == 429
    out = StringIO()
    call_command(
        "clear_login_throttle", **{k: v.replace("MODERATOR-NAME", user.upper()) for k, v in options.items()}, stdout=out
    )
    assert out.getvalue().startswith("cleared ")
    assert sign_in(user, "correct horse battery", address="10.3.0.1").status_code == 302


def test_clear_login_throttle_by_address_lifts_the_address_ceiling(moderator_with_password, settings):
    settings.ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS = 2
    for n in range(2):
        sign_in(f"guess-{n}", "x", address="10.4.0.1")
    assert sign_in(moderator_with_password.username, "correct horse battery", address="10.4.0.1").status_code == 429
    call_command("clear_login_throttle", ip="10.4.0.1", stdout=StringIO())
    assert sign_in(moderator_with_password.username, "correct horse battery", address="10.4.0.1").status_code == 302


def test_clear_login_throttle_needs_something_to_clear():
    with pytest.raises(CommandError, match="--username, --ip and/or --email"):
        call_command("clear_login_throttle")


def test_zero_switches_the_throttle_off(moderator_with_password, settings):
    settings.ADMIN_LOGIN_MAX_FAILURES = 0
    for _ in range(8):
        sign_in(moderator_with_password.username, "wrong")
    assert sign_in(moderator_with_password.username, "correct horse battery").status_code == 302


def test_without_redis_sign_in_still_works_and_the_log_says_why(moderator_with_password, settings, caplog):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert sign_in(moderator_with_password.username, "wrong").status_code == 200
    assert sign_in(moderator_with_password.username, "correct horse battery").status_code == 302
    assert "rate limit not applied (Redis unavailable" in caplog.text
