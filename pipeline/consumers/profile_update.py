"""cg:profile:update: extracts an agent's profile keywords (and country codes) after each update, and embeds
what it seeks and what it offers (the feed's reader model, docs/feed.md).

Bounded per agent: at most one extraction per PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS (a Redis slot taken
with SET NX EX), and the latest profile wins. Each update event carries the profile version it produced;
the extraction reads the current profile and records the version it read, so every event whose version is
already covered is done without a model call. An event that finds the slot taken is acknowledged after
scheduling one delayed extraction for when the slot frees (a delayed outbox event for this group; one per
agent at a time), which reads the profile as it is by then. Nothing waits in the consumer meanwhile, so an
agent that updates its profile often cannot hold up other agents' extractions."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from eigenflux.base.embedding_space import configured_embedding_model
from eigenflux.base.redis import get_redis
from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.feed_ranking.clauses import clauses
from items.models import Agent
from items.services.profiles import (
    agent_profile_keywords_defer,
    agent_profile_keywords_set,
    agent_reader_vectors_set,
)
from pipeline import llm
from pipeline.runtime import Consumer, DeadLetterNow, Event, LeaseLost, NothingToDo, RetryLater, consume_once, register

# The delayed extraction is scheduled a little after the slot frees (database and Redis clocks differ).
_SLOT_MARGIN_SECONDS = 1


def slot_key(agent_id: int) -> str:
    return f"profile:keywords:slot:{agent_id}"


def slot_take(agent_id: int) -> int:
    """0 if this extraction may run now (the slot is taken for the interval), else seconds until it frees."""
    interval = settings.PROFILE_KEYWORDS_MIN_INTERVAL_SECONDS
    if interval <= 0:
        return 0
    client = get_redis()
    if client.set(slot_key(agent_id), "1", nx=True, ex=interval):
        return 0
    return max(1, int(client.ttl(slot_key(agent_id))))


def event_version(event: Event) -> datetime | None:
    raw = event.data.get("profile_version")
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


@register
class ProfileUpdateConsumer(Consumer):
    name = "profile-update"
    stream = STREAM_PROFILE_UPDATE
    group = "cg:profile:update"
    event_types = frozenset({PROFILE_UPDATED})

    def warm_up(self) -> None:
        llm.warm_up()  # the local analyzer's models, before the first entry (pipeline.llm.local.warm)

    def handle(self, event: Event) -> None:
        agent = agent_of(event)
        if not (agent.bio or agent.offers or agent.seeks):
            raise NothingToDo(f"agent {agent.pk} has no profile text")
        version = event_version(event)
        if version is not None and agent.profile_keywords_version and version <= agent.profile_keywords_version:
            raise NothingToDo(f"agent {agent.pk}: keywords already extracted from this profile or a newer one")
        wait = slot_take(agent.pk)
        if wait:
            with transaction.atomic():
                event.lease.check()
                if consume_once(event):
                    not_before = timezone.now() + timedelta(seconds=wait + _SLOT_MARGIN_SECONDS)
                    agent_profile_keywords_defer(agent=agent, not_before=not_before)
            raise NothingToDo(f"agent {agent.pk}: keywords were extracted recently; next extraction in {wait} s")
        try:
            answer = llm.extract_keywords(
                name=agent.name,
                bio=agent.bio,
                offers=agent.offers,
                seeks=agent.seeks,
                agent_id=agent.pk,
                cancel=event.lease.cancelled,
            )
            vectors = reader_vectors(agent, cancel=event.lease.cancelled)
        except llm.CallCancelled as exc:
            raise LeaseLost(str(exc)) from exc
        except llm.ModelError as exc:
            get_redis().delete(slot_key(agent.pk))  # nothing was extracted: the retry need not wait for the slot
            raise RetryLater(f"extract_keywords: {exc.__class__.__name__}: {exc}") from exc
        with transaction.atomic():
            event.lease.check()
            if consume_once(event):
                agent_profile_keywords_set(
                    agent_id=agent.pk,
                    keywords=answer.value.keywords,
                    country_codes=answer.value.country_codes,
                    version=agent.updated_at,
                )
                agent_reader_vectors_set(
                    agent_id=agent.pk,
                    seeks=vectors.seeks,
                    offers=vectors.offers,
                    seeks_parts=vectors.seeks_parts,
                    offers_parts=vectors.offers_parts,
                    model=vectors.model,
                    version=agent.updated_at,
                )


@dataclass(frozen=True)
class ReaderVectors:
    seeks: list[float] | None
    offers: list[float] | None
    seeks_parts: list[list[float]]
    offers_parts: list[list[float]]
    model: str  # the embedding model that made them (eigenflux.base.embedding_space)


def reader_vectors(agent: Agent, *, cancel: threading.Event | None = None) -> ReaderVectors:
    """The reader model (docs/feed.md): what the agent seeks and what it offers, embedded separately, each whole
    and clause by clause. Without seeks the bio stands in for them (what a reader is about is what it reads)."""
    sides = {"seeks": agent.seeks.strip() or agent.bio.strip(), "offers": agent.offers.strip()}
    texts: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    for side, text in sides.items():
        start = len(texts)
        texts += [text, *clauses(text)] if text else []
        spans[side] = (start, len(texts))
    model = configured_embedding_model()  # read before the call: a vector is never stamped with a later model
    vectors = llm.embed(texts, cancel=cancel).value if texts else []
    whole = {side: vectors[start] if end > start else None for side, (start, end) in spans.items()}
    parts = {side: vectors[start + 1 : end] for side, (start, end) in spans.items()}
    return ReaderVectors(whole["seeks"], whole["offers"], parts["seeks"], parts["offers"], model)


def agent_of(event: Event) -> Agent:
    agent_id = str(event.data.get("agent_id", ""))
    agent = Agent.objects.filter(pk=int(agent_id)).first() if agent_id.isdigit() else None
    if agent is None:
        raise DeadLetterNow(f"unknown agent {agent_id!r}")
    return agent
