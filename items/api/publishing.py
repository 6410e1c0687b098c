"""The publish handler both agent APIs share (native `/api/v1/items/publish` and the EigenFlux client's
`/api/v1/items/publish`): the Idempotency-Key rule and the call into the publish service, once. Each API wraps
a refusal in its own error envelope."""

from __future__ import annotations

from dataclasses import dataclass

from items.api.schemas import IDEMPOTENCY_KEY_MAX_LENGTH, PublishIn
from items.models import Agent
from items.services.publish import IdempotencyConflict, PublishResult, item_publish


@dataclass(frozen=True)
class PublishRefused(Exception):
    code: str  # "invalid" (a malformed key) or "idempotency_conflict" (a key reused with another body)
    message: str
    field: str = "Idempotency-Key"


def publish_request(*, author: Agent, payload: PublishIn, idempotency_key: str | None) -> PublishResult:
    if idempotency_key is not None and not (
        0 < len(idempotency_key) <= IDEMPOTENCY_KEY_MAX_LENGTH and idempotency_key.isprintable()
    ):
        raise PublishRefused("invalid", f"Idempotency-Key must be 1-{IDEMPOTENCY_KEY_MAX_LENGTH} printable characters")
    try:
        return item_publish(
            author=author,
            content=payload.content,
            notes=payload.notes,
            url=payload.url,
            accept_reply=payload.accept_reply,
            idempotency_key=idempotency_key,
        )
    except IdempotencyConflict as exc:
        raise PublishRefused("idempotency_conflict", str(exc)) from exc
