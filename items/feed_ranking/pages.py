"""Diversity and exploration (docs/feed.md#diversity-and-exploration): the ranking is cut into pages (items below
the quality floor last); on each page at most FEED_MAX_PER_AUTHOR items of one author and FEED_MAX_PER_DOMAIN of
one main domain, and the last FEED_EXPLORATION_SLOTS places go to the best fresh items with no signal yet."""

from __future__ import annotations

import dataclasses
import functools
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from items.feed_ranking.signals import ItemFacts, Scored


@dataclass(frozen=True)
class _Limits:
    """The page settings, read once per ranking (a settings lookup per entry costs more than the arithmetic)."""

    per_author: int
    per_domain: int
    slots: int
    explore_max_consumed: int
    explore_max_age_hours: float
    explore_min_quality: float
    min_quality: float
    explore_pool: int = 1

    @classmethod
    def current(cls) -> _Limits:
        return cls(
            settings.FEED_MAX_PER_AUTHOR,
            settings.FEED_MAX_PER_DOMAIN,
            settings.FEED_EXPLORATION_SLOTS,
            settings.FEED_EXPLORATION_MAX_CONSUMED,
            settings.FEED_EXPLORATION_MAX_AGE_HOURS,
            settings.FEED_EXPLORATION_MIN_QUALITY,
            settings.FEED_MIN_QUALITY,
            settings.FEED_EXPLORATION_POOL,
        )


_draw = random.Random()  # an exploration draw, not a secret


def exploration_seed(seed: int) -> None:
    """Make this process's exploration draws repeatable (a simulation; tests)."""
    _draw.seed(seed)


def explorable_flags(items: list[ItemFacts], *, now: datetime) -> list[bool]:
    """Whether the exploration rule would take each item (the ranker's `explorable` feature)."""
    limits = _Limits.current()
    return [_explorable(facts, now=now, limits=limits) for facts in items]


def explorable(entry: Scored, *, now: datetime, limits: _Limits) -> bool:
    return _explorable(entry.facts, now=now, limits=limits)


def _explorable(facts: ItemFacts, *, now: datetime, limits: _Limits) -> bool:
    """Fresh, decent, and nobody has judged it yet: the kind of item a new author's reach depends on."""
    age_hours = (now - facts.completed_at).total_seconds() / 3600
    quality = 0.0 if facts.quality is None else facts.quality
    return (
        facts.readers == 0
        and facts.consumed <= limits.explore_max_consumed
        and age_hours <= limits.explore_max_age_hours
        and quality >= limits.explore_min_quality
    )


class _Caps:
    def __init__(self, limits: _Limits) -> None:
        self.limits = limits
        self.authors: Counter[int] = Counter()
        self.domains: Counter[str] = Counter()

    @staticmethod
    @functools.lru_cache(maxsize=4096)  # a page's domains repeat; their first, folded, is asked per entry
    def _domain(domains: tuple[str, ...]) -> str | None:
        return domains[0].casefold() if domains else None

    def allow(self, entry: Scored) -> bool:
        domain = self._domain(entry.facts.domains)
        return self.authors[entry.facts.author_id] < self.limits.per_author and (
            domain is None or self.domains[domain] < self.limits.per_domain
        )

    def take(self, entry: Scored) -> None:
        self.authors[entry.facts.author_id] += 1
        if (domain := self._domain(entry.facts.domains)) is not None:
            self.domains[domain] += 1


def _page(
    ranked: list[Scored], size: int, limits: _Limits, explorable_ids: set[int]
) -> tuple[list[Scored], list[Scored]]:
    """One page from the ranked remainder, and what is left of it."""
    slots = limits.slots if size > limits.slots else 0
    caps = _Caps(limits)
    chosen: list[Scored] = []
    taken: set[int] = set()

    def take(entry: Scored) -> None:
        chosen.append(entry)
        taken.add(entry.facts.item_id)
        caps.take(entry)

    for entry in ranked:
        if len(chosen) >= size - slots:
            break
        if caps.allow(entry):
            take(entry)
    for _ in range(slots):
        # The slot's item is drawn uniformly from the first FEED_EXPLORATION_POOL eligible ones (1: the best),
        # and the draw's probability logged with it: what an inverse-propensity estimate weighs it by.
        pool: list[Scored] = []
        for entry in ranked:
            if len(pool) >= limits.explore_pool:
                break
            if entry.facts.item_id in explorable_ids and entry.facts.item_id not in taken and caps.allow(entry):
                pool.append(entry)
        if not pool:
            break
        drawn = pool[0] if len(pool) == 1 else _draw.choice(pool)
        take(dataclasses.replace(drawn, propensity=1.0 / len(pool)))
    # Places left (no explorable item, or too few within the caps in a small or one-sided network): filled in
    # ranking order, within the caps first.
    for within_caps in (True, False):
        for entry in ranked:
            if len(chosen) >= size:
                break
            if entry.facts.item_id not in taken and (not within_caps or caps.allow(entry)):
                take(entry)
    return chosen, [entry for entry in ranked if entry.facts.item_id not in taken]


def paginate(scored: list[Scored], *, page_size: int, now: datetime, depth: int) -> list[Scored]:
    """The first `depth` items of the ranking, best first, arranged page by page; items below FEED_MIN_QUALITY
    (vague posts, bait) only after every other, however well they match."""
    limits = _Limits.current()
    explorable_ids = {entry.facts.item_id for entry in scored if explorable(entry, now=now, limits=limits)}
    below = {
        entry.facts.item_id
        for entry in scored
        if entry.facts.quality is not None and entry.facts.quality < limits.min_quality
    }
    arranged: list[Scored] = []
    for low in (False, True):
        remaining = sorted(
            (entry for entry in scored if (entry.facts.item_id in below) == low),
            key=lambda entry: (-entry.total, -entry.facts.item_id),
        )
        while remaining and len(arranged) < depth:
            page, remaining = _page(remaining, page_size, limits, explorable_ids)
            arranged.extend(page)
    return arranged[:depth]
