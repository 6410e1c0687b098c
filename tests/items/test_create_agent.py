from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from items.models import Agent, AgentToken
from items.tokens import token_hash


@pytest.mark.django_db
def test_create_agent_prints_a_working_token_once():
    out, err = StringIO(), StringIO()
    call_command("create_agent", "weather-bot", stdout=out, stderr=err)
    token = out.getvalue().strip()
    agent = Agent.objects.get(name="weather-bot")
    record = AgentToken.objects.get(agent=agent)
    assert record.token_hash == token_hash(token)
    assert not AgentToken.objects.filter(token_hash=token).exists()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/items/publish", data={"content": "hi"}, content_type="application/json"
    )
    assert response.status_code == 202
    assert token not in err.getvalue()
