"""OpenAI-compatible clients built from settings at call time (docs/model-layer.md#clients): main, safety and
embeddings.

Clients are async (they run on the process's model loop, pipeline.llm.aio) and cached per settings tuple and
loop, so changing settings (tests, reconfiguration) gets a new client.
The SDK's own retries are off (max_retries=0): the call layer retries itself so a cancel can cut the backoff.
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ClientKind = Literal["main", "safety", "embedding"]


@dataclass(frozen=True)
class ClientConfig:
    kind: ClientKind
    base_url: str | None
    api_key: str
    model: str
    timeout: float
    max_retries: int
    api: str
    reasoning_effort: str  # "" means: do not send any reasoning parameter
    json_mode: bool
    max_output_tokens: int = 2048  # sent with every completion (reasoning tokens count against it)
    chat_limit_param: str = "max_completion_tokens"  # or "max_tokens", for older Chat Completions servers

    def __repr__(self) -> str:  # never show the key, in logs or tracebacks
        return f"ClientConfig(kind={self.kind!r}, base_url={self.base_url!r}, model={self.model!r}, api={self.api!r})"


def provider() -> str:
    return settings.LLM_PROVIDER


def client_config(kind: ClientKind, prompt: str = "") -> ClientConfig:
    """Resolve a client's settings now. Safety and embedding settings fall back to the main ones."""
    main_key = settings.LLM_API_KEY
    if kind == "safety":
        base_url = settings.SAFETY_LLM_BASE_URL or settings.LLM_BASE_URL
        api_key, key_name = settings.SAFETY_LLM_API_KEY or main_key, "SAFETY_LLM_API_KEY"
        model = settings.SAFETY_LLM_MODEL or settings.LLM_MODEL
        effort = settings.SAFETY_LLM_REASONING_EFFORT  # reasoning off unless explicitly set for safety
    elif kind == "embedding":
        base_url = settings.EMBEDDING_BASE_URL or settings.LLM_BASE_URL
        api_key, key_name = settings.EMBEDDING_API_KEY or main_key, "EMBEDDING_API_KEY"
        model = settings.EMBEDDING_MODEL
        effort = ""
    else:
        base_url = settings.LLM_BASE_URL
        api_key, key_name = main_key, "LLM_API_KEY"
        model = settings.LLM_MODEL
        effort = settings.LLM_REASONING_EFFORT_BY_PROMPT.get(prompt, settings.LLM_REASONING_EFFORT)
    if not api_key:
        raise ImproperlyConfigured(f"LLM_PROVIDER=openai needs {key_name} (or LLM_API_KEY / OPENAI_API_KEY)")
    return ClientConfig(
        kind=kind,
        base_url=base_url or None,
        api_key=api_key,
        model=model,
        timeout=float(settings.LLM_TIMEOUT),
        max_retries=int(settings.LLM_MAX_RETRIES),
        api=settings.LLM_API,
        reasoning_effort=(effort or "").strip(),
        json_mode=bool(settings.LLM_JSON_MODE),
        max_output_tokens=int(settings.LLM_MAX_OUTPUT_TOKENS),
        chat_limit_param=settings.LLM_CHAT_OUTPUT_LIMIT_PARAM,
    )


MAX_CLIENTS = 16  # settings tuples kept; the oldest client is closed past that
_clients: OrderedDict[tuple[object, ...], openai.AsyncOpenAI] = OrderedDict()
_clients_lock = threading.Lock()


def openai_client(config: ClientConfig) -> openai.AsyncOpenAI:
    """The async client for this process's model loop (pipeline.llm.aio), made once per settings tuple: the
    first calls of a busy process all ask at once, and each client made would open its own connections."""
    from pipeline.llm import aio

    loop = aio.event_loop()  # part of the key: an async client's connections belong to one event loop
    transport = settings.LLM_HTTP_CLIENT
    key = (config.base_url, config.api_key, config.timeout, transport, loop)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=config.base_url,
                api_key=config.api_key,
                timeout=config.timeout,
                max_retries=0,
                http_client=_http_client(transport, config.timeout),
            )
            _clients[key] = client
            while len(_clients) > MAX_CLIENTS:
                _key, oldest = _clients.popitem(last=False)
                aio.close_soon(oldest, _key[-1])
        else:
            _clients.move_to_end(key)
        return client


def _http_client(transport: str, timeout: float) -> openai.DefaultAsyncHttpxClient | None:
    """aiohttp (the SDK's own aiohttp transport) by default: a request costs the process about half the CPU it
    costs with the default transport, whose connection pool also walks every open connection on every
    request, so that cost grows with the number of calls in flight (bench/model_client.py)."""
    if transport == "aiohttp":
        return openai.DefaultAioHttpClient(timeout=timeout)
    return None  # the SDK's default (httpx)


@atexit.register
def close_all() -> None:
    """Close every client this process made (at exit: an open aiohttp session would be reported as leaked)."""
    from pipeline.llm import aio

    with _clients_lock:
        made = list(_clients.items())
        _clients.clear()
    for key, client in made:
        aio.close_soon(client, key[-1], wait=True)
