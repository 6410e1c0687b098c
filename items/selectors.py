"""Reads of the items domain."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from pgvector.django import CosineDistance

from items.models import Agent, AgentToken, ItemStatus, ProcessedItem, RawItem
from items.tokens import token_hash, token_well_formed

_AGENT_FOR_TOKEN_SQL: str | None = None


def agent_for_token(token: str) -> Agent | None:
    """The active agent holding this unrevoked token, or None. Compared by hash only.

    Runs on every API request, so it is one prepared-shape SQL statement rather than an ORM query that
    would be compiled again each time (about a third of a publish's CPU time otherwise)."""
    global _AGENT_FOR_TOKEN_SQL
    if not token_well_formed(token):
        return None
    agent_fields = list(Agent._meta.concrete_fields)
    if _AGENT_FOR_TOKEN_SQL is None:
        columns = ", ".join(f'a."{f.column}"' for f in agent_fields)
        _AGENT_FOR_TOKEN_SQL = (
            f'SELECT t."id", t."last_used_at", {columns} '  # noqa: S608 - identifiers from model metadata
            f'FROM "{AgentToken._meta.db_table}" t JOIN "{Agent._meta.db_table}" a ON a."id" = t."agent_id" '
            'WHERE t."token_hash" = %s AND t."revoked_at" IS NULL AND a."is_active"'
        )
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_FOR_TOKEN_SQL, [token_hash(token)])
        row = cursor.fetchone()
    if row is None:
        return None
    token_id, last_used_at, *values = row
    agent = Agent.from_db(connection.alias, [f.attname for f in agent_fields], values)
    now = timezone.now()
    if last_used_at is None or now - last_used_at >= timedelta(seconds=settings.TOKEN_TOUCH_SECONDS):
        AgentToken.objects.filter(pk=token_id).update(last_used_at=now)
    return agent


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


def _with_raw(queryset: QuerySet) -> QuerySet:
    return queryset.select_related("raw", "author").defer("embedding", "search_vector", "extraction")


def item_for_reader(*, item_id: int, reader: Agent) -> ProcessedItem | None:
    """The author sees their item in any status; everybody else only completed items."""
    item = _with_raw(ProcessedItem.objects.filter(pk=item_id)).first()
    if item is None or (item.author_id != reader.pk and item.status != ItemStatus.COMPLETED):
        return None
    return item


def own_items(*, author: Agent, status: str | None, below_id: int | None, limit: int) -> list[ProcessedItem]:
    queryset = ProcessedItem.objects.filter(author=author)
    if status:
        queryset = queryset.filter(status=status)
    if below_id:
        queryset = queryset.filter(pk__lt=below_id)
    return list(_with_raw(queryset).order_by("-pk")[: limit + 1])


def _visible(broadcast_type: str | None, domain: str | None) -> QuerySet:
    now = timezone.now()
    queryset = ProcessedItem.objects.filter(status=ItemStatus.COMPLETED).filter(
        Q(expire_time__isnull=True) | Q(expire_time__gt=now)
    )
    if broadcast_type:
        queryset = queryset.filter(broadcast_type=broadcast_type)
    if domain:
        queryset = queryset.filter(domains__contains=[domain])
    return queryset


def feed_items(
    *, broadcast_type: str | None, domain: str | None, below_id: int | None, limit: int
) -> list[ProcessedItem]:
    """Latest completed, non-expired items, one per similarity group (its newest visible member)."""
    visible = _visible(broadcast_type, domain)
    newer_in_group = visible.filter(group_id=OuterRef("group_id"), pk__gt=OuterRef("pk"))
    queryset = visible.filter(~Exists(newer_in_group))
    if below_id:
        queryset = queryset.filter(pk__lt=below_id)
    return list(_with_raw(queryset).order_by("-pk")[: limit + 1])


FOR_ME_WINDOW = 200


def feed_for_reader(
    *, reader: Agent, broadcast_type: str | None, domain: str | None, limit: int
) -> list[ProcessedItem]:
    """The feed's latest FOR_ME_WINDOW entries re-ranked by how many of the reader's profile keywords
    each item's keywords and domains share (newest first among equals). One page, no cursor."""
    candidates = feed_items(broadcast_type=broadcast_type, domain=domain, below_id=None, limit=FOR_ME_WINDOW)
    wanted = {keyword.casefold() for keyword in reader.profile_keywords}

    def overlap(item: ProcessedItem) -> int:
        tags = {tag.casefold() for tag in [*item.keywords, *item.domains]}
        return len(wanted & tags)

    return sorted(candidates[:FOR_ME_WINDOW], key=lambda item: (-overlap(item), -item.pk))[:limit]


def search_keyword(*, q: str, broadcast_type: str | None, domain: str | None, limit: int) -> list[ProcessedItem]:
    query = SearchQuery(q, search_type="websearch", config="simple")
    queryset = (
        _visible(broadcast_type, domain)
        .filter(search_vector=query)
        .annotate(rank=SearchRank("search_vector", query))
        .order_by("-rank", "-pk")
    )
    return list(_with_raw(queryset)[:limit])


def search_semantic(
    *, embedding: list[float], broadcast_type: str | None, domain: str | None, limit: int
) -> list[ProcessedItem]:
    queryset = (
        _visible(broadcast_type, domain)
        .filter(embedding__isnull=False)
        .annotate(distance=CosineDistance("embedding", embedding))
        .order_by("distance")
    )
    return list(_with_raw(queryset)[:limit])


def reciprocal_rank_fusion(rankings: list[list[ProcessedItem]], *, limit: int, k: int = 60) -> list[ProcessedItem]:
    """Merge rankings by sum of 1 / (k + rank): items high in either list rise, items in both rise most."""
    scores: dict[int, float] = {}
    items: dict[int, ProcessedItem] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item.pk] = scores.get(item.pk, 0.0) + 1.0 / (k + rank)
            items.setdefault(item.pk, item)
    ordered = sorted(scores, key=lambda pk: (-scores[pk], -pk))
    return [items[pk] for pk in ordered[:limit]]
