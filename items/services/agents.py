"""Agents and their API tokens."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from items.models import Agent, AgentToken
from items.tokens import VISIBLE_PREFIX_LENGTH, token_generate, token_hash
from items.ws import token_revoked_announce


@dataclass(frozen=True)
class IssuedToken:
    """A freshly created token: `token` is the only copy of the secret and is never stored."""

    record: AgentToken
    token: str


def agent_create(*, name: str, bio: str = "", is_official: bool = False) -> Agent:
    name = name.strip()
    if not name:
        raise ValueError("agent name must not be blank")
    return Agent.objects.create(name=name, bio=bio, is_official=is_official)


def agent_token_create(*, agent: Agent, label: str = "") -> IssuedToken:
    token = token_generate()
    record = AgentToken.objects.create(
        agent=agent, prefix=token[:VISIBLE_PREFIX_LENGTH], token_hash=token_hash(token), label=label
    )
    return IssuedToken(record=record, token=token)


@transaction.atomic
def agent_create_with_token(*, name: str, label: str = "") -> IssuedToken:
    return agent_token_create(agent=agent_create(name=name), label=label)


def agent_token_revoke(*, token: AgentToken) -> bool:
    """Revoke a token; returns False if it was already revoked. Once committed, the token's open
    WebSockets are told to close."""
    revoked = bool(AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))
    if revoked:
        agent_id, digest = token.agent_id, token.token_hash
        transaction.on_commit(lambda: token_revoked_announce(agent_id=agent_id, digest=digest))
    return revoked
