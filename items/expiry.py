"""How far ahead an item may expire: an author's declared `expire_time` or the model's reading of one is cut to
ITEM_EXPIRY_MAX_DAYS from now, so a year-9999 expiry cannot keep a broadcast in every feed for ever. A cut, not a
refusal: publish answers before enrichment reads the notes, and the client's wire contract has the server
decide the item's public expiry (docs/enrichment.md)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone


def expiry_latest(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(days=settings.ITEM_EXPIRY_MAX_DAYS)


def expiry_capped(moment: datetime, *, now: datetime | None = None) -> datetime:
    """`moment`, or the latest allowed expiry when it lies beyond."""
    return min(moment, expiry_latest(now))
