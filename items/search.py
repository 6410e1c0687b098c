"""Query embeddings for semantic search. The model layer lives in `pipeline`, which `items` must not
import, so the pipeline app registers its embedder here when Django starts (pipeline.apps)."""

from __future__ import annotations

from collections.abc import Callable

QueryEmbedder = Callable[[str], list[float]]

_embedder: QueryEmbedder | None = None


class SemanticSearchUnavailable(RuntimeError):
    pass


def set_query_embedder(embedder: QueryEmbedder | None) -> None:
    global _embedder
    _embedder = embedder


def embed_query(text: str) -> list[float]:
    if _embedder is None:
        raise SemanticSearchUnavailable("no query embedder is registered")
    return _embedder(text)
