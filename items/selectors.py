"""Reads of the items domain."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from pgvector.django import CosineDistance

from items.models import Agent, AgentToken, ItemStatus, ProcessedItem, RawItem
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


@dataclass(frozen=True)
class SimilarHit:
    item_id: int
    author_id: int
    group_id: int
    created_at: datetime
    cosine: float


def exact_duplicate_of(item: ProcessedItem) -> RawItem | None:
    """The earliest completed item with the same normalised-content hash within the duplicate window."""
    since = timezone.now() - timedelta(days=settings.DUPLICATE_WINDOW_DAYS)
    return (
        RawItem.objects.filter(
            content_hash=item.raw.content_hash, created_at__gte=since, processed__status=ItemStatus.COMPLETED
        )
        .exclude(pk=item.pk)
        .order_by("created_at")
        .first()
    )


def most_similar(*, embedding, exclude_id: int) -> SimilarHit | None:
    """The completed item nearest by cosine (pgvector HNSW), or None when there is none."""
    row = (
        ProcessedItem.objects.filter(status=ItemStatus.COMPLETED, embedding__isnull=False)
        .exclude(pk=exclude_id)
        .annotate(distance=CosineDistance("embedding", embedding))
        .order_by("distance")
        .values("pk", "author_id", "group_id", "created_at", "distance")
        .first()
    )
    if row is None:
        return None
    return SimilarHit(
        item_id=row["pk"],
        author_id=row["author_id"],
        group_id=row["group_id"] or row["pk"],
        created_at=row["created_at"],
        cosine=1.0 - float(row["distance"]),
    )
