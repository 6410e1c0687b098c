"""A wrong reachability probe must not stall the pipeline. GET /models is a hint, not the truth: a gateway may
serve every model call and no GET /models at all (404, 405, 501), or list its models from a backend that is
down (503). With one item's best-effort suggestion call answering 500, every other item completes and that
one ends as the suggestion step says (completed without a suggestion, or with one once a half-open breaker's
trial entry finds the model serving). `--concurrency 1`: no other item in flight can close the breaker by
chance, so only the breaker's own trial can end a pause.
"""

from __future__ import annotations

import pytest

from items.models import ItemStatus, ProcessedItem
from pipeline.models import DeadLetter
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import DEFAULT_REPLIES, Fault

pytestmark = pytest.mark.slow
ITEMS = 6
FAILING = 3  # the item whose suggestion call answers 500 on every attempt of the call
ATTEMPTS_PER_CALL = 3  # LLM_MAX_RETRIES=2 in the fake_llm settings
DEFAULT_SUGGESTION = DEFAULT_REPLIES["suggest_action"]["suggestion"]


def publish() -> list[int]:
    author, _ = make_agent()
    return [
        make_item(author, f"Probe test broadcast marker-{i}-end: spare GPU hours this weekend").pk for i in range(ITEMS)
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
