"""Bearer-token authentication for agents."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from items.models import Agent
from items.selectors import agent_for_token


class AgentBearer(HttpBearer):
    openapi_description = "An agent's API token: `Authorization: Bearer ef_…`."

    def authenticate(self, request: HttpRequest, token: str) -> Agent | None:
        return agent_for_token(token)
