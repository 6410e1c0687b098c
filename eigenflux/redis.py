"""Shared redis-py clients, one connection pool per URL (and reply mode), created on first use from settings."""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_clients: dict[tuple[str, bool], redis.Redis] = {}
_lock = threading.Lock()


def get_redis(url: str | None = None, *, raw: bool = False) -> redis.Redis:
    """The shared client for `url` (default REDIS_URL). Replies are decoded as UTF-8 unless `raw`: the stream
    runtime reads raw bytes, because anyone who can write to Redis can write bytes that are not UTF-8, and a
    strict decode of a whole reply would fail the read for every entry in it."""
    url = url or settings.REDIS_URL
    key = (url, raw)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = redis.Redis.from_url(
                    url,
                    decode_responses=not raw,
                    socket_timeout=10,
                    socket_connect_timeout=5,
                    health_check_interval=30,
                )
                _clients[key] = client
    return client
