"""Publishing a broadcast: raw item + processed row (pending) + outbox event, in one transaction."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from eigenflux.base.logs import log_context, trace_id_from_traceparent
from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import Agent, IdempotencyKey, ProcessedItem, RawItem
from items.outbox import outbox_event_create
from items.text import content_hash

log = logging.getLogger(__name__)


class IdempotencyConflict(Exception):
    """The Idempotency-Key was already used with a different request body."""


@dataclass(frozen=True)
class PublishResult:
    item: RawItem
    replayed: bool


def item_publish(
    *,
    author: Agent,
    content: str,
    notes: str = "",
    url: str = "",
    accept_reply: bool | None = None,
    idempotency_key: str | None = None,
) -> PublishResult:
    """Publish a validated broadcast; with an idempotency key, a repeat returns the original item."""
    request_hash = _request_hash(content=content, notes=notes, url=url, accept_reply=accept_reply)
    if idempotency_key:
        existing = _replay(author=author, key=idempotency_key, request_hash=request_hash)
        if existing is not None:
            return PublishResult(item=existing, replayed=True)
    try:
        with transaction.atomic():
            item = RawItem.objects.create(
                author=author,
                content=content,
                notes=notes,
                url=url,
                accept_reply=accept_reply,
                content_hash=content_hash(content),
            )
            ProcessedItem.objects.create(raw=item, author=author)
            if idempotency_key:
                IdempotencyKey.objects.create(
                    agent=author, key=idempotency_key, request_hash=request_hash, raw_item=item
                )
            event = outbox_event_create(
                stream=STREAM_ITEM_PUBLISH,
                event_type=ITEM_PUBLISHED,
                subject=str(item.pk),
                data={"item_id": str(item.pk), "author_id": str(author.pk)},
            )
    except IntegrityError:
        # Two publishes with the same key raced; the other one won and its item is the answer.
        if idempotency_key:
            existing = _replay(author=author, key=idempotency_key, request_hash=request_hash)
            if existing is not None:
                return PublishResult(item=existing, replayed=True)
        raise
    envelope = event.envelope
    with log_context(
        item_id=str(item.pk),
        agent_id=str(author.pk),
        event_id=envelope["id"],
        correlation_id=envelope["correlationid"],
        trace_id=trace_id_from_traceparent(envelope["traceparent"]),
    ):
        log.info("item %s published", item.pk)
    return PublishResult(item=item, replayed=False)


def _replay(*, author: Agent, key: str, request_hash: str) -> RawItem | None:
    record = IdempotencyKey.objects.select_related("raw_item").filter(agent=author, key=key).first()
    if record is None:
        return None
    if record.request_hash != request_hash:
        raise IdempotencyConflict(f"Idempotency-Key {key!r} was already used with a different request body")
    return record.raw_item


def _request_hash(**fields: object) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def idempotency_keys_prune() -> int:
    """Forget Idempotency-Keys older than IDEMPOTENCY_TTL_HOURS (at least 24 h); returns how many."""
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_TTL_HOURS)
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted
