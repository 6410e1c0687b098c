"""A model endpoint that cannot work is said so (docs/operations.md, "When the model endpoint fails"): at start-up
(`make run` asks GET /models of each endpoint and names what is wrong), and while the pipeline runs (a consumer's
model breaker open: /readyz says `degraded`, the health page says so, and the author of a waiting item reads why it
waits)."""

from __future__ import annotations

import pytest
from django.test import Client

from eigenflux.base.redis import get_redis
from items.models import ItemStatus, ProcessedItem
from pipeline.health_snapshot import health_snapshot
from pipeline.llm.reachability import endpoints_report, model_degraded
from pipeline.runtime import liveness
from tests.factories import make_agent, make_item


def test_an_unreachable_endpoint_is_named_at_start(fake_llm, settings):
    settings.LLM_BASE_URL = settings.SAFETY_LLM_BASE_URL = settings.EMBEDDING_BASE_URL = "http://127.0.0.1:9/v1"
    reports = endpoints_report()
    assert {client for report in reports for client in report.clients} == {"main", "safety", "embedding"}
    for report in reports:  # three keys: three endpoints as the clients see them
        assert report.base_url == "http://127.0.0.1:9/v1" and report.problem.startswith("is unreachable"), report


@pytest.mark.parametrize(("status", "said"), [(401, "refuses the API key (HTTP 401)"), (503, "answers HTTP 503")])
def test_a_refused_key_or_a_failing_endpoint_is_named_at_start(fake_llm, status, said):
    fake_llm.server.models_status = status
    problems = {report.problem for report in endpoints_report()}
    assert problems == {said}


def test_a_working_endpoint_and_the_local_analyzer_have_nothing_to_say(fake_llm, settings):
    reports = endpoints_report()
    assert reports and all(report.problem == "" for report in reports)
    assert {model for report in reports for model in report.models} == {
        settings.LLM_MODEL,
        settings.SAFETY_LLM_MODEL,
        settings.EMBEDDING_MODEL,
    }
    settings.LLM_PROVIDER = "local"
    assert endpoints_report() == []


def _report_model_breaker(open_seconds: float | None) -> None:
    """A running consumer as it reports itself (pipeline.runtime.liveness), its model breaker open or closed."""
    ages = {} if open_seconds is None else {"model": open_seconds}
    status = {"consumer": "item-publish-test", "stream": "s", "group": "cg:item:publish", "breakers_open_seconds": ages}
    liveness.publish(get_redis(), [status])


@pytest.mark.django_db
def test_an_open_model_breaker_makes_readyz_degraded_and_the_health_page_say_so(redis_client):
    client = Client()
    _report_model_breaker(None)
    assert client.get("/readyz").json()["status"] == "ok"
    assert model_degraded() == "" and health_snapshot()["model_degraded"] == ""

    _report_model_breaker(42)
    response = client.get("/readyz")
    assert response.status_code == 200  # still serving: publishing works, items wait
    body = response.json()
    assert body["status"] == "degraded" and "model endpoint is failing" in body["degraded"]["model"]
    assert "42 s" in health_snapshot()["model_degraded"]


@pytest.mark.django_db
def test_the_author_of_a_waiting_item_reads_why_it_waits_and_a_finished_item_says_nothing(redis_client):
    author, token = make_agent()
    _, other_token = make_agent()
    item = make_item(author, "Selling two tickets for the Saturday match, section B.")
    url = f"/api/v1/items/{item.pk}"
    client = Client()

    def detail(bearer: str) -> str:
        response = client.get(url, headers={"Authorization": f"Bearer {bearer}"})
        assert response.status_code == 200, response.content
        return response.json()["status_detail"]

    assert detail(token) == ""  # nothing holds it up
    _report_model_breaker(90)
    assert "model endpoint is failing" in detail(token)
    ProcessedItem.objects.filter(pk=item.pk).update(status=ItemStatus.COMPLETED)
    assert detail(token) == "" and detail(other_token) == ""  # done: nothing waits
