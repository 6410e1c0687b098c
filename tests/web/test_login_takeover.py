"""The look-alike takeover, end to end against uvicorn as `make run` starts it, mailing through Django's real
SMTP backend to a sink that records the envelope: `alice@gma<dotless i>l.com` used to be answered with a code
mailed to alice@xn--gmal-nza.com (a mailbox the attacker can own) that logged in as Alice. Now that address is
another address: its code makes (with open sign-up) an agent of its own, and Alice's codes go only to the
address she holds."""

from __future__ import annotations

import re

import httpx
import pytest

from items.services.agents import agent_create
from tests.fakes.smtp_server import SmtpSink

pytestmark = pytest.mark.slow

LOGIN = "/eigenflux/api/v1/auth/login"


@pytest.fixture
def smtp():
    sink = SmtpSink()
    yield sink
    sink.close()


def _code(sink: SmtpSink) -> str:
    return re.findall(r"\b\d{6}\b", sink.messages[-1].data)[-1]


def test_a_look_alike_domain_never_logs_in_as_alice(web_server, smtp):
    alice = agent_create(name="alice", email="alice@gmail.com")
    server = web_server(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(smtp.port),
        EIGENFLUX_OPEN_SIGNUP="true",
        LOGIN_RESEND_SECONDS="0",  # two codes for Alice in a row from this one client
    )
    with httpx.Client(base_url=server.url, timeout=10) as http:
        body = http.post(LOGIN, json={"login_method": "email", "email": "alice@gma\u0131l.com"}).json()
        assert body["code"] == 0
        assert smtp.messages[-1].recipients == ["alice@xn--gmal-nza.com"]  # the attacker's mailbox...
        verify = {"login_method": "email", "challenge_id": body["data"]["challenge_id"], "code": _code(smtp)}
        session = http.post(f"{LOGIN}/verify", json=verify).json()["data"]
        assert session["agent_id"] != str(alice.pk) and session["is_new_agent"] is True  # ...is not Alice's
        me = http.get("/eigenflux/api/v1/agents/me", headers={"Authorization": f"Bearer {session['access_token']}"})
        assert me.json()["data"]["profile"]["email"] == "alice@xn--gmal-nza.com"

        # Alice's own address in another case and in full-width letters: the code goes to what she holds.
        for typed in ("ALICE@GMAIL.COM", "\uff41\uff4c\uff49\uff43\uff45@gmail.com"):
            body = http.post(LOGIN, json={"login_method": "email", "email": typed})
            assert body.json()["code"] == 0, body.text
            assert smtp.messages[-1].recipients == ["alice@gmail.com"]
        verify = {"login_method": "email", "challenge_id": body.json()["data"]["challenge_id"], "code": _code(smtp)}
        assert http.post(f"{LOGIN}/verify", json=verify).json()["data"]["agent_id"] == str(alice.pk)
