"""Request bodies and slow clients, against real servers: uvicorn as `make run` starts it, and gunicorn for
WSGI. The 64 KiB limit holds for chunked bodies and lying Content-Lengths, is enforced as bytes arrive (a
100 MB upload is refused after a few KiB, not read), and trickled heads or half-sent bodies time out."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time

import pytest

from eigenflux.asgi import application
from tests.factories import make_agent

pytestmark = pytest.mark.slow

CHUNK = 16 * 1024


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    return sock


def read_response(sock: socket.socket, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        part = sock.recv(65536)
        if not part:
            break
        body += part
    return int(lines[0].split()[1]), headers, body


def stream_chunked_until_answered(sock: socket.socket, total: int) -> int:
    """Send a chunked body of up to `total` bytes, stopping as soon as the server answers; bytes sent."""
    sent = 0
    chunk = b"%x\r\n" % CHUNK + b"x" * CHUNK + b"\r\n"
    while sent < total:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            return sent
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return sent
        sent += CHUNK
    return sent


def head(path: str, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("wsgi", [False, True], ids=["uvicorn", "gunicorn"])
def test_a_100_mb_chunked_body_is_refused_after_the_limit_without_being_read(web_server, wsgi):
    server = web_server(wsgi=wsgi)
    sock = connect(server)
    sock.sendall(head("/api/v1/items/publish", Transfer_Encoding="chunked", Authorization="Bearer x"))
    sent = stream_chunked_until_answered(sock, 100 * 1024 * 1024)
    status, headers, body = read_response(sock)
    sock.close()
    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert headers["connection"] == "close"
    assert sent < 8 * 1024 * 1024  # socket buffers hold a few MiB at most; nothing near 100 MB was taken


@pytest.mark.parametrize("wsgi", [False, True], ids=["uvicorn", "gunicorn"])
def test_a_declared_length_over_the_limit_is_refused_before_the_body(web_server, wsgi):
    server = web_server(wsgi=wsgi)
    sock = connect(server)
    sock.sendall(head("/api/v1/items/publish", Content_Length=str(100 * 1024 * 1024)))
    status, _, body = read_response(sock)
    sock.close()
    assert status == 413
    assert "65536" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize("wsgi", [False, True], ids=["uvicorn", "gunicorn"])
def test_a_small_chunked_publish_still_works(web_server, wsgi):
    _, token = make_agent()
    server = web_server(wsgi=wsgi)
    payload = json.dumps({"content": "Chunked, and small enough"}).encode()
    sock = connect(server)
    sock.sendall(head("/api/v1/items/publish", Transfer_Encoding="chunked", Authorization=f"Bearer {token}"))
    sock.sendall(b"%x\r\n" % len(payload) + payload + b"\r\n0\r\n\r\n")
    status, _, body = read_response(sock)
    sock.close()
    assert status == 202, body
    assert json.loads(body)["status"] == "pending"


def test_a_lying_content_length_is_caught_by_counting_what_arrives():
    """ASGI level: whatever the header claims, the bytes the server hands over are what is counted."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/items/publish",
        "headers": [(b"content-length", b"10"), (b"content-type", b"application/json")],
        "query_string": b"",
    }
    chunks = [{"type": "http.request", "body": b"x" * CHUNK, "more_body": True} for _ in range(100)]
    taken = []
    sent = []

    async def receive():
        message = chunks.pop(0)
        taken.append(message)
        return message

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    assert sent[0]["status"] == 413
    assert len(taken) == 5  # 5 x 16 KiB passes 64 KiB: refused there, the other 95 chunks never read


def test_a_trickled_request_head_is_cut_off(web_server):
    server = web_server(REQUEST_HEADER_TIMEOUT_SECONDS="1")
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    started = time.monotonic()
    for _ in range(20):  # a header line every 0.5 s, never the blank line that ends the head
        time.sleep(0.5)
        try:
            sock.sendall(b"X-Slow: 1\r\n")
        except (BrokenPipeError, ConnectionResetError):
            break
    sock.settimeout(5)
    try:
        closed = sock.recv(1024) == b""
    except ConnectionResetError:
        closed = True
    sock.close()
    assert closed
    assert time.monotonic() - started < 8


def test_a_silent_connection_is_cut_off(web_server):
    server = web_server(REQUEST_HEADER_TIMEOUT_SECONDS="1")
    sock = connect(server)
    sock.settimeout(10)
    started = time.monotonic()
    assert sock.recv(1024) == b""
    assert time.monotonic() - started < 8
    sock.close()


def test_a_half_sent_body_times_out_with_408(web_server):
    server = web_server(REQUEST_BODY_TIMEOUT_SECONDS="1")
    sock = connect(server)
    sock.sendall(head("/api/v1/items/publish", Content_Length="100") + b'{"content": ')
    status, headers, body = read_response(sock, timeout=10)
    sock.close()
    assert status == 408
    assert headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "request_timeout"
