"""Deactivating an agent closes its open WebSockets at once (finding 8), as revoking a token does, through the
same push: from the service, the admin's action and the admin's form. Another agent's socket stays open."""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from items.events_socket import CLOSE_UNAUTHORIZED
from items.models import Agent
from items.services.agents import agent_deactivate
from tests.admin.test_blacklist_and_agents import _agent_form
from tests.factories import make_agent
from tests.items.test_ws_auth import _fresh_channel_layer, close_connections, closed_with, socket  # noqa: F401


def admin_browser() -> Client:
    browser = Client()
    browser.force_login(User.objects.create_superuser("root-ws", "root@example.invalid", "x"))
    return browser


def deactivating_closes_at_once(deactivate) -> tuple[dict, dict, bool]:
    """Open a socket for a new agent and one for another, call `deactivate(agent)` (sync), and return the error
    and close frame the first received and whether the other one is still open."""
    agent, token = make_agent()
    _, other_token = make_agent()

    async def scenario():
        mine, other = socket(f"/ws/v1/events?token={token}"), socket(f"/ws/v1/events?token={other_token}")
        assert (await mine.connect())[0] and (await other.connect())[0]
        assert await mine.receive_nothing(timeout=0.3)
        await sync_to_async(deactivate)(agent)
        error, closed = await closed_with(mine, 3)
        other_open = await other.receive_nothing(timeout=0.5)
        await other.disconnect()
        await close_connections()
        return error, closed, other_open

    result = asyncio.run(scenario())
    assert Agent.objects.get(pk=agent.pk).is_active is False
    return result


def assert_closed_by_the_push(result: tuple[dict, dict, bool]) -> None:
    error, closed, other_open = result
    assert error["error"] == {"code": "unauthorized", "message": "the agent was deactivated"}
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHORIZED}
    assert other_open


def test_the_service_closes_the_agents_sockets_at_once(transactional_db, settings):
    settings.WS_AUTH_RECHECK_SECONDS = 3600  # only the push can close it within the test
    assert_closed_by_the_push(deactivating_closes_at_once(lambda agent: agent_deactivate(agent=agent)))


def test_the_admin_action_closes_the_agents_sockets_at_once(transactional_db, settings):
    settings.WS_AUTH_RECHECK_SECONDS = 3600
    browser = admin_browser()

    def deactivate(agent: Agent) -> None:
        data = {"action": "deactivate_agents", "_selected_action": [agent.pk]}
        assert browser.post(reverse("admin:items_agent_changelist"), data).status_code == 302

    assert_closed_by_the_push(deactivating_closes_at_once(deactivate))


def test_saving_the_admin_form_inactive_closes_the_agents_sockets_at_once(transactional_db, settings):
    settings.WS_AUTH_RECHECK_SECONDS = 3600
    browser = admin_browser()

    def deactivate(agent: Agent) -> None:
        url = reverse("admin:items_agent_change", args=[agent.pk])
        assert browser.post(url, _agent_form(agent, is_active="")).status_code == 302

    assert_closed_by_the_push(deactivating_closes_at_once(deactivate))
