"""Query embeddings for semantic search. The model layer lives in `pipeline`, which `items` must not
import, so the pipeline app registers its embedder here when Django starts (pipeline.apps).

Each embedding costs a model call, so they are bounded: vectors are cached in Redis by query text (for
SEARCH_EMBEDDING_CACHE_SECONDS, keyed with the provider, model and dimensions), and every embedding that
is not in the cache counts in its own per-agent rate bucket (RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE).
Repeating a query, or searching in keyword mode, costs nothing against that bucket."""

from __future__ import annotations

import base64
import hashlib
import logging
import struct
from collections.abc import Callable

import redis
from django.conf import settings

from eigenflux.redis import get_redis
from items.ratelimit import rate_limit_hit

log = logging.getLogger(__name__)

QueryEmbedder = Callable[[str], list[float]]
EMBEDDING_BUCKET = "embed"

_embedder: QueryEmbedder | None = None


class SemanticSearchUnavailable(RuntimeError):
    pass


class EmbeddingRateLimited(RuntimeError):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many new search embeddings; retry in {retry_after} s")
        self.retry_after = retry_after


def set_query_embedder(embedder: QueryEmbedder | None) -> None:
    global _embedder
    _embedder = embedder


def embed_query(text: str) -> list[float]:
    if _embedder is None:
        raise SemanticSearchUnavailable("no query embedder is registered")
    return _embedder(text)


def normalise_query(text: str) -> str:
    """Whitespace collapsed and trimmed: what is embedded and what the cache is keyed by."""
    return " ".join(text.split())


def cache_key(text: str) -> str:
    identity = f"{settings.LLM_PROVIDER}|{settings.EMBEDDING_MODEL}|{settings.EMBEDDING_DIMENSIONS}|{text}"
    return f"search:embedding:{hashlib.sha256(identity.encode('utf-8')).hexdigest()}"


def _pack(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _unpack(raw: str) -> list[float]:
    data = base64.b64decode(raw)
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def _cached(key: str) -> list[float] | None:
    try:
        raw = get_redis().get(key)
    except redis.RedisError as exc:
        log.warning("search embedding cache unavailable: %s", exc.__class__.__name__)
        return None
    return _unpack(raw) if raw else None


def _remember(key: str, vector: list[float]) -> None:
    try:
        get_redis().set(key, _pack(vector), ex=settings.SEARCH_EMBEDDING_CACHE_SECONDS)
    except redis.RedisError as exc:
        log.warning("search embedding not cached: %s", exc.__class__.__name__)


def query_embedding(*, text: str, agent_id: int) -> list[float]:
    """The query's embedding: from the cache, or one model call counted against the agent's embedding bucket
    (EmbeddingRateLimited when it is full; SemanticSearchUnavailable when the model fails)."""
    text = normalise_query(text)
    key = cache_key(text)
    vector = _cached(key)
    if vector is not None:
        return vector
    verdict = rate_limit_hit(
        agent_id=agent_id, bucket=EMBEDDING_BUCKET, per_minute=settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE
    )
    if not verdict.allowed:
        raise EmbeddingRateLimited(verdict.retry_after)
    vector = embed_query(text)
    _remember(key, vector)
    return vector
