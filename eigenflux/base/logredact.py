"""Secrets never reach a log line: agent tokens, bearer credentials and URL query strings are redacted in
every log record of every process that loads the settings (web, run_pipeline, the job worker, make run).

It is installed as the logging module's record factory rather than as a filter on some handlers, because
servers and libraries attach handlers of their own (uvicorn logs a WebSocket's path with its `?token=…` on
`uvicorn.error`, with or without an access log): every record passes through the factory, whatever logger
and handler it takes afterwards.
"""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"

_PATTERNS = (
    # Our own token format anywhere in a line.
    (re.compile(r"ef_[A-Za-z0-9_\-]{8,}"), "ef_" + REDACTED),
    # Authorization headers and bearer credentials.
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + REDACTED),
    # The query string of any path or URL ("GET /ws/v1/events?token=…", "http://…/x?key=…").
    (re.compile(r"((?:^|[\s\"'(])(?:[a-z][a-z0-9+.\-]*://[^\s\"'?]*|/[^\s\"'?]*))\?[^\s\"')]*"), r"\1?" + REDACTED),
    # key=value pairs with a secret-looking key, wherever they appear.
    (
        re.compile(r"(?i)\b((?:access_?)?token|api_?key|password|secret|sec-websocket-protocol)([=:]\s*)[^\s&,;\"']+"),
        r"\1\2" + REDACTED,
    ),
)


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_installed = False


def install() -> None:
    """Wrap the record factory once per process: each record's message is rendered and redacted."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it later; keep the record as it is
            return record
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return record

    logging.setLogRecordFactory(factory)


class RedactingMixin(logging.Formatter):
    """For any logging.Formatter: also redacts tracebacks (rendered after the record is made, by the
    formatter)."""

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return redact(super().formatStack(stack_info))


class RedactingFormatter(RedactingMixin, logging.Formatter):
    """The standard formatter with redacted tracebacks."""
