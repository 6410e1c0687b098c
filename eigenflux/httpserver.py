"""uvicorn's HTTP/1.1 protocol (h11) with a request-head timeout: `uvicorn --http eigenflux.httpserver:H11Protocol`.

uvicorn has no header read timeout: its keep-alive timer starts only after a response, so a client that
connects and sends nothing, or trickles its request line and headers a byte at a time, holds the connection
forever. Here a connection whose request head is not complete REQUEST_HEADER_TIMEOUT_SECONDS after its first
byte (or after connecting) is closed. The body has its own deadline (eigenflux.base.bodylimit).

A request h11 cannot parse (most often raw UTF-8 in the path or query string: RFC 9112 allows only ASCII
there, so clients must percent-encode) never reaches the application; uvicorn answers it with a plain-text
400. Here that answer is the API's JSON error body instead, in the client envelope for its paths, saying what
to fix. What cannot be done at this layer: the request is not served (h11 refuses it before any view), so it
has no request id, no access log line and no metrics of the application.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

import h11
from django.conf import settings
from uvicorn.protocols.http.h11_impl import H11Protocol as UvicornH11Protocol

log = logging.getLogger(__name__)

# The start of a request line: enough to tell which API a refused request was for (it is never served).
_REQUEST_LINE = re.compile(rb"(?:^|\r?\n)[A-Z]+ (/[^ \r\n?]*)(\?[^ \r\n]*)?[ \r\n]")
_SEEN_BYTES = 8192


def bad_request_body(head: bytes) -> bytes:
    """The JSON 400 for a request h11 refused, given the last bytes received on the connection."""
    # Imported here: uvicorn loads this protocol class before the application has set Django up.
    from items.api.errors import error_body
    from items.api.json_errors import is_client_api_path
    from items.compat.envelope import failure_body

    matches = list(_REQUEST_LINE.finditer(head))
    line = matches[-1] if matches else None
    raw_path = line.group(1) if line else b""
    if line and not (line.group(0) + (line.group(2) or b"")).isascii():
        message = "the request line contains raw non-ASCII bytes; percent-encode the path and query (UTF-8)"
    else:
        message = "malformed HTTP request"
    path = raw_path.decode("latin-1")
    body = failure_body(400, message) if is_client_api_path(path) else error_body("bad_request", message)
    return json.dumps(body).encode()


class H11Protocol(UvicornH11Protocol):
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    _seen: bytes = b""

    def data_received(self, data: bytes) -> None:
        self._seen = (self._seen + data)[-_SEEN_BYTES:]
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            # Waiting for (the rest of) a request head: the clock runs from its first byte.
            self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        body = bad_request_body(self._seen)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=400, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(settings.REQUEST_HEADER_TIMEOUT_SECONDS, self._head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closing a connection whose request head did not arrive in time")
            self.transport.close()
