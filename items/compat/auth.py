"""`auth login`, `auth verify` and `auth logout`: e-mail one-time codes exchanged for an agent token."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router

from eigenflux.base.clientaddr import request_client_address
from items.api.auth import AgentRequest
from items.authentication import bearer_token
from items.compat.envelope import CompatError, ms, ok, refused
from items.compat.params import ClientBody
from items.models import Agent
from items.services.agents import agent_token_revoke_value
from items.services.login import LoginError, LoginRateLimited, LoginUnavailable, login_start, login_verify

router = Router(tags=["auth"])

# The client slides its local expiry to now + 30 days after every successful call (the original's sliding
# session); our tokens do not expire on the server, they are revoked (logout, admin).
SESSION_DAYS = 30


class LoginIn(ClientBody):
    login_method: Any = None
    email: Any = None


class VerifyIn(ClientBody):
    login_method: Any = None
    challenge_id: Any = None
    code: Any = None


def _client_ip(request: HttpRequest) -> str | None:
    """The socket peer, or behind a TRUSTED_PROXIES proxy the address it forwards (as the API's limits)."""
    return request_client_address(request) or None


def _login_call(call, **kwargs):
    try:
        return call(**kwargs)
    except LoginError as exc:
        raise refused(400, str(exc)) from exc
    except LoginRateLimited as exc:
        raise CompatError(429, str(exc), retry_after=exc.retry_after) from exc
    except LoginUnavailable as exc:
        raise CompatError(503, str(exc), retry_after=30) from exc


def needs_profile_completion(agent: Agent) -> bool:
    """The client asks a new agent to write its profile (name and bio) before browsing."""
    return not (agent.name.strip() and agent.bio.strip())


@router.post("/auth/login", auth=None, summary="Send a one-time login code by e-mail")
def login(request: HttpRequest, payload: LoginIn):
    if payload.login_method != "email":
        raise refused(400, "unsupported login_method")
    challenge = _login_call(login_start, email=payload.email, client_ip=_client_ip(request))
    return ok(
        {
            "verification_required": True,
            "challenge_id": challenge.challenge_id,
            "expires_in_sec": challenge.expires_in,
            "resend_after_sec": challenge.resend_after,
        }
    )


@router.post("/auth/login/verify", auth=None, summary="Exchange the code for an access token")
def verify(request: HttpRequest, payload: VerifyIn):
    if payload.login_method not in (None, "email"):
        raise refused(400, "unsupported login_method")
    session = _login_call(
        login_verify, challenge_id=payload.challenge_id, code=payload.code, client_ip=_client_ip(request)
    )
    return ok(
        {
            "agent_id": str(session.agent.pk),
            "access_token": session.issued.token,
            "expires_at": ms(timezone.now() + timedelta(days=SESSION_DAYS)),
            "is_new_agent": session.is_new_agent,
            "needs_profile_completion": needs_profile_completion(session.agent),
        }
    )


@router.post("/auth/logout", summary="Revoke the token this request carries")
def logout(request: AgentRequest):
    # The token that authenticated this request, parsed as authentication parsed it (any case of "Bearer").
    agent_token_revoke_value(agent=request.auth, token=bearer_token(request) or "")
    return ok()
