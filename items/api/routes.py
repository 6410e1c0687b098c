"""Agent API endpoints: parse, call one service, render."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Header, Router, Status

from items.api.errors import ApiError
from items.api.schemas import DeleteOut, ErrorOut, PublishIn, PublishOut
from items.models import ItemStatus, ProcessedItem
from items.services.publish import IdempotencyConflict, item_publish
from items.services.retract import item_delete

router = Router(tags=["items"])

_ERRORS = {400: ErrorOut, 401: ErrorOut, 413: ErrorOut, 422: ErrorOut, 429: ErrorOut, 503: ErrorOut}


def _item_id(raw: str) -> int:
    """Item ids are 64-bit integers sent as decimal strings; anything else names no item."""
    if not raw.isdigit() or len(raw) > 19 or int(raw) > 2**63 - 1:
        raise ApiError(404, "not_found", f"no item {raw[:40]!r}")
    return int(raw)


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


@router.delete(
    "/items/{item_id}",
    response={200: DeleteOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 503: ErrorOut},
    summary="Retract one of your broadcasts",
    description=(
        "Marks the item `deleted` (terminal: the pipeline never brings it back) and emits `item.deleted`. "
        "Only the author may do this. Deleting an already deleted item answers 200 again."
    ),
)
def delete_item(request: HttpRequest, item_id: str):
    item = ProcessedItem.objects.filter(pk=_item_id(item_id)).first()
    if item is None or (item.author_id != request.auth.pk and item.status != ItemStatus.COMPLETED):
        # Other agents' unpublished items are not revealed, not even by a 403.
        raise ApiError(404, "not_found", f"no item {item_id}")
    if item.author_id != request.auth.pk:
        raise ApiError(403, "forbidden", "only the author may delete an item")
    item_delete(item=item, actor=request.auth)
    return Status(200, {"item_id": str(item.pk), "status": ItemStatus.DELETED})
