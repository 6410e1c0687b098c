"""One model call with explicit retries, backoff, cancellation and accounting (docs/model-layer.md#clients).

Per attempt: check the cancel event, send the request (a task on the process's model loop, pipeline.llm.aio:
the calling thread blocks on it without polling, and a cancel aborts it at once), classify the result, record
an LLMCall row. Replies are read from the raw JSON body (the few fields we use), not built into the SDK's
response models; embeddings come as base64 and are decoded with numpy. Transient failures (429, 5xx, timeouts,
connection errors) are retried with exponential backoff and full jitter, honouring Retry-After; the backoff sleeps on
the cancel event. A reply that fails parsing or validation is NOT retried here: it raises
ModelOutputInvalid and the pipeline retries the message later.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
import numpy as np
import openai
from django.conf import settings
from pydantic import BaseModel, ValidationError

from eigenflux.base.dbpool import release_connection
from pipeline.llm import aio
from pipeline.llm.accounting import Outcome, Usage, record_call
from pipeline.llm.clients import ClientConfig, openai_client
from pipeline.llm.errors import CallCancelled, ModelOutputInvalid, ModelRequestRejected, ModelUnavailable
from pipeline.llm.jsonparse import JSONExtractionError, extract_json_object
from pipeline.llm.prompts import RenderedPrompt
from pipeline.llm.tracing import model_call_span
from pipeline.llm.wire import endpoint, post_json, request_body

logger = logging.getLogger(__name__)
T = TypeVar("T")
S = TypeVar("S", bound=BaseModel)

_RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    vectors: list[list[float]] | None = None  # embeddings replies only
    truncated: bool = False  # the model stopped at the output-token cap


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(exc: openai.APIStatusError) -> float | None:
    raw = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return max(0.0, float(raw)) if raw else None
    except ValueError:
        return None


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Full-jitter exponential backoff; a server's Retry-After is a floor (both capped by the maximum)."""
    cap = float(settings.LLM_RETRY_MAX_DELAY)
    delay = random.uniform(0, min(cap, float(settings.LLM_RETRY_BASE_DELAY) * (2**attempt)))
    if retry_after is not None:
        delay = max(delay, min(cap, retry_after))
    return delay


def _classify(exc: Exception) -> Exception:
    """Map an SDK exception to _Transient, ModelRequestRejected or ModelOutputInvalid."""
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code in _RETRYABLE_STATUS:
            return _Transient(f"HTTP {exc.status_code}", _retry_after(exc))
        return ModelRequestRejected(f"HTTP {exc.status_code}: {exc.message}"[:500])
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        failure = _connection_failure(exc)
        if isinstance(exc, openai.APITimeoutError) and failure is None:
            return _Transient("timeout")
        return _Transient(f"connection error: {failure or exc.__cause__ or exc}"[:300])
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        # An empty or non-JSON HTTP body: the server answered, but with nothing usable.
        return ModelOutputInvalid(f"unreadable response body: {exc}"[:300])
    return exc


def _connection_failure(exc: BaseException) -> BaseException | None:
    """The connection failure behind a reported timeout, if that is what it was. The SDK's aiohttp transport
    reports every failed or dropped connection as a connect timeout (its error map prefers the broader
    entry), so a refused connection would otherwise read "timeout" in the logs and the admin."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__
    return None


@dataclass(frozen=True)
class _Call(Generic[T]):
    """What stays the same over one model call's attempts."""

    prompt: str
    config: ClientConfig
    item_id: int | None
    cancel: threading.Event | None
    send: Callable[[], Awaitable[Reply]]
    accept: Callable[[Reply], T]


def _attempts(
    *,
    prompt: str,
    config: ClientConfig,
    item_id: int | None,
    cancel: threading.Event | None,
    send: Callable[[], Awaitable[Reply]],
    accept: Callable[[Reply], T],
) -> T:
    """Await `send()` on the model loop, with retries; `accept` turns a reply into the result or raises
    ModelOutputInvalid."""
    call = _Call(prompt=prompt, config=config, item_id=item_id, cancel=cancel, send=send, accept=accept)
    last_error = ""
    for attempt in range(config.max_retries + 1):
        if cancel is not None and cancel.is_set():
            raise CallCancelled(f"{prompt}: cancelled before attempt {attempt + 1}")
        try:
            return _attempt(call, attempt)
        except _Transient as exc:
            last_error = str(exc)
            if attempt >= config.max_retries:
                break
            _back_off(prompt=prompt, attempt=attempt, error=exc, cancel=cancel)
    raise ModelUnavailable(
        f"{prompt}: {config.model} unavailable after {config.max_retries + 1} attempts: {last_error}"
    )


# How a failed attempt is recorded; any other exception escapes unrecorded (its span still ends).
_FAILURE_OUTCOMES: tuple[tuple[type[Exception], str], ...] = (
    (CallCancelled, Outcome.CANCELLED),
    (_Transient, Outcome.UNAVAILABLE),
    (ModelOutputInvalid, Outcome.INVALID_OUTPUT),
    (ModelRequestRejected, Outcome.REJECTED),
)
_RECORDED_FAILURES = tuple(kind for kind, _ in _FAILURE_OUTCOMES)


def _attempt(call: _Call[T], attempt: int) -> T:
    """One model call, traced and recorded (an LLMCall row) whatever its outcome; raises _Transient for a
    failure worth retrying and the caller's exceptions for the rest."""
    started = time.monotonic()
    usage: Usage | None = None
    span = model_call_span(prompt=call.prompt, model=call.config.model, attempt=attempt + 1)

    def record(outcome: str, error: str = "") -> None:
        input_tokens, output_tokens = (usage.input_tokens, usage.output_tokens) if usage else (None, None)
        span.end(outcome, input_tokens=input_tokens, output_tokens=output_tokens)
        record_call(
            prompt=call.prompt,
            model=call.config.model,
            item_id=call.item_id,
            latency_s=time.monotonic() - started,
            outcome=outcome,
            usage=usage,
            error=error,
        )

    # The model may take seconds: this thread's database connection goes back to the pool meanwhile.
    release_connection()
    try:
        try:
            reply = aio.run(call.send, call.cancel)
        except CallCancelled:
            raise
        except Exception as exc:
            classified = _classify(exc)
            if classified is exc:
                span.end(type(exc).__name__)
                raise
            raise classified from exc
        usage = reply.usage
        result = call.accept(reply)
    except _RECORDED_FAILURES as exc:
        record(next(outcome for kind, outcome in _FAILURE_OUTCOMES if isinstance(exc, kind)), str(exc))
        raise
    record(Outcome.OK)
    return result


def _back_off(*, prompt: str, attempt: int, error: _Transient, cancel: threading.Event | None) -> None:
    """Wait before the next attempt; a cancelled lease ends the wait (and the call) at once."""
    delay = backoff_delay(attempt, error.retry_after)
    logger.info("model call %s attempt %d failed (%s); retrying in %.2fs", prompt, attempt + 1, error, delay)
    if cancel is None:
        time.sleep(delay)
    elif cancel.wait(delay):
        raise CallCancelled(f"{prompt}: cancelled during backoff") from None


def _count(usage: dict[str, Any], key: str, details: str = "") -> int:
    value = (usage.get(details) or {}).get(key) if details else usage.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def _responses_reply(data: dict[str, Any]) -> Reply:
    usage = data.get("usage") or {}
    incomplete = data.get("incomplete_details") or {}
    parts = []
    for output in data.get("output") or []:
        if output.get("type") == "message":
            parts += [c.get("text") or "" for c in output.get("content") or [] if c.get("type") == "output_text"]
    return Reply(
        text="".join(parts),
        truncated=incomplete.get("reason") == "max_output_tokens",
        usage=Usage(
            input_tokens=_count(usage, "input_tokens"),
            output_tokens=_count(usage, "output_tokens"),
            reasoning_tokens=_count(usage, "reasoning_tokens", "output_tokens_details"),
        ),
    )


def _chat_reply(data: dict[str, Any]) -> Reply:
    usage = data.get("usage") or {}
    choices = data.get("choices") or []
    first = choices[0] if choices else {}
    return Reply(
        text=(first.get("message") or {}).get("content") or "",
        truncated=first.get("finish_reason") == "length",
        usage=Usage(
            input_tokens=_count(usage, "prompt_tokens"),
            output_tokens=_count(usage, "completion_tokens"),
            reasoning_tokens=_count(usage, "reasoning_tokens", "completion_tokens_details"),
        ),
    )


def _sender(config: ClientConfig, rendered: RenderedPrompt) -> Callable[[], Awaitable[Reply]]:
    client = openai_client(config)
    body = request_body(config, rendered)
    if config.api == "chat":
        url = endpoint(client, "/chat/completions")

        async def send_chat() -> Reply:
            return _chat_reply(await post_json(client, url, body))

        return send_chat

    url = endpoint(client, "/responses")

    async def send_responses() -> Reply:
        return _responses_reply(await post_json(client, url, body))

    return send_responses


def accept_reply(reply: Reply, schema: type[S], max_output_tokens: int) -> S:
    """A complete reply parsed into the schema; one cut at the output-token cap is invalid output."""
    if reply.truncated:
        raise ModelOutputInvalid(f"reply cut off at the output-token cap (LLM_MAX_OUTPUT_TOKENS={max_output_tokens})")
    return parse_reply(reply.text, schema)


def parse_reply(text: str, schema: type[S]) -> S:
    """Pure: model text -> validated schema instance, or ModelOutputInvalid."""
    try:
        data = extract_json_object(text)
    except JSONExtractionError as exc:
        raise ModelOutputInvalid(str(exc)) from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}" for err in exc.errors())
        raise ModelOutputInvalid(f"{schema.__name__} invalid: {problems}"[:1000]) from None


def complete(
    *,
    config: ClientConfig,
    rendered: RenderedPrompt,
    schema: type[S],
    item_id: int | None,
    cancel: threading.Event | None,
) -> S:
    return _attempts(
        prompt=rendered.name,
        config=config,
        item_id=item_id,
        cancel=cancel,
        send=_sender(config, rendered),
        accept=lambda reply: accept_reply(reply, schema, config.max_output_tokens),
    )


def decode_vector(encoded: Any) -> list[float]:
    """One embedding from a reply: base64 little-endian float32 (what we ask for), or a JSON list of numbers
    (servers that ignore encoding_format)."""
    if isinstance(encoded, str):
        try:
            vector: list[float] = np.frombuffer(base64.b64decode(encoded, validate=True), dtype="<f4").tolist()
            return vector
        except ValueError as exc:  # bad base64, or a length that is no whole number of float32s
            raise ModelOutputInvalid(f"embedding is not base64 float32: {exc}"[:300]) from None
    if isinstance(encoded, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in encoded):
        return [float(x) for x in encoded]
    raise ModelOutputInvalid(f"embedding is neither base64 nor a list of numbers: {type(encoded).__name__}")


# The largest magnitude half precision holds: the item graphs are built on the vectors as halfvec
# (items.models.graph_key), and a value beyond it could not be written into them.
HALF_PRECISION_MAX = 65504.0


def _check_values(vector: np.ndarray) -> None:
    """An embedding every comparison can read: finite numbers, not all zero (no direction, so no cosine), within
    half precision's range."""
    if not np.isfinite(vector).all():
        raise ModelOutputInvalid("embedding has values that are not finite numbers (NaN or infinity)")
    if not vector.any():
        raise ModelOutputInvalid("embedding is all zeros: it has no direction to compare")
    if np.abs(vector).max() > HALF_PRECISION_MAX:
        raise ModelOutputInvalid(f"embedding has a value beyond {HALF_PRECISION_MAX:g}, half precision's range")


def embed_remote(
    *, config: ClientConfig, texts: list[str], dimensions: int, item_id: int | None, cancel: threading.Event | None
) -> list[list[float]]:
    client = openai_client(config)
    fields: dict[str, Any] = {"model": config.model, "input": texts, "encoding_format": "base64"}
    if settings.EMBEDDING_SEND_DIMENSIONS:
        fields["dimensions"] = dimensions
    body = json.dumps(fields).encode()
    url = endpoint(client, "/embeddings")

    async def send() -> Reply:
        data = await post_json(client, url, body)
        rows = [row for row in data.get("data") or [] if isinstance(row, dict)]
        ordered = sorted(rows, key=lambda row: row["index"] if isinstance(row.get("index"), int) else 0)
        return Reply(
            text="",
            usage=Usage(input_tokens=_count(data.get("usage") or {}, "prompt_tokens")),
            vectors=[decode_vector(row.get("embedding")) for row in ordered],
        )

    def accept(reply: Reply) -> list[list[float]]:
        vectors = reply.vectors or []
        if len(vectors) != len(texts):
            raise ModelOutputInvalid(f"{len(vectors)} embeddings for {len(texts)} inputs")
        for vector in vectors:
            if len(vector) != dimensions:
                raise ModelOutputInvalid(f"embedding has {len(vector)} dimensions, expected {dimensions}")
            _check_values(np.asarray(vector, dtype=float))
        return vectors

    return _attempts(prompt="embedding", config=config, item_id=item_id, cancel=cancel, send=send, accept=accept)
