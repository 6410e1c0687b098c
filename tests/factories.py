"""The one place tests make agents and items: through the same services the product uses."""

from __future__ import annotations

import itertools
import re

from eigenflux.base.embedding_space import configured_embedding_model
from items.models import Agent, ItemStatus, ProcessedItem, RawItem
from items.services.agents import agent_create, agent_token_create
from items.services.publish import item_publish

_seq = itertools.count(1)


def make_agent(name: str | None = None) -> tuple[Agent, str]:
    """An agent and a fresh token for it."""
    agent = agent_create(name=name or f"agent-{next(_seq)}")
    return agent, agent_token_create(agent=agent).token


def mailed_login_code(message) -> str:
    """The one-time code in a login mail (its body: the subject never carries it)."""
    return re.search(r"login code is (\d+)", message.body).group(1)


def make_item(author: Agent | None = None, content: str | None = None, **fields) -> RawItem:
    """A published item (pending, with its outbox event), as POST /items/publish would make it."""
    if author is None:
        author, _ = make_agent()
    content = content or f"Broadcast number {next(_seq)}: offering spare GPU hours this weekend."
    return item_publish(author=author, content=content, **fields).item


def make_completed_item(
    author: Agent | None = None,
    content: str | None = None,
    *,
    group_id: int | None = None,
    embedding: list[float] | None = None,
    **fields,
) -> ProcessedItem:
    """A completed item, as the enrichment pipeline would leave it (fields given or plausible defaults)."""
    from django.utils import timezone

    from items.feed_ranking.concepts import item_concepts
    from items.textsearch import search_vector

    raw = make_item(author, content)
    values = {
        "status": ItemStatus.COMPLETED,
        "summary": fields.pop("summary", raw.content[:80]),
        "broadcast_type": fields.pop("broadcast_type", "info"),
        "keywords": fields.pop("keywords", ["gpu"]),
        "domains": fields.pop("domains", ["compute"]),
        "quality": fields.pop("quality", 0.7),
        "analyzer": fields.pop("analyzer", "local"),
        "group_id": group_id or raw.pk,
        "embedding": embedding,
        # Stamped as the pipeline stamps it: made by the embedding configured now (eigenflux.base.embedding_space).
        "embedding_model": fields.pop("embedding_model", configured_embedding_model() if embedding is not None else ""),
        "processed_at": timezone.now(),
        **fields,
    }
    values.setdefault("concepts", item_concepts(raw.content, values["keywords"]))
    ProcessedItem.objects.filter(pk=raw.pk).update(
        **values,
        search_vector=search_vector(summary=values["summary"], keywords=values["keywords"], content=raw.content),
    )
    return ProcessedItem.objects.select_related("raw").get(pk=raw.pk)


def make_held_item(author: Agent | None = None, content: str | None = None, **fields) -> ProcessedItem:
    """An item held for review (status `review`), with its extracted fields and a `held` decision, as the
    pipeline's persist step leaves it: a completed item moved to review, without the search vector."""
    from items.models import DecisionStage, ModerationDecision

    category = fields.pop("held_category", "safety_risk")
    item = make_completed_item(author, content, **fields)
    ProcessedItem.objects.filter(pk=item.pk).update(status=ItemStatus.REVIEW, search_vector=None)
    ModerationDecision.objects.create(
        item=item, actor="pipeline", stage=DecisionStage.REVIEW, verdict="held", category=category, reason="held"
    )
    return ProcessedItem.objects.select_related("raw").get(pk=item.pk)


def outbox_stream_event(row, *, group: str, delivery_count: int = 1):
    """The stream entry an outbox row becomes, as a consumer of `group` receives it (handled in-process, without
    the relay and Redis: for tests of a handler's effects; the relay's own path is tested through run_pipeline)."""
    import json

    from pipeline.runtime.event import Event, Lease

    envelope = dict(row.envelope)
    return Event(
        stream=row.stream,
        group=group,
        message_id=f"{row.pk}-0",
        delivery_count=delivery_count,
        envelope=envelope,
        id=envelope["id"],
        type=envelope["type"],
        subject=envelope["subject"],
        data=json.loads(envelope["data"]),
        replay=False,
        correlation_id=envelope.get("correlationid", ""),
        causation_id="",
        traceparent="",
        lease=Lease(),
    )
