"""WS /ws/v1/events: an agent receives its own items' outcome events as they happen.

The token comes in the `Sec-WebSocket-Protocol` header (offer `eigenflux.v1` and `eigenflux.bearer.<token>`;
the server answers `eigenflux.v1`, never echoing the token) or, for clients that cannot set it, `?token=…`.
The cg:item:notify consumer sends to the agent's channel-layer group. A bad token is accepted and then closed
with code 4401 so the client can tell it from a network failure. A token revoked while its socket is open
closes the socket at once (a push through the same group) and, should the push be lost, at the next
periodic re-check (WS_AUTH_RECHECK_SECONDS). Deactivating the agent closes all its sockets the same way.
Each open socket keeps the agent in the presence registry (items.presence), which match pushes read; the
cg:item:match consumer sends `item.matched` events through the same group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import parse_qs

from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from eigenflux.base.clientaddr import scope_client_address
from items.authentication import AddressThrottled, NotAuthenticated, agent_authenticate
from items.presence import presence_claim, presence_heartbeat, presence_leave
from items.selectors import agent_for_token
from items.tokens import token_hash

log = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_BAD_REQUEST = 4400
CLOSE_RATE_LIMITED = 4429
SUBPROTOCOL = "eigenflux.v1"
BEARER_SUBPROTOCOL_PREFIX = "eigenflux.bearer."


def agent_group(agent_id: int) -> str:
    return f"agent.{agent_id}.events"


def _event_head(envelope: dict[str, str], data: dict) -> dict:
    """What every item event pushed to a socket starts with: the envelope's id, type and time, and the item."""
    return {
        "id": envelope.get("id", ""),
        "type": envelope.get("type", ""),
        "time": envelope.get("time", ""),
        "item_id": str(data.get("item_id", "")),
    }


def outcome_message(envelope: dict[str, str], data: dict) -> dict:
    return {
        "type": "item.event",
        "event": {
            **_event_head(envelope, data),
            "status": data.get("status", ""),
            "reason": data.get("reason", ""),
        },
    }


def milestone_message(envelope: dict[str, str], data: dict, text: str) -> dict:
    """An `item.milestone` event as the author's sockets receive it (docs/feed-log.md#author-milestones)."""
    return {
        "type": "item.event",
        "event": {
            **_event_head(envelope, data),
            "milestone": {"kind": data.get("kind", ""), "threshold": data.get("threshold"), "count": data.get("count")},
            "message": text,
        },
    }


def matched_message(*, event_id: str, item_id: int, score: float, side: str, time: str) -> dict:
    """An `item.matched` push (docs/feed.md#match-push): ids and the score only, nothing of the item's text."""
    return {
        "type": "item.matched",
        "event": {
            "id": event_id,
            "type": "item.matched",
            "time": time,
            "item_id": str(item_id),
            "score": round(score, 4),
            "matched": side,
        },
    }


def _announce(agent_id: int, message: dict, what: str) -> None:
    """Best effort: a lost push is caught by the sockets' periodic re-check."""
    try:
        async_to_sync(get_channel_layer().group_send)(agent_group(agent_id), message)
    except Exception as exc:
        log.warning("could not announce %s (%s); sockets re-check on their own", what, type(exc).__name__)


def token_revoked_announce(*, agent_id: int, digest: str) -> None:
    """Tell the agent's open sockets that the token with this hash is revoked (they close with 4401)."""
    _announce(agent_id, {"type": "token.revoked", "token_hash": digest}, "a token revocation")


def agent_deactivated_announce(*, agent_id: int) -> None:
    """Tell all the agent's open sockets that it was deactivated (they close with 4401)."""
    _announce(agent_id, {"type": "agent.deactivated"}, "an agent deactivation")


def _offered_token(scope: dict) -> tuple[str | None, str | None]:
    """(token, problem): from the subprotocol header first, else the query string."""
    offered = [str(p) for p in scope.get("subprotocols") or ()]
    bearer = [p.removeprefix(BEARER_SUBPROTOCOL_PREFIX) for p in offered if p.startswith(BEARER_SUBPROTOCOL_PREFIX)]
    if bearer:
        if SUBPROTOCOL not in offered:
            return None, f"offer the {SUBPROTOCOL!r} subprotocol alongside the bearer one"
        return bearer[0], None
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return (query.get("token") or [None])[0], None


class AgentEventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        token, problem = _offered_token(self.scope)
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in (self.scope.get("subprotocols") or ()) else None
        await self.accept(subprotocol=subprotocol)
        if problem:
            return await self._refuse(CLOSE_BAD_REQUEST, "bad_request", problem)
        try:
            agent = await database_sync_to_async(agent_authenticate)(
                token=token, address=scope_client_address(self.scope)
            )
        except NotAuthenticated:
            return await self._refuse(CLOSE_UNAUTHORIZED, "unauthorized", "missing, unknown or revoked token")
        except AddressThrottled as exc:
            return await self._refuse(CLOSE_RATE_LIMITED, "rate_limited", str(exc))
        assert token is not None  # agent_authenticate refuses a missing token (NotAuthenticated)
        self.token = token
        self.token_hash = token_hash(token)
        self.agent_id = agent.pk
        # In the agent's group before it counts as online: a match push that sees it online reaches this socket.
        self.group = agent_group(agent.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        if not await self._claimed():
            await self.channel_layer.group_discard(self.group, self.channel_name)
            del self.group  # not in it: disconnect leaves no group and no presence
            limit = settings.WS_MAX_SOCKETS_PER_AGENT
            message = f"too many open WebSockets for this agent (the limit is {limit}); close one to open another"
            return await self._refuse(CLOSE_RATE_LIMITED, "rate_limited", message)
        self._recheck = asyncio.create_task(self._recheck_loop())

    async def _refuse(self, code: int, error: str, message: str) -> None:
        await self.send_json({"error": {"code": error, "message": message}})
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        recheck = getattr(self, "_recheck", None)
        if recheck is not None:
            recheck.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recheck
        group = getattr(self, "group", None)
        if group:
            await self.channel_layer.group_discard(group, self.channel_name)
            await self._presence(presence_leave)

    async def _claimed(self) -> bool:
        """Whether this socket fits in the agent's limit (and is now registered). Without Redis it opens: the
        limit bounds resources, and a Redis outage must not cut every agent off its events."""
        try:
            return await sync_to_async(presence_claim, thread_sensitive=False)(
                agent_id=self.agent_id, channel=self.channel_name, limit=settings.WS_MAX_SOCKETS_PER_AGENT
            )
        except Exception as exc:
            log.warning("WebSocket limit not applied (presence unavailable: %s)", type(exc).__name__)
            return True

    async def _presence(self, change) -> None:
        """Best effort: without Redis the agent only misses match pushes until its next re-check."""
        try:
            await sync_to_async(change, thread_sensitive=False)(agent_id=self.agent_id, channel=self.channel_name)
        except Exception as exc:
            log.warning("WebSocket presence not recorded: %s", type(exc).__name__)

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(settings.WS_AUTH_RECHECK_SECONDS)
            try:
                agent = await database_sync_to_async(agent_for_token)(self.token)
            except Exception as exc:  # the database is briefly away: keep the socket, check again later
                log.warning("WebSocket token re-check failed: %s", type(exc).__name__)
                continue
            if agent is None:
                await self._revoked()
                return
            await self._presence(presence_heartbeat)

    async def _revoked(self) -> None:
        await self._refuse(CLOSE_UNAUTHORIZED, "unauthorized", "the token was revoked")

    async def item_event(self, message: dict) -> None:
        await self.send_json(message["event"])

    async def item_matched(self, message: dict) -> None:
        await self.send_json(message["event"])

    async def token_revoked(self, message: dict) -> None:
        if message.get("token_hash") == getattr(self, "token_hash", None):
            await self._closed_by_push("the token was revoked")

    async def agent_deactivated(self, message: dict) -> None:
        await self._closed_by_push("the agent was deactivated")

    async def _closed_by_push(self, reason: str) -> None:
        recheck = getattr(self, "_recheck", None)
        if recheck is not None:
            recheck.cancel()
        await self._refuse(CLOSE_UNAUTHORIZED, "unauthorized", reason)

    async def receive_json(self, content, **kwargs) -> None:
        """The socket is push-only; anything a client sends is ignored."""
