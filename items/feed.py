"""The feed's Redis cache: first pages are cached per filter under a version number that every change to
the set of visible items bumps (completion, deletion, take-down), so a stale page is never served."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

import redis
from django.db import transaction

from eigenflux.base.redis import get_redis, reply_text

VERSION_KEY = "feed:version"
PAGE_SECONDS = 30


def feed_invalidate_on_commit() -> None:
    transaction.on_commit(feed_invalidate, robust=True)


def feed_invalidate() -> None:
    get_redis().incr(VERSION_KEY)


def feed_cached(key: str, build: Callable[[], dict]) -> dict:
    """A cached first page; falls back to building it from PostgreSQL when Redis is unavailable."""
    try:
        client = get_redis()
        version = client.get(VERSION_KEY) or "0"
        cache_key = f"feed:page:{reply_text(version)}:{key}"
        cached = client.get(cache_key)
        if cached is not None:
            return json.loads(cached)
    except redis.RedisError:
        return build()
    body = build()
    # The cache is an optimisation; the answer is already built.
    with contextlib.suppress(redis.RedisError):
        client.set(cache_key, json.dumps(body), ex=PAGE_SECONDS)
    return body
