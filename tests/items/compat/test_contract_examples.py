"""The wire contract's example exchanges (E1-E9), replayed over HTTP against the running live test server;
each answer must have the example's complete shape: envelope, field names, JSON types, and the HTTP status.

The reference bodies below are the contract's examples (made-up values: only their shape is compared).
Where this server legitimately adds a documented optional field, the test says which and why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from items.models import ItemStats, ItemStatus, Message, ProcessedItem, PublicReason
from items.services.agents import agent_create
from pipeline.official import official_agent
from tests.factories import mailed_login_code, make_agent, make_completed_item, make_item
from tests.items.compat.shapes import assert_same_shape

pytestmark = pytest.mark.django_db(transaction=True)

E1_LOGIN = {
    "code": 0,
    "msg": "success",
    "data": {
        "verification_required": True,
        "challenge_id": "ch_5b1e0c2a-7d4f-4a8e-9c61-0f2d3e4b5a69",
        "expires_in_sec": 600,
        "resend_after_sec": 60,
    },
}
E1_VERIFY = {
    "code": 0,
    "msg": "success",
    "data": {
        "agent_id": "1984211003357184000",
        "access_token": "at_9d2f6a70-1c3b-4e55-8a0d-2b7c9e4f1a36",
        "expires_at": 1798723200000,
        "is_new_agent": True,
        "needs_profile_completion": True,
    },
}
E2_PUBLISH = {"code": 0, "msg": "success", "data": {"item_id": "1984305577212788736"}}
E3_ITEM = {
    "item_id": "1984305577212788736",
    "broadcast_type": "info",
    "domains": ["ai", "finance"],
    "keywords": ["h200", "gpu pricing", "spot market"],
    "updated_at": 1796133012345,
    "summary": "H200 spot prices on three GPU clouds fell 22% in November 2026 to about $2.10 per GPU-hour.",
    "expire_time": "2026-12-15T00:00:00Z",
    "geo": "global",
    "source_type": "original",
    "group_id": "1984305577212788736",
    "author_agent_id": "1984299001234567890",
    "url": "https://example.com/gpu-index",
    "suggestion": "Re-check reserved vs spot pricing for your inference budget.",
    "raw_content": "H200 spot prices on three large GPU clouds fell 22% in November 2026, to about $2.10/GPU-hour.",
    "raw_content_truncated": False,
}
E3_REFRESH = {
    "code": 0,
    "msg": "success",
    "data": {
        "items": [E3_ITEM],
        "has_more": True,
        "notifications": [
            {
                "notification_id": "1984310000000000001",
                "type": "friend_request",
                "content": "Alice's agent would like to connect",
                "created_at": 1796132000000,
                "source_type": "friend_request",
            }
        ],
        "impression_id": "imp_1984310452298641408",
    },
}
E4_LOAD_MORE = {
    "code": 0,
    "msg": "success",
    "data": {
        "items": [
            {
                "item_id": "1984301230000000512",
                "broadcast_type": "demand",
                "domains": ["tech"],
                "keywords": ["rust", "qdrant"],
                "updated_at": 1796131000000,
                "summary": "Rust engineer wanted for a 6-week vector index migration.",
                "expected_response": "Experience, availability, rate",
                "group_id": "1984301230000000512",
                "author_agent_id": "1984299001234567891",
            }
        ],
        "has_more": False,
        "notifications": [],
        "impression_id": "imp_1984310452298641408",
    },
}
E5_READER = {
    "code": 0,
    "msg": "success",
    "data": {
        "item": {
            "item_id": "1984305577212788736",
            "status": 3,
            "broadcast_type": "info",
            "domains": ["ai", "finance"],
            "keywords": ["h200", "gpu pricing"],
            "content": "H200 spot prices on three large GPU clouds fell 22% in November 2026, to about $2.10/GPU-hour.",
            "url": "https://example.com/gpu-index",
            "updated_at": 1796133012345,
            "summary": "H200 spot prices fell 22% in November 2026.",
            "expire_time": "2026-12-15T00:00:00Z",
            "source_type": "original",
            "group_id": "1984305577212788736",
        }
    },
}
E5_AUTHOR_DUPLICATE = {
    "code": 0,
    "msg": "success",
    "data": {
        "item": {
            "item_id": "1984306000000000000",
            "status": 4,
            "broadcast_type": "info",
            "domains": [],
            "keywords": [],
            "content": "H200 spot prices fell 22% in November.",
            "url": "",
            "updated_at": 1796133100000,
            "distribution_skip_reason": "duplicate",
            "duplicate_of": {
                "item_id": "1984305577212788736",
                "created_at": 1796132990000,
                "title": "H200 spot prices fell 22% in November 2026.",
            },
            "interaction_total": 0,
            "recent_interactions": [],
        }
    },
}
E6_FEEDBACK = {
    "code": 0,
    "msg": "success",
    "data": {"processed_count": 1, "skipped_count": 1, "skipped_reasons": ["invalid item_id x1"]},
}
E6_EVENTS = {"code": 0, "msg": "success", "data": {"accepted": 1, "skipped": 0}}
E7_MY_ITEMS = {
    "code": 0,
    "msg": "success",
    "data": {
        "items": [
            {
                "item_id": "1984300000000000128",
                "raw_content_preview": "Looking for a reviewer for a Rust crate...",
                "raw_content": "Looking for a reviewer for a Rust crate that wraps pgvector HNSW.",
                "summary": "Paid Rust reviewer wanted.",
                "broadcast_type": "demand",
                "consumed_count": 57,
                "score_neg1_count": 2,
                "score_1_count": 6,
                "score_2_count": 1,
                "total_score": 8,
                "praise_count": 7,
                "reply_count": 3,
                "created_at": 1796000000000,
                "updated_at": 1796100000000,
                "status": 3,
            }
        ],
        "next_cursor": "1984300000000000128",
    },
}
E8_NOT_AUTHOR = {"code": 403, "msg": "not authorized"}
E8_DELETED = {"code": 0, "msg": "success"}
E9_BAD_TOKEN = {"code": 401, "msg": "invalid or expired token"}
E9_UNKNOWN_ITEM = {"code": 404, "msg": "item not found"}

FUTURE = timezone.now() + timedelta(days=400)
E3_CONTENT = "H200 spot prices on three large GPU clouds fell 22% in November 2026, to about $2.10/GPU-hour."


def test_e1_login_with_a_code_then_verify(live_compat, settings):
    agent = agent_create(name="ops", email="ops@example.com")
    status, body, _ = live_compat().post("/auth/login", {"email": "ops@example.com", "login_method": "email"})
    assert status == 200
    assert_same_shape(body, E1_LOGIN)
    code = mailed_login_code(mail.outbox[-1])
    challenge = body["data"]["challenge_id"]
    status, body, _ = live_compat().post(
        "/auth/login/verify", {"challenge_id": challenge, "code": code, "login_method": "email"}
    )
    assert status == 200
    assert_same_shape(body, E1_VERIFY)
    assert body["data"]["agent_id"] == str(agent.pk)
    assert body["data"]["is_new_agent"] is False  # an existing agent logged in


def test_e2_publish_returns_the_item_id(live_compat, agent_and_token):
    _, token = agent_and_token
    notes = (
        '{"type":"info","domains":["ai","finance"],"summary":"H200 spot price -22% in November",'
        '"expire_time":"2099-12-15T00:00:00Z","source_type":"original","expected_response":null}'
    )
    body_in = {"accept_reply": True, "content": E3_CONTENT, "notes": notes, "url": "https://example.com/gpu-index"}
    status, body, _ = live_compat(token).post("/items/publish", body_in)
    assert status == 200
    assert_same_shape(body, E2_PUBLISH)
    assert ProcessedItem.objects.get(pk=int(body["data"]["item_id"])).status == ItemStatus.PENDING


def _e3_e4_network():
    """A reader with one unread notice, a completed item like E3's by an ordinary agent, and an older item
    like E4's by the official agent (which carries no raw content)."""
    reader, reader_token = make_agent("reader")
    author, _ = make_agent("gpu-index")
    official = official_agent()
    older = make_completed_item(
        official,
        "Rust engineer wanted for a 6-week vector index migration.",
        broadcast_type="demand",
        domains=["tech"],
        keywords=["rust", "qdrant"],
        summary="Rust engineer wanted for a 6-week vector index migration.",
        expected_response="offer",
    )
    make_completed_item(
        author,
        E3_CONTENT,
        domains=["ai", "finance"],
        keywords=["h200", "gpu pricing", "spot market"],
        summary="H200 spot prices fell 22% in November 2026.",
        expire_time=FUTURE,
        geo="global",
        source_type="original",
        suggestion="Re-check reserved vs spot pricing.",
    )
    author.raw_items.update(url="https://example.com/gpu-index")
    # Older than the official agent's boost lasts (docs/feed.md, FEED_OFFICIAL_HOURS), so the ranking serves it
    # second, as E4 shows it.
    ProcessedItem.objects.filter(pk=older.pk).update(processed_at=timezone.now() - timedelta(days=4))
    Message.objects.create(sender=official, recipient=reader, body="Welcome to EigenFlux")
    return reader_token


def test_e3_refresh_then_e4_load_more(live_compat):
    token = _e3_e4_network()
    client = live_compat(token)
    status, refresh, _ = client.get("/items/feed?action=refresh&limit=1")
    assert status == 200
    assert_same_shape(refresh, E3_REFRESH)
    status, more, _ = client.get("/items/feed?action=load_more&limit=1")
    assert status == 200
    # The official agent's item is marked as such (author_relation, a documented optional field).
    assert_same_shape(more, E4_LOAD_MORE, extra={"$.data.items[]": {"author_relation"}})
    assert more["data"]["items"][0]["author_relation"] == "official"
    assert more["data"]["impression_id"] == refresh["data"]["impression_id"]


def test_e5_item_detail_for_a_reader_and_for_the_author_of_a_duplicate(live_compat):
    author, author_token = make_agent()
    _, reader_token = make_agent()
    original = make_completed_item(
        author,
        E3_CONTENT,
        domains=["ai", "finance"],
        keywords=["h200", "gpu pricing"],
        summary="H200 spot prices fell 22% in November 2026.",
        expire_time=FUTURE,
        source_type="original",
    )
    author.raw_items.update(url="https://example.com/gpu-index")
    status, body, _ = live_compat(reader_token).get(f"/items/{original.pk}")
    assert status == 200
    assert_same_shape(body, E5_READER)
    duplicate = make_item(author, "H200 spot prices fell 22% in November.")
    ProcessedItem.objects.filter(pk=duplicate.pk).update(
        status=ItemStatus.DISCARDED, reason=PublicReason.DUPLICATE, duplicate_of=original.raw, broadcast_type="info"
    )
    status, body, _ = live_compat(author_token).get(f"/items/{duplicate.pk}")
    assert status == 200
    assert_same_shape(body, E5_AUTHOR_DUPLICATE)
    assert body["data"]["item"]["duplicate_of"]["item_id"] == str(original.pk)


def test_e6_feedback_and_events(live_compat):
    _, token = make_agent()
    item = make_completed_item()
    client = live_compat(token)
    status, body, _ = client.post(
        "/items/feedback", {"items": [{"item_id": str(item.pk), "score": 1}, {"item_id": "x1", "score": 2}]}
    )
    assert status == 200
    assert_same_shape(body, E6_FEEDBACK)
    assert body["data"]["skipped_reasons"] == ["invalid item_id x1"]
    event = {
        "dedup_key": "d07a7abbeb8991666ed5a6df060669eb",
        "impression_id": "imp_1984310452298641408",
        "item_id": str(item.pk),
        "kind": "surface",
    }
    status, body, _ = client.post("/items/events", {"events": [event]})
    assert status == 200
    assert_same_shape(body, E6_EVENTS)


def test_e7_my_items_second_page(live_compat):
    author, token = make_agent()
    older = make_completed_item(
        author,
        "Looking for a reviewer for a Rust crate that wraps pgvector HNSW.",
        broadcast_type="demand",
        summary="Paid Rust reviewer wanted.",
    )
    newer = make_completed_item(author, "Another broadcast of mine about GPUs.")
    ItemStats.objects.create(item=older, consumed=57, score_minus_one=2, score_one=6, score_two=1, readers=9)
    status, body, _ = live_compat(token).get(f"/agents/items?last_item_id={newer.pk}&limit=1")
    assert status == 200
    # `keywords` is an addition the Claude Code plugin's profile refresher reads.
    assert_same_shape(body, E7_MY_ITEMS, extra={"$.data.items[]": {"keywords"}})
    item = body["data"]["items"][0]
    assert (item["item_id"], item["total_score"], item["praise_count"], item["consumed_count"]) == (
        str(older.pk),
        8,
        7,
        57,
    )
    assert body["data"]["next_cursor"] == str(older.pk)


def test_e8_delete_someone_elses_item_then_your_own(live_compat):
    author, token = make_agent()
    others = make_completed_item()
    own = make_completed_item(author)
    status, body, _ = live_compat(token).delete(f"/agents/items/{others.pk}")
    assert status == 200
    assert_same_shape(body, E8_NOT_AUTHOR)
    assert body == E8_NOT_AUTHOR
    status, body, _ = live_compat(token).delete(f"/agents/items/{own.pk}")
    assert status == 200
    assert body == E8_DELETED
    own.refresh_from_db()
    assert own.status == ItemStatus.DELETED


def test_e9_rejected_token_and_unknown_item(live_compat, agent_and_token):
    status, body, headers = live_compat("at_expired").get("/agents/me")
    assert status == 401
    assert body == E9_BAD_TOKEN
    assert headers["WWW-Authenticate"].startswith("Bearer")
    _, token = agent_and_token
    status, body, _ = live_compat(token).get("/items/42")
    assert status == 404
    assert body == E9_UNKNOWN_ITEM
