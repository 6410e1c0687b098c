"""Log context and formats: the ids of the work in hand (item, event, trace, consumer...) on every log line.

Code that knows an id binds it for the duration of the work with `log_context(item_id=..., ...)` (or, on hot
paths, `lazy_log_context(function)`, computed only if a line is written); the
`LogContextFilter` on the console handler copies the bound fields onto each record, and the formatter
chosen by LOG_FORMAT writes them: `text` (the default) appends `key=value` pairs, `json` writes one JSON
object per line (python-json-logger) with each field as a key. Fields that are not bound are left out.

The context lives in a contextvar, so it follows the code into nested calls on the same thread (or task)
and never leaks into other threads' work. Tracing fills `trace_id` and `span_id` the same way when it
starts a span; until a span exists, a `traceparent` seen on an event or a request gives the `trace_id`.
"""

from __future__ import annotations

import logging
import logging.config
import re
import sys
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from eigenflux.base.logredact import RedactingFormatter, RedactingMixin

# The fields this project binds, in the order the text format shows them.
CONTEXT_FIELDS = (
    "trace_id",
    "span_id",
    "item_id",
    "agent_id",
    "event_id",
    "correlation_id",
    "stream",
    "group",
    "consumer",
    "message_id",
    "delivery_count",
)

_KNOWN = frozenset(CONTEXT_FIELDS)
# The bound layers, innermost last: each a dict of fields, or a function computing them when a line is written.
_context: ContextVar[tuple[Mapping[str, object] | Callable[[], Mapping[str, object]], ...]] = ContextVar(
    "eigenflux_log_context", default=()
)

# W3C trace context: version-traceid-parentid-flags, lower-case hex.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


class LogContext:
    """A context manager binding one layer of fields for the duration of a block."""

    __slots__ = ("_layer", "_token")

    def __init__(self, layer: Mapping[str, object] | Callable[[], Mapping[str, object]]):
        self._layer = layer

    def __enter__(self) -> None:
        self._token = _context.set((*_context.get(), self._layer))

    def __exit__(self, *exc_info) -> None:
        _context.reset(self._token)


def log_context(**fields: object) -> LogContext:
    """Bind fields to every log line written inside the `with` block (nested blocks add to and may override
    them). None and "" mean "unknown" and are not bound. Unknown field names are refused, so a typo cannot
    silently invent a key that dashboards and searches do not know."""
    if not _KNOWN.issuperset(fields):
        raise ValueError(f"unknown log context field(s): {', '.join(sorted(set(fields) - _KNOWN))}")
    return LogContext(fields)


def lazy_log_context(compute: Callable[[], Mapping[str, object]]) -> LogContext:
    """Like log_context, but the fields are computed only when a line is written: for hot paths (every stream
    entry) where most blocks log nothing, binding then costs one contextvar set."""
    return LogContext(compute)


def current_log_context() -> dict[str, object]:
    """The fields bound here and now (unknown names from a lazy layer are dropped, never raised on: logging
    must not fail)."""
    merged: dict[str, object] = {}
    for layer in _context.get():
        try:
            fields = layer() if callable(layer) else layer
        except Exception:  # noqa: S112 - a broken lazy layer loses its fields, never the line (no logging in here)
            continue
        merged.update((k, v) for k, v in fields.items() if v is not None and v != "" and k in _KNOWN)
    return merged


def trace_id_from_traceparent(value: str | None) -> str | None:
    """The trace id of a W3C `traceparent` value, or None when the value is missing or not well formed
    (stream entries are untrusted: nothing but 32 hex digits gets into a log line this way)."""
    match = _TRACEPARENT.fullmatch(value or "")
    if match is None or match.group(1) == "0" * 32:
        return None
    return match.group(1)


_SAFE_ID = re.compile(r"[A-Za-z0-9_.:@/+=-]{1,128}")


def loggable_id(value: object) -> str | None:
    """An id taken from untrusted input (a stream entry, a header), if it looks like one; otherwise a
    marker, so that no newline or control character from outside can forge or split a log line."""
    if value is None or value == "":
        return None
    text = str(value)
    return text if _SAFE_ID.fullmatch(text) else "(not an id)"


class LogContextFilter(logging.Filter):
    """Copies the bound context onto each record (on a handler, so records from every logger get it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _context.get():
            return True
        for name, value in current_log_context().items():
            # An explicit `extra=` on the call wins over the bound context.
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class TextFormatter(RedactingFormatter):
    """The plain format with the bound context appended as ` key=value` pairs."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{name}={getattr(record, name)}" for name in CONTEXT_FIELDS if hasattr(record, name)]
        if not pairs:
            return line
        head, sep, rest = line.partition("\n")  # keep a traceback below the context, not inside it
        return f"{head} {' '.join(pairs)}{sep}{rest}"


class JsonFormatter(RedactingMixin, _JsonFormatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the bound context fields,
    any `extra=` fields, and the traceback (`exc_info`, one string) when there is one."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("fmt", ["levelname", "name", "message"])
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        super().__init__(*args, **kwargs)


def configure(config: dict) -> None:
    """Django's LOGGING_CONFIG: dictConfig, and with LOG_FORMAT=json also Python's warnings and uncaught
    exceptions through logging, so that nothing a process writes to stderr breaks the one-object-per-line
    stream (a log shipper would otherwise split a traceback into many unparseable lines)."""
    from django.conf import settings

    logging.config.dictConfig(config)
    if getattr(settings, "LOG_FORMAT", "text") != "json":
        return
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(exc_type, exc, tb) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    logging.getLogger("eigenflux").critical("uncaught exception", exc_info=(exc_type, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("eigenflux").critical(
        "uncaught exception in thread %s",
        name,
        exc_info=args.exc_value,  # its __traceback__ is args.exc_traceback
    )
