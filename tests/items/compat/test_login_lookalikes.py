"""Look-alike letters in e-mail login (the takeover finding): an address typed with a dotless i, a Kelvin sign,
full-width or Cyrillic letters, or in another case, either is the agent's own address (its canonical form is
equal: then the code goes to the agent's STORED address, never to the text typed) or is another address that
never reaches that agent, with its own rate limits; or it is refused with the reason."""

from __future__ import annotations

import pytest
from django.core import mail
from django.db import IntegrityError, transaction

from items.models import Agent, LoginChallenge
from items.services.agents import agent_account_update, agent_create, agent_token_create
from items.services.login import code_hash
from tests.items.compat.test_login import last_code, login, verify

pytestmark = pytest.mark.django_db

DOTLESS_I, KELVIN, CYRILLIC_A = "\u0131", "\u212a", "\u0430"
CYRILLIC_COPE = "\u0441\u043e\u0440\u0435"  # "cope" in Cyrillic letters only
FULLWIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


@pytest.fixture
def alice(db):
    return agent_create(name="alice", email="alice@gmail.com")


@pytest.fixture
def keeper(django_user_model):
    """A user allowed to change an agent's login e-mail (items.change_agent_identity)."""
    return django_user_model.objects.create_superuser("keeper", "keeper@example.org", "pw")


@pytest.fixture
def kate(db):
    return agent_create(name="kate", email="Kate@Example.com")


@pytest.mark.parametrize(
    ("typed", "who"),
    [
        ("ALICE@Gmail.COM", "alice"),
        ("alice@gmail.com".translate(FULLWIDTH), "alice"),
        (f"{KELVIN}ATE@example.com", "kate"),
        ("kate@EXAMPLE.com".translate(FULLWIDTH), "kate"),
    ],
)
def test_a_variant_of_the_same_address_logs_in_with_the_code_mailed_to_the_stored_address(
    compat, alice, kate, typed, who
):
    agent = {"alice": alice, "kate": kate}[who]
    status, body, _ = login(compat(), typed)
    assert status == 200 and body["code"] == 0
    assert mail.outbox[-1].to == [agent.email]  # the stored address, whatever was typed
    _status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert body["code"] == 0 and body["data"]["agent_id"] == str(agent.pk)


def test_the_dotless_i_domain_is_another_address_and_never_reaches_alice(compat, alice, settings):
    """The reported attack: alice@gma<dotless i>l.com got a code mailed to alice@xn--gmal-nza.com that logged
    in as Alice (SQL UPPER() folds the dotless i into I)."""
    status, body, _ = login(compat(), f"alice@gma{DOTLESS_I}l.com")
    assert status == 200  # the same answer as for any address
    challenge = LoginChallenge.objects.get(challenge_id=body["data"]["challenge_id"])
    assert challenge.agent is None and challenge.email == "alice@xn--gmal-nza.com"
    assert mail.outbox[-1].to == ["alice@xn--gmal-nza.com"] and "no login code was issued" in mail.outbox[-1].body
    # Even the right code cannot log in: no agent holds that address and sign-up is closed.
    LoginChallenge.objects.filter(pk=challenge.pk).update(code_hash=code_hash(challenge.challenge_id, "123456"))
    assert verify(compat(), challenge.challenge_id, "123456")[1]["code"] == 400
    # With open sign-up it is a new agent of its own, not Alice.
    settings.EIGENFLUX_OPEN_SIGNUP = True
    _, body, _ = login(compat(), f"alice@gma{DOTLESS_I}l.com", REMOTE_ADDR="10.0.0.2")
    _status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert body["code"] == 0 and body["data"]["is_new_agent"] is True
    assert body["data"]["agent_id"] != str(alice.pk)
    assert Agent.objects.get(pk=body["data"]["agent_id"]).email == "alice@xn--gmal-nza.com"


def test_a_whole_script_cyrillic_domain_is_another_address_with_its_own_limits(compat, settings):
    settings.EIGENFLUX_OPEN_SIGNUP = True
    settings.LOGIN_RESEND_SECONDS = 0
    settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR = 1
    bob = agent_create(name="bob", email="bob@cope.com")
    assert login(compat(), "bob@cope.com")[0] == 200
    assert login(compat(), "BOB@cope.com", REMOTE_ADDR="10.0.0.2")[0] == 429  # the same address: its limit
    assert login(compat(), "bob@cope.com".translate(FULLWIDTH), REMOTE_ADDR="10.0.0.3")[0] == 429
    status, body, _ = login(compat(), f"bob@{CYRILLIC_COPE}.com", REMOTE_ADDR="10.0.0.4")
    assert status == 200  # another address: a budget of its own
    assert mail.outbox[-1].to == ["bob@xn--e1argc.com"]
    _status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert body["code"] == 0 and body["data"]["agent_id"] != str(bob.pk)


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        (f"al{DOTLESS_I}ce@gmail.com", "Internationalized characters before the @-sign"),
        (f"{CYRILLIC_A}lice@gmail.com", "Internationalized characters before the @-sign"),
        (f"alice@gm{CYRILLIC_A}il.com", "mixes Latin and Cyrillic letters"),
    ],
)
def test_look_alike_letters_that_are_neither_are_refused_with_the_reason(compat, alice, typed, reason):
    status, body, _ = login(compat(), typed)
    assert status == 200 and body["code"] == 400 and reason in body["msg"]
    assert mail.outbox == [] and not LoginChallenge.objects.exists()


def test_a_code_stops_working_when_the_agent_no_longer_holds_the_address_it_went_to(compat, alice, keeper):
    _, body, _ = login(compat(), "alice@gmail.com")
    agent_account_update(agent=alice, actor=keeper, email="alice@example.org")
    _status, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    assert body["code"] == 400 and "invalid or expired code" in body["msg"]


def test_the_database_holds_only_canonical_unique_addresses(alice, keeper):
    with pytest.raises(IntegrityError, match="agent_email_canonical"), transaction.atomic():
        Agent.objects.filter(pk=alice.pk).update(email="Alice@gmail.com")  # a writer that forgot the rule
    with pytest.raises(IntegrityError, match="agent_email_unique"), transaction.atomic():
        Agent.objects.create(name="copy", name_key="copy", name_shape_key="copy", email="alice@gmail.com")
    with pytest.raises(ValueError, match="invalid email format"):
        agent_account_update(
            agent=alice, actor=keeper, email="al\u0131ce@gmail.com"
        )  # the services refuse with the reason


def test_correcting_an_address_ends_the_sessions_its_old_mailbox_opened(compat, alice, keeper):
    _, body, _ = login(compat(), "alice@gmail.com")
    _, body, _ = verify(compat(), body["data"]["challenge_id"], last_code())
    mailbox_token = body["data"]["access_token"]
    operator_token = agent_token_create(agent=alice, label="operator").token
    assert compat(mailbox_token).get("/agents/me")[0] == 200
    agent_account_update(agent=alice, actor=keeper, email="alice@example.org")
    assert compat(mailbox_token).get("/agents/me")[0] == 401  # it proved the old mailbox, not the new one
    assert compat(operator_token).get("/agents/me")[0] == 200
