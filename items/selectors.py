"""Reads of the items domain."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, Count, Exists, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from eigenflux.base.embedding_space import configured_embedding_model
from eigenflux.base.sqlrows import BinaryVector, server_bound_cursor
from items.models import (
    VERDICT_TAKEN_DOWN,
    Agent,
    AgentToken,
    DecisionStage,
    FeedDelivery,
    ItemFeedback,
    ItemStats,
    ItemStatus,
    ModerationDecision,
    ProcessedItem,
    RawItem,
    graph_key_sql,
    graph_query_sql,
)
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


_DUPLICATE_SQL: str | None = None
# Statuses as literals, not parameters: a prepared statement's generic plan still sees the constant.
_KEPT = f"('{ItemStatus.COMPLETED.value}', '{ItemStatus.REVIEW.value}')"
_SIMILAR_SQL: str | None = None


def duplicate_sql(*, content_hash: str, item_id: str, author_id: str, since: str) -> str:
    """The exact-duplicate query (below) with its four inputs as SQL expressions: parameters here, the claimed
    row's columns in the claim (items.services.item_claim), which looks for the duplicate in its own statement."""
    raw, processed = RawItem._meta, ProcessedItem._meta
    return (
        f'SELECT d."id" FROM "{raw.db_table}" d JOIN "{processed.db_table}" dp '  # noqa: S608 - model metadata
        f'ON dp."{processed.pk.column}" = d."id" '
        f'WHERE d."content_hash" = {content_hash} AND d."created_at" >= {since} AND dp."status" IN {_KEPT} '
        f'AND (dp."status" = \'{ItemStatus.COMPLETED.value}\' OR d."author_id" = {author_id}) '
        f'AND d."id" <> {item_id} ORDER BY d."created_at" ASC LIMIT 1'
    )


def duplicate_window_start() -> datetime:
    return timezone.now() - timedelta(days=settings.DUPLICATE_WINDOW_DAYS)


def raw_item_ref(pk: int) -> RawItem:
    """A RawItem with only its primary key loaded (its other fields load on first access)."""
    return RawItem.from_db(connection.alias, ["id"], [pk])


def exact_duplicate_of(item: ProcessedItem) -> RawItem | None:
    """The earliest completed item, or held (`review`) item of the same author, with the same normalised-content
    hash within the duplicate window. An author's copy of their own held item is its duplicate (or approving
    both would publish the text twice); another author's held item is not: it is hidden, and a copy discarded
    for it would tell the copier that it exists (approving it then refuses, item_review_approve). Only its
    primary key is loaded. Runs on the hot path (the completion), so it is one prepared-shape statement rather
    than an ORM query compiled each time."""
    global _DUPLICATE_SQL
    if _DUPLICATE_SQL is None:
        _DUPLICATE_SQL = duplicate_sql(content_hash="%s", item_id="%s", author_id="%s", since="%s")
    params = [item.raw.content_hash, duplicate_window_start(), item.raw.author_id, item.pk]
    with server_bound_cursor() as cursor:
        cursor.execute(_DUPLICATE_SQL, params)
        row = cursor.fetchone()
    return None if row is None else raw_item_ref(row[0])


def most_similar(*, embedding, exclude_id: int) -> SimilarHit | None:
    """The completed item nearest by cosine (pgvector HNSW), or None when there is none. Only items embedded by the
    configured model are compared (a half-done re-embed never groups across two models' spaces); the HNSW scan still
    serves, the model filtered on its rows (tests/pipeline/test_reembed.py reads the plan)."""
    global _SIMILAR_SQL
    if _SIMILAR_SQL is None:
        table = ProcessedItem._meta.db_table
        # Ordered by the graph's half-precision key (so the graph serves), the distance reported at full precision.
        walk = graph_key_sql('"embedding"') + " <=> " + graph_query_sql("%s")
        _SIMILAR_SQL = (
            f'SELECT "raw_id", "author_id", "group_id", "created_at", ("embedding" <=> %s) AS "distance" '  # noqa: S608
            f'FROM "{table}" WHERE "status" = \'{ItemStatus.COMPLETED.value}\' AND "embedding" IS NOT NULL '
            'AND "raw_id" <> %s AND "embedding_model" = %s '
            f"ORDER BY {walk} ASC LIMIT 1"
        )
    vector = BinaryVector(embedding)
    with server_bound_cursor() as cursor:
        cursor.execute(_SIMILAR_SQL, [vector, exclude_id, configured_embedding_model(), vector])
        row = cursor.fetchone()
    if row is None:
        return None
    item_id, author_id, group_id, created_at, distance = row
    return SimilarHit(
        item_id=item_id,
        author_id=author_id,
        group_id=group_id or item_id,
        created_at=created_at,
        cosine=1.0 - float(distance),
    )


def with_raw(queryset: QuerySet) -> QuerySet:
    return queryset.select_related("raw", "author").defer("embedding", "search_vector", "extraction")


def item_for_reader(*, item_id: int, reader: Agent) -> ProcessedItem | None:
    """The author sees their item in any status; everybody else only completed items."""
    item = with_raw(ProcessedItem.objects.filter(pk=item_id)).first()
    if item is None or (item.author_id != reader.pk and item.status != ItemStatus.COMPLETED):
        return None
    return item


def readable_item_ids(*, ids: Iterable[int], reader: Agent) -> set[int]:
    """Those of `ids` the reader may see (item_for_reader's rule): published items, and the reader's own."""
    queryset = ProcessedItem.objects.filter(pk__in=set(ids)).filter(Q(status=ItemStatus.COMPLETED) | Q(author=reader))
    return set(queryset.values_list("pk", flat=True))


def own_items(*, author: Agent, status: str | None, below_id: int | None, limit: int) -> list[ProcessedItem]:
    queryset = ProcessedItem.objects.filter(author=author)
    if status:
        queryset = queryset.filter(status=status)
    if below_id:
        queryset = queryset.filter(pk__lt=below_id)
    return list(with_raw(queryset).order_by("-pk")[: limit + 1])


def visible_items(broadcast_type: str | None, domain: str | None) -> QuerySet:
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
    visible = visible_items(broadcast_type, domain)
    newer_in_group = visible.filter(group_id=OuterRef("group_id"), pk__gt=OuterRef("pk"))
    queryset = visible.filter(~Exists(newer_in_group))
    if below_id:
        queryset = queryset.filter(pk__lt=below_id)
    return list(with_raw(queryset).order_by("-pk")[: limit + 1])


def unseen_feed_candidates(
    *, reader: Agent, broadcast_type: str | None, domain: str | None, seen_since: datetime, limit: int
) -> list[ProcessedItem]:
    """The newest visible items the reader did not write, one per similarity group, leaving out every group
    the reader was served since `seen_since` (the seen memory). The unpersonalised unseen feed; the personalised
    one is items.feed_ranking."""
    visible = visible_items(broadcast_type, domain).exclude(author=reader)
    newer_in_group = visible.filter(group_id=OuterRef("group_id"), pk__gt=OuterRef("pk"))
    seen = FeedDelivery.objects.filter(agent=reader, group_id=OuterRef("group_key"), delivered_at__gte=seen_since)
    queryset = visible.annotate(group_key=Coalesce("group_id", "pk", output_field=BigIntegerField())).filter(
        ~Exists(newer_in_group), ~Exists(seen)
    )
    return list(with_raw(queryset).order_by("-pk")[:limit])


def feed_items_by_ids(*, reader: Agent, ids: list[int]) -> list[ProcessedItem]:
    """Those of `ids` still visible to the reader (completed, not expired, not its own), in the given order."""
    rows = {item.pk: item for item in with_raw(visible_items(None, None).exclude(author=reader).filter(pk__in=ids))}
    return [rows[pk] for pk in ids if pk in rows]


def item_stats_by_id(ids: list[int]) -> dict[int, ItemStats]:
    return {stats.item_id: stats for stats in ItemStats.objects.filter(item_id__in=ids)}


def recent_feedback(*, item: ProcessedItem, limit: int) -> tuple[int, list[ItemFeedback]]:
    """How many readers scored the item, and the newest `limit` of their scores (with the readers) that are not
    reports: a -1 is counted, never named to the author (docs/threat-model.md, reporters stay anonymous)."""
    queryset = ItemFeedback.objects.filter(item=item)
    named = queryset.exclude(score=-1).select_related("reader")
    return queryset.count(), list(named.order_by("-updated_at", "-pk")[:limit])


def agent_influence(agent: Agent) -> dict[str, int]:
    """The author's totals: items published (not retracted), deliveries, and readers' 1 and 2 scores."""
    totals = (
        ProcessedItem.objects.filter(author=agent)
        .exclude(status=ItemStatus.DELETED)
        .aggregate(
            items=Count("pk"),
            consumed=Coalesce(Sum("stats__consumed"), 0),
            scored_1=Coalesce(Sum("stats__score_one"), 0),
            scored_2=Coalesce(Sum("stats__score_two"), 0),
        )
    )
    return {key: int(value) for key, value in totals.items()}


def last_moderator_verdict() -> Subquery:
    """For annotating items: the verdict of the latest moderator decision on each (None when there is none)."""
    latest = ModerationDecision.objects.filter(item=OuterRef("pk"), stage=DecisionStage.MODERATOR)
    return Subquery(latest.order_by("-created_at", "-pk").values("verdict")[:1])


def item_takedown_decision(item: ProcessedItem) -> ModerationDecision | None:
    """The moderator's take-down behind `item`'s discard (who, when, why); None when it is not discarded or a
    later moderator decision (requeue, approve) replaced the take-down."""
    if item.status != ItemStatus.DISCARDED:
        return None
    latest = (
        item.decisions.filter(stage=DecisionStage.MODERATOR)
        .select_related("moderator")
        .order_by("-created_at", "-pk")
        .first()
    )
    return latest if latest is not None and latest.verdict == VERDICT_TAKEN_DOWN else None


def held_items(*, oldest_first: bool = True, limit: int = 200) -> QuerySet[ProcessedItem]:
    """The review queue (docs/admin.md#review-queue): items in `review`, annotated with why each was held (the
    category and reason of its latest `held` decision), oldest first by default (first in, first decided)."""
    held = ModerationDecision.objects.filter(item=OuterRef("pk"), stage=DecisionStage.REVIEW, verdict="held")
    latest = held.order_by("-created_at", "-pk")
    order = ("updated_at", "pk") if oldest_first else ("-updated_at", "-pk")
    return (
        ProcessedItem.objects.filter(status=ItemStatus.REVIEW)
        .select_related("author", "raw")
        .only(
            "pk",
            "status",
            "summary",
            "quality",
            "safety_risk",
            "updated_at",
            "created_at",
            "analyzer",
            "author__name",
            "raw__content",
        )
        .annotate(
            held_category=Subquery(latest.values("category")[:1]),
            held_reason=Subquery(latest.values("reason")[:1]),
        )
        .order_by(*order)[:limit]
    )
