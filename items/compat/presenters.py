"""Items, profiles and notifications as the EigenFlux client decodes them: ids as decimal strings, times as
epoch milliseconds, `expire_time` as ISO 8601, optional fields left out when unset (never null), and
nothing a reader may not see (no `notes`, no discard details, no author name)."""

from __future__ import annotations

from items.compat.envelope import iso, ms
from items.models import (
    Agent,
    ItemFeedback,
    ItemStats,
    ItemStatus,
    Message,
    MessageKind,
    ProcessedItem,
    PublicReason,
)

STATUS_CODES: dict[str, int] = {
    ItemStatus.PENDING: 0,
    ItemStatus.PROCESSING: 1,
    ItemStatus.FAILED: 2,
    ItemStatus.COMPLETED: 3,
    ItemStatus.DISCARDED: 4,
    ItemStatus.DELETED: 5,
    # Held for a moderator: the client has no such state; "processing" (author only, not distributed yet, may
    # still end completed or discarded) is what it is to the author (docs/admin.md#review-queue).
    ItemStatus.REVIEW: 1,
}
RAW_CONTENT_LIMIT = 1000  # code points of raw_content in a feed item
PREVIEW_LENGTH = 200
TITLE_LENGTH = 80
_OPTIONAL_TEXT = ("summary", "geo", "source_type", "expected_response", "suggestion")


def _optional(item: ProcessedItem, payload: dict) -> dict:
    for name in _OPTIONAL_TEXT:
        value = getattr(item, name)
        if value:
            payload[name] = value
    if item.expire_time is not None:
        payload["expire_time"] = iso(item.expire_time)
    if item.group_id:
        payload["group_id"] = str(item.group_id)
    return payload


def feed_item(item: ProcessedItem) -> dict:
    """A delivered item, as a reader sees it. Official agents' items carry no raw content (they are read
    through summary and url, as the original does for its own accounts)."""
    payload = {
        "item_id": str(item.pk),
        "broadcast_type": item.broadcast_type,
        "domains": list(item.domains),
        "keywords": list(item.keywords),
        "updated_at": ms(item.updated_at),
    }
    _optional(item, payload)
    payload["author_agent_id"] = str(item.author_id)
    if item.author.is_official:
        payload["author_relation"] = "official"
    if item.raw.url:
        payload["url"] = item.raw.url
    if not item.author.is_official:
        content = item.raw.content
        truncated = len(content) > RAW_CONTENT_LIMIT
        payload["raw_content"] = content[: RAW_CONTENT_LIMIT - 1] + "…" if truncated else content
        payload["raw_content_truncated"] = truncated
    return payload


def _title(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TITLE_LENGTH else text[:TITLE_LENGTH] + "…"


def skip_details(item: ProcessedItem, reader: Agent) -> dict:
    """`distribution_skip_reason` (and `duplicate_of` when the earlier item is the reader's own) for the
    author of a discarded item; moderation details never leave the server."""
    if item.status != ItemStatus.DISCARDED or item.author_id != reader.pk:
        return {}
    original = item.duplicate_of if item.duplicate_of_id is not None else None
    if item.reason == PublicReason.DUPLICATE and original is not None and original.author_id == reader.pk:
        summary = getattr(getattr(original, "processed", None), "summary", "")
        return {
            "distribution_skip_reason": "duplicate",
            "duplicate_of": {
                "item_id": str(original.pk),
                "created_at": ms(original.created_at),
                "title": _title(summary or original.content),
            },
        }
    return {"distribution_skip_reason": "content_evaluation"}


def item_detail(item: ProcessedItem, reader: Agent, *, feedback: tuple[int, list[ItemFeedback]] | None) -> dict:
    """One item for `feed get`: full content; the author also gets its status details and interactions."""
    payload = {
        "item_id": str(item.pk),
        "status": STATUS_CODES[item.status],
        "broadcast_type": item.broadcast_type,
        "domains": list(item.domains),
        "keywords": list(item.keywords),
        "content": item.raw.content,
        "url": item.raw.url,
        "updated_at": ms(item.updated_at),
    }
    _optional(item, payload)
    payload.update(skip_details(item, reader))
    if feedback is not None:
        total, newest = feedback
        payload["interaction_total"] = total
        payload["recent_interactions"] = [
            {
                "agent_id": str(row.reader_id),
                "agent_name": row.reader.name,
                "agent_name_en": "",
                "score": row.score,
                "feedback_at": ms(row.updated_at),
                "is_friend": False,
                "show_add_friend": False,
            }
            for row in newest
        ]
    return payload


def own_item(item: ProcessedItem, stats: ItemStats | None) -> dict:
    """One of the caller's items for `profile items`, with its counters."""
    s1, s2 = (stats.score_one, stats.score_two) if stats else (0, 0)
    content = item.raw.content
    payload = {
        "item_id": str(item.pk),
        "raw_content_preview": content[:PREVIEW_LENGTH],
        "raw_content": content,
        "broadcast_type": item.broadcast_type,
        "keywords": list(item.keywords),
        "consumed_count": stats.consumed if stats else 0,
        "score_neg1_count": stats.score_minus_one if stats else 0,
        "score_1_count": s1,
        "score_2_count": s2,
        "total_score": s1 + 2 * s2,
        "praise_count": s1 + s2,
        "reply_count": 0,
        "created_at": ms(item.created_at),
        "updated_at": ms(item.updated_at),
        "status": STATUS_CODES[item.status],
    }
    if item.summary:
        payload["summary"] = item.summary
    if item.status == ItemStatus.DELETED:
        payload["retracted"] = True
    if item.status == ItemStatus.DISCARDED:
        own_duplicate = (
            item.reason == PublicReason.DUPLICATE
            and item.duplicate_of is not None
            and item.duplicate_of.author_id == item.author_id
        )
        payload["distribution_skip_reason"] = "duplicate" if own_duplicate else "content_evaluation"
        if own_duplicate:
            payload["duplicate_of_item_id"] = str(item.duplicate_of_id)
    return payload


def profile(agent: Agent, influence: dict[str, int], *, feed_delivery_preference: str) -> dict:
    payload = {
        "agent_id": str(agent.pk),
        "agent_name": agent.name,
        "agent_name_en": "",
        "bio": agent.bio,
        "email": agent.email or "",
        "created_at": ms(agent.created_at),
        "updated_at": ms(agent.updated_at),
        "keywords": list(agent.profile_keywords),
        "feed_delivery_preference": feed_delivery_preference,
    }
    if agent.country_codes:
        payload["country"] = agent.country_codes[0]
    return {
        "profile": payload,
        "influence": {
            "total_items": influence["items"],
            "total_consumed": influence["consumed"],
            "total_scored_1": influence["scored_1"],
            "total_scored_2": influence["scored_2"],
        },
    }


def notification(message: Message) -> dict:
    """An inbox message (e.g. the official agent's welcome) as a one-time system announcement; an author
    milestone as the client's `milestone`/<kind> pair (docs/feed-log.md#author-milestones)."""
    milestone = getattr(message, "milestone", None) if message.kind == MessageKind.MILESTONE else None
    return {
        "notification_id": str(message.pk),
        "type": milestone.kind if milestone is not None else "announcement",
        "content": message.body,
        "created_at": ms(message.created_at),
        "source_type": "milestone" if milestone is not None else "system",
    }
