"""Is the model endpoint up? A free request (GET /models) to each configured OpenAI-compatible endpoint, for the
stream runtime's circuit breaker: it confirms an outage without spending a model call on an item.

It is a hint, not the truth: a gateway may serve the model calls and no GET /models at all (404, 405, 501).
Such answers say "cannot tell", never "down", so the breaker tries a real entry instead of waiting for ever."""

from __future__ import annotations

import logging

import openai
from django.core.exceptions import ImproperlyConfigured

from pipeline.llm import aio
from pipeline.llm.clients import ClientConfig, ClientKind, client_config, openai_client, provider
from pipeline.runtime.breaker import Verdict

PROBE_TIMEOUT_SECONDS = 5.0
# Answers that mean the server is there but cannot serve model calls now (as the call layer retries them).
_DOWN_STATUS = frozenset({408, 429}) | (frozenset(range(500, 600)) - {501})

log = logging.getLogger(__name__)


def endpoints_verdict() -> Verdict:
    """DOWN when any endpoint (main, safety, embeddings) is unreachable, times out, or answers 408, 429 or a 5xx
    other than 501; else UNKNOWN when any answers another status that is not a success (404/405/501: no such
    route, or any 4xx about the probe request rather than the model); else UP. The local analyzer is no
    remote dependency: always UP."""
    if provider() == "local":
        return Verdict.UP
    verdicts = {_endpoint_verdict(config) for config in _distinct_configs()}
    for verdict in (Verdict.DOWN, Verdict.UNKNOWN):
        if verdict in verdicts:
            return verdict
    return Verdict.UP


def _distinct_configs() -> list[ClientConfig]:
    configs: list[ClientConfig] = []
    seen: set[tuple[str | None, str]] = set()
    kinds: tuple[ClientKind, ...] = ("main", "safety", "embedding")
    for kind in kinds:
        try:
            config = client_config(kind)
        except ImproperlyConfigured:
            continue  # the calls themselves will say what is missing
        if (config.base_url, config.api_key) not in seen:
            seen.add((config.base_url, config.api_key))
            configs.append(config)
    return configs


def _endpoint_verdict(config: ClientConfig) -> Verdict:
    client = openai_client(config).with_options(timeout=PROBE_TIMEOUT_SECONDS, max_retries=0)
    try:
        aio.run(client.models.list, None)  # awaiting the first page is the request
    except (openai.APIConnectionError, openai.APITimeoutError):
        return Verdict.DOWN
    except openai.APIStatusError as exc:
        return Verdict.DOWN if exc.status_code in _DOWN_STATUS else Verdict.UNKNOWN
    except Exception:  # it answered, not the question: a page that is not a model list (a default page)
        log.info("GET /models at %s answered something that is not a model list", config.base_url)
        return Verdict.UNKNOWN
    return Verdict.UP
