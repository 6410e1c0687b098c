"""What goes on the wire for one model request: its URL and JSON body, built by us and sent through the SDK's
lowest public layer (docs/performance.md). A prompt's constant fields are serialised once (cached per settings
and prompt) and the call appends its texts; the URL is joined once per client and path."""

from __future__ import annotations

import functools
import json
from typing import Any

import openai

from pipeline.llm.clients import ClientConfig
from pipeline.llm.prompts import RenderedPrompt

_JSON_BODY: Any = {"headers": {"content-type": "application/json"}}


@functools.lru_cache(maxsize=64)
def endpoint(client: openai.AsyncOpenAI, path: str) -> str:
    """The absolute URL of `path` under the client's base URL, joined once per client and path as the SDK would
    (its base URL always ends with a slash). Passed to `client.post` as it is, it spares the SDK joining and
    parsing the two again on every request (`_prepare_url`). A base URL with a query string is left to the
    SDK: the path is returned for it to join."""
    base = client.base_url
    if base.query:
        return path
    return str(base.join(path.lstrip("/")))


async def post_json(client: openai.AsyncOpenAI, url: str, body: bytes) -> dict[str, Any]:
    """POST a JSON body built by us to `url` (absolute: `endpoint`) through the SDK's lowest public layer
    (`client.post`: its auth, timeout, error mapping and transport, but no parameter transform) and return the
    reply's JSON object as it came (`cast_to=object`: no response model is built); ValueError when the body is
    no JSON object."""
    data = await client.post(url, cast_to=object, content=body, options=_JSON_BODY)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


@functools.lru_cache(maxsize=256)
def _request_prefix(config: ClientConfig, prompt: str) -> str:
    """A prompt's request body without its texts, serialised once: the JSON object, open at the end so the
    call appends its instructions and input."""
    del prompt  # part of the cache key only: the same settings may differ per prompt (reasoning effort)
    if config.api == "chat":
        fields: dict[str, Any] = {"model": config.model, config.chat_limit_param: config.max_output_tokens}
        if config.reasoning_effort:
            fields["reasoning_effort"] = config.reasoning_effort
        if config.json_mode:
            fields["response_format"] = {"type": "json_object"}
    else:
        fields = {"model": config.model, "store": False, "max_output_tokens": config.max_output_tokens}
        if config.reasoning_effort:
            fields["reasoning"] = {"effort": config.reasoning_effort}
        if config.json_mode:
            fields["text"] = {"format": {"type": "json_object"}}
    return json.dumps(fields)[:-1]


def request_body(config: ClientConfig, rendered: RenderedPrompt) -> bytes:
    """The HTTP body of one completion: the prompt's cached prefix plus this call's texts."""
    prefix = _request_prefix(config, rendered.name)
    if config.api == "chat":
        messages = [
            {"role": "system", "content": rendered.instructions},
            {"role": "user", "content": rendered.input},
        ]
        return f'{prefix}, "messages": {json.dumps(messages)}}}'.encode()
    texts = f'"instructions": {json.dumps(rendered.instructions)}, "input": {json.dumps(rendered.input)}'
    return f"{prefix}, {texts}}}".encode()
