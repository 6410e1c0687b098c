"""Reads of the agent API: one item, own items, the feed, keyword search, feedback, rate limits."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from items.events import ITEM_FEEDBACK, STREAM_ITEM_STATS
from items.models import ItemStatus, OutboxEvent, ProcessedItem, PublicReason
from tests.factories import make_agent, make_completed_item, make_item

pytestmark = pytest.mark.django_db


def client_for(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def two_agents():
    (alice, alice_token), (bob, bob_token) = make_agent("alice"), make_agent("bob")
    return (alice, client_for(alice_token)), (bob, client_for(bob_token))


# --- GET /items/{id} ------------------------------------------------------------------------------


def test_author_sees_any_status_others_only_completed(two_agents):
    (alice, alice_client), (_, bob_client) = two_agents
    pending = make_item(alice)
    assert alice_client.get(f"/api/v1/items/{pending.pk}").json()["status"] == "pending"
    assert bob_client.get(f"/api/v1/items/{pending.pk}").status_code == 404
    assert Client().get(f"/api/v1/items/{pending.pk}").status_code == 401

    done = make_completed_item(alice)
    body = bob_client.get(f"/api/v1/items/{done.pk}").json()
    assert body["status"] == "completed"
    assert body["author"] == {"id": str(alice.pk), "name": "alice", "is_official": False}
    assert body["analyzer"] == "local"


def test_discard_reason_and_duplicate_of_are_for_the_author_only(two_agents):
    (alice, alice_client), (bob, bob_client) = two_agents
    original = make_completed_item(alice, "Renting two A100s by the hour")
    mine = make_item(alice, "Renting two A100s by the hour!")
    theirs = make_item(bob, "Renting two A100s by the hour!!")
    for item in (mine, theirs):
        ProcessedItem.objects.filter(pk=item.pk).update(
            status=ItemStatus.DISCARDED, reason=PublicReason.DUPLICATE, duplicate_of=original.raw
        )
    body = alice_client.get(f"/api/v1/items/{mine.pk}").json()
    assert body["reason"] == "duplicate"
    assert body["duplicate_of"] == str(original.pk)
    body = bob_client.get(f"/api/v1/items/{theirs.pk}").json()
    assert body["reason"] == "duplicate"
    assert body["duplicate_of"] is None  # the earlier item is not Bob's
    assert alice_client.get(f"/api/v1/items/{theirs.pk}").status_code == 404


# --- GET /items -------------------------------------------------------------------------------------


def test_own_items_paginate_newest_first_and_stay_stable_under_inserts(two_agents):
    (alice, alice_client), (bob, _) = two_agents
    ids = [make_item(alice, f"alice item {n}").pk for n in range(7)]
    make_item(bob, "not alice's")
    first = alice_client.get("/api/v1/items?limit=3").json()
    assert [int(i["item_id"]) for i in first["items"]] == ids[::-1][:3]
    # New items arriving between pages must not shift or repeat anything on later pages.
    make_item(alice, "arrived late")
    second = alice_client.get(f"/api/v1/items?limit=3&cursor={first['next_cursor']}").json()
    third = alice_client.get(f"/api/v1/items?limit=3&cursor={second['next_cursor']}").json()
    seen = [int(i["item_id"]) for page in (first, second, third) for i in page["items"]]
    assert seen == ids[::-1]
    assert third["next_cursor"] is None


def test_own_items_filter_by_status_and_validate_input(two_agents):
    (alice, alice_client), _ = two_agents
    make_item(alice)
    done = make_completed_item(alice)
    body = alice_client.get("/api/v1/items?status=completed").json()
    assert [i["item_id"] for i in body["items"]] == [str(done.pk)]
    assert alice_client.get("/api/v1/items?limit=101").status_code == 422
    assert alice_client.get("/api/v1/items?status=nonsense").status_code == 422
    bad = alice_client.get("/api/v1/items?cursor=garbage!")
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "cursor"


# --- GET /feed --------------------------------------------------------------------------------------


def test_feed_shows_one_item_per_group_and_hides_expired_and_unfinished(two_agents):
    (alice, alice_client), (bob, _) = two_agents
    first = make_completed_item(alice, "GPU hours for rent")
    newer_same_group = make_completed_item(bob, "GPU hours for rent, cheaper", group_id=first.pk)
    expired = make_completed_item(bob, "flash sale", expire_time=timezone.now() - timedelta(minutes=1))
    future = make_completed_item(bob, "conference next month", expire_time=timezone.now() + timedelta(days=30))
    make_item(bob, "still pending")
    body = alice_client.get("/api/v1/feed").json()
    ids = [int(i["item_id"]) for i in body["items"]]
    assert ids == [future.pk, newer_same_group.pk]
    assert expired.pk not in ids
    assert first.pk not in ids


def test_feed_filters_and_cache_follow_changes(two_agents, django_capture_on_commit_callbacks):
    (_, alice_client), (bob, bob_client) = two_agents
    alert = make_completed_item(bob, "Region outage", broadcast_type="alert", domains=["cloud"])
    make_completed_item(bob, "Selling GPUs", broadcast_type="supply", domains=["hardware"])
    body = alice_client.get("/api/v1/feed?broadcast_type=alert").json()
    assert [i["item_id"] for i in body["items"]] == [str(alert.pk)]
    assert len(alice_client.get("/api/v1/feed?domain=hardware").json()["items"]) == 1
    assert alice_client.get("/api/v1/feed?broadcast_type=rumour").status_code == 422
    # The first page is cached; a deletion bumps the cache version so the next read is current.
    assert len(alice_client.get("/api/v1/feed").json()["items"]) == 2
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert bob_client.delete(f"/api/v1/items/{alert.pk}").status_code == 200
    assert len(alice_client.get("/api/v1/feed").json()["items"]) == 2, "served from cache until the commit"
    for callback in callbacks:
        callback()
    assert str(alert.pk) not in [i["item_id"] for i in alice_client.get("/api/v1/feed").json()["items"]]
    assert len(alice_client.get("/api/v1/feed").json()["items"]) == 1


def test_feed_pages_with_cursor(two_agents):
    (alice, alice_client), _ = two_agents
    ids = [make_completed_item(alice, f"item {n}").pk for n in range(5)]
    first = alice_client.get("/api/v1/feed?limit=2").json()
    second = alice_client.get(f"/api/v1/feed?limit=2&cursor={first['next_cursor']}").json()
    third = alice_client.get(f"/api/v1/feed?limit=2&cursor={second['next_cursor']}").json()
    got = [int(i["item_id"]) for page in (first, second, third) for i in page["items"]]
    assert got == ids[::-1]


# --- GET /search (keyword) ----------------------------------------------------------------------------


def test_keyword_search_finds_completed_items_only(two_agents):
    (_, alice_client), (bob, _) = two_agents
    hit = make_completed_item(bob, "Offering Kubernetes consulting in Berlin")
    make_completed_item(bob, "Selling a bicycle")
    make_item(bob, "Kubernetes question still pending")
    body = alice_client.get("/api/v1/search?q=kubernetes&mode=keyword").json()
    assert body["mode"] == "keyword"
    assert [i["item_id"] for i in body["items"]] == [str(hit.pk)]
    assert alice_client.get("/api/v1/search?q=&mode=keyword").status_code == 422
    assert alice_client.get("/api/v1/search?q=x&mode=psychic").status_code == 422


# --- POST /items/{id}/feedback ---------------------------------------------------------------------------


def test_feedback_is_announced_on_the_stats_stream(two_agents):
    (alice, _), (bob, bob_client) = two_agents
    item = make_completed_item(alice)
    url = f"/api/v1/items/{item.pk}/feedback"
    response = bob_client.post(url, data=json.dumps({"score": 2}), content_type="application/json")
    assert response.status_code == 202
    event = OutboxEvent.objects.get(stream=STREAM_ITEM_STATS)
    assert event.event_type == ITEM_FEEDBACK
    assert json.loads(event.envelope["data"]) == {"item_id": str(item.pk), "reader_id": str(bob.pk), "score": 2}
    bad = bob_client.post(url, data=json.dumps({"score": 5}), content_type="application/json")
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "score"


def test_feedback_on_an_invisible_item_is_404(two_agents):
    (alice, _), (_, bob_client) = two_agents
    pending = make_item(alice)
    response = bob_client.post(
        f"/api/v1/items/{pending.pk}/feedback", data=json.dumps({"score": 1}), content_type="application/json"
    )
    assert response.status_code == 404
    assert not OutboxEvent.objects.filter(stream=STREAM_ITEM_STATS).exists()


# --- rate limits ---------------------------------------------------------------------------------------------


def test_publish_and_reads_are_rate_limited_separately(settings, two_agents):
    (_, alice_client), (_, bob_client) = two_agents
    settings.RATE_LIMIT_PUBLISH_PER_MINUTE = 2
    settings.RATE_LIMIT_READ_PER_MINUTE = 3
    publish = lambda: alice_client.post(  # noqa: E731
        "/api/v1/items/publish", data=json.dumps({"content": "x"}), content_type="application/json"
    )
    assert [publish().status_code for _ in range(3)] == [202, 202, 429]
    limited = publish()
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 61
    # Reads have their own budget, and other agents are not affected.
    assert [alice_client.get("/api/v1/items").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert bob_client.get("/api/v1/items").status_code == 200


def test_both_apis_spend_one_publish_budget_per_agent(settings, two_agents):
    """Exhausting the publish limit (issue 44's own pass): the EigenFlux client's API and the native one count in
    the same per-agent bucket, so switching APIs does not double it, and another agent keeps its own."""
    from tests.items.compat.conftest import CompatClient

    (_, alice_client), (_, bob_client) = two_agents
    settings.RATE_LIMIT_PUBLISH_PER_MINUTE = 2
    token = alice_client.defaults["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
    compat = CompatClient(token)
    body = {"content": "GPU hours this weekend", "notes": "", "url": "", "accept_reply": False}
    assert [compat.post("/items/publish", body)[0] for _ in range(2)] == [200, 200]
    native = alice_client.post(
        "/api/v1/items/publish", data=json.dumps({"content": "x"}), content_type="application/json"
    )
    assert native.status_code == 429 and compat.post("/items/publish", body)[0] == 429
    assert (
        bob_client.post(
            "/api/v1/items/publish", data=json.dumps({"content": "y"}), content_type="application/json"
        ).status_code
        == 202
    )


# --- hostile input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/feed?domain=a%00b", 422),
        ("/api/v1/search?q=a%00b&mode=keyword", 422),
        ("/api/v1/search?q=x&domain=%00&mode=keyword", 422),
        ("/api/v1/items/%C2%B2", 404),  # "²" is a digit to str.isdigit(), not to int()
        ("/api/v1/items/%D9%A3", 404),  # Arabic-Indic three
        ("/api/v1/messages/%C2%B2/read", 405),
    ],
)
def test_hostile_reads_get_json_errors_not_500(two_agents, path, status):
    (_, alice_client), _ = two_agents
    response = alice_client.get(path)
    assert response.status_code == status, response.content
    if status != 405:
        assert response.json()["error"]["code"] in ("invalid", "not_found")


def test_lone_surrogates_are_refused_by_name(two_agents):
    (_, alice_client), _ = two_agents
    for field, body in (
        ("content", '{"content": "a\\ud800b"}'),
        ("notes", '{"content": "x", "notes": "\\udfff"}'),
    ):
        response = alice_client.post("/api/v1/items/publish", data=body, content_type="application/json")
        assert response.status_code == 422, response.content
        assert response.json()["error"]["field"] == field
    profile = alice_client.put("/api/v1/agents/me", data='{"bio": "\\ud83d"}', content_type="application/json")
    assert profile.status_code == 422
    assert profile.json()["error"]["field"] == "bio"
