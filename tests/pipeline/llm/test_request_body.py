"""A completion's HTTP body is built by us: the prompt's constant fields serialised once (cached per settings and
prompt), the call's texts appended; the result is the same JSON the SDK's create() would have sent."""

from __future__ import annotations

import json

import openai
import pytest

from pipeline.llm.clients import ClientConfig
from pipeline.llm.prompts import RenderedPrompt
from pipeline.llm.wire import _request_prefix, endpoint, request_body


def config(**overrides) -> ClientConfig:
    values = {
        "kind": "main",
        "base_url": "http://x/v1",
        "api_key": "k",
        "model": "m",
        "timeout": 5.0,
        "max_retries": 0,
        "api": "responses",
        "reasoning_effort": "",
        "json_mode": False,
        "max_output_tokens": 300,
    }
    return ClientConfig(**{**values, **overrides})


RENDERED = RenderedPrompt(name="safety", instructions='Say "ok".\nTASK: safety', input='Ünïcode "quoted" text')


def test_responses_body_has_the_fields_and_the_texts():
    body = json.loads(request_body(config(reasoning_effort="low", json_mode=True), RENDERED))
    assert body == {
        "model": "m",
        "store": False,
        "max_output_tokens": 300,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_object"}},
        "instructions": RENDERED.instructions,
        "input": RENDERED.input,
    }


def test_chat_body_has_the_messages_and_the_limit_parameter():
    body = json.loads(request_body(config(api="chat", chat_limit_param="max_tokens"), RENDERED))
    assert body == {
        "model": "m",
        "max_tokens": 300,
        "messages": [
            {"role": "system", "content": RENDERED.instructions},
            {"role": "user", "content": RENDERED.input},
        ],
    }


def test_the_constant_part_is_serialised_once_per_settings_and_prompt():
    _request_prefix.cache_clear()
    for _ in range(3):
        request_body(config(), RENDERED)
    request_body(config(model="other"), RENDERED)
    info = _request_prefix.cache_info()
    assert (info.misses, info.hits) == (2, 2)


@pytest.mark.parametrize(
    "base_url", ["http://x/v1", "http://x/v1/", "https://x:8443/openai/v1", "http://x", "http://x/a%20b/v1"]
)
@pytest.mark.parametrize("path", ["/responses", "/chat/completions", "/embeddings"])
def test_the_endpoint_is_the_url_the_sdk_would_join(base_url, path):
    client = openai.AsyncOpenAI(base_url=base_url, api_key="k")
    assert endpoint(client, path) == str(client._prepare_url(path))


def test_a_base_url_with_a_query_is_left_to_the_sdk():
    client = openai.AsyncOpenAI(base_url="http://x/v1?api-version=1", api_key="k")
    assert endpoint(client, "/responses") == "/responses"
