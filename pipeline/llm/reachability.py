"""Is the model endpoint up? A free request (GET /models) to each configured OpenAI-compatible endpoint, for the
stream runtime's circuit breaker: it confirms an outage without spending a model call on an item.

It is a hint, not the truth: a gateway may serve the model calls and no GET /models at all (404, 405, 501).
Such answers say "cannot tell", never "down", so the breaker tries a real entry instead of waiting for ever."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import openai
import redis
from django.core.exceptions import ImproperlyConfigured

from eigenflux.base.redis import get_redis
from pipeline.llm import aio
from pipeline.llm.clients import ClientConfig, ClientKind, client_config, openai_client, provider
from pipeline.llm.errors import MODEL
from pipeline.runtime import liveness
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
    endpoints, _ = _endpoints()  # a client not configured: the calls themselves will say what is missing
    verdicts = {_probe(configs[0])[0] for configs in endpoints}
    for verdict in (Verdict.DOWN, Verdict.UNKNOWN):
        if verdict in verdicts:
            return verdict
    return Verdict.UP


def _endpoints() -> tuple[list[list[ClientConfig]], list[EndpointReport]]:
    """The configured clients grouped by endpoint (base URL and key: one probe each), and a report for each client
    that cannot be configured."""
    grouped: dict[tuple[str | None, str], list[ClientConfig]] = {}
    missing: list[EndpointReport] = []
    kinds: tuple[ClientKind, ...] = ("main", "safety", "embedding")
    for kind in kinds:
        try:
            config = client_config(kind)
        except ImproperlyConfigured as exc:
            missing.append(EndpointReport((kind,), "", (), str(exc)))
            continue
        grouped.setdefault((config.base_url, config.api_key), []).append(config)
    return list(grouped.values()), missing


def _probe(config: ClientConfig) -> tuple[Verdict, str]:
    """GET /models at the endpoint: the breaker's verdict, and what is wrong in words ("" when the answer says
    nothing against it)."""
    client = openai_client(config).with_options(timeout=PROBE_TIMEOUT_SECONDS, max_retries=0)
    started = time.monotonic()
    try:
        aio.run(client.models.list, None)  # awaiting the first page is the request
    except openai.APIConnectionError as exc:  # APITimeoutError too
        # The aiohttp transport reports a refused connection as a connect timeout: told apart by how soon it came.
        if isinstance(exc, openai.APITimeoutError) and time.monotonic() - started > PROBE_TIMEOUT_SECONDS / 2:
            return Verdict.DOWN, f"did not answer within {PROBE_TIMEOUT_SECONDS:.0f} s"
        return Verdict.DOWN, f"is unreachable ({exc.__cause__ or exc})"[:200]
    except openai.APIStatusError as exc:
        if exc.status_code in _DOWN_STATUS:
            return Verdict.DOWN, f"answers HTTP {exc.status_code}"
        refused = {401: "", 403: ": no permission"}.get(exc.status_code)
        return Verdict.UNKNOWN, "" if refused is None else f"refuses the API key (HTTP {exc.status_code}{refused})"
    except Exception:  # it answered, not the question: a page that is not a model list (a default page)
        log.info("GET /models at %s answered something that is not a model list", config.base_url)
        return Verdict.UNKNOWN, ""
    return Verdict.UP, ""


@dataclass(frozen=True)
class EndpointReport:
    """One configured endpoint as a start-up check found it: which clients use it, where, and what is wrong with
    it in words ("" when it answered, or answered something that says nothing against it)."""

    clients: tuple[str, ...]
    base_url: str
    models: tuple[str, ...]
    problem: str


def endpoints_report() -> list[EndpointReport]:
    """GET /models on each distinct endpoint (main, safety, embeddings), for `make run` to say at start whether the
    model can work: unreachable, too slow, or refusing the key (which the breaker's verdict cannot tell apart
    from "cannot tell"). Empty for the local analyzer."""
    if provider() == "local":
        return []
    endpoints, missing = _endpoints()
    if missing:
        return missing[:1]
    return [
        EndpointReport(
            clients=tuple(config.kind for config in configs),
            base_url=configs[0].base_url or "https://api.openai.com/v1",
            models=tuple(dict.fromkeys(config.model for config in configs)),
            problem=_probe(configs[0])[1],
        )
        for configs in endpoints
    ]


def model_degraded(statuses: list[dict[str, Any]] | None = None) -> str:
    """In words, why the model layer holds items up now ("" when it does not): a running consumer's circuit breaker
    for the model endpoint is open (the endpoint fails, refuses the key or cannot be reached). For /readyz, the
    health page and the `status_detail` of the items that wait (items.ports). `statuses`: the consumers' reports
    when the caller has read them already (liveness.live_consumers)."""
    try:
        opened = liveness.open_dependencies(liveness.live_consumers(get_redis()) if statuses is None else statuses)
    except redis.RedisError:
        return ""
    if MODEL not in opened:
        return ""
    return (
        f"the model endpoint is failing (calls paused for {opened[MODEL]:.0f} s, retried automatically); "
        "waiting items are processed as soon as it answers"
    )
