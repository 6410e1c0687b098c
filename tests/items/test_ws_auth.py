"""The agent WebSocket's authentication: the token by subprotocol or query string, revocation closing an open
socket at once (a push) or at the next re-check (when the push is lost), and the per-address limit."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from eigenflux.base.redis import get_redis
from items.events_socket import CLOSE_BAD_REQUEST, CLOSE_RATE_LIMITED, CLOSE_UNAUTHORIZED, SUBPROTOCOL
from items.models import AgentToken
from items.presence import SOCKETS_PREFIX
from items.services.agents import agent_token_create, agent_token_revoke
from tests.factories import make_agent


@pytest.fixture(autouse=True)
def _fresh_channel_layer(settings):
    channel_layers.backends.clear()  # this test's Redis database
    yield
    channel_layers.backends.clear()


def application():
    from eigenflux.asgi import application

    return application


async def close_connections() -> None:
    from django.db import connections

    await database_sync_to_async(connections.close_all)()


def socket(path: str = "/ws/v1/events", subprotocols: list[str] | None = None) -> WebsocketCommunicator:
    return WebsocketCommunicator(application(), path, subprotocols=subprotocols)


async def closed_with(ws: WebsocketCommunicator, timeout: float) -> tuple[dict, dict]:
    """The error message and the close frame the server sent; then the client side is torn down too."""
    error = await ws.receive_json_from(timeout=timeout)
    closed = await ws.receive_output(timeout=timeout)
    await ws.disconnect()
    return error, closed


def test_token_in_the_subprotocol_header_is_accepted_with_our_subprotocol(transactional_db):
    _, token = make_agent()

    async def scenario():
        ws = socket(subprotocols=[SUBPROTOCOL, f"eigenflux.bearer.{token}"])
        connected, subprotocol = await ws.connect()
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()
        await close_connections()
        return connected, subprotocol

    assert asyncio.run(scenario()) == (True, SUBPROTOCOL)  # never the token-bearing one


def test_a_bearer_subprotocol_without_ours_is_refused(transactional_db):
    _, token = make_agent()

    async def scenario():
        ws = socket(subprotocols=[f"eigenflux.bearer.{token}"])
        await ws.connect()
        result = await closed_with(ws, 5)
        await close_connections()
        return result

    error, closed = asyncio.run(scenario())
    assert error["error"]["code"] == "bad_request"
    assert closed == {"type": "websocket.close", "code": CLOSE_BAD_REQUEST}


def test_a_wrong_token_in_the_subprotocol_closes_with_4401(transactional_db):
    async def scenario():
        ws = socket(subprotocols=[SUBPROTOCOL, "eigenflux.bearer.ef_" + "x" * 43])
        await ws.connect()
        result = await closed_with(ws, 5)
        await close_connections()
        return result

    error, closed = asyncio.run(scenario())
    assert error["error"]["code"] == "unauthorized"
    assert closed["code"] == CLOSE_UNAUTHORIZED


def test_revoking_the_token_closes_its_open_socket_at_once(transactional_db, settings):
    settings.WS_AUTH_RECHECK_SECONDS = 3600  # only the push can close it within the test
    agent, token = make_agent()
    _, other_token = make_agent(agent.name + "-other")

    async def scenario():
        mine = socket(f"/ws/v1/events?token={token}")
        other = socket(f"/ws/v1/events?token={other_token}")
        assert (await mine.connect())[0] and (await other.connect())[0]
        assert await mine.receive_nothing(timeout=0.3)
        await database_sync_to_async(agent_token_revoke)(token=await AgentToken.objects.aget(agent=agent))
        result = await closed_with(mine, 3)
        other_still_open = await other.receive_nothing(timeout=0.5)
        await other.disconnect()
        await close_connections()
        return result, other_still_open

    (error, closed), other_still_open = asyncio.run(scenario())
    assert error["error"]["message"] == "the token was revoked"
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHORIZED}
    assert other_still_open


def test_a_revocation_whose_push_was_lost_closes_at_the_next_recheck(transactional_db, settings):
    settings.WS_AUTH_RECHECK_SECONDS = 0.5
    agent, token = make_agent()

    async def scenario():
        ws = socket(f"/ws/v1/events?token={token}")
        assert (await ws.connect())[0]
        assert await ws.receive_nothing(timeout=0.8)  # re-checked at least once: still valid, still open
        # Revoked behind the service's back: no push is sent.
        await AgentToken.objects.filter(agent=agent).aupdate(revoked_at=timezone.now())
        result = await closed_with(ws, 3)
        await close_connections()
        return result

    error, closed = asyncio.run(scenario())
    assert error["error"]["code"] == "unauthorized"
    assert closed["code"] == CLOSE_UNAUTHORIZED


def test_failed_socket_authentications_count_against_the_address(transactional_db, settings):
    settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE = 1

    async def scenario():
        codes = []
        for _ in range(2):
            ws = socket("/ws/v1/events?token=nope")
            await ws.connect()
            codes.append((await closed_with(ws, 5))[1]["code"])
        await close_connections()
        return codes

    assert asyncio.run(scenario()) == [CLOSE_UNAUTHORIZED, CLOSE_RATE_LIMITED]


def test_an_agent_keeps_at_most_its_limit_of_sockets_whatever_its_tokens(transactional_db, settings):
    """Issue 44, item 9: eight sockets on one token stayed open. The limit counts the agent's sockets in Redis
    (so over all processes), whichever token opened them; closing one makes room for another."""
    settings.WS_MAX_SOCKETS_PER_AGENT = 2
    agent, token = make_agent()
    second_token = agent_token_create(agent=agent, label="second").token

    async def scenario():
        first, second = socket(f"/ws/v1/events?token={token}"), socket(f"/ws/v1/events?token={second_token}")
        assert (await first.connect())[0] and (await second.connect())[0]
        # A socket is accepted before it claims its place: both placed before a third asks (else it may win one).
        deadline = time.monotonic() + 10
        while await sync_to_async(get_redis().zcard)(f"{SOCKETS_PREFIX}{agent.pk}") < 2:
            assert time.monotonic() < deadline, "the two sockets never claimed their places"
            await asyncio.sleep(0.02)
        third = socket(f"/ws/v1/events?token={token}")
        await third.connect()
        refused = await closed_with(third, 5)
        assert await first.receive_nothing(timeout=0.3)  # the open ones stay open
        await first.disconnect()
        fourth = socket(f"/ws/v1/events?token={token}")
        assert (await fourth.connect())[0]
        fourth_open = await fourth.receive_nothing(timeout=0.5)
        await fourth.disconnect()
        await second.disconnect()
        await close_connections()
        return refused, fourth_open

    (error, closed), fourth_open = asyncio.run(scenario())
    assert closed == {"type": "websocket.close", "code": CLOSE_RATE_LIMITED}
    assert error["error"] == {
        "code": "rate_limited",
        "message": "too many open WebSockets for this agent (the limit is 2); close one to open another",
    }
    assert fourth_open
