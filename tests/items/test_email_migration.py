"""Migration 0020 on addresses stored before the canonical rule: each becomes canonical; where several agents'
addresses share a canonical form the oldest keeps it; the others, and addresses with no canonical form, are
cleared and every clearing is printed and logged; pending login codes are expired."""

from __future__ import annotations

import importlib
import logging
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from items.models import Agent, LoginChallenge
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

migration = importlib.import_module("items.migrations.0020_agent_email_canonical")


def _as_before_0020(emails: list[str]) -> list[Agent]:
    """Agents created a minute apart, oldest first, holding `emails` as the old code stored them (the new
    constraints are dropped inside this test's transaction, which rolls back)."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE items_agent DROP CONSTRAINT agent_email_canonical")
        cursor.execute("ALTER TABLE items_agent DROP CONSTRAINT agent_email_unique")
    agents = []
    start = timezone.now() - timedelta(days=1)
    for n, email in enumerate(emails):
        agent, _ = make_agent(f"old-{n}")
        Agent.objects.filter(pk=agent.pk).update(email=email, created_at=start + timedelta(minutes=n))
        agents.append(agent)
    return agents


def test_collisions_keep_the_oldest_and_every_clearing_is_reported(capsys, caplog):
    emails = ["Alice@Gmail.com", "\uff41lice@gmail.com", "alice@gma\u0131l.com", "b\u0131b@example.com", "Carol@X.org"]
    alice, fullwidth, dotless_domain, dotless_local, carol = _as_before_0020(emails)
    challenge = LoginChallenge.objects.create(
        challenge_id="ch_pending",
        email="alice@gma\u0131l.com",
        agent=alice,
        code_hash="0" * 64,
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    with caplog.at_level(logging.WARNING, logger="items.migrations.email"):
        migration.canonicalise_agent_emails(apps, None)

    agents = [alice, fullwidth, dotless_domain, dotless_local, carol]
    stored = dict(Agent.objects.filter(pk__in=[a.pk for a in agents]).values_list("pk", "email"))
    assert stored == {
        alice.pk: "alice@gmail.com",  # the oldest keeps the address
        fullwidth.pk: None,  # the same canonical address, younger: cleared
        dotless_domain.pk: "alice@xn--gmal-nza.com",  # another domain: kept, canonical
        dotless_local.pk: None,  # no canonical form: cleared
        carol.pk: "carol@x.org",
    }
    printed = capsys.readouterr().out
    assert (
        f"agent #{fullwidth.pk} ('old-1')" in printed
        and f"older agent #{alice.pk} ('old-0'), which keeps it" in printed
    )
    assert f"agent #{dotless_local.pk} ('old-3')" in printed and "Internationalized characters" in printed
    assert printed.count("cleared") == 2
    assert [r.getMessage() for r in caplog.records] == [line.strip() for line in printed.strip().splitlines()]
    challenge.refresh_from_db()
    assert challenge.expires_at <= timezone.now()  # looked up the old way: no longer usable
