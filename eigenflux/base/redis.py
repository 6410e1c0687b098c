"""Shared redis-py clients, one connection pool per URL (and reply mode), created on first use from settings.

REDIS_URL may name a Redis Cluster: with REDIS_CLUSTER=true (any redis:// / rediss:// URL of one node; the
client discovers the others) or a `redis+cluster://host1:port1,host2:port2/` URL (several seed nodes, so a
start does not depend on one node being up). The client is then a redis-py RedisCluster, which routes each
command to the master owning its key's slot and follows MOVED/ASK redirections during failovers.

Keys that one Lua script or MULTI touches must live in one slot: they share a hash tag (the text between the
first `{` and the next `}`, which is all Redis Cluster hashes). `slot_tag` and `with_tag` are the helpers
every such key name is built with (dead-letter stream names: pipeline.streams).
"""

from __future__ import annotations

import threading
from typing import cast
from urllib.parse import unquote, urlsplit

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.cluster import ClusterNode, RedisCluster

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

_clients: dict[tuple[str, bool], redis.Redis] = {}
_lock = threading.Lock()


def is_cluster_url(url: str, *, flag: bool = False) -> bool:
    """Whether `url` (with REDIS_CLUSTER = `flag`) names a Redis Cluster."""
    return flag or urlsplit(url).scheme in CLUSTER_SCHEMES


def cluster_client(url: str, **options) -> RedisCluster:
    """A RedisCluster for a redis+cluster:// URL with one or more comma-separated seed nodes, or for a plain
    redis:// / rediss:// URL of one node. Raises ImproperlyConfigured naming what is wrong with the URL."""
    parts = urlsplit(url)
    scheme = CLUSTER_SCHEMES.get(parts.scheme, parts.scheme)
    if scheme not in ("redis", "rediss"):
        raise ImproperlyConfigured(
            f"REDIS_URL for a Redis Cluster must be redis://, rediss:// or redis+cluster://, got {parts.scheme}://"
        )
    if parts.path.strip("/") not in ("", "0"):
        raise ImproperlyConfigured("REDIS_URL: a Redis Cluster has only database 0")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    nodes = []
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not name or not port.isdigit():
            raise ImproperlyConfigured(f"REDIS_URL: cluster node {host!r} is not host:port")
        nodes.append(ClusterNode(name.strip("[]"), int(port)))
    if userinfo:
        username, _, password = userinfo.partition(":")
        options.update(username=unquote(username) or None, password=unquote(password) or None)
    if scheme == "rediss":
        options["ssl"] = True
    return RedisCluster(startup_nodes=nodes, **options)


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
                options = {"decode_responses": not raw, "socket_timeout": 10, "socket_connect_timeout": 5}
                if is_cluster_url(url, flag=url == settings.REDIS_URL and settings.REDIS_CLUSTER):
                    # Not a redis.Redis subclass, but it serves the same commands (RedisClusterCommands), the only
                    # part of the client the project uses.
                    client = cast(redis.Redis, cluster_client(url, **options))
                else:
                    client = redis.Redis.from_url(url, health_check_interval=30, **options)
                _clients[key] = client
    return client


def reply_text(reply: bytes | str) -> str:
    """A reply as text: a decoding client (the default) returns str already; a raw one returns bytes."""
    return reply.decode() if isinstance(reply, bytes) else reply


def slot_tag(key: str) -> str:
    """The part of `key` Redis Cluster hashes: the text between its first `{` and the next `}` when that is
    not empty, else the whole key."""
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def with_tag(anchor: str) -> str:
    """`{tag}`: a prefix that places a key in the same slot as `anchor`."""
    return "{" + slot_tag(anchor) + "}"
