"""Blacklist keywords through the admin (unique case-insensitively; every change invalidates the pipeline's
Redis cache) and agents with their tokens (shown once; revocable)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from items.blacklist_cache import CACHE_KEY, blacklist_keywords
from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Agent, AgentToken, BlacklistKeyword, OutboxEvent
from items.services.blacklist import blacklist_keyword_create
from items.tokens import token_hash
from tests.admin.conftest import messages_of
from tests.factories import make_agent

BL_CHANGELIST = reverse("admin:items_blacklistkeyword_changelist")
BL_ADD = reverse("admin:items_blacklistkeyword_add")


@pytest.fixture
def warm_cache(db, redis_client):
    """The pipeline has read the blacklist: its cache is warm."""
    blacklist_keywords()
    assert redis_client.exists(CACHE_KEY)
    return redis_client


def test_adding_a_keyword_stores_it_lower_cased_and_invalidates_the_cache(
    mod_client, warm_cache, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = mod_client.post(BL_ADD, {"keyword": "  Crypto Giveaway ", "enabled": "on"})

    assert response.status_code == 302
    assert BlacklistKeyword.objects.get().keyword == "crypto giveaway"
    assert not warm_cache.exists(CACHE_KEY)
    assert blacklist_keywords() == ["crypto giveaway"]


def test_a_keyword_differing_only_in_case_is_refused(mod_client, db):
    blacklist_keyword_create(keyword="casino")

    response = mod_client.post(BL_ADD, {"keyword": "CASINO", "enabled": "on"})

    assert response.status_code == 200
    assert "already on the blacklist" in response.content.decode()
    assert BlacklistKeyword.objects.count() == 1


def test_editing_a_keyword_invalidates_the_cache(mod_client, warm_cache, django_capture_on_commit_callbacks):
    record = blacklist_keyword_create(keyword="casino")
    blacklist_keywords()
    assert warm_cache.exists(CACHE_KEY)

    with django_capture_on_commit_callbacks(execute=True):
        mod_client.post(reverse("admin:items_blacklistkeyword_change", args=[record.pk]), {"keyword": "Casinos"})

    record.refresh_from_db()
    assert (record.keyword, record.enabled) == ("casinos", False)
    assert not warm_cache.exists(CACHE_KEY)
    assert blacklist_keywords() == []


def test_deleting_keywords_invalidates_the_cache(mod_client, warm_cache, django_capture_on_commit_callbacks):
    one = blacklist_keyword_create(keyword="one")
    two = blacklist_keyword_create(keyword="two")
    three = blacklist_keyword_create(keyword="three")

    blacklist_keywords()
    with django_capture_on_commit_callbacks(execute=True):
        mod_client.post(reverse("admin:items_blacklistkeyword_delete", args=[one.pk]), {"post": "yes"})
    assert not warm_cache.exists(CACHE_KEY)

    blacklist_keywords()
    with django_capture_on_commit_callbacks(execute=True):
        mod_client.post(
            BL_CHANGELIST, {"action": "delete_selected", "_selected_action": [two.pk, three.pk], "post": "yes"}
        )
    assert not warm_cache.exists(CACHE_KEY)
    assert BlacklistKeyword.objects.count() == 0


def test_disable_action_invalidates_the_cache(mod_client, warm_cache, django_capture_on_commit_callbacks):
    record = blacklist_keyword_create(keyword="casino")
    blacklist_keywords()

    with django_capture_on_commit_callbacks(execute=True):
        response = mod_client.post(
            BL_CHANGELIST, {"action": "disable_keywords", "_selected_action": [record.pk]}, follow=True
        )

    assert "Disabled 1 blacklist keyword." in messages_of(response)
    assert not warm_cache.exists(CACHE_KEY)
    assert blacklist_keywords() == []


# --- agents and tokens -----------------------------------------------------------------------------------


def test_creating_an_agent_shows_its_token_once(mod_client):
    response = mod_client.post(reverse("admin:items_agent_add"), {"name": "Weather bot", "bio": "forecasts"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    agent = Agent.objects.get(name="Weather bot")
    [issued] = response.context["issued"]
    assert AgentToken.objects.get(agent=agent).token_hash == token_hash(issued.token)
    assert issued.token in response.content.decode()

    page = mod_client.get(reverse("admin:items_agent_change", args=[agent.pk])).content.decode()
    assert issued.token not in page  # never again
    assert issued.token[:8] in page  # only its prefix
    assert not messages_of(mod_client.get(reverse("admin:items_agent_changelist")))


def test_issue_token_action_shows_the_new_token(mod_client):
    agent, _ = make_agent()

    response = mod_client.post(
        reverse("admin:items_agent_changelist"), {"action": "issue_tokens", "_selected_action": [agent.pk]}
    )

    [issued] = response.context["issued"]
    assert issued.record.agent_id == agent.pk
    assert issued.token in response.content.decode()
    assert agent.tokens.filter(revoked_at__isnull=True).count() == 2


def test_revoke_tokens_action_reports_counts_and_refusals(mod_client):
    agent, _ = make_agent()
    token = agent.tokens.get()
    url = reverse("admin:items_agenttoken_changelist")

    first = mod_client.post(url, {"action": "revoke_tokens", "_selected_action": [token.pk]}, follow=True)
    second = mod_client.post(url, {"action": "revoke_tokens", "_selected_action": [token.pk]}, follow=True)

    assert "Revoked 1 agent token." in messages_of(first)
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert "already revoked" in " ".join(messages_of(second))


def test_a_revoked_token_no_longer_authenticates(mod_client, client):
    agent, secret = make_agent()
    mod_client.post(
        reverse("admin:items_agent_changelist"), {"action": "revoke_all_tokens", "_selected_action": [agent.pk]}
    )
    response = client.get("/api/v1/items", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 401


def test_moderators_cannot_make_or_impersonate_the_official_agent(mod_client):
    official = Agent.objects.get(is_official=True)  # created by a migration
    response = mod_client.post(
        reverse("admin:items_agent_changelist"), {"action": "issue_tokens", "_selected_action": [official.pk]}
    )
    assert response.status_code == 302
    assert not official.tokens.exists()
    page = mod_client.get(reverse("admin:items_agent_change", args=[official.pk])).content.decode()
    assert 'name="is_official"' not in page  # shown read-only


def test_an_agent_gets_an_optional_unique_email_for_the_clients_login(admin_client):
    # Setting a login e-mail is identity: a user with items.change_agent_identity (here a superuser).
    admin_client.post(reverse("admin:items_agent_add"), {"name": "Mail bot", "email": "Bot@Example.com"})
    admin_client.post(reverse("admin:items_agent_add"), {"name": "No mail"})
    assert Agent.objects.get(name="Mail bot").email == "bot@example.com"  # its canonical form
    assert Agent.objects.get(name="No mail").email is None  # several agents may have none
    # In another case, or in full-width letters (U+FF42 ...), it is the same address.
    for copy in ("bot@example.COM", "\uff42\uff4f\uff54@example.com"):
        response = admin_client.post(reverse("admin:items_agent_add"), {"name": "Copy", "email": copy})
        assert response.status_code == 200 and not Agent.objects.filter(name="Copy").exists()
        assert "Another agent already has this email address." in response.content.decode()


def test_the_agent_form_names_what_is_wrong_with_an_address(admin_client):
    # A dotless i (U+0131) before the @ is not folded into an "i": refused, with the reason.
    response = admin_client.post(reverse("admin:items_agent_add"), {"name": "Dotless", "email": "b\u0131t@example.com"})
    assert response.status_code == 200 and not Agent.objects.filter(name="Dotless").exists()
    assert "Internationalized characters before the @-sign are not supported" in response.content.decode()


def test_a_moderator_cannot_give_a_new_agent_a_login_email(mod_client):
    """The add page shows the new agent's token: with an e-mail of the moderator's choosing, its owner would later
    log in to an account the moderator holds a token for. The field is read-only, and a forged one is ignored."""
    page = mod_client.get(reverse("admin:items_agent_add")).content.decode()
    assert 'name="email"' not in page
    response = mod_client.post(reverse("admin:items_agent_add"), {"name": "Trap", "email": "victim@corp-mail.com"})
    assert response.status_code == 200  # the page that shows the new agent's token once
    assert Agent.objects.get(name="Trap").email is None


def _agent_form(agent: Agent, **changes) -> dict:
    """The agent's change form as the admin renders it (no token rows to edit), with `changes` applied."""
    data = {
        "name": agent.name,
        "email": agent.email or "",
        "is_active": "on" if agent.is_active else "",
        "bio": agent.bio,
        "offers": agent.offers,
        "seeks": agent.seeks,
        "tokens-TOTAL_FORMS": "0",
        "tokens-INITIAL_FORMS": "0",
        "tokens-MIN_NUM_FORMS": "0",
        "tokens-MAX_NUM_FORMS": "1000",
        **changes,
    }
    return {key: value for key, value in data.items() if value != ""}


def test_a_moderators_profile_edit_is_announced_like_the_agents_own(mod_client):
    agent, _ = make_agent("scout")
    url = reverse("admin:items_agent_change", args=[agent.pk])
    response = mod_client.post(url, _agent_form(agent, bio="I index GPU offers", seeks="cheap H100 hours"))
    assert response.status_code == 302, response.content.decode()[-2000:]
    agent.refresh_from_db()
    assert (agent.bio, agent.seeks) == ("I index GPU offers", "cheap H100 hours")
    event = OutboxEvent.objects.get(stream=STREAM_PROFILE_UPDATE)
    assert event.event_type == PROFILE_UPDATED and event.subject == str(agent.pk)
    assert json.loads(event.envelope["data"]) == {
        "agent_id": str(agent.pk),
        "changed": ["bio", "seeks"],
        "profile_version": agent.updated_at.isoformat(),
    }

    # A rename is a profile change too (and keeps the name key); deactivating is not announced.
    mod_client.post(url, _agent_form(agent, name="Scout Two", is_active=""))
    agent.refresh_from_db()
    assert (agent.name, agent.is_active) == ("Scout Two", False)
    changed = [json.loads(e.envelope["data"])["changed"] for e in OutboxEvent.objects.order_by("pk")]
    assert changed == [["bio", "seeks"], ["name"]]

    # Saving the form unchanged announces nothing.
    mod_client.post(url, _agent_form(agent))
    assert OutboxEvent.objects.filter(stream=STREAM_PROFILE_UPDATE).count() == 2


def test_a_name_taken_in_the_admin_is_refused_on_the_form(mod_client):
    make_agent("Atlas")
    agent, _ = make_agent("scout")
    response = mod_client.post(reverse("admin:items_agent_change", args=[agent.pk]), _agent_form(agent, name="ATLAS"))
    assert response.status_code == 200
    assert "already taken" in response.content.decode()
    agent.refresh_from_db()
    assert agent.name == "scout" and not OutboxEvent.objects.filter(stream=STREAM_PROFILE_UPDATE).exists()
