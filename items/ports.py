"""What the pipeline plugs into items: the one registration point for the answers items needs from the model layer
and the stream engine, which it may not import (tests/items/test_app_boundary.py).

The pipeline app calls `connect` once when Django starts (pipeline/apps.py). Until then, or in a process without
the pipeline app, each port is empty and its user says so: semantic search raises SemanticSearchUnavailable, and a
moderator's requeue relies on the claim's lease alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class SemanticSearchUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class QueryVector:
    """A query's embedding and the similarity floors that belong to the model that made it: a semantic search
    answers only when its nearest item reaches `min_similarity`, and then keeps every item down to
    `tail_similarity` (None: the same floor)."""

    values: list[float]
    min_similarity: float
    tail_similarity: float | None = None


# Embeds a search query (items.search); raises SemanticSearchUnavailable when the model cannot answer.
QueryEmbedder = Callable[[str], QueryVector]
# Given a claim token, True when the consumer holding that claim's stream entry is gone: the entry was finished,
# or its consumer stopped reporting alive (items.services.moderation.claim_is_dead).
ClaimHolderCheck = Callable[[str], bool]
# Given an item id, asks for the reader suggestion of an item a moderator published (items.services.suggestions):
# queued once the caller's transaction commits, answered outside the request.
SuggestionRequester = Callable[[int], None]
# Why items waiting for the pipeline wait now, in words for their author ("" when nothing holds them up): e.g. the
# model endpoint failing, its circuit breaker open (items.api.presenters, the item's `status_detail`).
WaitingReason = Callable[[], str]


@dataclass(frozen=True)
class Ports:
    query_embedder: QueryEmbedder | None = None
    claim_holder_gone: ClaimHolderCheck | None = None
    suggestion_requester: SuggestionRequester | None = None
    waiting_reason: WaitingReason | None = None


_connected = Ports()


def connect(
    *,
    query_embedder: QueryEmbedder | None,
    claim_holder_gone: ClaimHolderCheck | None,
    suggestion_requester: SuggestionRequester | None = None,
    waiting_reason: WaitingReason | None = None,
) -> None:
    """Plug every port in at once (None leaves a port empty); a later call replaces all of them."""
    global _connected
    _connected = Ports(
        query_embedder=query_embedder,
        claim_holder_gone=claim_holder_gone,
        suggestion_requester=suggestion_requester,
        waiting_reason=waiting_reason,
    )


def connected() -> Ports:
    return _connected
