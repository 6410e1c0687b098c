"""Query embeddings for semantic search, bounded: each one costs a model call.

Vectors are cached in Redis per agent and query text (for SEARCH_EMBEDDING_CACHE_SECONDS, keyed with the
agent, provider, model and dimensions, and stored with the similarity floor of the model that made them). The
cache is per agent because a shared one is an oracle: a query another agent ran recently answers in about half
the time of a fresh one (a model call saved), so an agent could tell what others search for. Every semantic or
hybrid search also counts in its own per-agent rate bucket (RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE), whether
its vector is cached or not, so an agent's repeats are bounded like fresh queries. Keyword mode costs nothing
against that bucket."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import math
import struct

import redis
from django.conf import settings

from eigenflux.base.embedding_space import configured_embedding_model
from eigenflux.base.redis import get_redis, reply_text
from items.ratelimit import rate_limit_hit
from items.search import QueryVector, embed_query

log = logging.getLogger(__name__)

EMBEDDING_BUCKET = "embed"


class EmbeddingRateLimited(RuntimeError):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many new search embeddings; retry in {retry_after} s")
        self.retry_after = retry_after


def normalise_query(text: str) -> str:
    """Whitespace collapsed and trimmed: what is embedded and what the cache is keyed by."""
    return " ".join(text.split())


def cache_key(text: str, *, agent_id: int) -> str:
    """The agent's own cache entry for `text` in the configured embedding space: one agent's query never warms
    another's, and a vector of another model or space (before a change, or on a process not yet upgraded) is never
    read back."""
    identity = f"{configured_embedding_model()}|{text}"
    return f"search:embedding:v3:{agent_id}:{hashlib.sha256(identity.encode('utf-8')).hexdigest()}"


_FLOORS = struct.Struct("<2d")  # the floors as float64: a cached vector answers exactly as a fresh one


def _pack(vector: QueryVector) -> str:
    """The two floors (the tail's NaN when the model has none), then the vector as little-endian float32."""
    tail = math.nan if vector.tail_similarity is None else vector.tail_similarity
    data = _FLOORS.pack(vector.min_similarity, tail) + struct.pack(f"<{len(vector.values)}f", *vector.values)
    return base64.b64encode(data).decode("ascii")


def _unpack(raw: str) -> QueryVector | None:
    """The cached vector, or None (a miss) for anything that is not one of this space's entries."""
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    width = (len(data) - _FLOORS.size) // 4
    if width != int(settings.EMBEDDING_DIMENSIONS) or len(data) != _FLOORS.size + 4 * width:
        return None
    floor, tail = _FLOORS.unpack_from(data)
    values = struct.unpack_from(f"<{width}f", data, _FLOORS.size)
    if not math.isfinite(floor) or math.isinf(tail) or not all(math.isfinite(value) for value in values):
        return None
    return QueryVector(values=list(values), min_similarity=floor, tail_similarity=None if math.isnan(tail) else tail)


def _cached(key: str) -> QueryVector | None:
    try:
        raw = get_redis().get(key)
    except redis.RedisError as exc:
        log.warning("search embedding cache unavailable: %s", exc.__class__.__name__)
        return None
    return _unpack(reply_text(raw)) if raw else None


def _remember(key: str, vector: QueryVector) -> None:
    try:
        get_redis().set(key, _pack(vector), ex=settings.SEARCH_EMBEDDING_CACHE_SECONDS)
    except redis.RedisError as exc:
        log.warning("search embedding not cached: %s", exc.__class__.__name__)


def query_embedding(*, text: str, agent_id: int) -> QueryVector:
    """The query's embedding, counted against the agent's embedding bucket before the cache is looked at
    (EmbeddingRateLimited when it is full, hit or miss), then from the cache or one model call
    (items.search.SemanticSearchUnavailable when the model fails)."""
    verdict = rate_limit_hit(
        agent_id=agent_id, bucket=EMBEDDING_BUCKET, per_minute=settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE
    )
    if not verdict.allowed:
        raise EmbeddingRateLimited(verdict.retry_after)
    text = normalise_query(text)
    key = cache_key(text, agent_id=agent_id)
    vector = _cached(key)
    if vector is not None:
        return vector
    vector = embed_query(text)
    _remember(key, vector)
    return vector
