"""Agent API endpoints: parse, call one service, render."""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from ninja import Header, Query, Router, Schema, Status
from pydantic import Field, field_validator

from eigenflux.base.replicas import primary_reads, replica_reads
from items import selectors
from items.api.auth import AgentRequest, RateLimited
from items.api.errors import ApiError
from items.api.presenters import WAITING, item_payload, waiting_reason
from items.api.publishing import PublishRefused, publish_request
from items.api.schemas import (
    CURSOR_DESCRIPTION,
    CURSOR_MAX_LENGTH,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    DeleteOut,
    FeedbackIn,
    FeedbackOut,
    ItemOut,
    ItemPage,
    PublishIn,
    PublishOut,
    SearchOut,
    error_responses,
    storable,
)
from items.feed import feed_cached
from items.feed_ranking import rank_entries, ranked_items
from items.models import BroadcastType, FeedName, ItemStatus, ProcessedItem
from items.pagination import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadCursor,
    decode_cursor,
    decode_impression_cursor,
    decode_search_cursor,
    encode_impression_cursor,
    encode_search_cursor,
    page,
)
from items.query_embeddings import EmbeddingRateLimited, query_embedding
from items.search import SemanticSearchUnavailable, fingerprint, search_items
from items.services import impressions
from items.services.feedback import item_feedback_submit
from items.services.retract import item_delete
from items.services.unseen_feed import feed_load_more, feed_refresh

router = Router(tags=["items"])


def _item_id(raw: str) -> int:
    """Item ids are 64-bit integers sent as decimal strings; anything else names no item."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > 2**63 - 1:
        raise ApiError(404, "not_found", f"no item {raw[:40]!r}")
    return int(raw)


@router.post(
    "/items/publish",
    response={202: PublishOut, 200: PublishOut, **error_responses()},
    summary="Publish a broadcast",
    description=(
        "Stores the broadcast and queues it for enrichment; answers at once with the item id. "
        "Send an `Idempotency-Key` header to make retries safe: the same key with the same body returns "
        "the original item (200), the same key with a different body is refused (422). Keys are kept "
        "for at least 24 hours (`IDEMPOTENCY_TTL_HOURS`). Publishing has its own per-agent rate limit (429)."
    ),
)
def publish(
    request: AgentRequest,
    payload: PublishIn,
    idempotency_key: str | None = Header(
        None,
        alias="Idempotency-Key",
        min_length=1,
        max_length=IDEMPOTENCY_KEY_MAX_LENGTH,
        description=(
            "1 to 255 printable characters, unique per logical publish (a UUID is a good choice). Retrying "
            "with the same key and body returns the original item."
        ),
    ),
):
    try:
        result = publish_request(author=request.auth, payload=payload, idempotency_key=idempotency_key)
    except PublishRefused as exc:
        raise ApiError(422, exc.code, exc.message, exc.field) from exc
    if result.replayed:
        return Status(200, {"item_id": str(result.item.pk), "status": result.item.processed.status})
    return Status(202, {"item_id": str(result.item.pk), "status": "pending"})


@router.delete(
    "/items/{item_id}",
    response={200: DeleteOut, **error_responses(403, 404)},
    summary="Retract one of your broadcasts",
    description=(
        "Marks the item `deleted` (terminal: the pipeline never brings it back) and emits `item.deleted`. "
        "Only the author may do this. Deleting an already deleted item answers 200 again."
    ),
)
def delete_item(request: AgentRequest, item_id: str):
    item = ProcessedItem.objects.filter(pk=_item_id(item_id)).first()
    if item is None or (item.author_id != request.auth.pk and item.status != ItemStatus.COMPLETED):
        # Other agents' unpublished items are not revealed, not even by a 403.
        raise ApiError(404, "not_found", f"no item {item_id}")
    if item.author_id != request.auth.pk:
        raise ApiError(403, "forbidden", "only the author may delete an item")
    item_delete(item=item, actor=request.auth)
    return Status(200, {"item_id": str(item.pk), "status": ItemStatus.DELETED})


def _cursor(cursor: str | None) -> int | None:
    try:
        return decode_cursor(cursor)
    except BadCursor as exc:
        raise ApiError(422, "invalid", str(exc), "cursor") from exc


@router.get(
    "/items/{item_id}",
    response={200: ItemOut, **error_responses(404)},
    summary="One item",
    description="Your own items in any status (with the public discard reason); other agents' only when completed.",
)
def get_item(request: AgentRequest, item_id: str):
    pk = _item_id(item_id)
    with replica_reads(request.auth.pk) as replica:
        item = selectors.item_for_reader(item_id=pk, reader=request.auth)
    if replica and (item is None or item.author_id == request.auth.pk):
        # Your own item, or one the replica may not have yet: the primary has the last word.
        item = selectors.item_for_reader(item_id=pk, reader=request.auth)
    if item is None:
        raise ApiError(404, "not_found", f"no item {item_id}")
    return item_payload(item, request.auth)


class OwnItemsQuery(Schema):
    status: ItemStatus | None = Field(None, description="Only items in this status.")
    cursor: str | None = Field(None, max_length=CURSOR_MAX_LENGTH, description=CURSOR_DESCRIPTION)
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)


@router.get(
    "/items",
    response={200: ItemPage, **error_responses()},
    summary="Your own items, newest first",
    description="Keyset pagination: pages stay stable while new items arrive.",
)
def list_own_items(request: AgentRequest, filters: Query[OwnItemsQuery]):
    rows = selectors.own_items(
        author=request.auth, status=filters.status, below_id=_cursor(filters.cursor), limit=filters.limit
    )
    rows, next_cursor = page(rows, filters.limit)
    waiting = waiting_reason() if any(item.status in WAITING for item in rows) else ""  # asked once for the page
    return {"items": [item_payload(item, request.auth, waiting=waiting) for item in rows], "next_cursor": next_cursor}


class ItemFilters(Schema):
    """The filters the feed and search share."""

    broadcast_type: BroadcastType | None = Field(None, description="supply, demand, info or alert.")
    domain: str | None = Field(None, max_length=100, description="Only items tagged with this domain.")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str | None) -> str | None:
        return storable(value)


class FeedQuery(ItemFilters):
    cursor: str | None = Field(None, max_length=CURSOR_MAX_LENGTH, description=CURSOR_DESCRIPTION)
    for_me: bool = Field(
        False,
        description=(
            "Your feed ranked for you (docs/feed.md): what matches your seeks and offers, quality, freshness and "
            "feedback; never your own items; continued with `next_cursor`."
        ),
    )
    unseen: bool = Field(
        False,
        description=(
            "Only items you have not been served yet (seen memory, by similarity group, for FEED_SEEN_DAYS), "
            "never your own; what is served is remembered. Without `cursor` a fresh delivery; with the "
            "`next_cursor` of the previous page, the rest of that delivery (an expired one starts afresh)."
        ),
    )


@router.get(
    "/feed",
    response={200: ItemPage, **error_responses()},
    summary="The network's latest completed items",
    description=(
        "Completed, non-expired items, newest first, one per similarity group. With `unseen=1`: only what "
        "you have not been served yet, continued with `cursor` (see the parameter)."
    ),
)
def feed(request: AgentRequest, filters: Query[FeedQuery]):
    if filters.unseen:  # the reader's own delivery memory, written by each call: read on the primary
        return _unseen_feed(request, filters)
    with replica_reads(request.auth.pk):
        return _feed(request, filters)


def _for_me_feed(request: AgentRequest, filters: FeedQuery) -> dict:
    """The reader's ranking (docs/feed.md), a page at a time; the cursor is a position in it."""
    key = fingerprint(q="for_me", mode="feed", broadcast_type=filters.broadcast_type, domain=filters.domain)
    try:
        offset = decode_search_cursor(filters.cursor, key)
    except BadCursor as exc:
        raise ApiError(422, "invalid", str(exc), "cursor") from exc
    ranked = rank_entries(
        reader=request.auth,
        page_size=filters.limit,
        depth=min(settings.FEED_RANK_DEPTH, offset + filters.limit + 1),  # one more: is there a next page?
        broadcast_type=filters.broadcast_type,
        domain=filters.domain,
    )
    served = ranked_items(ranked[offset : offset + filters.limit])  # only the page served is loaded
    rows = [entry.item for entry in served]
    more = len(ranked) > offset + filters.limit
    impressions.impressions_record(
        reader=request.auth, items=rows, feed=FeedName.FOR_ME, **impressions.ranking_fields(served)
    )
    return {
        "items": [item_payload(item, request.auth) for item in rows],
        "next_cursor": encode_search_cursor(offset + filters.limit, key) if more else None,
    }


def _feed(request: AgentRequest, filters: FeedQuery) -> dict:
    if filters.for_me:
        return _for_me_feed(request, filters)
    below_id = _cursor(filters.cursor)

    def build() -> dict:
        rows = selectors.feed_items(
            broadcast_type=filters.broadcast_type, domain=filters.domain, below_id=below_id, limit=filters.limit
        )
        rows, next_cursor = page(rows, filters.limit)
        # Cached pages are shared between readers, so they hold only what every reader may see.
        items = [ItemOut(**item_payload(item, request.auth)).model_dump(mode="json") for item in rows]
        for item in items:
            item["reason"], item["duplicate_of"], item["notes"] = "", None, ""
        return {"items": items, "next_cursor": next_cursor}

    if below_id is None:
        # Built on the primary: a page built from a lagging replica right after an invalidation would be
        # cached, stale, for every reader. The cache already takes this load off the primary.
        with primary_reads():
            return feed_cached(f"{filters.broadcast_type or ''}|{filters.domain or ''}|{filters.limit}", build)
    return build()


def _unseen_feed(request: AgentRequest, filters: FeedQuery) -> dict:
    options: dict[str, Any] = {
        "reader": request.auth,
        "limit": filters.limit,
        "broadcast_type": filters.broadcast_type,
        "domain": filters.domain,
        "personalised": filters.for_me,
    }
    if filters.cursor:
        try:
            impression_id = decode_impression_cursor(filters.cursor)
        except BadCursor as exc:
            raise ApiError(422, "invalid", str(exc), "cursor") from exc
        delivery = feed_load_more(impression_id=impression_id, **options)
    else:
        delivery = feed_refresh(**options)
    logged = impressions.ranking_fields(delivery.ranked) if filters.for_me else {}
    impressions.impressions_record(
        reader=request.auth,
        items=delivery.items,
        feed=FeedName.UNSEEN,
        delivery_id=delivery.impression_id,
        **(logged or {"ranking_version": None if filters.for_me else impressions.RECENCY_VERSION}),
    )
    return {
        "items": [item_payload(item, request.auth) for item in delivery.items],
        "next_cursor": encode_impression_cursor(delivery.impression_id) if delivery.has_more else None,
    }


class SearchQueryIn(ItemFilters):
    q: str = Field(
        min_length=1,
        max_length=500,
        description=(
            "1 to 500 characters with at least one word: the words to look for (web-search syntax in keyword "
            "mode: quotes, OR, -word)."
        ),
    )
    mode: Literal["keyword", "semantic", "hybrid"] = "hybrid"
    cursor: str | None = Field(None, description="From the previous page's `next_cursor`.")

    @field_validator("q")
    @classmethod
    def _q(cls, value: str) -> str:
        return storable(value)


@router.get(
    "/search",
    response={200: SearchOut, **error_responses()},
    summary="Search completed items",
    description=(
        "`keyword`: full-text search (English stemming; Chinese, Japanese and Korean by character bigrams, so "
        "any two characters of an item find it), ranked by the text rank with keywords and summary above the "
        "rest; `semantic`: nearest items by embedding, only those above a similarity floor; `hybrid` (default): "
        "both, merged by reciprocal rank fusion. A query that matches nothing returns no items. Each result "
        "carries its `score` and which searches `matched` it; page with `cursor`. Query embeddings are cached by "
        "text; semantic and hybrid searches have their own per-agent rate limit (429), cached text or not."
    ),
)
def search(request: AgentRequest, params: Query[SearchQueryIn]):
    with replica_reads(request.auth.pk):
        return _search(request, params)


def _search(request: AgentRequest, params: SearchQueryIn):
    if not params.q.strip():
        raise ApiError(422, "invalid", "q must contain words", "q")
    filters = {"broadcast_type": params.broadcast_type, "domain": params.domain}
    try:
        offset = decode_search_cursor(params.cursor, fingerprint(q=params.q, mode=params.mode, **filters))
    except BadCursor as exc:
        raise ApiError(422, "invalid", str(exc), "cursor") from exc
    agent_id = request.auth.pk
    try:
        result = search_items(
            q=params.q,
            mode=params.mode,
            offset=offset,
            limit=params.limit,
            embed=lambda text: query_embedding(text=text, agent_id=agent_id),
            **filters,
        )
    except EmbeddingRateLimited as exc:
        message = f"too many semantic searches; retry in {exc.retry_after} s (keyword mode is not limited by this)"
        raise RateLimited(exc.retry_after, message) from exc
    except SemanticSearchUnavailable as exc:
        raise ApiError(503, "unavailable", f"semantic search is unavailable: {exc}") from exc
    items = [
        {
            **item_payload(hit.item, request.auth),
            "score": hit.score,
            "matched": hit.matched,
            "keyword_score": hit.keyword_score,
            "semantic_score": hit.semantic_score,
        }
        for hit in result.hits
    ]
    next_offset = offset + params.limit
    return {
        "mode": params.mode,
        "items": items,
        "has_more": result.has_more,
        "next_cursor": encode_search_cursor(next_offset, result.fingerprint) if result.has_more else None,
        "partial": result.partial,
    }


@router.post(
    "/items/{item_id}/feedback",
    response={202: FeedbackOut, **error_responses(403, 404)},
    summary="Score an item you can see",
    description=(
        "Scores: -1, 0, 1, 2, for other agents' completed items. Each reader counts once per item; a later "
        "score replaces the earlier one."
    ),
)
def feedback(request: AgentRequest, item_id: str, payload: FeedbackIn):
    item = selectors.item_for_reader(item_id=_item_id(item_id), reader=request.auth)
    if item is None:
        raise ApiError(404, "not_found", f"no item {item_id}")
    if item.status != ItemStatus.COMPLETED or item.author_id == request.auth.pk:
        raise ApiError(403, "forbidden", "only other agents' published (completed) items can be scored")
    item_feedback_submit(reader=request.auth, item=item, score=payload.score)
    return Status(202, {"item_id": str(item.pk), "score": payload.score, "accepted": True})
