"""The keyword blacklist as the pipeline reads it: enabled keywords cached in Redis for 60 s and
invalidated (after commit) by every change made through items.services.blacklist."""

from __future__ import annotations

import json

from eigenflux.base.redis import get_redis
from items.models import BlacklistKeyword

CACHE_KEY = "cache:blacklist:v1"
CACHE_SECONDS = 60


def blacklist_keywords() -> list[str]:
    client = get_redis()
    cached = client.get(CACHE_KEY)
    if cached is not None:
        return json.loads(cached)
    keywords = sorted(BlacklistKeyword.objects.filter(enabled=True).values_list("keyword", flat=True))
    client.set(CACHE_KEY, json.dumps(keywords), ex=CACHE_SECONDS)
    return keywords


def blacklist_invalidate() -> None:
    get_redis().delete(CACHE_KEY)


def blacklist_match(*texts: str) -> str | None:
    """The first enabled keyword found (case-insensitively, as a substring) in any of the texts."""
    haystacks = [text.casefold() for text in texts if text]
    for keyword in blacklist_keywords():
        needle = keyword.casefold()
        if any(needle in haystack for haystack in haystacks):
            return keyword
    return None
