"""Errors of both agent APIs are JSON that names what is wrong: unknown paths under /api/ and the client's
/eigenflux/api/ (also with DEBUG=True), an empty body, a field named once, duplicate JSON keys refused; and the
client API's two kinds of 400 follow the wire contract (a refused query value is HTTP 200 + code 400, a body
that cannot be bound is a real HTTP 400). The raw-UTF-8 request line is in tests/web/test_request_line.py."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from items.models import RawItem
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

NATIVE = "/api/v1/items/publish"
CLIENT = "/eigenflux/api/v1/items/publish"


def post(path: str, raw: str):
    _, token = make_agent()
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(path, data=raw, content_type="application/json")


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize("path", ["/api", "/api/", "/api/v2/items", "/api/v1/nothing/here"])
def test_an_unknown_native_api_path_is_a_json_404(settings, path, debug):
    settings.DEBUG = debug
    response = Client().get(path)
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": f"no such endpoint: {path}"}}


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize("path", ["/eigenflux/api", "/eigenflux/api/v9/feed", "/eigenflux/api/v1/nothing"])
def test_an_unknown_client_api_path_is_a_404_envelope(settings, path, debug):
    settings.DEBUG = debug
    response = Client().get(path)
    assert response.status_code == 404
    assert response.json() == {"code": 404, "msg": f"no such endpoint: {path}"}


def test_other_unknown_paths_keep_the_html_page():
    response = Client().get("/apis/nothing")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_empty_body_names_the_body():
    native = post(NATIVE, "")
    assert native.status_code == 422
    assert native.json()["error"] == {
        "code": "invalid",
        "message": "body: a JSON object is required",
        "field": "body",
    }
    client = post(CLIENT, "")
    assert (client.status_code, client.json()) == (400, {"code": 400, "msg": "body: a JSON object is required"})


def test_a_message_names_its_field_once():
    raw = json.dumps({"content": "x" * 4001})
    expected = "content is 4001 weighted characters; the limit is 4000"
    native = post(NATIVE, raw).json()["error"]
    assert (native["message"], native["field"]) == (expected, "content")
    assert post(CLIENT, raw).json() == {"code": 400, "msg": expected}


def test_a_message_without_the_field_name_gets_it_as_prefix():
    error = post(NATIVE, json.dumps({"content": 5})).json()["error"]
    assert error["field"] == "content"
    assert error["message"].startswith("content: ") and not error["message"].startswith("content: content")


@pytest.mark.parametrize(
    "raw",
    ['{"content": "harmless", "content": "the one that wins"}', '{"content": "x", "notes": "", "notes": "y"}'],
    ids=["content", "notes"],
)
def test_duplicate_keys_are_refused_naming_the_key(raw):
    key = "content" if raw.count('"content"') == 2 else "notes"
    native = post(NATIVE, raw)
    assert native.status_code == 400
    assert native.json()["error"] == {
        "code": "bad_request",
        "message": f"{key}: this key appears more than once in the request body",
        "field": key,
    }
    client = post(CLIENT, raw)
    assert (client.status_code, client.json()["msg"]) == (400, native.json()["error"]["message"])
    assert not RawItem.objects.exists()


def test_a_duplicate_key_in_a_nested_object_is_refused_too():
    raw = '{"items": [{"item_id": "1", "score": 1, "score": 2}]}'
    _, token = make_agent()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/eigenflux/api/v1/items/feedback", data=raw, content_type="application/json"
    )
    assert (response.status_code, response.json()["msg"]) == (
        400,
        "score: this key appears more than once in the request body",
    )


def test_invalid_json_reads_the_same_in_both_apis():
    native = post(NATIVE, "{nope")
    assert (native.status_code, native.json()["error"]["message"]) == (400, "request body is not valid JSON")
    assert post(CLIENT, "{nope").json() == {"code": 400, "msg": "request body is not valid JSON"}


def test_the_client_apis_two_400s_follow_the_wire_contract():
    """EIGENFLUX-WIRE.md §2 and §5.2: a body that cannot be bound is a real HTTP 400 (the original's bind
    error); a value the feed service refuses is HTTP 200 with code 400 (`invalid action: <value>`). The
    client exits 2 with the message either way; both carry code 400 and a message naming the problem."""
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    refused = client.get("/eigenflux/api/v1/items/feed?action=bogus")
    assert (refused.status_code, refused.json()) == (200, {"code": 400, "msg": "invalid action: bogus"})
    unbound = client.post(CLIENT, data="{nope", content_type="application/json")
    assert (unbound.status_code, unbound.json()) == (400, {"code": 400, "msg": "request body is not valid JSON"})
