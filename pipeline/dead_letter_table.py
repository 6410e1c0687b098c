"""The DeadLetter table's services (docs/admin.md#dead-letters): archiving the letters the stream runtime writes to
`{<stream>}:dlq` (pipeline.runtime.dead_lettering) as rows, requeue and resolve, and the bounded auto-requeue of
transient ones that the scheduled job (pipeline.scheduled_jobs) runs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from items.events import STREAM_EVENT_TYPES
from items.models import ItemStatus, ProcessedItem
from items.outbox import outbox_event_create
from pipeline.models import DeadLetter, DeadLetterState, ErrorClass
from pipeline.runtime.dead_lettering import ARCHIVE_GROUP
from pipeline.streams import is_dlq_stream

log = logging.getLogger(__name__)

TRUNCATION_MARK = "…[truncated]"
ENRICHMENT_GROUP = "cg:item:publish"
# The pipeline is done with the item: a letter about it is superseded (a held item waits for a moderator, not for
# the pipeline).
FINISHED = (ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.DELETED, ItemStatus.REVIEW)


class DeadLetterRefused(Exception):
    """The letter cannot be requeued or resolved in its state (or its payload cannot be replayed)."""


# --- archive --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Archived:
    letter: DeadLetter
    created: bool


def dead_letter_archive(
    *,
    stream: str,
    group: str,
    message_id: str,
    error_class: str,
    error: str = "",
    event_id: str = "",
    subject: str = "",
    event_type: str = "",
    delivery_count: int = 0,
    payload: dict | None = None,
    failed_at: datetime | None = None,
) -> Archived:
    """Store one dead letter; a second copy of the same (stream, group, message_id) changes nothing.

    A letter born from a requeued event inherits the auto-requeue count of the letter it was requeued from
    (found by causation id), so the scheduled job's bound holds over the whole chain.
    """
    payload = _clean(payload or {})
    inherited = 0
    causation = payload.get("causationid") if isinstance(payload, dict) else None
    if causation:
        parent = DeadLetter.objects.filter(event_id=causation).values_list("auto_requeues", flat=True).first()
        inherited = parent or 0
    letter, created = DeadLetter.objects.get_or_create(
        stream=_clean(stream)[:100],
        group=_clean(group)[:100],
        message_id=_clean(message_id)[:32],
        defaults={
            "event_id": _clean(event_id)[:64],
            "subject": _clean(subject)[:64],
            "event_type": _clean(event_type)[:100],
            "error_class": error_class if error_class in ErrorClass.values else ErrorClass.PERMANENT,
            "error": _clean(error),
            "delivery_count": max(0, delivery_count),
            "payload": payload,
            "failed_at": failed_at or timezone.now(),
            "auto_requeues": inherited,
        },
    )
    return Archived(letter=letter, created=created)


def _clean(value):
    """PostgreSQL's text and jsonb refuse the NUL character, which a hostile entry may well contain: it is
    stored as the visible escape `\\u0000` instead, so archiving can never fail on what a letter carries."""
    if isinstance(value, str):
        return value.replace("\x00", "\\u0000")
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _payload(text: str) -> dict:
    try:
        payload = json.loads(text or "{}")
    except ValueError:
        return {"_unparsed": text[:8192]}
    return payload if isinstance(payload, dict) else {"_unparsed": str(payload)[:8192]}


def dead_letter_archive_fields(fields: dict[str, str]) -> Archived:
    """Archive a `{<stream>}:dlq` entry as the runtime writes it (pipeline.runtime.dead_lettering.dead_letter).

    A letter of the archiver itself (from a `<stream>:dlq:dlq` stream an older version wrote) is unwrapped:
    the letter it failed to archive is stored instead, under its own origin."""
    payload = _payload(fields.get("payload", ""))
    if fields.get("group") == ARCHIVE_GROUP and is_dlq_stream(fields.get("stream", "")):
        inner = {key: str(value) for key, value in payload.items()}
        if all(inner.get(name) for name in ("stream", "group", "message_id")) and "_truncated" not in inner:
            return dead_letter_archive_fields(inner)
    try:
        delivery_count = min(max(int(fields.get("delivery_count") or 0), 0), 2**31 - 1)
    except ValueError:
        delivery_count = 0
    try:
        failed_at = parse_datetime(fields.get("failed_at", "").replace("Z", "+00:00"))
    except ValueError:  # well-formed but impossible (month 13): the archive time stands in
        failed_at = None
    if failed_at is not None and timezone.is_naive(failed_at):
        failed_at = failed_at.replace(tzinfo=UTC)
    return dead_letter_archive(
        stream=fields.get("stream", ""),
        group=fields.get("group", ""),
        message_id=fields.get("message_id", ""),
        event_id=fields.get("event_id", ""),
        subject=fields.get("subject", ""),
        event_type=fields.get("event_type", ""),
        error_class=fields.get("error_class", ""),
        error=fields.get("error", ""),
        delivery_count=delivery_count,
        payload=payload,
        failed_at=failed_at,
    )


def dead_letter_archive_malformed(*, stream: str, message_id: str, error: str, payload: str) -> Archived:
    """An entry of a dead-letter stream that is not a letter (fields missing, bytes not UTF-8): stored as a
    letter of the archive group itself, with what was read, for a person to look at and resolve."""
    return dead_letter_archive(
        stream=stream,
        group=ARCHIVE_GROUP,
        message_id=message_id,
        error_class=ErrorClass.PERMANENT,
        error=error,
        payload=_payload(payload),
    )


# --- requeue and resolve --------------------------------------------------------------------------------


def _replayable_data(letter: DeadLetter) -> dict:
    payload = letter.payload if isinstance(letter.payload, dict) else {}
    if not letter.event_type or not payload.get("type"):
        raise DeadLetterRefused(f"dead letter {letter.pk} is not an event (no type): resolve it instead")
    raw = payload.get("data")
    if payload.get("_truncated") or not isinstance(raw, str) or raw.endswith(TRUNCATION_MARK):
        raise DeadLetterRefused(f"dead letter {letter.pk}: its payload was truncated and cannot be replayed")
    try:
        data = json.loads(raw)
    except ValueError:
        raise DeadLetterRefused(f"dead letter {letter.pk}: its data is not valid JSON; resolve it instead") from None
    if not isinstance(data, dict):
        raise DeadLetterRefused(f"dead letter {letter.pk}: its data is not a JSON object; resolve it instead")
    return data


def dead_letter_requeue(*, letter: DeadLetter, actor=None) -> DeadLetter:
    """Send the letter's event back to its stream through the outbox, `replay` set, and mark it requeued.

    `actor` is the moderator; None means the scheduled job (counted in auto_requeues). Only open letters
    can be requeued, so a second requeue of the same letter is refused.
    """
    data = _replayable_data(letter)
    payload = letter.payload
    with transaction.atomic():
        changes = {"state": DeadLetterState.REQUEUED, "updated_at": timezone.now()}
        if actor is None:
            changes["auto_requeues"] = F("auto_requeues") + 1
            changes["note"] = "requeued automatically"
        else:
            changes["resolved_by"] = actor
            changes["note"] = f"requeued by {actor.get_username()}"
        if not DeadLetter.objects.filter(pk=letter.pk, state=DeadLetterState.OPEN).update(**changes):
            state = DeadLetter.objects.filter(pk=letter.pk).values_list("state", flat=True).first()
            raise DeadLetterRefused(f"dead letter {letter.pk} is {state or 'gone'}; only open letters can be requeued")
        outbox_event_create(
            stream=letter.stream,
            event_type=letter.event_type,
            subject=letter.subject or payload.get("subject", ""),
            data=data,
            correlation_id=payload.get("correlationid") or None,
            causation_id=letter.event_id or None,
            traceparent=payload.get("traceparent") or None,
            replay=True,
            target_group=letter.group,  # the stream's other groups handled the original already
        )
    letter.refresh_from_db()
    return letter


def dead_letter_resolve(*, letter: DeadLetter, actor, note: str) -> DeadLetter:
    """Close an open letter with a note saying what was done about it."""
    note = note.strip()
    if not note:
        raise DeadLetterRefused("resolving a dead letter needs a note")
    updated = DeadLetter.objects.filter(pk=letter.pk, state=DeadLetterState.OPEN).update(
        state=DeadLetterState.RESOLVED, resolved_by=actor, note=note, updated_at=timezone.now()
    )
    if not updated:
        state = DeadLetter.objects.filter(pk=letter.pk).values_list("state", flat=True).first()
        raise DeadLetterRefused(f"dead letter {letter.pk} is {state or 'gone'}; only open letters can be resolved")
    letter.refresh_from_db()
    return letter


def dead_letters_resolve_superseded(*, limit: int = 1000) -> int:
    """Close open enrichment letters whose item has since finished (completed, discarded or deleted: a requeue
    or a later delivery dealt with it), with a note saying so, so that moderators see only the letters that
    still need them. Returns how many."""
    open_letters = DeadLetter.objects.filter(state=DeadLetterState.OPEN, group=ENRICHMENT_GROUP)
    subjects = {s for s in open_letters.values_list("subject", flat=True)[:limit] if s.isdigit() and len(s) < 19}
    if not subjects:
        return 0
    finished = dict(
        ProcessedItem.objects.filter(pk__in=[int(s) for s in subjects], status__in=FINISHED).values_list("pk", "status")
    )
    closed = 0
    for item_id, status in finished.items():
        closed += open_letters.filter(subject=str(item_id)).update(
            state=DeadLetterState.RESOLVED,
            note=f"superseded: item {item_id} is {status}",
            updated_at=timezone.now(),
        )
    return closed


# What versions before event routing by intent wrote for an event its group does not handle (pipeline.runtime.event).
_NOT_HANDLED_ERROR = "malformed: unknown type "


def dead_letters_resolve_not_handled(*, model: type[DeadLetter] = DeadLetter) -> int:
    """Close the false dead letters earlier versions wrote: an event of a type its stream carries, dead-lettered
    by a group that does not handle it (such events are now acknowledged). Run by the retention job and by the
    migration that came with the change (`model` is then its historical DeadLetter). Returns how many."""
    candidates = model.objects.filter(
        state=DeadLetterState.OPEN, error_class=ErrorClass.PERMANENT, error__startswith=_NOT_HANDLED_ERROR
    )
    closed = 0
    for stream, types in STREAM_EVENT_TYPES.items():
        for letter in candidates.filter(stream=stream, event_type__in=types).only("pk", "group", "event_type"):
            closed += model.objects.filter(pk=letter.pk, state=DeadLetterState.OPEN).update(
                state=DeadLetterState.RESOLVED,
                note=f"not a failure: {letter.group} does not handle {letter.event_type} events, which it now "
                "acknowledges without handling (a false dead letter of an earlier version)",
                updated_at=timezone.now(),
            )
    return closed


# --- the scheduled auto-requeue --------------------------------------------------------------------------


def dead_letters_auto_requeue(*, limit: int | None = None) -> int:
    """Requeue open transient letters that are old enough and under the bound; returns how many.

    Permanent letters are never touched: they wait for a person. Letters whose payload cannot be replayed
    are skipped (and stay open for a person).
    """
    bound = settings.DEAD_LETTER_AUTO_REQUEUE_MAX
    if bound <= 0:
        return 0
    cutoff = timezone.now() - timedelta(seconds=settings.DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS)
    candidates = DeadLetter.objects.filter(
        state=DeadLetterState.OPEN,
        error_class=ErrorClass.TRANSIENT,
        auto_requeues__lt=bound,
        failed_at__lte=cutoff,
    ).order_by("failed_at")[: limit or settings.DEAD_LETTER_AUTO_REQUEUE_BATCH]
    count = 0
    for letter in candidates:
        if _superseded(letter):
            continue
        try:
            dead_letter_requeue(letter=letter, actor=None)
        except DeadLetterRefused as exc:
            log.info("auto-requeue skipped: %s", exc)
            continue
        count += 1
    if count:
        log.warning("auto-requeued %d transient dead letters", count)
    return count


def _superseded(letter: DeadLetter) -> bool:
    """An enrichment letter whose item is no longer `failed` (a moderator requeued or approved it, or it
    completed since): replaying the old event could only race the newer one."""
    if letter.group != ENRICHMENT_GROUP or not letter.subject.isdigit():
        return False
    status = ProcessedItem.objects.filter(pk=int(letter.subject)).values_list("status", flat=True).first()
    return status is not None and status != ItemStatus.FAILED
