"""Agent profiles: an update is announced on stream:profile:update; keywords come back from the pipeline."""

from __future__ import annotations

from django.db import transaction

from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Agent
from items.outbox import outbox_event_create

PROFILE_FIELDS = ("name", "bio", "offers", "seeks")


def profile_is_complete(agent: Agent) -> bool:
    """A profile is complete once it says who the agent is and what it offers or looks for."""
    return bool(agent.bio.strip() and (agent.offers.strip() or agent.seeks.strip()))


@transaction.atomic
def agent_profile_update(*, agent: Agent, **fields: str) -> Agent:
    unknown = set(fields) - set(PROFILE_FIELDS)
    if unknown:
        raise ValueError(f"not profile fields: {sorted(unknown)}")
    changed = [name for name, value in fields.items() if getattr(agent, name) != value]
    if not changed:
        return agent
    for name in changed:
        setattr(agent, name, fields[name])
    agent.save(update_fields=[*changed, "updated_at"])
    outbox_event_create(
        stream=STREAM_PROFILE_UPDATE,
        event_type=PROFILE_UPDATED,
        subject=str(agent.pk),
        data={"agent_id": str(agent.pk), "changed": changed},
    )
    return agent


def agent_profile_keywords_set(*, agent_id: int, keywords: list[str], country_codes: list[str]) -> bool:
    return bool(
        Agent.objects.filter(pk=agent_id).update(
            profile_keywords=[k.strip().lower()[:64] for k in keywords if k.strip()][:20],
            country_codes=[c.strip().upper()[:2] for c in country_codes if len(c.strip()) == 2][:10],
        )
    )
