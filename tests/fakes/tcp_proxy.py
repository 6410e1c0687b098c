"""A TCP front for a real server (PostgreSQL, Redis) that a test can take down and bring back.

`down()` closes every open connection and stops listening, as if the server had been stopped: clients see
their connections drop and new ones refused. `up()` listens again on the same port. The real server behind
it is never touched, so the test process keeps its own direct connection. The target is a TCP address or a
unix socket path (the embedded servers listen on unix sockets). Runs an asyncio loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target: str | tuple[str, int], *, host: str = "127.0.0.1"):
        self.target = target
        self.host = host
        self.port = 0
        self.connections = 0  # accepted while up, in total
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._is_down = False

    # --- control (from the test's thread) -------------------------------------------------------------
    def start(self) -> TcpProxy:
        with socket.socket() as probe:  # a free port, kept for every up()
            probe.bind((self.host, 0))
            self.port = probe.getsockname()[1]
        self._thread.start()
        self._call(self._listen())
        return self

    def down(self) -> None:
        self._call(self._down())

    def up(self) -> None:
        self._call(self._listen())

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self._down())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _call(self, coro) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # --- the loop --------------------------------------------------------------------------------------
    async def _listen(self) -> None:
        self._is_down = False
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)

    async def _down(self) -> None:
        self._is_down = True
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _connect_target(self):
        if isinstance(self.target, str):
            return await asyncio.open_unix_connection(self.target)
        return await asyncio.open_connection(*self.target)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._is_down:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await self._connect_target()
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._open.update((writer, upstream_writer))
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))
        self._open.discard(writer)
        self._open.discard(upstream_writer)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
