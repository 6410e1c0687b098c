"""Login limits (the lockout finding): one client asking codes for an address cannot lock its owner out, since
the resend wait and the code budget count per (address, client) and only a much higher ceiling counts the
address alone; the buckets slide, and Retry-After is the real wait, not the end of a clock hour."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from items.services.agents import agent_create
from tests.items.compat.test_login import last_code, login, verify

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    return agent_create(name="alice", email="alice@gmail.com")


def test_one_client_cannot_lock_the_address_out(compat, alice, settings):
    settings.LOGIN_RESEND_SECONDS = 0
    per_client = settings.LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR
    assert per_client < settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR
    attacker = [login(compat(), "alice@gmail.com", REMOTE_ADDR="203.0.113.9") for _ in range(per_client + 3)]
    assert [status for status, _, _ in attacker] == [200] * per_client + [429] * 3
    assert "too many codes for this address from this client" in attacker[-1][1]["msg"]
    # The refused requests spent nothing of the address's own budget: its owner still gets a code.
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="198.51.100.4")[0] == 200


def test_the_resend_wait_is_per_client(compat, alice):
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="203.0.113.9")[0] == 200
    status, body, _ = login(compat(), "alice@gmail.com", REMOTE_ADDR="203.0.113.9")
    assert status == 429 and "just now" in body["msg"]
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="198.51.100.4")[0] == 200  # someone else: not held


def test_a_whole_ipv6_64_is_one_client(compat, alice, settings):
    settings.LOGIN_RESEND_SECONDS = 0
    settings.LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR = 2
    for n in range(2):
        assert login(compat(), "alice@gmail.com", REMOTE_ADDR=f"2001:db8:0:1::{n + 1}")[0] == 200
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="2001:db8:0:1::99")[0] == 429
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="2001:db8:0:2::1")[0] == 200


def test_retry_after_is_the_real_wait_and_the_limit_slides(compat, alice, settings, redis_client):
    settings.LOGIN_RESEND_SECONDS = 0
    settings.LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR = 4  # one code back every 900 s
    for _ in range(4):
        assert login(compat(), "alice@gmail.com")[0] == 200
    status, body, headers = login(compat(), "alice@gmail.com")
    assert status == 429 and 890 <= int(headers["Retry-After"]) <= 900
    assert body["msg"].endswith(f"retry in {headers['Retry-After']} s")
    # 900 s later (the bucket's arrival time moved back) one code is allowed, and only one.
    [key] = redis_client.keys("ratelimit:{login:*}:client:*")
    redis_client.set(key, int(redis_client.get(key)) - 900_000, px=3_600_000)
    assert login(compat(), "alice@gmail.com")[0] == 200
    assert login(compat(), "alice@gmail.com")[0] == 429


def test_no_address_appears_in_a_rate_limit_key(compat, alice, redis_client):
    login(compat(), "alice@gmail.com", REMOTE_ADDR="203.0.113.9")
    keys = redis_client.keys("ratelimit:*")
    assert keys and not any("alice" in key or "gmail" in key or "203.0.113" in key for key in keys)


def test_clear_login_throttle_lifts_an_address_and_a_client(compat, alice, settings):
    settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR = 1
    settings.LOGIN_REQUESTS_PER_IP_PER_HOUR = 2
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="203.0.113.9")[0] == 200
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="198.51.100.4")[0] == 429  # the address's ceiling
    call_command("clear_login_throttle", email="ALICE@gmail.com", stdout=StringIO())  # any form of it
    assert login(compat(), "alice@gmail.com", REMOTE_ADDR="198.51.100.4")[0] == 200
    assert login(compat(), "bob@example.com", REMOTE_ADDR="203.0.113.9")[0] == 200  # the client's 2nd of 2
    assert login(compat(), "carol@example.com", REMOTE_ADDR="203.0.113.9")[1]["msg"].startswith("too many login")
    call_command("clear_login_throttle", ip="203.0.113.9", stdout=StringIO())
    assert login(compat(), "carol@example.com", REMOTE_ADDR="203.0.113.9")[0] == 200
    with pytest.raises(CommandError, match="--email: invalid email format"):
        call_command("clear_login_throttle", email="not-an-address")


def test_codes_asked_from_many_clients_do_not_multiply_the_guesses_at_one_address(compat, alice, settings):
    settings.LOGIN_RESEND_SECONDS, settings.LOGIN_REQUESTS_PER_IP_PER_HOUR = 0, 0
    budget = settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_HOUR
    per_code = settings.LOGIN_CODE_MAX_ATTEMPTS
    settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR = per_code  # each client spends a whole code
    clients = [f"203.0.113.{n}" for n in range(1, budget // per_code + 2)]
    challenges = [login(compat(), "alice@gmail.com", REMOTE_ADDR=ip)[1]["data"]["challenge_id"] for ip in clients]
    wrong = [
        verify(compat(), challenge, "000000", REMOTE_ADDR=ip)
        for ip, challenge in zip(clients[:-1], challenges[:-1], strict=True)
        for _ in range(per_code)
    ]
    assert all(body["code"] == 400 for _, body, _ in wrong[:budget])
    # The address's attempts are spent: even the right code of a fresh challenge waits, with the real wait.
    status, body, headers = verify(compat(), challenges[-1], last_code(), REMOTE_ADDR=clients[-1])
    assert status == 429 and "too many code attempts for this address" in body["msg"], body
    assert 0 < int(headers["Retry-After"]) <= 3600 // budget


def test_one_client_failing_codes_cannot_lock_the_owner_out(compat, alice, settings):
    """Issue 44, item 1: one client asking codes and failing them spent the address's attempts, and its owner,
    with the right code from another network, got 429. The client's own budget stops it first, and attempts it
    refuses spend nothing of the address's ceiling."""
    settings.LOGIN_RESEND_SECONDS = 0
    per_client = settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR
    ceiling = settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_HOUR
    assert per_client > 0 and per_client + settings.LOGIN_CODE_MAX_ATTEMPTS <= ceiling  # the owner keeps a code's worth
    attacker = "203.0.113.9"
    answers = []
    for _ in range(settings.LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR):  # about 12 requests an hour, as reported
        challenge = login(compat(), "alice@gmail.com", REMOTE_ADDR=attacker)[1]["data"]["challenge_id"]
        answers += [verify(compat(), challenge, "000000", REMOTE_ADDR=attacker)[1] for _ in range(2)]
    assert [answer["code"] for answer in answers[:per_client]] == [400] * per_client
    assert all(a["code"] == 429 for a in answers[per_client:]) and len(answers) > per_client
    assert "too many code attempts for this address from this client" in answers[-1]["msg"]
    # The owner, on another network, with the code just mailed to them, logs in.
    challenge = login(compat(), "alice@gmail.com", REMOTE_ADDR="198.51.100.4")[1]["data"]["challenge_id"]
    status, body, _ = verify(compat(), challenge, last_code(), REMOTE_ADDR="198.51.100.4")
    assert status == 200 and body["code"] == 0, body


def test_the_owners_slips_are_forgiven_once_the_mailbox_is_proven(compat, alice, settings):
    settings.LOGIN_RESEND_SECONDS = 0
    per_client = settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR
    challenge = login(compat(), "alice@gmail.com")[1]["data"]["challenge_id"]
    for _ in range(per_client - 1):
        assert verify(compat(), challenge, "000000")[1]["code"] == 400
    assert verify(compat(), challenge, last_code())[0] == 200
    challenge = login(compat(), "alice@gmail.com")[1]["data"]["challenge_id"]
    assert [verify(compat(), challenge, "000000")[1]["code"] for _ in range(per_client)] == [400] * per_client
