"""`auth logout` revokes the token the request authenticated with, however the client spells the scheme
(`Bearer`, `bearer`, `BEARER`: RFC 7235 makes it case-insensitive, and authentication already accepts each)."""

from __future__ import annotations

import pytest

from items.models import AgentToken
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_logout_revokes_the_token_whatever_the_case_of_the_scheme(compat, scheme):
    agent, token = make_agent()
    client = compat()
    status, body, _ = client.post("/auth/logout", Authorization=f"{scheme} {token}")
    assert (status, body) == (200, {"code": 0, "msg": "success"})
    assert AgentToken.objects.get(agent=agent).revoked_at is not None
    status, body, _ = client.get("/agents/me", Authorization=f"{scheme} {token}")
    assert (status, body) == (401, {"code": 401, "msg": "invalid or expired token"})


def test_logout_revokes_only_the_token_it_carries(compat):
    agent, token = make_agent()
    other = AgentToken.objects.create(agent=agent, prefix="ef_other", token_hash="0" * 64)
    assert compat().post("/auth/logout", Authorization=f"bearer {token}")[0] == 200
    other.refresh_from_db()
    assert other.revoked_at is None
