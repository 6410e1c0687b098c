"""Log redaction: tokens, bearer credentials, query strings and secret-looking pairs never survive."""

from __future__ import annotations

import logging

from eigenflux.base.logredact import redact

TOKEN = "ef_" + "A1b2-C3d4_" * 4 + "xyz"


def test_tokens_credentials_and_query_strings_are_redacted():
    lines = [
        f'127.0.0.1:5555 - "WebSocket /ws/v1/events?token={TOKEN}" [accepted]',
        f"Authorization: Bearer {TOKEN}",
        "GET http://example.com/x?key=sk-live-123456 failed",
        "password=hunter22 api_key: sk-abc12345",
        f"unexpected token {TOKEN[3:]} in {TOKEN}",
    ]
    for line in lines:
        assert TOKEN not in redact(line)
        assert "[redacted]" in redact(line)
    assert "sk-live-123456" not in redact(lines[2])
    assert "hunter22" not in redact(lines[3]) and "sk-abc12345" not in redact(lines[3])
    assert redact("plain message without secrets") == "plain message without secrets"


def test_every_logger_goes_through_the_redaction(caplog):
    with caplog.at_level(logging.INFO):
        logging.getLogger("uvicorn.error").info('%s - "WebSocket %s" [accepted]', "1.2.3.4", f"/ws?token={TOKEN}")
        logging.getLogger("some.library").warning("key %s", TOKEN)
    assert TOKEN not in caplog.text
    assert caplog.text.count("[redacted]") >= 2
