"""Shared redis-py clients, one connection pool per URL, created on first use from settings."""

from __future__ import annotations

import threading

import redis
from django.conf import settings

_clients: dict[str, redis.Redis] = {}
_lock = threading.Lock()


def get_redis(url: str | None = None) -> redis.Redis:
    url = url or settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        with _lock:
            client = _clients.get(url)
            if client is None:
                client = redis.Redis.from_url(
                    url, decode_responses=True, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30
                )
                _clients[url] = client
    return client
