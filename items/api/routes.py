"""Agent API endpoints: parse, call one service, render."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Header, Router, Status

from items.api.errors import ApiError
from items.api.schemas import ErrorOut, PublishIn, PublishOut
from items.services.publish import IdempotencyConflict, item_publish

router = Router(tags=["items"])

_ERRORS = {400: ErrorOut, 401: ErrorOut, 413: ErrorOut, 422: ErrorOut, 429: ErrorOut, 503: ErrorOut}


@router.post(
    "/items/publish",
    response={202: PublishOut, 200: PublishOut, **_ERRORS},
    summary="Publish a broadcast",
    description=(
        "Stores the broadcast and queues it for enrichment; answers at once with the item id. "
        "Send an `Idempotency-Key` header to make retries safe: the same key with the same body returns "
        "the original item (200), the same key with a different body is refused (422). Keys are kept "
        "for at least 24 hours."
    ),
)
def publish(
    request: HttpRequest,
    payload: PublishIn,
    idempotency_key: str | None = Header(
        None, alias="Idempotency-Key", description="Any string up to 255 characters, unique per logical publish."
    ),
):
    if idempotency_key is not None and not (0 < len(idempotency_key) <= 255 and idempotency_key.isprintable()):
        raise ApiError(422, "invalid", "Idempotency-Key must be 1-255 printable characters", "Idempotency-Key")
    try:
        result = item_publish(
            author=request.auth,
            content=payload.content,
            notes=payload.notes,
            url=payload.url,
            accept_reply=payload.accept_reply,
            idempotency_key=idempotency_key,
        )
    except IdempotencyConflict as exc:
        raise ApiError(422, "idempotency_conflict", str(exc), "Idempotency-Key") from exc
    if result.replayed:
        return Status(200, {"item_id": str(result.item.pk), "status": result.item.processed.status})
    return Status(202, {"item_id": str(result.item.pk), "status": "pending"})
