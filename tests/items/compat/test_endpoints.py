"""The client API's endpoints one by one: publish, item detail, batch feedback, events, my items, delete,
profile, settings, and how failures look (envelope, real 401/404/405/413, unsupported features)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.urls import clear_url_caches

from eigenflux.base.environ import compat_prefix
from items.models import (
    AgentClientSettings,
    FeedEvent,
    ItemFeedback,
    ItemStatus,
    OutboxEvent,
    ProcessedItem,
    PublicReason,
    RawItem,
)
from items.services.feedback import item_feedback_count
from tests.factories import make_agent, make_completed_item, make_held_item, make_item

pytestmark = pytest.mark.django_db

NOTES = '{"type":"info","domains":["ai"],"summary":"x","expire_time":"2099-01-01T00:00:00Z","source_type":"original"}'


def test_publish_stores_the_item_with_its_notes(compat, agent_and_token):
    author, token = agent_and_token
    body = {"content": "Spare A100 hours", "notes": NOTES, "accept_reply": False, "url": "https://example.com/a"}
    status, answer, _ = compat(token).post("/items/publish", {**body, "unknown_field": 1})
    assert status == 200 and answer["code"] == 0
    raw = RawItem.objects.get(pk=int(answer["data"]["item_id"]))
    assert (raw.author_id, raw.notes, raw.accept_reply, raw.url) == (author.pk, NOTES, False, "https://example.com/a")
    assert OutboxEvent.objects.filter(subject=str(raw.pk)).count() == 1


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"notes": NOTES}, "content"),
        ({"content": "   ", "notes": NOTES}, "content must not be blank"),
        ({"content": "x" * 4001, "notes": NOTES}, "4000"),
        ({"content": "ok", "url": "ftp://example.com"}, "url"),
        ({"content": "ok", "accept_reply": "yes"}, "accept_reply"),
    ],
)
def test_publish_refuses_bad_input_with_a_named_400(compat, agent_and_token, body, fragment):
    status, answer, _ = compat(agent_and_token[1]).post("/items/publish", body)
    assert status == 400 and answer["code"] == 400 and fragment in answer["msg"]
    assert RawItem.objects.count() == 0


def test_publish_idempotency_key_rules_are_the_native_apis(compat, agent_and_token):
    """A malformed key is a named 400, nothing stored; a key reused with another body is a 422; a repeat with the
    same body returns the first item (the native API's rules, through the one shared handler)."""
    client = compat(agent_and_token[1])
    for key in ("k" * 256, "tab\there"):
        status, answer, _ = client.post("/items/publish", {"content": "ok"}, **{"Idempotency-Key": key})
        assert (status, answer["code"]) == (400, 400) and "Idempotency-Key must be 1-255" in answer["msg"]
    assert RawItem.objects.count() == 0
    first = client.post("/items/publish", {"content": "ok"}, **{"Idempotency-Key": "k" * 255})
    again = client.post("/items/publish", {"content": "ok"}, **{"Idempotency-Key": "k" * 255})
    assert first[0] == again[0] == 200 and first[1]["data"]["item_id"] == again[1]["data"]["item_id"]
    status, answer, _ = client.post("/items/publish", {"content": "other"}, **{"Idempotency-Key": "k" * 255})
    assert status == 422 and "different request body" in answer["msg"]
    assert RawItem.objects.count() == 1


def test_publish_without_a_token_is_a_real_401(compat):
    status, answer, _headers = compat().post("/items/publish", {"content": "x"})
    assert (status, answer) == (401, {"code": 401, "msg": "missing or invalid authorization header"})


def test_malformed_json_is_a_400_envelope(agent_and_token):
    response = Client(HTTP_AUTHORIZATION=f"Bearer {agent_and_token[1]}").post(
        "/eigenflux/api/v1/items/publish", data="{nope", content_type="application/json"
    )
    assert response.status_code == 400 and response.json() == {"code": 400, "msg": "request body is not valid JSON"}


def test_oversized_bodies_are_a_413_envelope(agent_and_token, settings):
    settings.API_MAX_BODY_BYTES = 1024
    response = Client(HTTP_AUTHORIZATION=f"Bearer {agent_and_token[1]}").post(
        "/eigenflux/api/v1/items/publish", data=json.dumps({"content": "x" * 2000}), content_type="application/json"
    )
    assert response.status_code == 413 and response.json()["code"] == 413


def test_wrong_method_is_a_405_envelope_and_feedback_is_not_shadowed_by_the_item_path(compat, agent_and_token):
    status, answer, headers = compat(agent_and_token[1]).put("/items/feedback", {"items": []})
    assert status == 405 and answer["code"] == 405 and headers["Allow"] == "POST"
    status, answer, _ = compat(agent_and_token[1]).post("/items/feedback", {"items": []})
    assert status == 200 and answer["data"] == {"processed_count": 0, "skipped_count": 0}


def test_unsupported_features_say_so(compat, agent_and_token):
    for path, feature in [("/pm/fetch", "private messages"), ("/relations/friends", "relations")]:
        status, answer, _ = compat(agent_and_token[1]).get(path)
        assert status == 404 and answer["code"] == 404 and feature in answer["msg"]
    status, answer, _ = compat(agent_and_token[1]).get("/no/such/thing")
    assert status == 404 and answer["msg"].startswith("no such endpoint")


def test_item_detail_status_codes_and_visibility(compat):
    author, author_token = make_agent()
    _, reader_token = make_agent()
    pending = make_item(author, "pending one")
    status, answer, _ = compat(author_token).get(f"/items/{pending.pk}")
    item = answer["data"]["item"]
    assert status == 200 and item["status"] == 0 and item["broadcast_type"] == "" and item["url"] == ""
    assert item["interaction_total"] == 0 and item["recent_interactions"] == []
    assert "notes" not in item and "author_agent_id" not in item
    assert compat(reader_token).get(f"/items/{pending.pk}")[0] == 404
    for status_name, code in [(ItemStatus.PROCESSING, 1), (ItemStatus.FAILED, 2), (ItemStatus.DELETED, 5)]:
        ProcessedItem.objects.filter(pk=pending.pk).update(status=status_name)
        assert compat(author_token).get(f"/items/{pending.pk}")[1]["data"]["item"]["status"] == code
        assert compat(reader_token).get(f"/items/{pending.pk}")[0] == 404
    assert compat(reader_token).get("/items/not-a-number")[0] == 404


def test_discard_details_only_for_the_author_and_duplicates_only_of_own_items(compat):
    author, author_token = make_agent()
    other, _ = make_agent()
    others_original = make_completed_item(other, "the original by someone else")
    item = make_item(author, "copy")
    ProcessedItem.objects.filter(pk=item.pk).update(
        status=ItemStatus.DISCARDED, reason=PublicReason.DUPLICATE, duplicate_of=others_original.raw
    )
    detail = compat(author_token).get(f"/items/{item.pk}")[1]["data"]["item"]
    assert detail["status"] == 4 and detail["distribution_skip_reason"] == "content_evaluation"
    assert "duplicate_of" not in detail


def test_recent_interactions_for_the_author(compat):
    author, author_token = make_agent()
    item = make_completed_item(author)
    readers = [make_agent(f"reader-{n}")[0] for n in range(3)]
    for n, reader in enumerate(readers):
        item_feedback_count(item_id=item.pk, reader_id=reader.pk, score=n, event_id=f"e{n}")
    detail = compat(author_token).get(f"/items/{item.pk}?int_limit=2")[1]["data"]["item"]
    assert detail["interaction_total"] == 3
    assert [row["agent_name"] for row in detail["recent_interactions"]] == ["reader-2", "reader-1"]
    assert detail["recent_interactions"][0]["score"] == 2


def test_readers_who_reported_an_item_are_not_named_to_its_author(compat):
    """Issue 44, item 11: a -1 is a report; the author sees how many, never who (held items included)."""
    author, author_token = make_agent()
    item = make_completed_item(author)
    reporter, fan = make_agent("alice")[0], make_agent("fan")[0]
    item_feedback_count(item_id=item.pk, reader_id=fan.pk, score=2, event_id="e1")
    item_feedback_count(item_id=item.pk, reader_id=reporter.pk, score=-1, event_id="e2")
    for status in (ItemStatus.COMPLETED, ItemStatus.REVIEW):
        ProcessedItem.objects.filter(pk=item.pk).update(status=status)
        detail = compat(author_token).get(f"/items/{item.pk}")[1]["data"]["item"]
        assert detail["interaction_total"] == 2
        assert [row["agent_name"] for row in detail["recent_interactions"]] == ["fan"]
        assert [row["agent_id"] for row in detail["recent_interactions"]] == [str(fan.pk)]


def test_batch_feedback_skips_bad_entries_and_accepts_numeric_ids(compat):
    reader, token = make_agent()
    item = make_completed_item()
    own = make_completed_item(reader)
    entries = [
        {"item_id": item.pk, "score": 2},  # a JSON number, as `feed feedback` may send
        {"item_id": "abc", "score": 1},
        {"item_id": str(item.pk), "score": 5},
        {"item_id": str(own.pk), "score": 1},
        {"item_id": "999999", "score": 1},
    ]
    status, answer, _ = compat(token).post("/items/feedback", {"items": entries})
    assert status == 200
    assert answer["data"]["processed_count"] == 1 and answer["data"]["skipped_count"] == 4
    reasons = answer["data"]["skipped_reasons"]
    assert reasons[0] == "invalid item_id abc" and reasons[1] == f"invalid score for item {item.pk}"
    assert "cannot be scored" in reasons[2] and "not found" in reasons[3]
    assert OutboxEvent.objects.filter(event_type__endswith="item.feedback.v1", subject=str(item.pk)).count() == 1
    assert ItemFeedback.objects.count() == 0  # counted by the stats consumer, not here


def test_events_are_recorded_once_per_dedup_key(compat, agent_and_token):
    agent, token = agent_and_token
    item = str(make_completed_item().pk)
    events = [
        {"item_id": item, "kind": "surface", "impression_id": "imp_1", "dedup_key": "k1", "brief": "shown"},
        {"item_id": item, "kind": "dance", "dedup_key": "k2"},
        {"item_id": item, "kind": "task"},
        {"item_id": "x", "kind": "task", "dedup_key": "k3"},
    ]
    first = compat(token).post("/items/events", {"events": events})[1]["data"]
    assert (first["accepted"], first["skipped"]) == (1, 3)
    assert first["skipped_reasons"] == [
        f"invalid kind dance for item {item}",
        f"missing dedup_key for item {item}",
        "invalid item_id x",
    ]
    again = compat(token).post("/items/events", {"events": events[:1]})[1]["data"]
    assert again == {"accepted": 1, "skipped": 0}
    assert list(FeedEvent.objects.values_list("agent_id", "item_id", "kind", "brief")) == [
        (agent.pk, int(item), "surface", "shown")
    ]
    status, answer, _ = compat(token).post("/items/events", {"events": events * 13})
    assert status == 400 and "50" in answer["msg"]


def test_events_only_for_items_the_reader_may_see(compat, agent_and_token):
    """Issue 44, item 8: held items, others' unpublished items and unknown ids are skipped alike as not found."""
    agent, token = agent_and_token
    published, own_pending = make_completed_item(), make_item(author=agent)
    held, others_pending = make_held_item(), make_item()
    ids = [published.pk, own_pending.pk, held.pk, others_pending.pk, 999_999_999]
    events = [{"item_id": str(pk), "kind": "surface", "dedup_key": f"k{pk}"} for pk in ids]
    answer = compat(token).post("/items/events", {"events": events})[1]["data"]
    assert (answer["accepted"], answer["skipped"]) == (2, 3)
    assert answer["skipped_reasons"] == [f"item {pk} not found" for pk in ids[2:]]
    assert set(FeedEvent.objects.values_list("item_id", flat=True)) == {published.pk, own_pending.pk}


def test_my_items_page_with_last_item_id(compat):
    author, token = make_agent()
    items = [make_completed_item(author, f"mine {n}") for n in range(3)]
    make_completed_item(None, "someone else's")
    first = compat(token).get("/agents/items?limit=2")[1]["data"]
    assert [i["item_id"] for i in first["items"]] == [str(items[2].pk), str(items[1].pk)]
    assert first["next_cursor"] == str(items[1].pk)
    second = compat(token).get(f"/agents/items?limit=2&last_item_id={first['next_cursor']}")[1]["data"]
    assert [i["item_id"] for i in second["items"]] == [str(items[0].pk)]
    third = compat(token).get(f"/agents/items?limit=2&last_item_id={second['next_cursor']}")[1]["data"]
    assert third == {"items": [], "next_cursor": "0"}


def test_delete_then_deleted_items_are_listed_as_retracted(compat):
    author, token = make_agent()
    item = make_completed_item(author)
    assert compat(token).delete(f"/agents/items/{item.pk}")[1] == {"code": 0, "msg": "success"}
    assert compat(token).delete(f"/agents/items/{item.pk}")[1] == {"code": 0, "msg": "success"}
    listed = compat(token).get("/agents/items")[1]["data"]["items"][0]
    assert listed["status"] == 5 and listed["retracted"] is True
    assert compat(token).delete("/agents/items/424242")[1] == {"code": 404, "msg": "item not found"}


def test_profile_show_and_update(compat, agent_and_token):
    _agent, token = agent_and_token
    status, answer, _ = compat(token).put("/agents/profile", {"agent_name": "ResearchBot", "bio": "AI infra"})
    assert status == 200 and answer == {
        "code": 0,
        "msg": "Registration completed. You can now start browsing your feed.",
    }
    assert compat(token).put("/agents/profile", {"bio": "AI infra, GPUs"})[1] == {"code": 0, "msg": "success"}
    profile = compat(token).get("/agents/me")[1]["data"]
    assert profile["profile"]["agent_name"] == "ResearchBot" and profile["profile"]["bio"] == "AI infra, GPUs"
    assert profile["influence"] == {"total_items": 0, "total_consumed": 0, "total_scored_1": 0, "total_scored_2": 0}
    status, answer, _ = compat(token).put("/agents/profile", {})
    assert status == 400 and "at least one" in answer["msg"]
    status, answer, _ = compat(token).put("/agents/profile", {"bio": "b" * 4001})
    assert status == 400 and answer["msg"].startswith("bio")


@pytest.mark.parametrize(
    ("name", "status", "fragment"),
    [
        ("Bad\x1fname", 422, "control characters"),
        ("eigenflux", 422, "reserved"),
        ("TAKEN-name", 409, "taken"),
        ("taken-narne", 409, "taken"),  # rn looks like m: a look-alike is taken too
        ("EigenFIux", 422, "looks like the reserved name 'EigenFlux'"),
        ("Nova\u2800Star", 422, "invisible character U+2800"),
        ("Eigen\u2800Flux", 422, "reserved"),  # the reserved check comes first (agent_name_check)
    ],
)
def test_profile_update_refuses_a_name_it_cannot_use_with_a_named_error(
    compat, agent_and_token, name, status, fragment
):
    agent, token = agent_and_token
    make_agent(name="taken-name")
    before = (agent.name, agent.bio)
    answer_status, answer, _ = compat(token).put("/agents/profile", {"agent_name": name, "bio": "new bio"})
    assert answer_status == status and answer["code"] == status
    assert answer["msg"].startswith("agent_name: ") and fragment in answer["msg"]
    agent.refresh_from_db()
    assert (agent.name, agent.bio) == before  # nothing half-written: the bio is not saved either


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "/agents/me/settings"),
        ("put", "/agents/profile"),
        ("post", "/items/publish"),
        ("post", "/items/feedback"),
        ("post", "/items/events"),
        ("post", "/auth/login"),
        ("post", "/auth/login/verify"),
    ],
)
@pytest.mark.parametrize("body", [[None, None], [], "x", 5])
def test_a_body_that_is_not_a_json_object_is_a_named_400(compat, agent_and_token, method, path, body):
    agent, token = agent_and_token
    status, answer, _ = getattr(compat(token), method)(path, body)
    assert (status, answer) == (400, {"code": 400, "msg": "body: must be a JSON object"})
    assert not AgentClientSettings.objects.filter(agent=agent).exists()  # settings: nothing stored either


def test_settings_round_trip(compat, agent_and_token):
    agent, token = agent_and_token
    defaults = compat(token).get("/agents/me/settings")[1]["data"]
    assert defaults["feed_poll_interval"] == 300 and defaults["recurring_publish"] is False
    assert defaults["auto_reply_pm"] is False and defaults["auto_comment"] is False  # no PMs on this server
    body = {"recurring_publish": True, "feed_poll_interval": 900, "feed_poll_interval_user_set": True}
    assert compat(token).put("/agents/me/settings", body)[1] == {"code": 0, "msg": "success"}
    pushed = {"feed_delivery_preference": "only GPU news", "mode": "plugin"}
    compat(token).put("/agents/me/settings", pushed, **{"X-Client-Host": "claude-code/0.0.5"})
    data = compat(token).get("/agents/me/settings")[1]["data"]
    assert (data["recurring_publish"], data["feed_poll_interval"], data["mode"]) == (True, 900, "plugin")
    assert (data["runtime_name"], data["runtime_version"]) == ("claude-code", "0.0.5")
    assert data["updated_at"] > 0
    status, answer, _ = compat(token).put("/agents/me/settings", {"feed_poll_interval": 5})
    assert status == 400 and "feed_poll_interval" in answer["msg"]
    assert AgentClientSettings.objects.get(agent=agent).feed_poll_interval == 900


def test_the_prefix_is_configurable_and_can_be_turned_off(agent_and_token, monkeypatch):
    _, token = agent_and_token
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for urlconf, prefix, path in [
        ("tests.items.compat.urls_custom_prefix", "ef/compat", "/ef/compat/api/v1/agents/me"),
        ("tests.items.compat.urls_no_prefix", "", "/eigenflux/api/v1/agents/me"),
    ]:
        with override_settings(ROOT_URLCONF=urlconf, EIGENFLUX_COMPAT_PREFIX=prefix):
            clear_url_caches()
            response = client.get(path)
            assert response.status_code == (200 if prefix else 404)
            if not prefix:
                assert not response.get("Content-Type", "").startswith("application/json")
    clear_url_caches()
    assert client.get("/api/v1/agents/me").status_code == 200  # the native API is where it always was
    monkeypatch.setenv("TEST_COMPAT_PREFIX", "/ef/x/")
    assert compat_prefix("TEST_COMPAT_PREFIX", "eigenflux") == "ef/x"
    monkeypatch.setenv("TEST_COMPAT_PREFIX", "")
    assert compat_prefix("TEST_COMPAT_PREFIX", "eigenflux") == ""
    for bad in ("api", "admin/x", "a b", "../x"):
        monkeypatch.setenv("TEST_COMPAT_PREFIX", bad)
        with pytest.raises(ImproperlyConfigured, match="TEST_COMPAT_PREFIX"):
            compat_prefix("TEST_COMPAT_PREFIX", "eigenflux")
