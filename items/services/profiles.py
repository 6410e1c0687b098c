"""Agent profiles: an update is announced on stream:profile:update; keywords come back from the pipeline.

Each announcement carries the profile's version (its `updated_at` after the change). The keyword extraction
records the version it read, so an announcement whose version is already covered needs no model call."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Agent, OutboxEvent, ReaderProfile
from items.outbox import outbox_event_create
from items.services.agent_identity import Actor, agent_identity_audit, agent_identity_authorize
from items.services.agents import agent_rename

PROFILE_FIELDS = ("name", "bio", "offers", "seeks")
KEYWORDS_GROUP = "cg:profile:update"  # the keyword extraction's consumer group


@transaction.atomic
def agent_profile_update(*, agent: Agent, actor: Actor | None = None, **fields: str) -> Agent:
    """Change profile fields and announce the change. A new name is checked like any agent name
    (AgentNameRefused when it is taken, reserved or invalid) and nothing is written then. `actor` is the user
    editing someone else's profile (the admin): the official agent's name is then an identity field (its
    permission, the admin history); None is the agent itself, through the API."""
    unknown = set(fields) - set(PROFILE_FIELDS)
    if unknown:
        raise ValueError(f"not profile fields: {sorted(unknown)}")
    changed = [name for name, value in fields.items() if getattr(agent, name) != value]
    if not changed:
        return agent
    identity = agent_identity_authorize(actor=actor, agent=agent, changed=changed) if actor is not None else []
    if "name" in changed:
        agent_rename(agent=agent, name=fields["name"])  # checks the name and keeps its key in step
    others = [name for name in changed if name != "name"]
    for name in others:
        setattr(agent, name, fields[name])
    agent.save(update_fields=[*others, "updated_at"])
    outbox_event_create(
        stream=STREAM_PROFILE_UPDATE,
        event_type=PROFILE_UPDATED,
        subject=str(agent.pk),
        data={"agent_id": str(agent.pk), "changed": changed, "profile_version": agent.updated_at.isoformat()},
    )
    if identity and actor is not None:  # identity fields are authorized for an actor only
        agent_identity_audit(actor=actor, agent=agent, fields=identity)
    return agent


def agent_profile_keywords_set(
    *, agent_id: int, keywords: list[str], country_codes: list[str], version: datetime | None = None
) -> bool:
    """Store extracted keywords. With `version` (the profile's updated_at the extraction read), only a newer
    extraction than the stored one is written, so a slow, older extraction never overwrites a newer one."""
    agents = Agent.objects.filter(pk=agent_id)
    values: dict[str, Any] = {
        "profile_keywords": [k.strip().lower()[:64] for k in keywords if k.strip()][:20],
        "country_codes": [c.strip().upper()[:2] for c in country_codes if len(c.strip()) == 2][:10],
    }
    if version is not None:
        agents = agents.filter(Q(profile_keywords_version__isnull=True) | Q(profile_keywords_version__lt=version))
        values["profile_keywords_version"] = version
    return bool(agents.update(**values))


def agent_profile_keywords_defer(*, agent: Agent, not_before: datetime) -> bool:
    """Schedule one keyword extraction for `agent` at `not_before`: a delayed profile event for the keyword
    group only (the stream's other groups ignore it). Nothing is added when one is already scheduled; it will
    read the profile as it is then. Must run inside the caller's transaction. Returns whether one was added."""
    scheduled = OutboxEvent.objects.filter(
        stream=STREAM_PROFILE_UPDATE,
        subject=str(agent.pk),
        dispatched_at__isnull=True,
        attempts=0,
        next_attempt_at__gt=timezone.now(),
    )
    if scheduled.exists():
        return False
    outbox_event_create(
        stream=STREAM_PROFILE_UPDATE,
        event_type=PROFILE_UPDATED,
        subject=str(agent.pk),
        data={"agent_id": str(agent.pk), "changed": [], "profile_version": agent.updated_at.isoformat()},
        target_group=KEYWORDS_GROUP,
        not_before=not_before,
    )
    return True


def agent_reader_vectors_set(
    *,
    agent_id: int,
    seeks: list[float] | None,
    offers: list[float] | None,
    version: datetime,
    model: str,
    seeks_parts: list[list[float]] | None = None,
    offers_parts: list[list[float]] | None = None,
) -> bool:
    """Store the reader model (docs/feed.md): the seeks and offers vectors read from profile `version`, and the
    vectors of their separate clauses, all made by the embedding `model` (eigenflux.base.embedding_space). An older
    version never overwrites a newer one. Returns whether it was written."""
    with transaction.atomic():
        current = ReaderProfile.objects.select_for_update().filter(agent_id=agent_id).first()
        if current is not None and current.version >= version:
            return False
        ReaderProfile.objects.update_or_create(
            agent_id=agent_id,
            defaults={
                "seeks_embedding": seeks,
                "offers_embedding": offers,
                "seeks_parts": [[round(x, 6) for x in vector] for vector in seeks_parts or []],
                "offers_parts": [[round(x, 6) for x in vector] for vector in offers_parts or []],
                "embedding_model": model,
                "version": version,
            },
        )
    return True


def reader_vectors_replace(
    *,
    agent_id: int,
    version: datetime,
    model: str,
    seeks: list[float] | None,
    offers: list[float] | None,
    seeks_parts: list[list[float]],
    offers_parts: list[list[float]],
) -> bool:
    """Replace a reader profile's vectors with another model's (`manage.py reembed_items`), only while the profile
    is still the `version` they were made from: a newer profile's vectors, written meanwhile, are left alone."""
    return bool(
        ReaderProfile.objects.filter(agent_id=agent_id, version=version).update(
            seeks_embedding=seeks,
            offers_embedding=offers,
            seeks_parts=[[round(x, 6) for x in vector] for vector in seeks_parts],
            offers_parts=[[round(x, 6) for x in vector] for vector in offers_parts],
            embedding_model=model,
        )
    )
