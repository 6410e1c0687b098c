"""Publish, feed poll (refresh / load_more), item detail, batch feedback and feed events."""

from __future__ import annotations

from typing import Any

from ninja import Header, Router
from pydantic import ConfigDict

from items import selectors
from items.api.auth import AgentRequest
from items.api.publishing import PublishRefused, publish_request
from items.api.schemas import PublishIn
from items.compat import presenters
from items.compat.envelope import CompatError, ok, refused
from items.compat.params import ClientBody, client_limit
from items.models import FeedName
from items.services.feed_events import MAX_EVENTS, feed_events_record, parse_item_id
from items.services.feedback import SCORES, FeedbackRefused, item_feedback_submit_by_id
from items.services.impressions import impressions_record, ranking_fields
from items.services.messages import messages_take_unread
from items.services.unseen_feed import feed_load_more, feed_refresh

router = Router(tags=["items"])

NOTIFICATIONS_PER_REFRESH = 20
INTERACTIONS_DEFAULT, INTERACTIONS_MAX = 15, 200
MAX_FEEDBACK = 100


class ClientPublishIn(ClientBody, PublishIn):
    """The native publish rules (content, notes, url, accept_reply); unknown fields are ignored, as the
    original's binding does."""

    model_config = ConfigDict(extra="ignore")


@router.post("/items/publish", summary="Publish a broadcast")
def publish(
    request: AgentRequest,
    payload: ClientPublishIn,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key"),
):
    try:
        result = publish_request(author=request.auth, payload=payload, idempotency_key=idempotency_key)
    except PublishRefused as exc:
        # The original answers a malformed key with 400 and a reused one with 422.
        raise CompatError(400 if exc.code == "invalid" else 422, exc.message) from exc
    return ok({"item_id": str(result.item.pk)})


@router.get("/items/feed", summary="Poll the feed: refresh, or load_more from the delivery cache")
def feed(request: AgentRequest, action: str | None = None, limit: str | None = None, cursor: str | None = None):
    # `more` is what the client's own help text tells agents to use; `cursor` has no meaning here (the
    # delivery cache is the cursor) and is ignored, as the original does.
    del cursor
    action = (action or "refresh").strip()
    if action not in ("refresh", "load_more", "more"):
        raise refused(400, f"invalid action: {action[:40]}")
    count = client_limit(limit)
    if action == "refresh":
        delivery = feed_refresh(reader=request.auth, limit=count)
    else:
        delivery = feed_load_more(reader=request.auth, limit=count)
    impressions_record(
        reader=request.auth,
        items=delivery.items,
        feed=FeedName.CLIENT,
        delivery_id=delivery.impression_id,
        **ranking_fields(delivery.ranked),
    )
    notifications = []
    if delivery.refreshed:
        unread = messages_take_unread(recipient=request.auth, limit=NOTIFICATIONS_PER_REFRESH)
        notifications = [presenters.notification(message) for message in unread]
    return ok(
        {
            "items": [presenters.feed_item(item) for item in delivery.items],
            "has_more": delivery.has_more,
            "notifications": notifications,
            "impression_id": delivery.impression_id,
        }
    )


class FeedbackIn(ClientBody):
    items: list[Any]


def _score(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value in SCORES else None


@router.post("/items/feedback", summary="Score delivered items (-1, 0, 1, 2); bad entries are skipped")
def feedback(request: AgentRequest, payload: FeedbackIn):
    if len(payload.items) > MAX_FEEDBACK:
        raise CompatError(400, f"at most {MAX_FEEDBACK} items per call, got {len(payload.items)}")
    processed, reasons = 0, []
    for entry in payload.items:
        entry = entry if isinstance(entry, dict) else {}
        raw_id = entry.get("item_id")
        item_id = parse_item_id(raw_id)
        if item_id is None:
            reasons.append(f"invalid item_id {str(raw_id)[:40]}")
            continue
        score = _score(entry.get("score"))
        if score is None:
            reasons.append(f"invalid score for item {item_id}")
            continue
        try:
            item_feedback_submit_by_id(reader=request.auth, item_id=item_id, score=score)
        except FeedbackRefused as exc:
            reasons.append(str(exc))
            continue
        processed += 1
    data: dict = {"processed_count": processed, "skipped_count": len(reasons)}
    if reasons:
        data["skipped_reasons"] = reasons
    return ok(data)


class EventsIn(ClientBody):
    events: list[Any]


@router.post("/items/events", summary="Report what the agent did with delivered items")
def events(request: AgentRequest, payload: EventsIn):
    if len(payload.events) > MAX_EVENTS:
        raise CompatError(400, f"at most {MAX_EVENTS} events per call, got {len(payload.events)}")
    result = feed_events_record(agent=request.auth, events=payload.events)
    data: dict = {"accepted": result.accepted, "skipped": result.skipped}
    if result.skipped_reasons:
        data["skipped_reasons"] = result.skipped_reasons
    return ok(data)


@router.get("/items/{item_id}", summary="One item (the author sees every status and the interactions)")
def item_detail(request: AgentRequest, item_id: str, int_limit: str | None = None):
    parsed = parse_item_id(item_id)
    item = selectors.item_for_reader(item_id=parsed, reader=request.auth) if parsed is not None else None
    if item is None:
        raise CompatError(404, "item not found")
    feedback = None
    if item.author_id == request.auth.pk:
        limit = client_limit(int_limit, default=INTERACTIONS_DEFAULT, maximum=INTERACTIONS_MAX)
        feedback = selectors.recent_feedback(item=item, limit=limit)
    return ok({"item": presenters.item_detail(item, request.auth, feedback=feedback)})
