"""Is the model endpoint up? A free request (GET /models) to each configured OpenAI-compatible endpoint, for the
stream runtime's circuit breaker: it confirms an outage without spending a model call on an item."""

from __future__ import annotations

import openai
from django.core.exceptions import ImproperlyConfigured

from pipeline.llm import aio
from pipeline.llm.clients import client_config, openai_client, provider

PROBE_TIMEOUT_SECONDS = 5.0


def endpoints_reachable() -> bool:
    """True when every endpoint (main, safety, embeddings) answers; any HTTP answer below 500 counts (a server
    without /models still answers 404). Connection errors, timeouts, 429 and 5xx mean down. The local
    analyzer is no remote dependency: always True."""
    if provider() == "local":
        return True
    seen = set()
    for kind in ("main", "safety", "embedding"):
        try:
            config = client_config(kind)
        except ImproperlyConfigured:
            continue  # the calls themselves will say what is missing
        if (config.base_url, config.api_key) in seen:
            continue
        seen.add((config.base_url, config.api_key))
        client = openai_client(config).with_options(timeout=PROBE_TIMEOUT_SECONDS, max_retries=0)
        try:
            aio.run(client.models.list, None)  # awaiting the first page is the request
        except (openai.APIConnectionError, openai.APITimeoutError):
            return False
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 429:
                return False
    return True
