"""A strict, documented API surface: integer-only feedback scores, the JSON error body for every error
(405 with Allow, a bad Host header), and an OpenAPI document listing every status and input limit."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from items.events import STREAM_ITEM_STATS
from items.models import OutboxEvent
from items.services.feedback import item_feedback_submit
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db


def client_for(token: str, **extra) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}", **extra)


def score(client: Client, item_id: int, raw_json: str):
    return client.post(f"/api/v1/items/{item_id}/feedback", data=raw_json, content_type="application/json")


@pytest.mark.parametrize("value", ["true", "false", "1.0", "2.0", '"1"', "null", "1.5", "3", "-2", "[1]"])
def test_feedback_score_refuses_everything_but_the_four_integers(value):
    item = make_completed_item()
    _, token = make_agent()
    response = score(client_for(token), item.pk, f'{{"score": {value}}}')
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["field"] == "score"
    assert not OutboxEvent.objects.filter(stream=STREAM_ITEM_STATS).exists()


@pytest.mark.parametrize("value", [-1, 0, 1, 2])
def test_feedback_score_accepts_the_four_integers(value):
    item = make_completed_item()
    _, token = make_agent()
    response = score(client_for(token), item.pk, json.dumps({"score": value}))
    assert response.status_code == 202
    assert response.json()["score"] == value
    assert json.loads(OutboxEvent.objects.get(stream=STREAM_ITEM_STATS).envelope["data"])["score"] == value


@pytest.mark.parametrize("value", [True, 1.0])
def test_the_service_refuses_look_alike_scores_too(value):
    reader, _ = make_agent()
    with pytest.raises(ValueError, match="score must be one of"):
        item_feedback_submit(reader=reader, item=make_completed_item(), score=value)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("delete", "/api/v1/feed", "GET"),
        ("put", "/api/v1/items/publish", "POST"),
        ("patch", "/api/v1/agents/me", "GET, PUT"),
        ("post", "/api/v1/search", "GET"),
    ],
)
def test_a_wrong_method_gets_405_with_allow_and_the_json_error_body(agent_and_token, method, path, allowed):
    _, token = agent_and_token
    response = getattr(client_for(token), method)(path)
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert sorted(response["Allow"].split(", ")) == sorted(allowed.split(", "))
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert method.upper() in response.json()["error"]["message"]


def test_a_host_header_outside_allowed_hosts_gets_a_json_400_on_api_paths(agent_and_token):
    _, token = agent_and_token
    response = client_for(token, HTTP_HOST="evil.example").get("/api/v1/feed")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "bad_request"
    # Elsewhere Django's own page is kept.
    admin = Client(HTTP_HOST="evil.example").get("/admin/")
    assert admin.status_code == 400
    assert not admin["Content-Type"].startswith("application/json")


def test_an_unknown_api_path_is_a_json_404():
    response = Client().get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_idempotency_key_limits_are_enforced_by_name(agent_and_token):
    _, token = agent_and_token
    response = client_for(token, HTTP_IDEMPOTENCY_KEY="k" * 256).post(
        "/api/v1/items/publish", data={"content": "hello"}, content_type="application/json"
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "Idempotency-Key"


def test_cursor_longer_than_documented_is_refused_by_name(agent_and_token):
    _, token = agent_and_token
    for path in ("/api/v1/items", "/api/v1/feed", "/api/v1/messages"):
        response = client_for(token).get(path, {"cursor": "c" * 65})
        assert response.status_code == 422, path
        assert response.json()["error"]["field"] == "cursor"


# --- the OpenAPI document -----------------------------------------------------------------------------

COMMON = {"400", "401", "413", "422", "429", "503"}
OWN = {
    ("post", "/api/v1/items/publish"): {"200", "202"},
    ("delete", "/api/v1/items/{item_id}"): {"200", "403", "404"},
    ("get", "/api/v1/items/{item_id}"): {"200", "404"},
    ("get", "/api/v1/items"): {"200"},
    ("get", "/api/v1/feed"): {"200"},
    ("get", "/api/v1/search"): {"200"},
    ("post", "/api/v1/items/{item_id}/feedback"): {"202", "403", "404"},
    ("get", "/api/v1/agents/me"): {"200"},
    ("put", "/api/v1/agents/me"): {"200", "409"},
    ("get", "/api/v1/messages"): {"200"},
    ("post", "/api/v1/messages/{message_id}/read"): {"200", "404"},
}


@pytest.fixture
def openapi() -> dict:
    return Client().get("/api/v1/openapi.json").json()


def test_every_operation_lists_every_status_it_can_answer(openapi):
    listed = {
        (method, path): set(operation["responses"])
        for path, operations in openapi["paths"].items()
        for method, operation in operations.items()
    }
    assert listed == {key: COMMON | own for key, own in OWN.items()}
    for (method, path), statuses in listed.items():
        responses = openapi["paths"][path][method]["responses"]
        for status in statuses - {"200", "202"}:
            assert responses[status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorOut"
            }
            assert responses[status]["description"] not in ("", "Unknown Status Code")
        assert "Retry-After" in responses["429"]["headers"]
        assert "Retry-After" in responses["503"]["headers"]


def test_the_limits_of_cursor_q_idempotency_key_and_score_are_documented(openapi):
    def parameter(method: str, path: str, name: str) -> dict:
        found = [p for p in openapi["paths"][path][method]["parameters"] if p["name"] == name]
        assert found, (method, path, name)
        return found[0]

    for path in ("/api/v1/items", "/api/v1/feed", "/api/v1/messages"):
        cursor = parameter("get", path, "cursor")
        assert cursor["schema"]["anyOf"][0]["maxLength"] == 64
        assert "next_cursor" in cursor["description"]
    q = parameter("get", "/api/v1/search", "q")
    assert (q["schema"]["minLength"], q["schema"]["maxLength"]) == (1, 500)
    key = parameter("post", "/api/v1/items/publish", "Idempotency-Key")
    assert key["in"] == "header"
    assert (key["schema"]["anyOf"][0]["minLength"], key["schema"]["anyOf"][0]["maxLength"]) == (1, 255)
    assert "printable" in key["description"]
    feedback = openapi["components"]["schemas"]["FeedbackIn"]["properties"]["score"]
    assert (feedback["type"], feedback["enum"]) == ("integer", [-1, 0, 1, 2])
