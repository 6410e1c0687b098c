"""What a handler receives: the parsed envelope of one stream entry, and the lease on it."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from eigenflux.base.envelope import MAX_ENVELOPE_BYTES, REQUIRED_ATTRIBUTES
from pipeline.runtime.errors import LeaseLost


class CancelEvent(threading.Event):
    """A threading.Event that also calls back when it is set, so a wait elsewhere (a model call on the event
    loop) can be aborted at once instead of checking the event on a timer."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], object]] = []
        self._callbacks_lock = threading.Lock()

    def set(self) -> None:
        with self._callbacks_lock:
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call `callback` once when the event is set (at once if it already is); returns an unsubscribe."""
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._unsubscribe(callback)
        callback()
        return lambda: None

    def _unsubscribe(self, callback: Callable[[], object]) -> None:
        with self._callbacks_lock, contextlib.suppress(ValueError):  # already called back
            self._callbacks.remove(callback)


class Lease:
    """This process's ownership of one pending entry, kept alive by the runtime's heartbeats.

    `cancelled` is set when ownership is lost (or on hard shutdown): pass it to long calls so they stop.

    `trust_seconds`: how long a proof of ownership holds without asking Redis again (`confirm`). Redis hands an
    entry to another consumer only once it has been idle for a whole lease (XAUTOCLAIM's min-idle), and every
    proof (the read or reclaim that delivered it, a heartbeat, a redelivery) reset that idle time; the runner
    trusts a proof for half a lease, counted from when its command was sent. 0: always ask.
    """

    def __init__(self, verify: Callable[[], bool] | None = None, *, trust_seconds: float = 0.0):
        self.lost = False
        self._verify = verify
        self._trust_seconds = trust_seconds
        self._trusted_until = 0.0  # time.monotonic() until which the last proof holds

    @property
    def cancelled(self) -> threading.Event:
        # Made on first use: most handlers never look, and an Event costs more than the rest of dispatch.
        # dict.setdefault is atomic, so concurrent first uses still share one Event.
        event: threading.Event | None = self.__dict__.get("_cancelled")
        if event is None:
            event = self.__dict__.setdefault("_cancelled", CancelEvent())
        return event

    def lose(self) -> None:
        self.lost = True
        self.cancelled.set()

    def confirm(self, sent_at: float) -> None:
        """Redis proved this consumer owned the entry by a command sent at `sent_at` (time.monotonic())."""
        self._trusted_until = max(self._trusted_until, sent_at + self._trust_seconds)

    def check(self) -> None:
        """Raise LeaseLost unless this process still owns the entry; call right before committing.

        Besides the heartbeat's verdict this asks Redis once more (XPENDING), unless a proof of ownership is
        younger than `trust_seconds`: within it no consumer that follows the protocol can have taken the entry.
        """
        if not self.cancelled.is_set() and self._verify is not None and not self._trusted():
            sent_at = time.monotonic()
            if self._verify():
                self.confirm(sent_at)
            else:
                self.lose()
        if self.cancelled.is_set():
            raise LeaseLost("lease lost" if self.lost else "shutting down")

    def _trusted(self) -> bool:
        return self._trust_seconds > 0 and time.monotonic() < self._trusted_until


@dataclass
class Event:
    stream: str
    group: str
    message_id: str
    delivery_count: int
    envelope: dict[str, str]
    id: str
    type: str
    subject: str
    data: dict[str, Any]
    replay: bool
    correlation_id: str
    causation_id: str
    traceparent: str
    lease: Lease = field(default_factory=Lease, repr=False, compare=False)


class MalformedEntry(ValueError):
    """The stream entry is not a valid envelope for this consumer (dead-lettered as permanent)."""


class NotHandled(Exception):
    """A well-formed entry of a type its stream carries (declare_stream_types) that this group does not handle:
    acknowledged and counted, never dead-lettered."""

    def __init__(self, event_type: str) -> None:
        super().__init__(event_type)
        self.event_type = event_type


# The event types each stream may carry, handed in by the application at start-up (declare_stream_types).
_stream_types: dict[str, frozenset[str]] = {}


def declare_stream_types(types_by_stream: dict[str, frozenset[str]]) -> None:
    """The registry of event types per stream. A group meeting a registered type it does not handle acknowledges
    it (NotHandled); a type registered nowhere on the stream is malformed, as is everything on a stream not
    declared here."""
    _stream_types.update({stream: frozenset(types) for stream, types in types_by_stream.items()})


def stream_types(stream: str) -> frozenset[str]:
    """The event types declared for `stream` (empty when none were)."""
    return _stream_types.get(stream, frozenset())


def parse_entry(
    *,
    stream: str,
    group: str,
    message_id: str,
    fields: dict[str, str],
    delivery_count: int,
    event_types: frozenset[str],
    lease: Lease,
) -> Event:
    size = sum(map(len, fields)) + sum(map(len, map(str.encode, fields.values())))
    if size > MAX_ENVELOPE_BYTES:
        raise MalformedEntry(f"oversize entry: {size} bytes (limit {MAX_ENVELOPE_BYTES})")
    missing = [name for name in REQUIRED_ATTRIBUTES if not fields.get(name)]
    if missing:
        raise MalformedEntry(f"missing required field(s): {', '.join(missing)}")
    if fields["type"] not in event_types and fields["type"] in stream_types(stream):
        raise NotHandled(fields["type"])  # before its data is decoded: another group's, not this one's, to judge
    try:
        data = json.loads(fields["data"])
    except (ValueError, RecursionError) as exc:  # RecursionError: hostile nesting within the size limit
        raise MalformedEntry(f"bad JSON in data: {type(exc).__name__}: {exc}"[:500]) from None
    if not isinstance(data, dict):
        raise MalformedEntry(f"data must be a JSON object, got {type(data).__name__}")
    if fields["type"] not in event_types:
        raise MalformedEntry(f"unknown type {fields['type']!r} on stream {stream} (group {group})")
    return Event(
        stream=stream,
        group=group,
        message_id=message_id,
        delivery_count=delivery_count,
        envelope=fields,
        id=fields["id"],
        type=fields["type"],
        subject=fields["subject"],
        data=data,
        replay=fields.get("replay", "") not in ("", "0", "false"),
        correlation_id=fields.get("correlationid", ""),
        causation_id=fields.get("causationid", ""),
        traceparent=fields.get("traceparent", ""),
        lease=lease,
    )


_CONSUMED_SQL = None
_consumed_model: Any = None


def use_consumed_events(model: Any) -> None:
    """The table consume_once records in: a Django model with `group`, `event_id` and `consumed_at` fields and a
    unique key on (group, event_id). Registered once by the application at start-up (the pipeline app's
    ConsumedEvent); the engine has no table of its own."""
    global _consumed_model, _CONSUMED_SQL
    _consumed_model, _CONSUMED_SQL = model, None


def consume_once(event: Event) -> bool:
    """Record that event.group consumed event.id; False if it already had (then do nothing).

    Must run inside the handler's transaction.atomic(), so the record commits with the effects: a
    concurrent duplicate waits on the unique key and then sees the conflict.
    """
    global _CONSUMED_SQL
    if not connection.in_atomic_block:
        raise RuntimeError("consume_once must run inside transaction.atomic() with the handler's effects")
    if _CONSUMED_SQL is None:
        if _consumed_model is None:
            raise RuntimeError("consume_once needs a table: call pipeline.runtime.use_consumed_events(model) first")
        meta = _consumed_model._meta
        qn = connection.ops.quote_name
        cols = {f.name: qn(f.column) for f in meta.concrete_fields}
        _CONSUMED_SQL = (
            f"INSERT INTO {qn(meta.db_table)} ({cols['group']}, {cols['event_id']}, {cols['consumed_at']}) "  # noqa: S608
            f"VALUES (%s, %s, now()) ON CONFLICT ({cols['group']}, {cols['event_id']}) DO NOTHING RETURNING 1"
        )
    with connection.cursor() as cursor:
        cursor.execute(_CONSUMED_SQL, [event.group, event.id])
        return cursor.fetchone() is not None
