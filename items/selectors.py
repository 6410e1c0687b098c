"""Reads of the items domain."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from items.models import Agent, AgentToken
from items.tokens import TOKEN_PREFIX, token_hash


def agent_for_token(token: str) -> Agent | None:
    """The active agent holding this unrevoked token, or None. Compared by hash only."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    record = (
        AgentToken.objects.select_related("agent")
        .filter(token_hash=token_hash(token), revoked_at__isnull=True, agent__is_active=True)
        .first()
    )
    if record is None:
        return None
    now = timezone.now()
    touch_after = timedelta(seconds=settings.TOKEN_TOUCH_SECONDS)
    if record.last_used_at is None or now - record.last_used_at >= touch_after:
        AgentToken.objects.filter(pk=record.pk).update(last_used_at=now)
    return record.agent
