"""A wrong reachability probe must not stall the pipeline. GET /models is a hint, not the truth: a gateway may
serve every model call and no GET /models at all (404, 405, 501), or list its models from a backend that is
down (503). With one item's best-effort suggestion call answering 500, every other item completes and that
one ends as the suggestion step says (completed without a suggestion, or with one once a half-open breaker's
trial entry finds the model serving). `--concurrency 1`: no other item in flight can close the breaker by
chance, so only the breaker's own trial can end a pause.
"""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from items.models import ItemStatus, ProcessedItem
from pipeline.health_snapshot import health_snapshot
from pipeline.models import DeadLetter
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import DEFAULT_REPLIES, Fault
from tests.pipeline.enrichment.conftest import ENRICHMENT_MODULES
from tests.pipeline.runtime.fixtures import wait_for
from tests.pipeline.runtime.test_guarantees import free_port, get_json

pytestmark = pytest.mark.slow
ITEMS = 6
FAILING = 3  # the item whose suggestion call answers 500 on every attempt of the call
ATTEMPTS_PER_CALL = 3  # LLM_MAX_RETRIES=2 in the fake_llm settings
DEFAULT_SUGGESTION = DEFAULT_REPLIES["suggest_action"]["suggestion"]


def publish(n: int = ITEMS) -> list[int]:
    author, _ = make_agent()
    return [
        make_item(author, f"Probe test broadcast marker-{i}-end: spare GPU hours this weekend").pk for i in range(n)
    ]


def outcome(pks: list[int]) -> dict[int, tuple[str, str]]:
    rows = ProcessedItem.objects.filter(pk__in=pks).values_list("pk", "status", "suggestion")
    return {pk: (status, suggestion) for pk, status, suggestion in rows}


def fail_one_suggestion(fake_llm) -> None:
    fake_llm.script("suggest_action", *[Fault.server_error(500)] * ATTEMPTS_PER_CALL, matching=f"marker-{FAILING}-end")


def assert_others_completed_with_a_suggestion(pks: list[int], result: dict[int, tuple[str, str]]) -> None:
    others = {pk: result.get(pk) for pk in pks if pk != pks[FAILING]}
    assert others == dict.fromkeys(others, (ItemStatus.COMPLETED, DEFAULT_SUGGESTION)), result
    assert DeadLetter.objects.count() == 0


@pytest.mark.parametrize("models_status", [404, 405, 501])
def test_an_endpoint_without_get_models_completes_every_item(fake_llm, enrich, redis_client, models_status):
    fake_llm.server.models_status = models_status
    fail_one_suggestion(fake_llm)
    pks = publish()
    output = enrich(PIPELINE_CONCURRENCY="1")
    result = outcome(pks)
    assert result[pks[FAILING]] == (ItemStatus.COMPLETED, ""), output[-3000:]  # best effort: no suggestion
    assert_others_completed_with_a_suggestion(pks, result)
    answered = [r.status for r in fake_llm.requests_for("suggest_action")]
    assert answered.count(500) == ATTEMPTS_PER_CALL
    assert redis_client.xlen("{stream:item:publish}:dlq") == 0
    assert "model is down" not in output  # "cannot tell" never pauses the consumer


def test_a_probe_that_says_down_while_the_model_serves_is_overruled_by_a_trial_entry(fake_llm, enrich, redis_client):
    fake_llm.server.models_status = 503  # the listing is down; the model calls are not
    fail_one_suggestion(fake_llm)
    pks = publish()
    output = enrich(PIPELINE_CONCURRENCY="1")
    result = outcome(pks)
    # Paused by the breaker (the probe said down), then tried for real once half-open: the model answered.
    assert result[pks[FAILING]] == (ItemStatus.COMPLETED, DEFAULT_SUGGESTION), output[-3000:]
    assert_others_completed_with_a_suggestion(pks, result)
    assert "model is down" in output and "paused without spending a delivery" in output
    assert "model probe says down" in output and "trying one entry for real" in output
    assert "model is back (trial entry" in output
    assert redis_client.xlen("{stream:item:publish}:dlq") == 0


def test_an_item_whose_extraction_always_fails_while_the_probe_cannot_tell_ends_failed(fake_llm, enrich):
    """A step that is not best effort: its attempts count (the probe never said down), so the item ends failed
    when its retries run out, and the others complete."""
    fake_llm.server.models_status = 501
    fake_llm.script("process_item", *[Fault.server_error(500)] * 100, matching=f"marker-{FAILING}-end")
    pks = publish()
    output = enrich(PIPELINE_CONCURRENCY="1", PIPELINE_MAX_RETRIES="3")
    result = outcome(pks)
    assert result[pks[FAILING]][0] == ItemStatus.FAILED, output[-3000:]
    others = {pk: result[pk][0] for pk in pks if pk != pks[FAILING]}
    assert set(others.values()) == {ItemStatus.COMPLETED}, result


def breaker_gauges(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("eigenflux_pipeline_breaker_open") and sample.labels.get("dependency") == "model"
    }


def test_a_breaker_open_past_its_bound_shows_on_readyz_the_health_page_and_the_metrics(
    fake_llm, run_pipeline, client, redis_client
):
    fake_llm.server.outage = Fault.server_error(503)  # the calls and GET /models alike: really down
    [pk] = publish(1)
    port = free_port()
    env = {
        **fake_llm.env(),
        "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
        "PIPELINE_BREAKER_STUCK_SECONDS": "3",
        "PIPELINE_BLOCK_MS": "200",
    }
    proc = run_pipeline("--consumer", "item-publish", "--no-housekeeping", "--metrics-port", str(port), env=env)

    def readyz() -> tuple[int, dict]:
        return get_json(f"http://127.0.0.1:{port}/readyz")

    def stuck() -> dict | None:
        status, body = readyz()
        problems = body.get("consumers", [{}])[0].get("problems", [])
        return body if status == 503 and any(p.startswith("model breaker open ") for p in problems) else None

    # Waits for the breaker's own 503 (readiness may also fail for a moment while the loops start).
    body = wait_for(stuck, 60, message="the pipeline's /readyz fails for the breaker")
    [problem] = body["consumers"][0]["problems"]
    assert problem.startswith("model breaker open "), body
    # The gauges follow at the lease keeper's next turn.
    gauges = wait_for(
        lambda: (g := breaker_gauges(port))["eigenflux_pipeline_breaker_open_seconds"] >= 3.0 and g, 10, message="gauge"
    )
    assert gauges["eigenflux_pipeline_breaker_open_limit_seconds"] == 3.0

    def reported_problems() -> list[str]:
        return [p for c in health_snapshot(redis_client)["consumers"] for p in c["problems"]]

    wait_for(lambda: any(p.startswith("model breaker open") for p in reported_problems()), 10, message="health")
    web = client.get("/readyz")
    assert web.status_code == 200  # the web process itself is ready
    [stuck] = web.json()["pipeline"]["breakers_open_too_long"]
    assert (stuck["dependency"], stuck["group"]) == ("model", "cg:item:publish") and stuck["open_seconds"] >= 3
    assert "model breaker open for" in proc.output()

    fake_llm.server.outage = None
    wait_for(lambda: readyz()[0] == 200, 60, message="ready again once the model is back")
    wait_for(lambda: outcome([pk]).get(pk, ("",))[0] == ItemStatus.COMPLETED, 60, message="the item completed")
    wait_for(lambda: breaker_gauges(port)["eigenflux_pipeline_breaker_open_seconds"] == 0.0, 10, message="gauge 0")
    # The web process reads the consumers' last liveness report, which follows at its next beat.
    wait_for(
        lambda: client.get("/readyz").json()["pipeline"]["breakers_open_too_long"] == [],
        30,
        message="the web /readyz no longer lists the breaker",
    )
    proc.terminate()
    assert proc.wait(30) == 0, proc.output()[-3000:]
