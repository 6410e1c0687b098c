"""The feed scores its candidates as arrays (items.feed_ranking.scoring.score_many); each item's score and every
signal's part equal what the per-item reference (tests/items/feed/reference_scoring.py) gives, for every kind of
reader and item."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from items.feed_ranking.scoring import score_many
from items.feed_ranking.signals import SIGNALS, ItemFacts, ReaderContext, unit, weights
from tests.items.feed.reference_scoring import score_item

DIMS = 16
TYPES = ("supply", "demand", "info", "alert", "")


def _vector(rng: np.random.Generator) -> np.ndarray:
    return unit(rng.standard_normal(DIMS))


def _facts(index: int, rng: np.random.Generator, chance: random.Random, now) -> ItemFacts:
    stats = chance.random() < 0.6
    return ItemFacts(
        item_id=index,
        author_id=chance.randrange(5),
        broadcast_type=chance.choice(TYPES),
        keywords=tuple(chance.sample(["GPU", "rent", "bike", "Lisbon", "law"], chance.randrange(3))),
        domains=tuple(chance.sample(["compute", "Travel", "legal"], chance.randrange(2))),
        quality=None if chance.random() < 0.2 else chance.random(),
        completed_at=now - timedelta(hours=chance.random() * 200 - 2),  # a few in the future (clock skew)
        embedding=None if chance.random() < 0.15 else _vector(rng),
        concepts=frozenset(chance.sample(range(10), chance.randrange(4))),
        author_official=chance.random() < 0.1,
        readers=chance.randrange(8) if stats else 0,
        score_sum=chance.randrange(-3, 12) if stats else 0,
        consumed=chance.randrange(300) if stats else 0,
        engagement=chance.choice([0.0, chance.random() * 80]) if stats else 0.0,
        stats_updated_at=now - timedelta(hours=chance.random() * 90) if stats else None,
    )


def _reader(rng: np.random.Generator, chance: random.Random, *, offers: bool, judged: bool) -> ReaderContext:
    seeks = _vector(rng) if chance.random() < 0.9 else None
    offered = _vector(rng) if offers else None
    return ReaderContext(
        agent_id=999,
        seeks=seeks,
        offers=offered,
        seeks_parts=[v for v in (seeks, _vector(rng)) if v is not None],
        offers_parts=[offered, _vector(rng)] if offered is not None else [],
        keywords=frozenset({"gpu", "travel"}),
        seeks_concepts=frozenset(chance.sample(range(10), 3)),
        offers_concepts=frozenset(chance.sample(range(10), 2)) if offers or chance.random() < 0.5 else frozenset(),
        judged=[(_vector(rng), chance.choice([-1.0, 0.5, 1.0, 0.25])) for _ in range(4)] if judged else [],
        neighbour_likes={index: chance.random() * 1.5 for index in range(0, 60, 7)},
    )


@pytest.mark.parametrize(("offers", "judged"), [(True, True), (False, True), (True, False), (False, False)])
def test_score_many_equals_score_item_for_each_item_and_signal(settings, offers, judged):
    settings.FEED_WEIGHT_OVERLAP = 0.7  # every weight non-zero and distinct, so a swapped signal shows
    rng, chance, now = np.random.default_rng(3), random.Random(5), timezone.now()
    current = weights()
    for _ in range(5):
        reader = _reader(rng, chance, offers=offers, judged=judged)
        items = [_facts(index, rng, chance, now) for index in range(60)]
        many = score_many(reader, items, now=now, weights=current)
        assert [entry.facts.item_id for entry in many] == [item.item_id for item in items]
        for entry, item in zip(many, items, strict=True):
            one = score_item(reader, item, now=now, weights=current)
            # Cosines are float32: one row or many may round apart, by about 1e-7 times the largest weight.
            assert entry.total == pytest.approx(one.total, abs=1e-6 * max(current.values()))
            assert list(entry.parts) == list(SIGNALS)
            for name in SIGNALS:
                assert entry.parts[name] == pytest.approx(one.parts[name], abs=1e-6 * max(current.values())), name


def test_score_many_of_nothing_is_nothing():
    assert score_many(ReaderContext(agent_id=1), [], now=timezone.now(), weights=weights()) == []
