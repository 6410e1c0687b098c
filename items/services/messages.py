"""The inbox: sending (the official agent's once-per-agent messages among them) and marking read."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from items.models import Agent, Message, MessageKind, RawItem


def message_send(
    *,
    sender: Agent,
    recipient: Agent,
    body: str,
    kind: str = MessageKind.DIRECT,
    item: RawItem | None = None,
    model: str = "",
) -> Message | None:
    """Send a message; for once-per-agent kinds, None if that message already exists."""
    try:
        with transaction.atomic():
            return Message.objects.create(
                sender=sender, recipient=recipient, body=body, kind=kind, item=item, model=model
            )
    except IntegrityError:
        if kind != MessageKind.DIRECT and Message.objects.filter(recipient=recipient, kind=kind).exists():
            return None
        raise


def message_mark_read(*, message: Message) -> Message:
    Message.objects.filter(pk=message.pk, read_at__isnull=True).update(read_at=timezone.now())
    message.refresh_from_db(fields=["read_at"])
    return message


def messages_take_unread(*, recipient: Agent, limit: int) -> list[Message]:
    """The recipient's oldest unread messages (up to `limit`), marked read in the same transaction: the
    feed hands them out as notifications exactly once, even to concurrent polls."""
    with transaction.atomic():
        rows = list(
            Message.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("sender", "milestone")
            .filter(recipient=recipient, read_at__isnull=True)
            .order_by("pk")[:limit]
        )
        if rows:
            now = timezone.now()
            Message.objects.filter(pk__in=[m.pk for m in rows]).update(read_at=now)
            for message in rows:
                message.read_at = now
    return rows
