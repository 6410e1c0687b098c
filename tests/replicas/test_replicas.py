"""Read replicas with a real streaming replica: the feed, search and other agents' items are read from it;
an agent that just wrote reads the primary (read-your-writes); writes never go to a replica.

Replay on the replica is paused (pg_wal_replay_pause) to make it visibly behind: what a reader sees then
tells which server answered."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from eigenflux.base.replicas import replica_reads
from items.keyword_search import keyword_candidates
from items.models import ProcessedItem
from items.pagination import encode_cursor
from tests.factories import make_agent, make_completed_item
from tests.items.test_search_keyword_paths import keyword_paths
from tests.replicas.conftest import caught_up

pytestmark = pytest.mark.slow


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {int(item["item_id"] if "item_id" in item else item["id"]) for item in response.json()["items"]}


def test_reads_go_to_the_replica_except_right_after_your_own_write(replica_db, settings):
    settings.DATABASE_REPLICA_PIN_SECONDS = 30
    author, author_token = make_agent()
    _, reader_token = make_agent()
    author_client = Client(HTTP_AUTHORIZATION=f"Bearer {author_token}")
    reader_client = Client(HTTP_AUTHORIZATION=f"Bearer {reader_token}")
    old = make_completed_item(author, "Zanzibar ferry schedules for the dry season", keywords=["zanzibar"])
    caught_up(replica_db)
    replica_db.execute("SELECT pg_wal_replay_pause()")
    try:
        new = make_completed_item(author, "Zanzibar spice farm tours every Tuesday", keywords=["zanzibar"])

        # The reader is served by the replica, which has not replayed `new`.
        assert ids(reader_client.get(f"/api/v1/feed?limit=50&cursor={encode_cursor(new.pk + 1)}")) == {old.pk}
        assert ids(reader_client.get("/api/v1/search?q=zanzibar&mode=keyword")) == {old.pk}
        # Also its candidates through the whole-network text index, which runs in a transaction of its own (its
        # settings): on the replica's connection, not the primary's.
        settings.SEARCH_KEYWORD_WINDOW, settings.SEARCH_KEYWORD_BUDGET_MS = 0, 0  # whole, on a cold replica too
        before = keyword_paths().get("text_index", 0)
        with replica_reads():
            found = keyword_candidates(q="zanzibar", broadcast_type=None, domain=None, depth=5)
        assert [pk for pk, _score in found.ranked] == [old.pk]
        assert keyword_paths().get("text_index", 0) == before + 1
        settings.SEARCH_KEYWORD_WINDOW = 20000
        # The cached first page is built on the primary (a stale page would be cached for everyone).
        assert new.pk in ids(reader_client.get("/api/v1/feed?limit=50"))
        # An item the replica does not have yet is looked for on the primary before a 404.
        assert reader_client.get(f"/api/v1/items/{new.pk}").status_code == 200

        # The author writes (a profile update): for DATABASE_REPLICA_PIN_SECONDS it reads the primary.
        assert (
            author_client.put("/api/v1/agents/me", {"bio": "ferries"}, content_type="application/json").status_code
            == 200
        )
        assert ids(author_client.get(f"/api/v1/feed?limit=50&cursor={encode_cursor(new.pk + 1)}")) == {old.pk, new.pk}
        assert ids(author_client.get("/api/v1/search?q=zanzibar&mode=keyword")) == {old.pk, new.pk}
        # ...while the reader, who wrote nothing, still reads the replica.
        assert ids(reader_client.get("/api/v1/search?q=zanzibar&mode=keyword")) == {old.pk}
    finally:
        replica_db.execute("SELECT pg_wal_replay_resume()")
    caught_up(replica_db)
    assert ids(reader_client.get("/api/v1/search?q=zanzibar&mode=keyword")) == {old.pk, new.pk}


def test_writes_and_reads_in_a_transaction_never_touch_the_replica(replica_db):
    item = make_completed_item(summary="before")
    caught_up(replica_db)
    with replica_reads() as alias:
        assert alias == "replica1"
        loaded = ProcessedItem.objects.get(pk=item.pk)
        assert loaded._state.db == "replica1"
        loaded.summary = "after"
        loaded.save(update_fields=["summary"])  # a replica would refuse: read-only transaction
        with transaction.atomic():
            inside = ProcessedItem.objects.get(pk=item.pk)
        assert inside._state.db == "default" and inside.summary == "after"
    assert ProcessedItem.objects.get(pk=item.pk).summary == "after"
