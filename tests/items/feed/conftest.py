"""Shared pieces of the feed ranking tests: basis vectors, readers with a reader model, ranked ids."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from eigenflux.base.embedding_space import configured_embedding_model
from items.feed_ranking import rank_feed
from items.models import Agent, ProcessedItem, ReaderProfile
from tests.factories import make_agent, make_completed_item


def basis(*axes: int) -> list[float]:
    """A unit vector along the given axes (equal parts)."""
    vector = [0.0] * settings.EMBEDDING_DIMENSIONS
    for axis in axes:
        vector[axis] = 1.0 / len(axes) ** 0.5
    return vector


def reader_with(
    *, seeks_vector: list[float] | None = None, offers_vector: list[float] | None = None, **profile
) -> Agent:
    reader, _ = make_agent()
    if profile:
        for name, value in profile.items():
            setattr(reader, name, value)
        reader.save(update_fields=list(profile))
    if seeks_vector is not None or offers_vector is not None:
        ReaderProfile.objects.create(
            agent=reader,
            seeks_embedding=seeks_vector,
            offers_embedding=offers_vector,
            embedding_model=configured_embedding_model(),
            version=timezone.now(),
        )
    return reader


def item(author: Agent | None = None, *, hours_old: float = 0.0, **fields) -> ProcessedItem:
    """A completed item with neutral defaults (no keywords or domains shared by accident)."""
    fields.setdefault("keywords", [])
    fields.setdefault("domains", [])
    fields.setdefault("broadcast_type", "info")
    fields.setdefault("embedding", basis(300))
    created = make_completed_item(author, fields.pop("content", "A plain broadcast"), **fields)
    if hours_old:
        when = timezone.now() - timedelta(hours=hours_old)
        ProcessedItem.objects.filter(pk=created.pk).update(processed_at=when)
    return created


def ranked(reader: Agent, *, page_size: int = 20, **options) -> list[int]:
    return [entry.item.pk for entry in rank_feed(reader=reader, page_size=page_size, depth=100, **options)]


@pytest.fixture
def author():
    return make_agent()[0]
