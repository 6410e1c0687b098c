"""Request bodies are counted as they arrive and refused with 413 the moment they pass the limit, whatever
the headers claim (chunked, no Content-Length, a Content-Length that lies), so a 100 MB body is never read.

Django's own limit (DATA_UPLOAD_MAX_MEMORY_SIZE) only applies after the whole body has been read, and its
ASGI handler spools every body to disk first; these wrappers sit in front of it. Agent API paths get
API_MAX_BODY_BYTES, everything else (admin forms) DATA_UPLOAD_MAX_MEMORY_SIZE. Under ASGI the body must also
arrive within REQUEST_BODY_TIMEOUT_SECONDS (408 otherwise), so a half-sent body cannot hold a connection.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging

from django.conf import settings

log = logging.getLogger(__name__)


def body_limit(path: str) -> int:
    if path.startswith("/api/"):
        return settings.API_MAX_BODY_BYTES
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def _too_large(limit: int) -> bytes:
    return _error("payload_too_large", f"request body larger than the limit of {limit} bytes")


def _declared_length(value: str | bytes | None) -> int | None:
    """The Content-Length, or None when absent; -1 when it is not a number."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else -1


class BodyLimitASGI:
    """ASGI wrapper: reads the body (up to the limit) before the application sees the request."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = body_limit(scope.get("path", ""))
        headers = dict(scope.get("headers") or [])
        declared = _declared_length(headers.get(b"content-length"))
        if declared == -1:
            return await _respond(send, 400, _error("bad_request", "invalid Content-Length header"))
        if declared is not None and declared > limit:
            return await _respond(send, 413, _too_large(limit))

        messages: list[dict] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.REQUEST_BODY_TIMEOUT_SECONDS
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - loop.time()))
            except TimeoutError:
                log.info("request body not received within %ss; 408", settings.REQUEST_BODY_TIMEOUT_SECONDS)
                return await _respond(send, 408, _error("request_timeout", "the request body arrived too slowly"))
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client went away; the application sees the disconnect
            size += len(message.get("body", b""))
            if size > limit:
                return await _respond(send, 413, _too_large(limit))
            if not message.get("more_body", False):
                break

        async def replay():
            if messages:
                return messages.pop(0)
            return await receive()

        return await self.app(scope, replay, send)


async def _respond(send, status: int, body: bytes) -> None:
    # Connection: close, because the rest of the body (if any) is never read.
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimitWSGI:
    """WSGI wrapper (gunicorn): refuses a declared length over the limit at once, and reads a chunked body
    only up to the limit (Django's WSGI request would otherwise see it as empty)."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        limit = body_limit(environ.get("PATH_INFO", ""))
        declared = _declared_length(environ.get("CONTENT_LENGTH") or None)
        if declared == -1:
            return _wsgi_respond(start_response, 400, _error("bad_request", "invalid Content-Length header"))
        if declared is not None and declared > limit:
            return _wsgi_respond(start_response, 413, _too_large(limit))
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            body = environ["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                return _wsgi_respond(start_response, 413, _too_large(limit))
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)


def _wsgi_respond(start_response, status: int, body: bytes) -> list[bytes]:
    reason = {400: "Bad Request", 413: "Content Too Large"}[status]
    start_response(
        f"{status} {reason}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")],
    )
    return [body]
