"""uvicorn's HTTP/1.1 protocol (h11) with a request-head timeout: `uvicorn --http eigenflux.httpserver:H11Protocol`.

uvicorn has no header read timeout: its keep-alive timer starts only after a response, so a client that
connects and sends nothing, or trickles its request line and headers a byte at a time, holds the connection
forever. Here a connection whose request head is not complete REQUEST_HEADER_TIMEOUT_SECONDS after its first
byte (or after connecting) is closed. The body has its own deadline (eigenflux.bodylimit).
"""

from __future__ import annotations

import asyncio
import logging

import h11
from django.conf import settings
from uvicorn.protocols.http.h11_impl import H11Protocol as UvicornH11Protocol

log = logging.getLogger(__name__)


class H11Protocol(UvicornH11Protocol):
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            # Waiting for (the rest of) a request head: the clock runs from its first byte.
            self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

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
