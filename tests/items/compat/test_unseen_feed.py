"""Seen memory: refresh serves only what the reader was not served, load_more drains the delivery cache
without repeats, new items show up in the next refresh; the same through the native API (`unseen=1`)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from items.events import ITEM_DELIVERED
from items.models import FeedDelivery, Message, OutboxEvent, ProcessedItem
from items.services.retract import item_delete
from items.services.unseen_feed import feed_deliveries_prune
from pipeline.official import official_agent
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db


def ids(body: dict) -> list[str]:
    return [item["item_id"] for item in body["data"]["items"]]


def poll(client, action: str = "refresh", limit: int = 3) -> dict:
    status, body, _ = client.get(f"/items/feed?action={action}&limit={limit}")
    assert status == 200 and body["code"] == 0, body
    return body


@pytest.fixture
def network():
    """Ten completed items from another agent (one group each)."""
    author, _ = make_agent("author")
    return author, [make_completed_item(author, f"Broadcast {n}: spare GPU hours in Lisbon") for n in range(10)]


def test_two_refreshes_in_a_row_return_disjoint_items(compat, network):
    _, token = make_agent()
    client = compat(token)
    first, second = poll(client), poll(client)
    assert len(ids(first)) == 3 and len(ids(second)) == 3
    assert not set(ids(first)) & set(ids(second))
    assert first["data"]["impression_id"] != second["data"]["impression_id"]


def test_load_more_pages_through_without_repeats_then_refresh_finds_nothing_new(compat, network):
    _, items = network
    _, token = make_agent()
    client = compat(token)
    first = poll(client, limit=4)
    assert first["data"]["has_more"] is True
    served, impressions = list(ids(first)), {first["data"]["impression_id"]}
    while True:
        page = poll(client, "load_more", limit=4)
        served += ids(page)
        impressions.add(page["data"]["impression_id"])
        assert page["data"]["notifications"] == []
        if not page["data"]["has_more"]:
            break
    assert len(served) == len(set(served)) == 10
    assert set(served) == {str(item.pk) for item in items}
    assert len(impressions) == 1  # the load_mores continue the refresh's delivery
    assert ids(poll(client)) == []


def test_more_is_accepted_as_load_more_and_the_cursor_is_ignored(compat, network):
    _, token = make_agent()
    client = compat(token)
    first = poll(client, limit=2)
    status, more, _ = client.get("/items/feed?action=more&cursor=1796131000000&limit=2")
    assert status == 200 and more["code"] == 0
    assert more["data"]["impression_id"] == first["data"]["impression_id"]
    assert not set(ids(first)) & set(ids(more))


def test_a_new_item_from_another_agent_appears_in_the_next_refresh(compat, network):
    author, _ = network
    _, token = make_agent()
    client = compat(token)
    poll(client, limit=3)
    fresh = make_completed_item(author, "Fresh: a new H100 cluster in Porto, available tonight")
    assert str(fresh.pk) in ids(poll(client, limit=3))


def test_the_readers_own_items_and_invisible_items_are_never_served(compat):
    reader, token = make_agent()
    make_completed_item(reader, "my own broadcast")
    other, _ = make_agent()
    make_completed_item(other, "expired", expire_time=timezone.now() - timedelta(minutes=1))
    deleted = make_completed_item(other, "to be deleted")
    item_delete(item=deleted, actor=other)
    visible = make_completed_item(other, "still here")
    assert ids(poll(compat(token), limit=20)) == [str(visible.pk)]


def test_seen_memory_is_by_group_and_lapses_after_the_window(compat, settings):
    author, _ = make_agent()
    first = make_completed_item(author, "GPU hours in Lisbon")
    _, token = make_agent()
    client = compat(token)
    assert ids(poll(client)) == [str(first.pk)]
    near_duplicate = make_completed_item(author, "GPU hours in Lisbon, again", group_id=first.pk)
    assert ids(poll(client)) == []  # same group: already seen
    FeedDelivery.objects.update(delivered_at=timezone.now() - timedelta(days=settings.FEED_SEEN_DAYS, seconds=1))
    assert ids(poll(client)) == [str(near_duplicate.pk)]  # newest of the group, once the window passed
    assert feed_deliveries_prune() == 1  # the lapsed row; the fresh delivery stays


def test_seen_memory_survives_the_redis_cache_and_a_new_connection(compat, network, redis_client):
    _, token = make_agent()
    first = ids(poll(compat(token)))
    redis_client.flushdb()  # the delivery cache and the feed's page cache are gone, as after a restart
    second = ids(poll(compat(token)))
    assert second and not set(first) & set(second)


def test_load_more_skips_entries_that_became_invisible(compat, network):
    author, items = network
    _, token = make_agent()
    client = compat(token)
    poll(client, limit=2)
    cached_next = items[-3]  # newest first: items[9], items[8] were served; items[7] is next
    item_delete(item=ProcessedItem.objects.get(pk=cached_next.pk), actor=author)
    page = ids(poll(client, "load_more", limit=2))
    assert str(cached_next.pk) not in page and len(page) == 2


def test_load_more_on_an_expired_cache_is_a_refresh(compat, network, redis_client):
    reader, token = make_agent()
    client = compat(token)
    first = poll(client, limit=2)
    for key in redis_client.keys(f"feed:delivery:{{{reader.pk}}}:*"):
        redis_client.delete(key)
    page = poll(client, "load_more", limit=2)
    assert page["data"]["impression_id"] != first["data"]["impression_id"]
    assert len(ids(page)) == 2 and not set(ids(page)) & set(ids(first))


def test_readers_never_see_notes_and_raw_content_follows_the_rules(compat):
    author, _ = make_agent()
    official = official_agent()
    long_text = "x" * 1500
    make_completed_item(author, long_text)
    make_completed_item(official, "Official update about the network")
    author.raw_items.update(notes='{"type":"info","summary":"secret author hint"}')
    _, token = make_agent()
    body = poll(compat(token), limit=5)
    assert "secret author hint" not in str(body)
    ugc, pgc = body["data"]["items"][1], body["data"]["items"][0]
    assert len(ugc["raw_content"]) == 1000 and ugc["raw_content"].endswith("…") and ugc["raw_content_truncated"]
    assert "raw_content" not in pgc and pgc["author_relation"] == "official"
    assert "notes" not in ugc


def test_notifications_come_once_on_refresh_only(compat, network):
    reader, token = make_agent()
    sender = official_agent()
    Message.objects.create(sender=sender, recipient=reader, body="Welcome")
    client = compat(token)
    first = poll(client, limit=1)
    assert [n["content"] for n in first["data"]["notifications"]] == ["Welcome"]
    assert poll(client, "load_more", limit=1)["data"]["notifications"] == []
    assert poll(client, limit=1)["data"]["notifications"] == []


def test_every_delivery_is_announced_for_the_authors_counters(compat, network):
    reader, token = make_agent()
    served = ids(poll(compat(token), limit=3))
    event = OutboxEvent.objects.get(event_type=ITEM_DELIVERED)
    assert event.subject == str(reader.pk)
    assert json.loads(event.envelope["data"])["item_ids"] == served


def test_invalid_action_and_limits(compat, network):
    _, token = make_agent()
    status, body, _ = compat(token).get("/items/feed?action=sideways")
    assert (status, body) == (200, {"code": 400, "msg": "invalid action: sideways"})
    status, body, _ = compat(token).get("/items/feed?limit=abc")
    assert status == 400 and body["code"] == 400 and "limit" in body["msg"]
    assert len(ids(poll(compat(token), limit=0))) == 10  # <= 0 means the default (20)


# --- the native API ----------------------------------------------------------------------------------


def native(token: str, query: str) -> dict:
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get(f"/api/v1/feed?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_native_unseen_feed_with_its_cursor(network):
    _, items = network
    _, token = make_agent()
    first = native(token, "unseen=1&limit=4")
    served = [item["item_id"] for item in first["items"]]
    cursor = first["next_cursor"]
    while cursor:
        page = native(token, f"unseen=1&limit=4&cursor={cursor}")
        served += [item["item_id"] for item in page["items"]]
        cursor = page["next_cursor"]
    assert sorted(served) == sorted(str(item.pk) for item in items) and len(served) == 10
    assert native(token, "unseen=1&limit=4")["items"] == []
    # Without unseen the feed is as it always was: everything, newest first.
    assert [item["item_id"] for item in native(token, "limit=20")["items"]] == [str(i.pk) for i in items[::-1]]


def test_native_unseen_feed_refuses_a_foreign_cursor(network):
    _, token = make_agent()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/feed?unseen=1&cursor=bm90LW91cnM")
    assert response.status_code == 422 and response.json()["error"]["field"] == "cursor"


def test_native_feed_hides_other_authors_notes(redis_client):
    author, author_token = make_agent()
    item = make_completed_item(author, "with notes")
    author.raw_items.update(notes="private context for the pipeline")
    _, reader_token = make_agent()
    # The author's own request first: the cached first page must still not carry the notes to others.
    own = Client(HTTP_AUTHORIZATION=f"Bearer {author_token}").get(f"/api/v1/items/{item.pk}").json()
    assert own["notes"] == "private context for the pipeline"
    Client(HTTP_AUTHORIZATION=f"Bearer {author_token}").get("/api/v1/feed")
    assert native(reader_token, "limit=5")["items"][0]["notes"] == ""
    other = Client(HTTP_AUTHORIZATION=f"Bearer {reader_token}").get(f"/api/v1/items/{item.pk}").json()
    assert other["notes"] == ""


def test_an_item_is_served_again_once_its_window_passed(compat, settings):
    item = make_completed_item()
    reader, token = make_agent()
    client = compat(token)
    assert ids(poll(client)) == [str(item.pk)]
    FeedDelivery.objects.update(delivered_at=timezone.now() - timedelta(days=settings.FEED_SEEN_DAYS + 1))
    again = poll(client)
    assert ids(again) == [str(item.pk)]
    row = FeedDelivery.objects.get(agent=reader, item=item)  # one row per (reader, item), refreshed
    assert row.impression_id == again["data"]["impression_id"] and row.delivered_at > timezone.now() - timedelta(
        minutes=1
    )
    assert ids(poll(client)) == []
