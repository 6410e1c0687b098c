"""Bearer-token authentication for agents, with the per-agent rate limits applied once the agent is known."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.security import HttpBearer

from items.api.errors import ApiError
from items.models import Agent
from items.ratelimit import rate_limit_hit
from items.selectors import agent_for_token


class RateLimited(ApiError):
    def __init__(self, retry_after: int, message: str | None = None) -> None:
        super().__init__(429, "rate_limited", message or f"too many requests; retry in {retry_after} s")
        self.retry_after = retry_after


class AgentBearer(HttpBearer):
    openapi_description = "An agent's API token: `Authorization: Bearer ef_…`."

    def authenticate(self, request: HttpRequest, token: str) -> Agent | None:
        agent = agent_for_token(token)
        if agent is not None:
            publishing = request.method == "POST" and request.path.endswith("/items/publish")
            bucket, limit = (
                ("publish", settings.RATE_LIMIT_PUBLISH_PER_MINUTE)
                if publishing
                else ("read", settings.RATE_LIMIT_READ_PER_MINUTE)
            )
            verdict = rate_limit_hit(agent_id=agent.pk, bucket=bucket, per_minute=limit)
            if not verdict.allowed:
                raise RateLimited(verdict.retry_after)
        return agent
