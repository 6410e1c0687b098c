"""E-mail login: codes are random and stored hashed, expire, allow 5 attempts, are rate limited per address
and per client IP; unknown addresses get the same answer (no enumeration); open sign-up creates agents."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from items.models import Agent, AgentToken, LoginChallenge
from items.services.agents import agent_create
from items.services.login import code_hash, login_challenges_prune
from tests.factories import mailed_login_code

pytestmark = pytest.mark.django_db


def login(client, email: str, **headers: str):
    return client.post("/auth/login", {"email": email, "login_method": "email"}, **headers)


def verify(client, challenge_id: str, code: str, **headers: str):
    body = {"challenge_id": challenge_id, "code": code, "login_method": "email"}
    return client.post("/auth/login/verify", body, **headers)


def last_code() -> str:
    return mailed_login_code(mail.outbox[-1])


@pytest.fixture
def registered(db):
    return agent_create(name="ops", email="Ops@Example.com")


def test_the_code_logs_in_and_the_token_works(compat, registered):
    assert registered.email == "ops@example.com"  # stored in its canonical form
    status, body, _ = login(compat(), "OPS@example.COM")
    assert status == 200 and body["data"]["verification_required"] is True
    assert mail.outbox[-1].to == ["ops@example.com"]  # the stored address, not the text sent
    code = last_code()
    assert code.isdigit() and len(code) == 6 and code in mail.outbox[-1].body
    # Not in the subject: subjects show in notification previews, lock screens and mail-server logs.
    assert code not in mail.outbox[-1].subject and mail.outbox[-1].subject == "Your EigenFlux login code"
    status, body, _ = verify(compat(), body["data"]["challenge_id"], code)
    assert status == 200 and body["code"] == 0
    data = body["data"]
    assert data["agent_id"] == str(registered.pk) and data["is_new_agent"] is False
    assert data["expires_at"] > timezone.now().timestamp() * 1000
    status, me, _ = compat(data["access_token"]).get("/agents/me")
    assert status == 200 and me["data"]["profile"]["email"] == "ops@example.com"
    # an ordinary agent token: the native API takes it too
    assert AgentToken.objects.filter(agent=registered, label="email login").count() == 1


def test_codes_are_stored_only_as_a_keyed_hash(compat, registered):
    _, body, _ = login(compat(), "ops@example.com")
    code, challenge_id = last_code(), body["data"]["challenge_id"]
    row = LoginChallenge.objects.get(challenge_id=challenge_id)
    assert code not in row.code_hash and len(row.code_hash) == 64
    assert row.code_hash == code_hash(challenge_id, code)
    assert code_hash("ch_other", code) != row.code_hash  # salted with the challenge
    assert all(code not in str(value) for value in LoginChallenge.objects.values_list().get(pk=row.pk))


def test_a_code_expires(compat, registered, settings):
    _, body, _ = login(compat(), "ops@example.com")
    code = last_code()
    LoginChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    status, body, _ = verify(compat(), body["data"]["challenge_id"], code)
    assert status == 200 and body["code"] == 400 and "expired" in body["msg"]
    assert settings.LOGIN_CODE_TTL_SECONDS == 600


def test_five_attempts_then_even_the_right_code_fails(compat, registered):
    _, body, _ = login(compat(), "ops@example.com")
    challenge_id, code = body["data"]["challenge_id"], last_code()
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    messages = [verify(compat(), challenge_id, wrong)[1]["msg"] for _ in range(5)]
    assert messages[0] == "invalid code (4 attempts left)" and messages[-1] == "invalid code (0 attempts left)"
    _status, body, _ = verify(compat(), challenge_id, code)
    assert body["code"] == 400 and "too many attempts" in body["msg"]
    assert LoginChallenge.objects.get(challenge_id=challenge_id).attempts == 5


def test_a_code_works_once(compat, registered):
    _, body, _ = login(compat(), "ops@example.com")
    challenge_id, code = body["data"]["challenge_id"], last_code()
    assert verify(compat(), challenge_id, code)[1]["code"] == 0
    assert verify(compat(), challenge_id, code)[1]["code"] == 400


def test_unknown_addresses_get_the_same_answer_and_can_never_log_in(compat, registered):
    known = login(compat(), "ops@example.com", REMOTE_ADDR="10.0.0.1")
    unknown = login(compat(), "nobody@example.com", REMOTE_ADDR="10.0.0.2")
    assert known[0] == unknown[0] == 200
    assert known[1]["data"].keys() == unknown[1]["data"].keys()
    assert {k: v for k, v in known[1]["data"].items() if k != "challenge_id"} == {
        k: v for k, v in unknown[1]["data"].items() if k != "challenge_id"
    }
    assert len(mail.outbox) == 2  # both addresses get a mail; only the registered one gets a code
    assert "no login code was issued" in mail.outbox[1].body and not any(c.isdigit() for c in mail.outbox[1].subject)
    challenge = LoginChallenge.objects.get(challenge_id=unknown[1]["data"]["challenge_id"])
    # even the right code fails, with the same message as any wrong code
    LoginChallenge.objects.filter(pk=challenge.pk).update(code_hash=code_hash(challenge.challenge_id, "123456"))
    _status, body, _ = verify(compat(), challenge.challenge_id, "123456")
    assert body == {"code": 400, "msg": "invalid code (4 attempts left)"}
    assert not Agent.objects.filter(email="nobody@example.com").exists()


def test_open_signup_creates_the_agent_on_verify(compat, settings):
    settings.EIGENFLUX_OPEN_SIGNUP = True
    _, body, _ = login(compat(), "new.agent@example.com")
    assert not Agent.objects.filter(email="new.agent@example.com").exists()  # not before the code is shown
    _status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert body["code"] == 0 and body["data"]["is_new_agent"] is True and body["data"]["needs_profile_completion"]
    agent = Agent.objects.get(email="new.agent@example.com")
    assert agent.name == "new.agent" and body["data"]["agent_id"] == str(agent.pk)


@pytest.mark.parametrize("email", ["OPS@elsewhere.org", "eigenflux@elsewhere.org"])
def test_open_signup_when_the_address_does_not_give_a_usable_name(compat, registered, settings, email):
    # "ops" belongs to another agent (names ignore case), "eigenflux" is the official agent's: the new agent
    # gets a free name of its own (it is asked to choose one anyway) instead of a server error.
    settings.EIGENFLUX_OPEN_SIGNUP = True
    _, body, _ = login(compat(), email)
    status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert status == 200 and body["code"] == 0 and body["data"]["is_new_agent"] is True
    agent = Agent.objects.get(email=email.lower())  # stored canonical
    assert agent.pk != registered.pk and agent.name.startswith("agent-") and agent.name_key
    assert body["data"]["needs_profile_completion"]


def test_rate_limit_per_address(compat, registered, settings):
    settings.LOGIN_RESEND_SECONDS = 0
    settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR = 3
    results = [login(compat(), "ops@example.com", REMOTE_ADDR=f"10.0.0.{n}") for n in range(4)]
    assert [status for status, _, _ in results] == [200, 200, 200, 429]
    _status, body, headers = results[-1]
    assert body["code"] == 429 and int(headers["Retry-After"]) > 0
    assert len(mail.outbox) == 3
    # the limit is per address: another one still works
    assert login(compat(), "other@example.com", REMOTE_ADDR="10.0.0.9")[0] == 200


def test_resend_waits_for_resend_after(compat, registered):
    assert login(compat(), "ops@example.com")[0] == 200
    status, body, _ = login(compat(), "ops@example.com")
    assert status == 429 and "just now" in body["msg"]


def test_rate_limit_per_client_ip_covers_login_and_verify(compat, registered, settings):
    settings.LOGIN_REQUESTS_PER_IP_PER_HOUR = 4
    settings.LOGIN_RESEND_SECONDS = 0
    client = compat()
    for n in range(2):
        assert login(client, f"a{n}@example.com", REMOTE_ADDR="192.0.2.7")[0] == 200
    for _ in range(2):
        assert (
            client.post("/auth/login/verify", {"challenge_id": "ch_x", "code": "123456"}, REMOTE_ADDR="192.0.2.7")[0]
            == 200
        )
    status, body, _ = login(client, "a9@example.com", REMOTE_ADDR="192.0.2.7")
    assert status == 429 and body["code"] == 429
    assert login(client, "a9@example.com", REMOTE_ADDR="192.0.2.8")[0] == 200


def test_login_fails_closed_without_redis(compat, registered, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    status, body, headers = login(compat(), "ops@example.com")
    assert status == 503 and body["code"] == 503 and headers["Retry-After"]
    assert mail.outbox == []


def test_bad_input_is_named(compat):
    assert login(compat(), "not-an-address")[1] == {
        "code": 400,
        "msg": "invalid email format: An email address must have an @-sign.",
    }
    status, body, _ = compat().post("/auth/login", {"email": "a@example.com", "login_method": "sms"})
    assert (status, body) == (200, {"code": 400, "msg": "unsupported login_method"})
    assert verify(compat(), "ch_x", "12ab56")[1] == {"code": 400, "msg": "the code must be 6 digits"}


def test_logout_revokes_the_token(compat, registered):
    _, body, _ = login(compat(), "ops@example.com")
    token = verify(compat(), body["data"]["challenge_id"], last_code())[1]["data"]["access_token"]
    status, body, _ = compat(token).post("/auth/logout")
    assert (status, body) == (200, {"code": 0, "msg": "success"})
    status, body, _ = compat(token).get("/agents/me")
    assert status == 401 and body == {"code": 401, "msg": "invalid or expired token"}


def test_old_challenges_are_pruned(compat, registered):
    login(compat(), "ops@example.com")
    LoginChallenge.objects.update(expires_at=timezone.now() - timedelta(days=2))
    assert login_challenges_prune() == 1
