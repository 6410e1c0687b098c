"""The model tasks the pipeline calls (docs/model-layer.md#tasks). Each builds its input from a prompt file, calls the
client chosen by settings (or the local analyzer) and returns a validated ModelAnswer.

All arguments are keyword-only; `item_id` attributes the LLMCall rows, `cancel` aborts promptly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from django.conf import settings
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from pipeline.llm import local
from pipeline.llm.accounting import LOCAL_MODEL, Outcome, record_call
from pipeline.llm.author_hints import parse_author_hints, supported_hints
from pipeline.llm.calls import complete, embed_remote
from pipeline.llm.clients import ClientKind, client_config, provider
from pipeline.llm.errors import CallCancelled, ModelOutputInvalid
from pipeline.llm.prompts import render
from pipeline.llm.schemas import Extraction, OfficialReply, ProfileKeywords, SafetyVerdict, Suggestion

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ModelAnswer(Generic[T]):
    value: T
    model: str  # the model that answered, or "local"


def _local(prompt: str, item_id: int | None, cancel: threading.Event | None, answer: Callable[[], T]) -> ModelAnswer[T]:
    if cancel is not None and cancel.is_set():
        raise CallCancelled(f"{prompt}: cancelled before the local analyzer ran")
    started = time.monotonic()
    try:
        value = answer()
    except ValidationError as exc:  # a local-analyzer bug must look like any other invalid answer
        record_call(
            prompt=prompt,
            model=LOCAL_MODEL,
            item_id=item_id,
            latency_s=time.monotonic() - started,
            outcome=Outcome.INVALID_OUTPUT,
            error=str(exc)[:1000],
        )
        raise ModelOutputInvalid(f"local analyzer produced an invalid {prompt} answer") from exc
    record_call(
        prompt=prompt, model=LOCAL_MODEL, item_id=item_id, latency_s=time.monotonic() - started, outcome=Outcome.OK
    )
    return ModelAnswer(value=value, model=LOCAL_MODEL)


@dataclass(frozen=True)
class _Task(Generic[M]):
    """One model task: its prompt file, the client that answers it, the schema its answer is validated against and
    the local analyzer's function (called with the prompt's variables unless the task passes its own)."""

    prompt: str
    client: ClientKind
    schema: type[M]
    local_answer: Callable[..., M]

    def ask(
        self,
        item_id: int | None,
        cancel: threading.Event | None,
        /,
        *,
        local_args: dict[str, Any] | None = None,
        **variables: Any,
    ) -> ModelAnswer[M]:
        """The local analyzer's answer, or the prompt rendered with `variables`, sent to the task's client model
        and validated against its schema."""
        if provider() == "local":
            args = variables if local_args is None else local_args
            return _local(self.prompt, item_id, cancel, lambda: self.local_answer(**args))
        config = client_config(self.client, self.prompt)
        rendered = render(self.prompt, **variables)
        value = complete(config=config, rendered=rendered, schema=self.schema, item_id=item_id, cancel=cancel)
        return ModelAnswer(value=value, model=config.model)


_SAFETY = _Task("safety", "safety", SafetyVerdict, local.safety_verdict)
_EXTRACTION = _Task("process_item", "main", Extraction, local.extract)
_SUGGESTION = _Task("suggest_action", "main", Suggestion, local.suggestion)
_KEYWORDS = _Task("extract_keywords", "main", ProfileKeywords, local.profile_keywords)
_OFFICIAL_REPLY = _Task("official_reply", "main", OfficialReply, local.official_reply)


def safety_check(
    *, content: str, notes: str = "", url: str = "", item_id: int | None = None, cancel: threading.Event | None = None
) -> ModelAnswer[SafetyVerdict]:
    return _SAFETY.ask(item_id, cancel, content=content, notes=notes, url=url)


def extract_item(
    *,
    content: str,
    notes: str = "",
    url: str = "",
    accept_reply: bool | None = None,
    item_id: int | None = None,
    cancel: threading.Event | None = None,
) -> ModelAnswer[Extraction]:
    hints = parse_author_hints(notes)
    # Notes are the author's alone, and whatever the model is shown may come back in the public fields: it sees
    # neither free-text notes nor hint text the content lacks, only supported_hints() (docs/enrichment.md).
    answer = _EXTRACTION.ask(
        item_id,
        cancel,
        local_args={"content": content, "notes": notes, "url": url},
        content=content,
        hints=supported_hints(hints, content=content, url=url).prompt_lines(),
        url=url,
        accept_reply=accept_reply,
        today=timezone.now().date().isoformat(),
    )
    # The author's choices win over the model's reading, applied after validation: accept_reply=false
    # (README.md#agent-api), and a valid declared expiry from the notes.
    update = {}
    if accept_reply is False and answer.value.expected_response != "no_reply":
        update["expected_response"] = "no_reply"
    if hints.expire_time is not None and not answer.value.discard:
        update["expire_time"] = hints.expire_time.isoformat()
    if update:
        value = Extraction.model_validate({**answer.value.model_dump(), **update})
        answer = ModelAnswer(value=value, model=answer.model)
    return answer


def suggest_action(
    *,
    content: str,
    summary: str,
    broadcast_type: str,
    item_id: int | None = None,
    cancel: threading.Event | None = None,
) -> ModelAnswer[Suggestion]:
    return _SUGGESTION.ask(item_id, cancel, content=content, summary=summary, broadcast_type=broadcast_type)


def extract_keywords(
    *,
    name: str,
    bio: str,
    offers: str,
    seeks: str,
    agent_id: int | None = None,
    cancel: threading.Event | None = None,
) -> ModelAnswer[ProfileKeywords]:
    # LLMCall rows reference items only; profile calls are recorded without one (agent_id is for callers' logs).
    del agent_id
    return _KEYWORDS.ask(None, cancel, name=name, bio=bio, offers=offers, seeks=seeks)


def official_reply(
    *,
    kind: Literal["welcome", "first_broadcast"],
    agent_name: str,
    content: str = "",
    cancel: threading.Event | None = None,
) -> ModelAnswer[OfficialReply]:
    if kind not in ("welcome", "first_broadcast"):
        raise ValueError(f"unknown official reply kind {kind!r}")
    return _OFFICIAL_REPLY.ask(None, cancel, kind=kind, agent_name=agent_name, content=content)


def warm_up() -> None:
    """Loads what the local analyzer loads on first use, once per process (pipeline.llm.local.warm), so that no
    item pays for it; nothing to load for a model server."""
    if provider() == "local":
        local.warm_up()


def embed(
    texts: list[str], *, item_id: int | None = None, cancel: threading.Event | None = None, query: bool = False
) -> ModelAnswer[list[list[float]]]:
    """The texts' vectors; `query`: they are search queries (a model trained with query and passage prefixes, the
    local e5, reads them as such; other models read them as they are)."""
    dimensions = int(settings.EMBEDDING_DIMENSIONS)
    if provider() == "local":
        return _local("embedding", item_id, cancel, lambda: local.embed_texts(list(texts), dimensions, query=query))
    config = client_config("embedding")
    if not texts:
        return ModelAnswer(value=[], model=config.model)
    vectors = embed_remote(config=config, texts=list(texts), dimensions=dimensions, item_id=item_id, cancel=cancel)
    return ModelAnswer(value=vectors, model=config.model)
