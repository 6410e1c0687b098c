"""Every model call sends an output-token cap (LLM_MAX_OUTPUT_TOKENS) in the parameter its API style uses,
and a reply the server cut at that cap is refused as invalid output instead of being half-parsed."""

from __future__ import annotations

import pytest

from pipeline.llm import (
    ModelOutputInvalid,
    extract_item,
    extract_keywords,
    official_reply,
    safety_check,
    suggest_action,
)
from pipeline.models import LLMCall

pytestmark = pytest.mark.django_db

COMPLETION_TASKS = ("safety", "process_item", "suggest_action", "extract_keywords", "official_reply")


def call_every_task() -> None:
    safety_check(content="hello")
    extract_item(content="hello")
    suggest_action(content="x", summary="y", broadcast_type="info")
    extract_keywords(name="n", bio="b", offers="o", seeks="s")
    official_reply(kind="welcome", agent_name="Atlas")


def test_responses_calls_send_max_output_tokens_by_default(fake_llm, settings):
    assert settings.LLM_MAX_OUTPUT_TOKENS == 2048
    call_every_task()
    for task in COMPLETION_TASKS:
        (request,) = fake_llm.requests_for(task)
        assert request.path == "/v1/responses"
        assert request.json["max_output_tokens"] == 2048, task


def test_the_cap_follows_the_setting(fake_llm, settings):
    settings.LLM_MAX_OUTPUT_TOKENS = 300
    call_every_task()
    assert {request.json["max_output_tokens"] for request in fake_llm.requests} == {300}


def test_chat_calls_send_max_completion_tokens(fake_llm, settings):
    settings.LLM_API = "chat"
    call_every_task()
    for task in COMPLETION_TASKS:
        (request,) = fake_llm.requests_for(task)
        assert request.path == "/v1/chat/completions"
        assert request.json["max_completion_tokens"] == 2048, task
        assert "max_tokens" not in request.json


def test_chat_calls_can_send_max_tokens_for_older_servers(fake_llm, settings):
    settings.LLM_API = "chat"
    settings.LLM_CHAT_OUTPUT_LIMIT_PARAM = "max_tokens"
    settings.LLM_MAX_OUTPUT_TOKENS = 512
    call_every_task()
    for request in fake_llm.requests:
        assert request.json["max_tokens"] == 512
        assert "max_completion_tokens" not in request.json


def test_embedding_calls_have_no_output_to_cap(fake_llm, settings):
    from pipeline.llm import embed

    embed(["hello"])
    (request,) = fake_llm.requests_for("embed")
    assert "max_output_tokens" not in request.json


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_reply_cut_at_the_cap_is_invalid_output(fake_llm, settings, api):
    settings.LLM_API = api
    settings.LLM_MAX_OUTPUT_TOKENS = 16  # the default extraction reply is longer than 16 words
    with pytest.raises(ModelOutputInvalid, match="LLM_MAX_OUTPUT_TOKENS=16"):
        extract_item(content="Offering GPU hours in Berlin.")
    assert list(LLMCall.objects.values_list("outcome", flat=True)) == ["invalid_output"]
    assert fake_llm.count("process_item") == 1  # not retried at once: the pipeline retries the message later
