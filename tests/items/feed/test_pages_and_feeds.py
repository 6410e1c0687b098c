"""Diversity caps and the exploration slot on each page; both feeds serve the ranking, never the reader's own
items and never an item twice (docs/feed.md)."""

from __future__ import annotations

import pytest
from django.test import Client

from items.models import ItemStats
from tests.factories import make_agent
from tests.items.feed.conftest import basis, item, ranked, reader_with

pytestmark = pytest.mark.django_db


def test_at_most_n_items_of_one_author_per_page(settings):
    settings.FEED_MAX_PER_AUTHOR = 2
    prolific, _ = make_agent()
    others = [make_agent()[0] for _ in range(3)]
    reader = reader_with()
    best = [item(prolific, quality=0.95) for _ in range(4)]
    rest = [item(other, quality=0.5) for other in others]
    first_page = ranked(reader, page_size=4)[:4]
    assert sum(pk in {i.pk for i in best} for pk in first_page) == 2
    assert len({i.pk for i in rest} & set(first_page)) == 2
    settings.FEED_MAX_PER_AUTHOR = 10
    assert set(ranked(reader, page_size=4)[:4]) == {i.pk for i in best}


def test_at_most_n_items_of_one_domain_per_page(settings, author):
    settings.FEED_MAX_PER_DOMAIN = 1
    settings.FEED_MAX_PER_AUTHOR = 10
    reader = reader_with()
    gpu = [item(author, domains=["compute"], quality=0.9) for _ in range(3)]
    travel = item(author, domains=["travel"], quality=0.55)
    first_page = ranked(reader, page_size=2)[:2]
    assert travel.pk in first_page and len(set(first_page) & {i.pk for i in gpu}) == 1


def test_an_exploration_slot_goes_to_a_fresh_item_with_no_signal(settings, author):
    settings.FEED_EXPLORATION_SLOTS = 1
    settings.FEED_MAX_PER_AUTHOR = 10
    reader = reader_with()
    proven = [item(author, quality=0.8) for _ in range(3)]
    for proven_item in proven:
        ItemStats.objects.create(item=proven_item, readers=10, score_sum=10, consumed=20)
    newcomer = item(make_agent()[0], quality=0.6)
    assert ranked(reader, page_size=3)[:3] == [proven[2].pk, proven[1].pk, newcomer.pk]
    settings.FEED_EXPLORATION_SLOTS = 0
    assert ranked(reader, page_size=3)[:3] == [proven[2].pk, proven[1].pk, proven[0].pk]


def test_exploration_skips_items_below_its_quality_floor(settings, author):
    settings.FEED_EXPLORATION_SLOTS = 1
    reader = reader_with()
    proven = [item(make_agent()[0], quality=0.8) for _ in range(3)]
    for proven_item in proven:
        ItemStats.objects.create(item=proven_item, readers=10, score_sum=10)
    item(author, quality=settings.FEED_EXPLORATION_MIN_QUALITY - 0.1)
    assert set(ranked(reader, page_size=3)[:3]) == {i.pk for i in proven}


def test_one_item_per_similarity_group_its_newest(author):
    reader = reader_with()
    original = item(author)
    repost = item(author, group_id=original.pk)
    assert ranked(reader) == [repost.pk]


def feed_ids(client: Client, path: str, **params) -> list[str]:
    body = client.get(path, params).json()
    items = body["data"]["items"] if "data" in body else body["items"]
    return [entry["item_id"] for entry in items]


def test_both_feeds_share_the_seen_memory_and_never_serve_an_item_twice(author):
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for n in range(9):
        item(author, content=f"Broadcast {n}", embedding=basis(n))
    poll = "/eigenflux/api/v1/items/feed"
    served = [
        *feed_ids(client, poll, action="refresh", limit=3),
        *feed_ids(client, "/api/v1/feed", for_me=1, unseen=1, limit=3),
        *feed_ids(client, poll, action="load_more", limit=3),
    ]
    assert len(served) == 9 and len(set(served)) == 9
    assert feed_ids(client, poll, action="refresh", limit=3) == []
    assert feed_ids(client, "/api/v1/feed", for_me=1, unseen=1, limit=3) == []


def test_neither_feed_serves_the_readers_own_items(author):
    reader, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    own = item(reader, quality=1.0)
    other = item(author)
    assert feed_ids(client, "/api/v1/feed", for_me=1) == [str(other.pk)]
    assert feed_ids(client, "/eigenflux/api/v1/items/feed", action="refresh") == [str(other.pk)]
    assert str(own.pk) in feed_ids(client, "/api/v1/feed")  # the plain network feed still lists it


def test_for_me_pages_through_the_whole_ranking_with_its_cursor(author):
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    made = {str(item(author, content=f"Broadcast {n}").pk) for n in range(5)}
    seen: list[str] = []
    cursor = None
    while True:
        body = client.get("/api/v1/feed", {"for_me": 1, "limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [entry["item_id"] for entry in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made)
    bad = client.get("/api/v1/feed", {"for_me": 1, "cursor": "bm90LW91cnM"})
    assert bad.status_code == 422


def test_items_below_the_quality_floor_come_after_every_other(settings, author):
    reader = reader_with(seeks_vector=basis(0))
    vague_match = item(author, broadcast_type="supply", embedding=basis(0), quality=0.2)
    plain = item(author, broadcast_type="supply", embedding=basis(3), quality=0.6, hours_old=50)
    assert ranked(reader) == [plain.pk, vague_match.pk]
    settings.FEED_MIN_QUALITY = 0.0
    assert ranked(reader) == [vague_match.pk, plain.pk]
