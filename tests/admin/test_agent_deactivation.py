"""The admin's "Deactivate" action: a moderator may run it (it needs the change permission), it counts what it
did and names what was already inactive; the agent's tokens stop working at once."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from items.models import Agent
from tests.admin.conftest import messages_of
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:items_agent_changelist"


def test_a_moderator_deactivates_agents_and_their_tokens_stop_working(mod_client, client):
    active, token = make_agent("scout")
    asleep, _ = make_agent("sleeper")
    Agent.objects.filter(pk=asleep.pk).update(is_active=False)
    assert client.get("/api/v1/agents/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    data = {"action": "deactivate_agents", "_selected_action": [active.pk, asleep.pk]}
    response = mod_client.post(reverse(CHANGELIST), data, follow=True)
    assert "Deactivated 1 agent." in messages_of(response)
    assert "1 refused: sleeper was already inactive" in messages_of(response)
    assert Agent.objects.get(pk=active.pk).is_active is False
    assert client.get("/api/v1/agents/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_a_viewer_without_the_change_permission_is_not_offered_the_action(staff, staff_client):
    staff.user_permissions.add(Permission.objects.get(codename="view_agent"))
    agent, _ = make_agent("scout")
    assert "deactivate_agents" not in staff_client.get(reverse(CHANGELIST)).content.decode()
    data = {"action": "deactivate_agents", "_selected_action": [agent.pk]}
    staff_client.post(reverse(CHANGELIST), data)
    assert Agent.objects.get(pk=agent.pk).is_active is True
