"""A request line h11 refuses (raw UTF-8 in the query string: RFC 9112 allows only ASCII there) is answered
by the HTTP server before the application sees it. uvicorn's own answer is a plain-text 400; ours is the
API's JSON error body, in the client envelope under /eigenflux/api/. Against uvicorn as `make run` starts it."""

from __future__ import annotations

import json
import socket

import httpx

from tests.web.test_bodies import read_response

RAW_QUERY = "café€"
ADVICE = "the request line contains raw non-ASCII bytes; percent-encode the path and query (UTF-8)"


def send_raw(server, path: str) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return read_response(sock)


def test_raw_utf8_in_the_query_string_gets_a_json_400_saying_what_to_fix(web_server):
    server = web_server()
    status, headers, body = send_raw(server, f"/api/v1/search?q={RAW_QUERY}")
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": {"code": "bad_request", "message": ADVICE}}

    status, headers, body = send_raw(server, f"/eigenflux/api/v1/items/feed?action={RAW_QUERY}")
    assert (status, headers["content-type"]) == (400, "application/json")
    assert json.loads(body) == {"code": 400, "msg": ADVICE}

    # The same query percent-encoded (as every HTTP library sends it) reaches the application.
    answer = httpx.get(f"{server.url}/api/v1/search", params={"q": RAW_QUERY})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


def test_a_request_line_that_is_not_http_gets_a_json_400_too(web_server):
    server = web_server()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"HELLO\r\n\r\n")
        status, _, body = read_response(sock)
    assert (status, json.loads(body)) == (400, {"error": {"code": "bad_request", "message": "malformed HTTP request"}})
