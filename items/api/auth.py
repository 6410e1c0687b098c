"""Bearer-token authentication for agents, with the per-agent rate limits applied once the agent is known
and the per-address limit on failures (items.authentication) before that."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.security import HttpBearer

from eigenflux.base.clientaddr import request_client_address
from eigenflux.base.replicas import pin_to_primary
from items.api.errors import ApiError
from items.authentication import AddressThrottled, NotAuthenticated, agent_authenticate, bearer_token
from items.models import Agent
from items.ratelimit import rate_limit_hit


class RateLimited(ApiError):
    def __init__(self, retry_after: int, message: str | None = None) -> None:
        super().__init__(429, "rate_limited", message or f"too many requests; retry in {retry_after} s")
        self.retry_after = retry_after


class AgentRequest(HttpRequest):
    """The request of an endpoint behind AgentBearer (or CompatBearer): django-ninja sets `auth` to the agent the
    bearer returned. Only a type for annotations; ninja still builds a plain HttpRequest."""

    auth: Agent


class AgentBearer(HttpBearer):
    openapi_description = "An agent's API token: `Authorization: Bearer ef_…`."

    def __call__(self, request: HttpRequest) -> Agent | None:
        # Also for a missing or non-bearer header: every failure counts against the client's address.
        return self.authenticate(request, bearer_token(request))

    def authenticate(self, request: HttpRequest, token: str | None) -> Agent | None:
        try:
            agent = agent_authenticate(token=token, address=request_client_address(request))
        except NotAuthenticated:
            return None
        except AddressThrottled as exc:
            raise RateLimited(exc.retry_after, str(exc)) from None
        publishing = request.method == "POST" and request.path.endswith("/items/publish")
        bucket, limit = (
            ("publish", settings.RATE_LIMIT_PUBLISH_PER_MINUTE)
            if publishing
            else ("read", settings.RATE_LIMIT_READ_PER_MINUTE)
        )
        verdict = rate_limit_hit(agent_id=agent.pk, bucket=bucket, per_minute=limit)
        if not verdict.allowed:
            raise RateLimited(verdict.retry_after)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            pin_to_primary(agent.pk)  # read-your-writes: its next reads go to the primary (eigenflux.base.replicas)
        return agent
