"""Who is calling: an agent token checked as cheaply as possible, shared by the REST API and the WebSocket.

A token that is not of our shape costs nothing; a well-formed one the database did not know costs one query
per AUTH_NEGATIVE_CACHE_SECONDS in each process; every failure counts against the client's address, and an
address over RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE is answered 429 with no lookup at all until its minute
ends (agents behind that address included: the price of not letting it query the database freely).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from eigenflux.base.clientaddr import client_network
from items.models import Agent
from items.ratelimit import address_blocked_for, unauthenticated_hit
from items.selectors import agent_for_token
from items.tokens import UnknownTokens, token_hash, token_well_formed

unknown_tokens = UnknownTokens()


class NotAuthenticated(Exception):
    """No, malformed, unknown or revoked token."""


class AddressThrottled(Exception):
    """Too many failed authentications from this client address."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many unauthenticated requests; retry in {retry_after} s")
        self.retry_after = retry_after


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, the scheme in any case (RFC 7235); None without one.
    The one parser of that header: authentication and logout must agree on which token a request carries."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    token = credentials.strip()
    return token if scheme.lower() == "bearer" and token else None


def agent_authenticate(*, token: str | None, address: str) -> Agent:
    """The active agent holding `token`; raises NotAuthenticated or AddressThrottled. Failures count per client
    network (an IPv4 address or an IPv6 /64, as every per-client limit): one host holds a whole /64, and counting
    its addresses one by one would give it 2**64 budgets."""
    address = client_network(address)
    blocked = address_blocked_for(address)
    if token_well_formed(token):
        digest = token_hash(token)
        if digest not in unknown_tokens:
            if blocked:
                raise AddressThrottled(blocked)
            agent = agent_for_token(token)
            if agent is not None:
                return agent
            unknown_tokens.add(digest, settings.AUTH_NEGATIVE_CACHE_SECONDS)
    if blocked:
        raise AddressThrottled(blocked)
    verdict = unauthenticated_hit(address=address)
    if not verdict.allowed:
        raise AddressThrottled(verdict.retry_after)
    raise NotAuthenticated("missing, unknown or revoked token")
