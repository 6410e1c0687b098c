"""The health page's WebSocket (`ws/admin/health`): pushes a fresh snapshot every few seconds to staff users
allowed to see the page; anyone else is refused at the handshake."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import close_old_connections
from django.template.loader import render_to_string

from pipeline import health_snapshot

log = logging.getLogger(__name__)


def _snapshot_message() -> dict:
    close_old_connections()
    snapshot = health_snapshot.health_snapshot()
    return {
        "type": "health.snapshot",
        "snapshot": snapshot,
        "html": render_to_string("admin/pipeline/health_snapshot.html", {"snapshot": snapshot}),
    }


class HealthConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if not await database_sync_to_async(health_snapshot.can_view_health)(user):
            await self.close(code=4403)
            return
        await self.accept()
        self._pusher = asyncio.create_task(self._push())

    async def disconnect(self, code):
        pusher = getattr(self, "_pusher", None)
        if pusher is not None:
            pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pusher

    async def receive_json(self, content, **kwargs):
        """Clients send nothing but an optional {"refresh": true} to get a snapshot at once."""
        if isinstance(content, dict) and content.get("refresh"):
            await self.send_json(await database_sync_to_async(_snapshot_message)())

    async def _push(self):
        while True:
            try:
                message = await database_sync_to_async(_snapshot_message)()
            except Exception as exc:  # a database or Redis outage: say so, keep the socket, try again
                log.exception("health snapshot failed")
                message = {"type": "health.error", "error": f"{type(exc).__name__}: {exc}"[:500]}
            await self.send_json(message)
            await asyncio.sleep(health_snapshot.push_seconds())
